// Files written by fgemma's GGUF writer are read by llama.cpp's Python reader (the gguf package,
// scripts/gguf_check.py) exactly as fgemma's own reader reads them: same keys in the same order
// with the same values, same tensor names, types, shapes, offsets and bytes.
// Needs FGEMMA_VENV (a venv with gguf==0.19.0); skips with the reason otherwise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/base/status_matchers.h"
#include "src/gguf/reader.h"
#include "src/gguf_tools/synthetic.h"
#include "src/gguf/writer.h"

namespace fg::gguf {
namespace {

using tensor::DType;

uint32_t Crc32(const uint8_t* p, size_t n) {  // zlib's CRC-32 (reflected 0xEDB88320)
  static uint32_t table[256] = {};
  if (table[1] == 0) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
  }
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// Runs `cmd`, returns its exit status and stdout.
int RunCommand(const std::string& cmd, std::string* out) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class GgufInteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* venv = std::getenv("FGEMMA_VENV");
    if (venv == nullptr || *venv == '\0') {
      GTEST_SKIP() << "FGEMMA_VENV is not set (a venv with gguf==0.19.0; 'make venv')";
    }
    python_ = std::string(venv) + "/bin/python";
  }

  // Reads `path` with gguf_check.py.
  nlohmann::json PyRead(const std::string& path) {
    std::string out;
    int rc = RunCommand(python_ + " " FG_SOURCE_DIR "/scripts/gguf_check.py '" + path + "'", &out);
    EXPECT_EQ(rc, 0) << out;
    return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  }

  std::string python_;
};

std::string Path(const std::string& name) { return ::testing::TempDir() + "/interop_" + name; }

// Everything fgemma's reader sees equals what the gguf package sees.
void ExpectSame(const File& f, const nlohmann::json& j) {
  ASSERT_TRUE(j.is_object()) << "gguf_check.py output is not JSON";
  EXPECT_EQ(j["version"], f.version());
  EXPECT_EQ(j["alignment"], f.alignment());
  EXPECT_EQ(j["data_offset"], f.data_offset());
  ASSERT_EQ(j["key_order"].size(), f.metadata().size());
  for (size_t k = 0; k < f.metadata().size(); ++k) {
    const KeyValue& kv = f.metadata()[k];
    std::string key(kv.key);
    SCOPED_TRACE("key " + key);
    EXPECT_EQ(j["key_order"][k], key);
    const nlohmann::json& e = j["metadata"][key];
    const Value& v = kv.value;
    if (v.type == ValueType::kArray) {
      EXPECT_EQ(e["type"], "array:" + std::string(ValueTypeName(v.elem_type)));
      ASSERT_EQ(e["value"].size(), v.count);
      if (v.elem_type == ValueType::kString) {
        uint64_t i = 0;
        for (std::string_view s : v.strings) EXPECT_EQ(e["value"][i++], std::string(s));
        EXPECT_EQ(i, v.count);
      } else if (v.elem_type == ValueType::kFloat32) {
        auto fl = *f.GetFloatArray(key);
        for (uint64_t i = 0; i < v.count; ++i) EXPECT_EQ(e["value"][i].get<double>(), fl[i]);
      } else if (v.elem_type == ValueType::kInt32) {
        auto in = *f.GetInt32Array(key);
        for (uint64_t i = 0; i < v.count; ++i) EXPECT_EQ(e["value"][i].get<int64_t>(), in[i]);
      }
      continue;
    }
    EXPECT_EQ(e["type"], std::string(ValueTypeName(v.type)));
    switch (v.type) {
      case ValueType::kString: EXPECT_EQ(e["value"], std::string(v.str)); break;
      case ValueType::kBool: EXPECT_EQ(e["value"].get<bool>(), v.u != 0); break;
      case ValueType::kFloat32:
      case ValueType::kFloat64: EXPECT_EQ(e["value"].get<double>(), v.f); break;
      case ValueType::kInt8:
      case ValueType::kInt16:
      case ValueType::kInt32:
      case ValueType::kInt64: EXPECT_EQ(e["value"].get<int64_t>(), v.i); break;
      default: EXPECT_EQ(e["value"].get<uint64_t>(), v.u); break;
    }
  }
  ASSERT_EQ(j["tensors"].size(), f.tensors().size());
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const TensorInfo& t = f.tensors()[k];
    const nlohmann::json& e = j["tensors"][k];
    SCOPED_TRACE("tensor " + std::string(t.name));
    EXPECT_EQ(e["name"], std::string(t.name));
    EXPECT_EQ(e["type"], std::string(tensor::DTypeName(t.type)));
    EXPECT_EQ(e["shape"].get<std::vector<int64_t>>(), t.shape);
    EXPECT_EQ(e["offset"], t.offset);
    EXPECT_EQ(e["n_bytes"], t.size_bytes);
    EXPECT_EQ(e["crc32"], Crc32(t.data, t.size_bytes));
  }
}

