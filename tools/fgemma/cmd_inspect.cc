// fgemma inspect FILE.gguf [--json] [--no-tensors]: the header, metadata (long arrays
// summarized), tensor table and per-type byte summary of a GGUF file, like gguf-tools `show`.
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/gguf/reader.h"
#include "tools/fgemma/cli_text.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/flags.h"

namespace fg::cli {

namespace {

using gguf::ValueType;

constexpr uint64_t kArrayHead = 8;       // array items shown
constexpr size_t kMaxStringShown = 160;  // characters of a long string shown

// One element of a numeric array payload as JSON.
nlohmann::json Element(ValueType t, const uint8_t* p) {
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (t) {
    case ValueType::kUint8: return load(uint8_t{});
    case ValueType::kInt8: return load(int8_t{});
    case ValueType::kUint16: return load(uint16_t{});
    case ValueType::kInt16: return load(int16_t{});
    case ValueType::kUint32: return load(uint32_t{});
    case ValueType::kInt32: return load(int32_t{});
    case ValueType::kUint64: return load(uint64_t{});
    case ValueType::kInt64: return load(int64_t{});
    case ValueType::kFloat32: return load(float{});
    case ValueType::kFloat64: return load(double{});
    case ValueType::kBool: return load(uint8_t{}) != 0;
    default: return nullptr;
  }
}

size_t ElementSize(ValueType t) {
  switch (t) {
    case ValueType::kUint16:
    case ValueType::kInt16: return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32: return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64: return 8;
    default: return 1;
  }
}

nlohmann::json ScalarJson(const gguf::Value& v) {
  switch (v.type) {
    case ValueType::kInt8:
    case ValueType::kInt16:
    case ValueType::kInt32:
    case ValueType::kInt64: return v.i;
    case ValueType::kFloat32:
    case ValueType::kFloat64: return v.f;
    case ValueType::kBool: return v.u != 0;
    case ValueType::kString: return std::string(v.str);
    default: return v.u;
  }
}

// Items 0..n-1 of an array value as JSON.
nlohmann::json ArrayHead(const gguf::Value& v, uint64_t n) {
  nlohmann::json a = nlohmann::json::array();
  auto str = v.strings.begin();
  for (uint64_t k = 0; k < n && k < v.count; ++k) {
    if (v.elem_type == ValueType::kString) {
      a.push_back(std::string(*str++));
    } else {
      a.push_back(Element(v.elem_type, v.data + k * ElementSize(v.elem_type)));
    }
  }
  return a;
}


// Appends instead of operator+ chains: GCC 12 warns falsely (-Wrestrict) on those.
std::string Quoted(std::string_view s, size_t max) {
  std::string out = "\"";
  out += Printable(s, max);
  out += '"';
  return out;
}

std::string Dump(const nlohmann::json& j) {
  // Strings from the file need not be UTF-8: replace bad bytes instead of throwing.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ValueText(const gguf::Value& v) {
  if (v.type == ValueType::kString) return Quoted(v.str, kMaxStringShown);
  if (v.type == ValueType::kFloat32 || v.type == ValueType::kFloat64) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.9g", v.f);
    return buf;
  }
  if (v.type != ValueType::kArray) return Dump(ScalarJson(v));
  std::string out = "[";
  uint64_t n = std::min<uint64_t>(v.count, kArrayHead);
  auto str = v.strings.begin();
  for (uint64_t k = 0; k < n; ++k) {
    if (k) out += ", ";
    if (v.elem_type == ValueType::kString) {
      out += Quoted(*str++, 40);
    } else {
      out += Dump(Element(v.elem_type, v.data + k * ElementSize(v.elem_type)));
    }
  }
  if (v.count > n) out += ", ...";
  return out + "]";
}

std::string TypeText(const gguf::Value& v) {
  if (v.type != ValueType::kArray) return std::string(gguf::ValueTypeName(v.type));
  return std::string(gguf::ValueTypeName(v.elem_type)) + "[" + std::to_string(v.count) + "]";
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

struct TypeTotal {
  int tensors = 0;
  uint64_t bytes = 0;
  int64_t elements = 0;
};

}  // namespace

int CmdInspect(int argc, char** argv) {
  bool json = false, no_tensors = false;
  std::vector<std::string> files;
  FlagParser flags("inspect", "Show a GGUF file's header, metadata, tensor table and summary.");
  flags.AddBool("--json", &json, "Print one JSON object instead of text");
  flags.AddBool("--no-tensors", &no_tensors, "Leave out the tensor table");
  flags.SetPositionals(&files, "FILE.gguf", 1, 1);
  flags.AddNote("Shapes are outermost-first (rows, columns); offsets are relative to the start of "
                "the tensor data section. Arrays show their first " +
                std::to_string(kArrayHead) + " items.");
  if (auto rc = flags.Parse(argc, argv)) return *rc;

  auto file = gguf::File::Open(files[0]);
  if (!file.ok()) return ReportError("inspect", file.status());
  const gguf::File& f = **file;

  std::map<std::string, TypeTotal> totals;  // by type name
  uint64_t total_bytes = 0;
  int64_t total_elements = 0;
  for (const auto& t : f.tensors()) {
    TypeTotal& tt = totals[std::string(tensor::DTypeName(t.type))];
    tt.tensors++;
    tt.bytes += t.size_bytes;
    tt.elements += t.n_elements;
    total_bytes += t.size_bytes;
    total_elements += t.n_elements;
  }

  if (json) {
    nlohmann::json j;
    j["file"] = files[0];
    j["file_size"] = f.bytes().size();
    j["version"] = f.version();
    j["alignment"] = f.alignment();
    j["data_offset"] = f.data_offset();
    j["metadata_count"] = f.metadata().size();
    j["tensor_count"] = f.tensors().size();
    nlohmann::json md = nlohmann::json::array();
    for (const auto& kv : f.metadata()) {
      nlohmann::json e;
      e["key"] = std::string(kv.key);
      e["type"] = std::string(gguf::ValueTypeName(kv.value.type));
      if (kv.value.type == ValueType::kArray) {
        e["elem_type"] = std::string(gguf::ValueTypeName(kv.value.elem_type));
        e["count"] = kv.value.count;
        e["head"] = ArrayHead(kv.value, kArrayHead);
      } else {
        e["value"] = ScalarJson(kv.value);
      }
      md.push_back(std::move(e));
    }
    j["metadata"] = std::move(md);
    if (!no_tensors) {
      nlohmann::json ts = nlohmann::json::array();
      for (const auto& t : f.tensors()) {
        ts.push_back({{"name", std::string(t.name)},
                      {"type", std::string(tensor::DTypeName(t.type))},
                      {"shape", t.shape},
                      {"elements", t.n_elements},
                      {"offset", t.offset},
                      {"bytes", t.size_bytes}});
      }
      j["tensors"] = std::move(ts);
    }
    nlohmann::json sum = nlohmann::json::array();
    for (const auto& [type, tt] : totals) {
      sum.push_back({{"type", type}, {"tensors", tt.tensors}, {"bytes", tt.bytes},
                     {"elements", tt.elements}});
    }
    j["summary"] = std::move(sum);
    j["total_bytes"] = total_bytes;
    j["total_elements"] = total_elements;
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return kExitOk;
  }

  std::printf("%s: GGUF v%u, alignment %" PRIu64 ", %zu metadata keys, %zu tensors, data at byte "
              "%" PRIu64 ", %zu bytes\n",
              Printable(files[0]).c_str(), f.version(), f.alignment(), f.metadata().size(),
              f.tensors().size(), f.data_offset(), f.bytes().size());
  std::printf("\nMetadata:\n");
  for (const auto& kv : f.metadata()) {
    std::printf("  %-44s %-16s %s\n", Printable(kv.key, 80).c_str(), TypeText(kv.value).c_str(),
                ValueText(kv.value).c_str());
  }
  if (!no_tensors) {
    std::printf("\nTensors:\n  %5s  %-36s %-7s %-20s %12s %12s\n", "#", "name", "type", "shape",
                "offset", "bytes");
    size_t k = 0;
    for (const auto& t : f.tensors()) {
      std::printf("  %5zu  %-36s %-7s %-20s %12" PRIu64 " %12" PRIu64 "\n", k++,
                  Printable(t.name, 80).c_str(), std::string(tensor::DTypeName(t.type)).c_str(),
                  ShapeText(t.shape).c_str(), t.offset, t.size_bytes);
    }
  }
  std::printf("\nSummary:\n");
  for (const auto& [type, tt] : totals) {
    std::printf("  %-7s %5d tensors %14" PRId64 " elements %14" PRIu64 " bytes (%.2f MiB)\n",
                type.c_str(), tt.tensors, tt.elements, tt.bytes, tt.bytes / 1048576.0);
  }
  std::printf("  %-7s %5zu tensors %14" PRId64 " elements %14" PRIu64 " bytes (%.2f MiB)\n",
              "total", f.tensors().size(), total_elements, total_bytes,
              total_bytes / 1048576.0);
  return kExitOk;
}

}  // namespace fg::cli
