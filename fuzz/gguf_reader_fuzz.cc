// libFuzzer target for the GGUF reader: parse arbitrary bytes, then touch everything a parsed
// File exposes (every metadata value, every array element, every tensor's first and last byte,
// every typed getter) and write the file back with the Writer. A crash, sanitizer report or a
// failed invariant (FG_FUZZ_CHECK) is a bug; a non-OK Status is the expected answer to garbage.
//   make fuzz FUZZ_SECONDS=60
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "fuzz/fuzz_check.h"
#include "src/gguf/reader.h"
#include "src/gguf/writer.h"

namespace {

volatile uint64_t g_sink;  // keeps the reads from being optimized away

void Touch(const uint8_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  g_sink = g_sink + s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using fg::gguf::File;
  using fg::gguf::ValueType;
  std::span<const uint8_t> bytes(data, size);
  auto parsed = File::FromBytes(bytes);
  if (!parsed.ok()) {
    FG_FUZZ_CHECK(!parsed.status().message().empty());
    return 0;
  }
  const File& f = **parsed;
  FG_FUZZ_CHECK(f.version() == 2 || f.version() == 3);
  FG_FUZZ_CHECK(f.alignment() != 0 && (f.alignment() & (f.alignment() - 1)) == 0);
  for (const auto& kv : f.metadata()) {
    Touch(reinterpret_cast<const uint8_t*>(kv.key.data()), kv.key.size());
    FG_FUZZ_CHECK(f.Find(kv.key) == &kv.value);
    const auto& v = kv.value;
    if (v.type == ValueType::kString) {
      Touch(reinterpret_cast<const uint8_t*>(v.str.data()), v.str.size());
    } else if (v.type == ValueType::kArray) {
      if (v.elem_type == ValueType::kString) {
        FG_FUZZ_CHECK(v.strings.size() == v.count);
        for (auto s : v.strings) Touch(reinterpret_cast<const uint8_t*>(s.data()), s.size());
        (void)f.GetStringArray(kv.key);
      } else {
        FG_FUZZ_CHECK(v.data >= data && v.data <= data + size);
        (void)f.GetFloatArray(kv.key);
        (void)f.GetInt32Array(kv.key);
      }
    }
    (void)f.GetUint(kv.key);
    (void)f.GetInt(kv.key);
    (void)f.GetFloat(kv.key);
    (void)f.GetBool(kv.key);
    (void)f.GetString(kv.key);
  }
  for (const auto& t : f.tensors()) {
    FG_FUZZ_CHECK(f.FindTensor(t.name) == &t);
    FG_FUZZ_CHECK(!t.shape.empty() && t.shape.size() <= 4);
    int64_t n = 1;
    for (int64_t d : t.shape) {
      FG_FUZZ_CHECK(d > 0);
      n *= d;
    }
    FG_FUZZ_CHECK(n == t.n_elements);
    FG_FUZZ_CHECK(t.data >= data && t.size_bytes <= static_cast<uint64_t>(data + size - t.data));
    if (t.size_bytes > 0) Touch(t.data, 1), Touch(t.data + t.size_bytes - 1, 1);
  }
  // Write it back: either the writer refuses (names it cannot write, tensors out of order) or
  // the result parses to the same tables.
  auto writer = fg::gguf::Writer::FromFile(f);
  if (!writer.ok()) return 0;
  auto out = writer->ToBytes();
  if (!out.ok()) return 0;
  auto again = File::FromBytes(*out);
  FG_FUZZ_CHECK(again.ok());
  FG_FUZZ_CHECK((*again)->metadata().size() == f.metadata().size());
  FG_FUZZ_CHECK((*again)->tensors().size() == f.tensors().size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& a = f.tensors()[i];
    const auto& b = (*again)->tensors()[i];
    FG_FUZZ_CHECK(a.name == b.name && a.type == b.type && a.shape == b.shape &&
                  a.offset == b.offset);
    FG_FUZZ_CHECK(std::memcmp(a.data, b.data, a.size_bytes) == 0);
  }
  return 0;
}