Writer EveryKind(uint64_t alignment) {
  Writer w(alignment);
  w.SetString("general.architecture", "gemma3");
  w.SetUint8("t.u8", 255);
  w.SetInt8("t.i8", -128);
  w.SetUint16("t.u16", 65535);
  w.SetInt16("t.i16", -32768);
  w.SetUint32("t.u32", 4294967295u);
  w.SetInt32("t.i32", -2147483647 - 1);
  w.SetUint64("t.u64", 18446744073709551615ull);
  w.SetInt64("t.i64", -9223372036854775807ll - 1);
  w.SetFloat32("t.f32", 0.1f);
  w.SetFloat64("t.f64", -2.5e-300);
  w.SetBool("t.bool", true);
  w.SetString("t.str", "caf\xc3\xa9 \"quoted\" \n newline");
  w.SetStringArray("t.strs", {"<pad>", "", "\xe2\x96\x81turn", "\n\n"});
  w.SetFloat32Array("t.f32s", {-1000.f, 0.f, 3.5f, -0.25f});
  w.SetInt32Array("t.i32s", {1, 3, 4, 6, -7});
  std::vector<uint8_t> seed(1 << 16);
  for (size_t i = 0; i < seed.size(); ++i) seed[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  auto bytes = [&](size_t n) { return std::vector<uint8_t>(seed.begin(), seed.begin() + n); };
  struct T {
    const char* name;
    DType type;
    std::vector<int64_t> shape;
  };
  for (const T& t : {T{"a.f32", DType::kF32, {3}}, T{"b.f16", DType::kF16, {2, 5}},
                     T{"c.bf16", DType::kBF16, {4, 4}}, T{"d.q8_0", DType::kQ8_0, {3, 64}},
                     T{"e.q4_0", DType::kQ4_0, {2, 32}}, T{"f.q5_0", DType::kQ5_0, {1, 2, 32}},
                     T{"g.q4_k", DType::kQ4_K, {2, 256}}, T{"h.q6_k", DType::kQ6_K, {256}},
                     T{"i.q5_k", DType::kQ5_K, {1, 1, 1, 256}}}) {
    size_t n = static_cast<size_t>(*tensor::RowBytes(t.type, t.shape.back()));
    for (size_t d = 0; d + 1 < t.shape.size(); ++d) n *= t.shape[d];
    EXPECT_THAT(w.AddTensor(t.name, t.type, t.shape, bytes(n)), ::fg::testing::IsOk());
  }
  return w;
}

TEST_F(GgufInteropTest, EveryValueTypeAndTensorType) {
  for (uint64_t alignment : {32, 64}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    std::string path = Path("every_" + std::to_string(alignment) + ".gguf");
    FG_ASSERT_OK(EveryKind(alignment).WriteFile(path));
    FG_ASSERT_OK_AND_ASSIGN(auto f, File::Open(path));
    nlohmann::json j = PyRead(path);
    ExpectSame(*f, j);
    EXPECT_EQ(j["metadata"]["t.u64"]["value"].get<uint64_t>(), 18446744073709551615ull);
    EXPECT_EQ(j["metadata"]["t.strs"]["value"][2], "\xe2\x96\x81turn");
    std::remove(path.c_str());
  }
}

TEST_F(GgufInteropTest, VersionTwo) {
  Writer w = EveryKind(32);
  FG_ASSERT_OK(w.SetVersion(2));
  std::string path = Path("v2.gguf");
  FG_ASSERT_OK(w.WriteFile(path));
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::Open(path));
  nlohmann::json j = PyRead(path);
  EXPECT_EQ(j["version"], 2);
  ExpectSame(*f, j);
  std::remove(path.c_str());
}

TEST_F(GgufInteropTest, SyntheticGemma3) {
  FG_ASSERT_OK_AND_ASSIGN(SyntheticSpec spec, SyntheticPreset("small"));
  spec.type_overrides = {{"token_embd", DType::kQ8_0}, {"ffn_down", DType::kQ8_0}};
  std::string path = Path("small.gguf");
  FG_ASSERT_OK(WriteSyntheticGemma3(spec, path));
  FG_ASSERT_OK_AND_ASSIGN(auto f, File::Open(path));
  nlohmann::json j = PyRead(path);
  ExpectSame(*f, j);
  EXPECT_EQ(j["metadata"]["general.architecture"]["value"], "gemma3");
  EXPECT_EQ(j["tensors"][1]["type"], "Q8_0");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace fg::gguf
