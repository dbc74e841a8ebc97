// Hostile and valid GGUF inputs for the reader: one case per corruption, each checking the status
// code and that the message names the problem (and the key or tensor). Inputs are hand-crafted
// byte by byte with Img, so every field can hold any value.
#include "src/gguf/reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "src/base/status_matchers.h"
#include "src/gguf/writer.h"

namespace fg::gguf {
namespace {

using ::fg::testing::IsOk;
using ::fg::testing::StatusIs;
using ::testing::_;
using ::testing::AllOf;
using ::testing::HasSubstr;
using tensor::DType;

// Little-endian GGUF image builder for hand-crafted (possibly invalid) files.
struct Img {
  std::vector<uint8_t> b;
  Img& U8(uint8_t v) { return Raw(&v, 1); }
  Img& U32(uint32_t v) { return Raw(&v, 4); }
  Img& U64(uint64_t v) { return Raw(&v, 8); }
  Img& F32(float v) { return Raw(&v, 4); }
  Img& Str(std::string_view s) {
    U64(s.size());
    return Raw(s.data(), s.size());
  }
  Img& Raw(const void* p, size_t n) {
    auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  Img& Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    Raw("GGUF", 4);
    U32(version);
    U64(n_tensors);
    return U64(n_kv);
  }
  Img& KvU32(std::string_view key, uint32_t v) {
    Str(key);
    U32(static_cast<uint32_t>(ValueType::kUint32));
    return U32(v);
  }
  // Tensor info with innermost-first ne[].
  Img& TensorInfo(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t off) {
    Str(name);
    U32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) U64(d);
    U32(type);
    return U64(off);
  }
  Img& PadTo(uint64_t align) {
    while (b.size() % align != 0) b.push_back(0);
    return *this;
  }
  Img& Zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

StatusOr<std::unique_ptr<File>> Parse(const Img& img) { return File::FromBytes(img.b); }

// A file with one F32 tensor 'w' of ne=[4, 2] (shape {2, 4}) and one key.
Img OneTensor(std::vector<uint64_t> ne = {4, 2}, uint32_t type = 0, uint64_t off = 0,
              size_t data_bytes = 32) {
  Img img;
  img.Header(1, 1).KvU32("k", 7).TensorInfo("w", ne, type, off).PadTo(32).Zeros(data_bytes);
  return img;
}

TEST(ReaderTest, ValidHandCraftedFile) {
  Img img = OneTensor();  // the File views these bytes: keep them alive
  FG_ASSERT_OK_AND_ASSIGN(auto f, Parse(img));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  ASSERT_EQ(f->tensors().size(), 1u);
  const TensorInfo& t = f->tensors()[0];
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.type, DType::kF32);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 4}));  // outermost-first
  EXPECT_EQ(t.n_elements, 8);
  EXPECT_EQ(t.size_bytes, 32u);
  EXPECT_EQ(t.data, f->bytes().data() + f->data_offset());
  EXPECT_EQ(f->data_offset() % 32, 0u);
  EXPECT_EQ(f->FindTensor("w"), &t);
  EXPECT_EQ(f->FindTensor("nope"), nullptr);
  FG_ASSERT_OK_AND_ASSIGN(uint64_t k, f->GetUint("k"));
  EXPECT_EQ(k, 7u);
}

TEST(ReaderTest, BadMagic) {
  Img img = OneTensor();
  img.b[3] = 'X';
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss, HasSubstr("bad magic 'GGUX'")));
}

TEST(ReaderTest, EmptyAndTinyFiles) {
  Img empty;
  EXPECT_THAT(Parse(empty), StatusIs(StatusCode::kDataLoss, HasSubstr("truncated magic")));
  Img tiny;
  tiny.Raw("GGUF", 4).U32(3).U32(0);
  EXPECT_THAT(Parse(tiny), StatusIs(StatusCode::kDataLoss, HasSubstr("truncated tensor count")));
}

TEST(ReaderTest, VersionOneRefused) {
  Img img;
  img.Header(0, 0, /*version=*/1);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kUnimplemented, HasSubstr("version 1")));
}

TEST(ReaderTest, BadVersion) {
  Img v0;
  v0.Header(0, 0, 0);
  EXPECT_THAT(Parse(v0), StatusIs(StatusCode::kDataLoss, HasSubstr("bad version 0")));
  Img v9;
  v9.Header(0, 0, 9);
  EXPECT_THAT(Parse(v9), StatusIs(StatusCode::kUnimplemented, HasSubstr("bad version 9")));
  Img be;
  be.Header(0, 0, 0x03000000);
  EXPECT_THAT(Parse(be), StatusIs(StatusCode::kUnimplemented, HasSubstr("big-endian")));
}

