#include "src/gguf/writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "src/base/mapped_file.h"
#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"

namespace fg::gguf {
namespace {

using ::fg::testing::IsOk;
using ::fg::testing::StatusIs;
using ::testing::HasSubstr;
using tensor::DType;

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

Writer Sample(uint64_t alignment = 32) {
  Writer w(alignment);
  w.SetString("general.architecture", "gemma3");
  w.SetUint32("gemma3.block_count", 2);
  w.SetFloat32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetStringArray("tokenizer.ggml.tokens", {"<pad>", "<eos>", "\n"});
  w.SetFloat32Array("tokenizer.ggml.scores", {-1000.f, -1000.f, 0.f});
  w.SetInt32Array("tokenizer.ggml.token_type", {3, 3, 4});
  EXPECT_THAT(w.AddTensor("a", DType::kF32, {3}, Bytes(12, 1)), IsOk());
  EXPECT_THAT(w.AddTensor("b", DType::kQ8_0, {2, 64}, Bytes(136, 2)), IsOk());
  EXPECT_THAT(w.AddTensor("c", DType::kF16, {1, 2, 3, 5}, Bytes(60, 3)), IsOk());
  return w;
}

TEST(WriterTest, LayoutIsGgmlLayout) {
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, Sample().ToBytes());
  ASSERT_EQ(std::memcmp(bytes.data(), "GGUF", 4), 0);
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(bytes));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_FALSE(f->Find("general.alignment"));  // default alignment is not written
  ASSERT_EQ(f->tensors().size(), 3u);
  // Offsets are packed in order, each aligned to 32; the file ends padded after the last.
  EXPECT_EQ(f->tensors()[0].offset, 0u);
  EXPECT_EQ(f->tensors()[1].offset, 32u);
  EXPECT_EQ(f->tensors()[2].offset, 192u);
  EXPECT_EQ(f->tensors()[2].shape, (std::vector<int64_t>{1, 2, 3, 5}));
  EXPECT_EQ(bytes.size(), f->data_offset() + 256);
  EXPECT_EQ(std::vector<uint8_t>(f->tensors()[1].data, f->tensors()[1].data + 136), Bytes(136, 2));
  EXPECT_EQ(f->metadata()[0].key, "general.architecture");
  EXPECT_EQ(f->metadata()[5].key, "tokenizer.ggml.token_type");
}

TEST(WriterTest, CustomAlignment) {
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, Sample(128).ToBytes());
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(bytes));
  EXPECT_EQ(f->alignment(), 128u);
  EXPECT_EQ(*f->GetUint("general.alignment"), 128u);
  EXPECT_EQ(f->data_offset() % 128, 0u);
  EXPECT_EQ(f->tensors()[1].offset, 128u);
  EXPECT_EQ(f->tensors()[2].offset, 384u);  // b ends at 264
  Writer bad = Sample();
  bad.SetAlignment(48);
  EXPECT_THAT(bad.ToBytes(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("power of two")));
}

TEST(WriterTest, ReadWriteRoundTripIsBitIdentical) {
  for (uint64_t align : {32, 64, 4096}) {
    FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> first, Sample(align).ToBytes());
    FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(first));
    FG_ASSERT_OK_AND_ASSIGN(Writer w, Writer::FromFile(*f));
    FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> second, w.ToBytes());
    EXPECT_EQ(first, second) << "alignment " << align;
  }
}

TEST(WriterTest, RoundTripKeepsForeignOffsetsAndTail) {
  // FromFile keeps tensor offsets when the header changes, and keeps trailing bytes.
  Writer w = Sample();
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> packed, w.ToBytes());
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(packed));
  FG_ASSERT_OK_AND_ASSIGN(Writer w2, Writer::FromFile(*f));
  w2.SetString("general.name", "extra");  // appended key: header grows, offsets stay
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> grown, w2.ToBytes());
  FG_ASSERT_OK_AND_ASSIGN(auto g, File::FromBytes(grown));
  EXPECT_EQ(*g->GetString("general.name"), "extra");
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(g->tensors()[i].offset, f->tensors()[i].offset);
    EXPECT_EQ(0, std::memcmp(g->tensors()[i].data, f->tensors()[i].data,
                             f->tensors()[i].size_bytes));
  }
  std::vector<uint8_t> tailed = grown;
  tailed.push_back(0xAB);
  tailed.push_back(0xCD);
  FG_ASSERT_OK_AND_ASSIGN(auto h, File::FromBytes(tailed));
  FG_ASSERT_OK_AND_ASSIGN(Writer w3, Writer::FromFile(*h));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> again, w3.ToBytes());
  EXPECT_EQ(again, tailed);
}

TEST(WriterTest, VersionTwo) {
  Writer w = Sample();
  FG_ASSERT_OK(w.SetVersion(2));
  EXPECT_THAT(w.SetVersion(1), StatusIs(StatusCode::kInvalidArgument, HasSubstr("version 1")));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, w.ToBytes());
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(bytes));
  EXPECT_EQ(f->version(), 2u);
  FG_ASSERT_OK_AND_ASSIGN(Writer back, Writer::FromFile(*f));
  EXPECT_EQ(*back.ToBytes(), bytes);
}

TEST(WriterTest, SetterReplacesInPlace) {
  Writer w = Sample();
  w.SetUint64("gemma3.block_count", 9);  // same key, new type: keeps position 1
  EXPECT_TRUE(w.Has("gemma3.block_count"));
  EXPECT_TRUE(w.Remove("general.architecture"));
  EXPECT_FALSE(w.Remove("general.architecture"));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, w.ToBytes());
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(bytes));
  EXPECT_EQ(f->metadata().size(), 5u);
  EXPECT_EQ(f->metadata()[0].key, "gemma3.block_count");
  EXPECT_EQ(f->metadata()[0].value.type, ValueType::kUint64);
  EXPECT_EQ(*f->GetUint("gemma3.block_count"), 9u);
}

TEST(WriterTest, RejectsBadTensors) {
  Writer w;
  EXPECT_THAT(w.AddTensor("x", DType::kF32, {2}, Bytes(7, 0)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("has 7 bytes")));
  FG_ASSERT_OK(w.AddTensor("x", DType::kF32, {2}, Bytes(8, 0)));
  EXPECT_THAT(w.AddTensor("x", DType::kF32, {2}, Bytes(8, 0)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("duplicate")));
  EXPECT_THAT(w.AddTensor("", DType::kF32, {2}, Bytes(8, 0)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("name")));
  EXPECT_THAT(w.AddTensor(std::string(64, 'n'), DType::kF32, {2}, Bytes(8, 0)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("GGML_MAX_NAME")));
  EXPECT_THAT(w.AddTensor("y", DType::kF32, {}, {}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("1..4 dimensions")));
  EXPECT_THAT(w.AddTensor("y", DType::kF32, {1, 1, 1, 1, 1}, Bytes(4, 0)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("1..4 dimensions")));
  EXPECT_THAT(w.AddTensor("y", DType::kF32, {0, 2}, {}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("dimension 0")));
  EXPECT_THAT(w.AddTensor("y", DType::kQ4_K, {2, 32}, Bytes(36, 0)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("block size 256")));
  EXPECT_THAT(w.AddTensor("y", DType::kF32, {1ll << 40, 1ll << 40}, {}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("overflows")));
  EXPECT_THAT(w.SetArray("z", ValueType::kUint32, 3, Bytes(8, 0)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("3 elements")));
  EXPECT_THAT(w.SetArray("z", ValueType::kString, 1, {}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("SetStringArray")));
}

TEST(WriterTest, GeneratedTensors) {
  Writer w;
  FG_ASSERT_OK(w.AddTensorGenerated("g", DType::kF32, {2, 2}, [](std::span<uint8_t> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i);
    return OkStatus();
  }));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, w.ToBytes());
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(bytes));
  EXPECT_EQ(f->tensors()[0].data[15], 15);
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/writer_test_" + name;
}

bool Exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// No "<path>.tmp.*" left over in the directory of `path`.
bool NoTempFiles(const std::string& path) {
  std::filesystem::path p(path);
  for (const auto& e : std::filesystem::directory_iterator(p.parent_path())) {
    if (e.path().filename().string().rfind(p.filename().string() + ".tmp.", 0) == 0) return false;
  }
  return true;
}

TEST(WriterTest, WriteFileAtomically) {
  std::string path = TempPath("atomic.gguf");
  std::remove(path.c_str());
  Writer w = Sample();
  FG_ASSERT_OK(w.WriteFile(path));
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::Open(path));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> mem, w.ToBytes());
  EXPECT_EQ(std::vector<uint8_t>(f->bytes().begin(), f->bytes().end()), mem);
  EXPECT_TRUE(NoTempFiles(path));
  for (const TensorInfo& t : f->tensors()) {  // the mapping is page-aligned, so data is too
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 32, 0u) << t.name;
  }

  // A generator that fails: the error names the tensor, the old file is untouched, and no
  // temporary is left behind.
  Writer failing = Sample();
  FG_ASSERT_OK(failing.AddTensorGenerated("boom", DType::kF32, {4}, [](std::span<uint8_t>) {
    return UnimplementedError("no kernel");
  }));
  EXPECT_THAT(failing.WriteFile(path),
              StatusIs(StatusCode::kUnimplemented, HasSubstr("tensor 'boom': no kernel")));
  FG_ASSERT_OK_AND_ASSIGN(auto still, MappedFile::Open(path));
  EXPECT_EQ(std::vector<uint8_t>(still->bytes().begin(), still->bytes().end()), mem);
  EXPECT_TRUE(NoTempFiles(path));
  std::remove(path.c_str());

  std::string fresh = TempPath("never.gguf");
  std::remove(fresh.c_str());
  EXPECT_FALSE(failing.WriteFile(fresh).ok());
  EXPECT_FALSE(Exists(fresh));
  EXPECT_TRUE(NoTempFiles(fresh));

  EXPECT_THAT(w.WriteFile("/nonexistent_dir_fgemma/x.gguf"),
              StatusIs(StatusCode::kIo, HasSubstr("cannot create")));
}

}  // namespace
}  // namespace fg::gguf