TEST(ReaderTest, TruncatedKey) {
  Img img;
  img.Header(0, 1).U64(1000).Raw("abc", 3).Zeros(10);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   AllOf(HasSubstr("metadata entry 0"),
                                         HasSubstr("truncated string (metadata key)"))));
}

TEST(ReaderTest, TruncatedStringValue) {
  Img img;
  img.Header(0, 1).Str("general.name").U32(8).U64(1ull << 40).Raw("Gemma", 5);
  EXPECT_THAT(Parse(img),
              StatusIs(StatusCode::kDataLoss,
                       AllOf(HasSubstr("key 'general.name'"), HasSubstr("truncated string"))));
}

TEST(ReaderTest, TruncatedScalarValue) {
  Img img;
  img.Header(0, 1).Str("x").U32(static_cast<uint32_t>(ValueType::kUint64)).U32(5);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   AllOf(HasSubstr("key 'x'"), HasSubstr("truncated uint64"))));
}

TEST(ReaderTest, HugeMetadataCount) {
  Img img;
  img.Header(0, 1ull << 60).KvU32("a", 1);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss, HasSubstr("huge metadata count")));
}

TEST(ReaderTest, HugeTensorCount) {
  Img img;
  img.Header(~0ull, 0).Zeros(64);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss, HasSubstr("huge tensor count")));
}

TEST(ReaderTest, HugeArrayCount) {
  Img img;
  img.Header(0, 1).Str("tokenizer.ggml.scores").U32(9).U32(6).U64(1ull << 40).Zeros(16);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   AllOf(HasSubstr("key 'tokenizer.ggml.scores'"),
                                         HasSubstr("larger than the file"))));
  // count * element size overflows 64 bits.
  Img wrap;
  wrap.Header(0, 1).Str("a").U32(9).U32(10).U64(1ull << 61).Zeros(16);
  EXPECT_THAT(Parse(wrap), StatusIs(StatusCode::kDataLoss, HasSubstr("larger than the file")));
}

TEST(ReaderTest, HugeStringArrayCount) {
  Img img;
  img.Header(0, 1).Str("tokenizer.ggml.tokens").U32(9).U32(8).U64(~0ull).Str("a");
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   AllOf(HasSubstr("key 'tokenizer.ggml.tokens'"),
                                         HasSubstr("strings is larger than the file"))));
}

TEST(ReaderTest, TruncatedStringArrayElement) {
  Img img;
  img.Header(0, 1).Str("t").U32(9).U32(8).U64(2).Str("ok").U64(99).Raw("x", 1);
  EXPECT_THAT(Parse(img),
              StatusIs(StatusCode::kDataLoss, AllOf(HasSubstr("key 't'"), HasSubstr("element 1"),
                                                    HasSubstr("truncated string"))));
}

TEST(ReaderTest, UnknownValueType) {
  Img img;
  img.Header(0, 1).Str("odd").U32(13).U32(0);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   AllOf(HasSubstr("key 'odd'"), HasSubstr("value type id 13"))));
  Img arr;
  arr.Header(0, 1).Str("odd").U32(9).U32(77).U64(0);
  EXPECT_THAT(Parse(arr), StatusIs(StatusCode::kDataLoss, HasSubstr("element type id 77")));
}

TEST(ReaderTest, NestedArrayRefused) {
  Img img;
  img.Header(0, 1).Str("nest").U32(9).U32(9).U64(1).U32(4).U64(0);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kUnimplemented,
                                   AllOf(HasSubstr("key 'nest'"), HasSubstr("nested arrays"))));
}

TEST(ReaderTest, DuplicateKey) {
  Img img;
  img.Header(0, 2).KvU32("gemma3.block_count", 1).KvU32("gemma3.block_count", 2);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   HasSubstr("duplicate key 'gemma3.block_count'")));
}

TEST(ReaderTest, DuplicateTensorName) {
  Img img;
  img.Header(2, 0)
      .TensorInfo("blk.0.attn_q.weight", {8}, 0, 0)
      .TensorInfo("blk.0.attn_q.weight", {8}, 0, 32)
      .PadTo(32)
      .Zeros(64);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   HasSubstr("duplicate tensor name 'blk.0.attn_q.weight'")));
}

TEST(ReaderTest, TensorPastEndOfFile) {
  Img img = OneTensor({4, 2}, 0, 0, /*data_bytes=*/31);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   AllOf(HasSubstr("tensor 'w'"), HasSubstr("past end of file"))));
  Img far = OneTensor({4, 2}, 0, /*off=*/~0ull & ~31ull, 32);  // offset + size wraps
  EXPECT_THAT(Parse(far), StatusIs(StatusCode::kDataLoss, HasSubstr("past end of file")));
}

TEST(ReaderTest, DataSectionMissing) {
  Img img;
  img.Header(1, 0).TensorInfo("w", {8}, 0, 0);  // no padding, no data
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss, HasSubstr("past the end of the file")));
}

TEST(ReaderTest, MisalignedTensorOffset) {
  Img img = OneTensor({4, 2}, 0, /*off=*/4, 64);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   AllOf(HasSubstr("tensor 'w'"),
                                         HasSubstr("misaligned tensor offset 4"))));
}

TEST(ReaderTest, OverlappingTensors) {
  Img img;
  img.Header(2, 0)
      .TensorInfo("a", {16}, 0, 0)
      .TensorInfo("b", {8}, 0, 32)
      .PadTo(32)
      .Zeros(96);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss, HasSubstr("'b' overlaps tensor 'a'")));
}

TEST(ReaderTest, UnknownTensorType) {
  Img img = OneTensor({4, 2}, /*type=*/4);  // Q4_2: removed from ggml
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kUnimplemented,
                                   AllOf(HasSubstr("tensor 'w'"),
                                         HasSubstr("unknown tensor type id 4"))));
  Img big = OneTensor({4, 2}, /*type=*/1000);
  EXPECT_THAT(Parse(big), StatusIs(StatusCode::kUnimplemented, HasSubstr("type id 1000")));
}

TEST(ReaderTest, ShapeOverflowElementCount) {
  Img img = OneTensor({1ull << 32, 1ull << 32});
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   AllOf(HasSubstr("tensor 'w'"), HasSubstr("shape overflow"),
                                         HasSubstr("element count"))));
  Img neg = OneTensor({1ull << 63, 1});  // does not fit int64
  EXPECT_THAT(Parse(neg), StatusIs(StatusCode::kDataLoss, HasSubstr("shape overflow")));
}

TEST(ReaderTest, ShapeOverflowByteSize) {
  // 2^62 F32 elements fit in int64, their 2^64 bytes do not.
  Img img = OneTensor({1ull << 31, 1ull << 31});
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   AllOf(HasSubstr("tensor 'w'"), HasSubstr("byte size"))));
}

TEST(ReaderTest, TooManyDimensions) {
  Img img = OneTensor({1, 1, 1, 1, 8});
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   AllOf(HasSubstr("tensor 'w'"), HasSubstr("n_dims is 5"))));
  Img zero = OneTensor({});
  EXPECT_THAT(Parse(zero), StatusIs(StatusCode::kDataLoss, HasSubstr("n_dims is 0")));
}

TEST(ReaderTest, ZeroSizeDimension) {
  Img img = OneTensor({4, 0}, 0, 0, 0);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kDataLoss,
                                   AllOf(HasSubstr("tensor 'w'"), HasSubstr("dimension 1 is 0"))));
}

TEST(ReaderTest, RowNotMultipleOfBlock) {
  Img img = OneTensor({33, 1}, static_cast<uint32_t>(DType::kQ8_0), 0, 64);
  EXPECT_THAT(Parse(img),
              StatusIs(StatusCode::kDataLoss,
                       AllOf(HasSubstr("tensor 'w'"), HasSubstr("row size 33"),
                             HasSubstr("not a multiple of the Q8_0 block size 32"))));
}

TEST(ReaderTest, AlignmentNotPowerOfTwo) {
  Img img;
  img.Header(0, 1).KvU32("general.alignment", 48);
  EXPECT_THAT(Parse(img), StatusIs(StatusCode::kInvalidArgument,
                                   AllOf(HasSubstr("general.alignment"),
                                         HasSubstr("not a power of two"))));
  Img zero;
  zero.Header(0, 1).KvU32("general.alignment", 0);
  EXPECT_THAT(Parse(zero), StatusIs(StatusCode::kInvalidArgument, HasSubstr("power of two")));
  Img type;
  type.Header(0, 1).Str("general.alignment").U32(static_cast<uint32_t>(ValueType::kString)).Str("x");
  EXPECT_THAT(Parse(type), StatusIs(StatusCode::kInvalidArgument, HasSubstr("must be uint32")));
}

TEST(ReaderTest, CustomAlignment) {
  Img img;
  img.Header(1, 1).KvU32("general.alignment", 256).TensorInfo("w", {8}, 0, 0).PadTo(256).Zeros(32);
  FG_ASSERT_OK_AND_ASSIGN(auto f, Parse(img));
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->data_offset(), 256u);
  Img mis;
  mis.Header(1, 1).KvU32("general.alignment", 64).TensorInfo("w", {8}, 0, 32).PadTo(64).Zeros(64);
  EXPECT_THAT(Parse(mis), StatusIs(StatusCode::kDataLoss, HasSubstr("alignment 64")));
}

// A file with every metadata value type, written by the Writer, read back.
Writer EveryTypeWriter() {
  Writer w;
  w.SetUint8("u8", 200);
  w.SetInt8("i8", -100);
  w.SetUint16("u16", 60000);
  w.SetInt16("i16", -30000);
  w.SetUint32("u32", 4000000000u);
  w.SetInt32("i32", -2000000000);
  w.SetUint64("u64", 1ull << 63);
  w.SetInt64("i64", -(1ll << 62));
  w.SetFloat32("f32", 1e-6f);
  w.SetFloat64("f64", 3.25);
  w.SetBool("yes", true);
  w.SetBool("no", false);
  w.SetString("s", "h\xc3\xa9llo");
  w.SetString("empty", "");
  w.SetStringArray("tokens", {"<pad>", "", "\xe2\x96\x81the"});
  w.SetFloat32Array("scores", {-1000.f, 0.f, -1.5f});
  w.SetInt32Array("types", {3, 6, 1});
  std::vector<uint16_t> u16s = {1, 2, 65535};
  EXPECT_THAT(w.SetArray("u16s", ValueType::kUint16, 3,
                         {reinterpret_cast<const uint8_t*>(u16s.data()), 6}),
              IsOk());
  std::vector<float> data(64);
  for (int i = 0; i < 64; ++i) data[i] = static_cast<float>(i);
  std::vector<uint8_t> bytes(256);
  std::memcpy(bytes.data(), data.data(), 256);
  EXPECT_THAT(w.AddTensor("w", DType::kF32, {4, 16}, bytes), IsOk());
  EXPECT_THAT(w.AddTensor("v", DType::kQ8_0, {2, 32}, std::vector<uint8_t>(68, 1)), IsOk());
  return w;
}

void CheckEveryType(const File& f) {
  EXPECT_EQ(*f.GetUint("u8"), 200u);
  EXPECT_EQ(*f.GetInt("i8"), -100);
  EXPECT_EQ(*f.GetUint("u16"), 60000u);
  EXPECT_EQ(*f.GetInt("i16"), -30000);
  EXPECT_EQ(*f.GetUint("u32"), 4000000000u);
  EXPECT_EQ(*f.GetInt("i32"), -2000000000);
  EXPECT_EQ(*f.GetUint("u64"), 1ull << 63);
  EXPECT_EQ(*f.GetInt("i64"), -(1ll << 62));
  EXPECT_EQ(*f.GetFloat("f32"), static_cast<double>(1e-6f));
  EXPECT_EQ(*f.GetFloat("f64"), 3.25);
  EXPECT_TRUE(*f.GetBool("yes"));
  EXPECT_FALSE(*f.GetBool("no"));
  EXPECT_EQ(*f.GetString("s"), "h\xc3\xa9llo");
  EXPECT_EQ(*f.GetString("empty"), "");
  EXPECT_THAT(*f.GetStringArray("tokens"),
              ::testing::ElementsAre("<pad>", "", "\xe2\x96\x81the"));
  EXPECT_THAT(*f.GetFloatArray("scores"), ::testing::ElementsAre(-1000.f, 0.f, -1.5f));
  EXPECT_THAT(*f.GetInt32Array("types"), ::testing::ElementsAre(3, 6, 1));
  const Value* u16s = f.Find("u16s");
  ASSERT_NE(u16s, nullptr);
  EXPECT_EQ(u16s->type, ValueType::kArray);
  EXPECT_EQ(u16s->elem_type, ValueType::kUint16);
  EXPECT_EQ(u16s->count, 3u);
  ASSERT_EQ(f.tensors().size(), 2u);
  const TensorInfo* w = f.FindTensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{4, 16}));
  float x;
  std::memcpy(&x, w->data + 4 * 37, 4);
  EXPECT_EQ(x, 37.f);
  const TensorInfo* v = f.FindTensor("v");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->type, DType::kQ8_0);
  EXPECT_EQ(v->size_bytes, 68u);
  EXPECT_EQ(v->offset % 32, 0u);
  EXPECT_EQ(f.metadata()[0].key, "u8");  // file order kept
}

TEST(ReaderTest, ValidVersion3EveryValueType) {
  Writer w = EveryTypeWriter();
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, w.ToBytes());
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(bytes));
  EXPECT_EQ(f->version(), 3u);
  CheckEveryType(*f);
}

TEST(ReaderTest, ValidVersion2EveryValueType) {
  Writer w = EveryTypeWriter();
  FG_ASSERT_OK(w.SetVersion(2));
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, w.ToBytes());
  EXPECT_EQ(bytes[4], 2);
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(bytes));
  EXPECT_EQ(f->version(), 2u);
  CheckEveryType(*f);
}

TEST(ReaderTest, GetterErrors) {
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, EveryTypeWriter().ToBytes());
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::FromBytes(bytes));
  EXPECT_THAT(f->GetUint("missing"), StatusIs(StatusCode::kNotFound, HasSubstr("'missing'")));
  EXPECT_THAT(f->GetString("u8"), StatusIs(StatusCode::kInvalidArgument,
                                           AllOf(HasSubstr("'u8'"), HasSubstr("uint8"))));
  EXPECT_THAT(f->GetUint("i8"), StatusIs(StatusCode::kOutOfRange, HasSubstr("negative")));
  EXPECT_THAT(f->GetInt("u64"), StatusIs(StatusCode::kOutOfRange, HasSubstr("int64")));
  EXPECT_THAT(f->GetFloat("s"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("string")));
  EXPECT_THAT(f->GetBool("u8"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("bool")));
  EXPECT_THAT(f->GetFloatArray("types"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("array of int32")));
  EXPECT_THAT(f->GetInt32Array("scores"), StatusIs(StatusCode::kInvalidArgument, _));
  EXPECT_THAT(f->GetStringArray("scores"), StatusIs(StatusCode::kInvalidArgument, _));
  EXPECT_THAT(f->GetUint("f32"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("float32")));
  EXPECT_EQ(*f->GetInt("u8"), 200);  // any integer type that fits
  EXPECT_EQ(*f->GetUint("u16"), 60000u);
  EXPECT_THAT(f->GetUint("i16"), StatusIs(StatusCode::kOutOfRange, HasSubstr("'i16'")));
}

// Every prefix of a valid file that cuts into the header or a tensor is an error, never a crash.
TEST(ReaderTest, EveryTruncationIsAnError) {
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, EveryTypeWriter().ToBytes());
  FG_ASSERT_OK_AND_ASSIGN(auto full, File::FromBytes(bytes));
  uint64_t needed = 0;
  for (const TensorInfo& t : full->tensors()) {
    needed = std::max(needed, full->data_offset() + t.offset + t.size_bytes);
  }
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto f = File::FromBytes(std::span<const uint8_t>(bytes.data(), n));
    if (n < needed) {
      EXPECT_THAT(f, StatusIs(StatusCode::kDataLoss, HasSubstr("gguf: "))) << "prefix " << n;
    } else {
      EXPECT_THAT(f, IsOk()) << "prefix " << n;
    }
  }
}

// Flipping any header byte gives OK or an error, never a crash (the sanitizer build checks).
TEST(ReaderTest, ByteFlipsNeverCrash) {
  FG_ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, EveryTypeWriter().ToBytes());
  FG_ASSERT_OK_AND_ASSIGN(auto full, File::FromBytes(bytes));
  int errors = 0;
  for (size_t pos = 0; pos < full->data_offset(); ++pos) {
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> c = bytes;
      c[pos] ^= x;
      auto f = File::FromBytes(c);
      if (!f.ok()) {
        ++errors;
        EXPECT_FALSE(f.status().message().empty());
        continue;
      }
      for (const TensorInfo& t : (*f)->tensors()) {
        ASSERT_LE(t.data + t.size_bytes, c.data() + c.size());
      }
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(ReaderTest, OpenMissingAndCorruptFiles) {
  EXPECT_THAT(File::Open("/nonexistent/dir/model.gguf"), StatusIs(StatusCode::kNotFound, _));
  std::string path = ::testing::TempDir() + "/reader_test_corrupt.gguf";
  Img img = OneTensor();
  img.b[0] = 'X';
  FILE* fp = std::fopen(path.c_str(), "wb");
  ASSERT_NE(fp, nullptr);
  std::fwrite(img.b.data(), 1, img.b.size(), fp);
  std::fclose(fp);
  EXPECT_THAT(File::Open(path),
              StatusIs(StatusCode::kDataLoss, AllOf(HasSubstr(path), HasSubstr("bad magic"))));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace fg::gguf
