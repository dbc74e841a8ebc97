#include "src/export/tensor_io.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>

#include "src/base/file_io.h"

namespace fg::exporter {

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 34;  // sanity bound on a parsed shape
// The largest .npy file read (the real model's embedding table as f32 is 640 MiB).
constexpr uint64_t kMaxTensorFileBytes = uint64_t{4} << 30;

// "1x24xi32" -> shape, type.
Status ParseShapeType(std::string_view s, std::vector<int64_t>* shape, ArgType* type) {
  shape->clear();
  size_t start = 0;
  while (true) {
    const size_t x = s.find('x', start);
    std::string_view part = s.substr(start, x == std::string_view::npos ? s.npos : x - start);
    if (x == std::string_view::npos) {
      if (part == "f32") {
        *type = ArgType::kF32;
      } else if (part == "i32") {
        *type = ArgType::kI32;
      } else if (part.empty()) {
        return InvalidArgumentError("'" + std::string(s) + "' has no element type (e.g. 1x24xi32)");
      } else {
        return InvalidArgumentError("element type '" + std::string(part) +
                                    "' is not supported (the contract uses f32 and i32)");
      }
      break;
    }
    if (part.empty() || part.size() > 12 ||
        part.find_first_not_of("0123456789") != std::string_view::npos) {
      return InvalidArgumentError("'" + std::string(s) +
                                  "' is not a shape and element type like 1x24xi32");
    }
    shape->push_back(std::strtoll(std::string(part).c_str(), nullptr, 10));
    start = x + 1;
  }
  int64_t n = 1;
  for (int64_t d : *shape) {
    if (d != 0 && n > kMaxElements / d) {
      return InvalidArgumentError("shape '" + std::string(s) + "' is too large");
    }
    n *= d;
  }
  return OkStatus();
}

Status ParseValues(std::string_view text, HostTensor* t) {
  const int64_t n = t->elements();
  std::vector<std::string> items;
  std::string cur;
  for (char ch : text) {
    if (ch == ' ' || ch == ',' || ch == '[' || ch == ']' || ch == '\t' || ch == '\n') {
      if (!cur.empty()) items.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) items.push_back(std::move(cur));
  if (items.empty()) return InvalidArgumentError("no values after '='");
  if (items.size() != 1 && static_cast<int64_t>(items.size()) != n) {
    return InvalidArgumentError(std::to_string(items.size()) + " values for a tensor of " +
                                std::to_string(n) +
                                " elements (give all of them, or one to fill it)");
  }
  std::vector<double> vals;
  for (const std::string& item : items) {
    errno = 0;
    char* end = nullptr;
    if (t->type == ArgType::kI32) {
      const long long v = std::strtoll(item.c_str(), &end, 10);
      if (*end != '\0' || errno == ERANGE || v < INT32_MIN || v > INT32_MAX) {
        return InvalidArgumentError("'" + item + "' is not an i32 value");
      }
      vals.push_back(static_cast<double>(v));
    } else {
      const double v = std::strtod(item.c_str(), &end);
      if (*end != '\0') return InvalidArgumentError("'" + item + "' is not an f32 value");
      vals.push_back(v);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const double v = vals.size() == 1 ? vals[0] : vals[i];
    if (t->type == ArgType::kI32) {
      t->i32.push_back(static_cast<int32_t>(v));
    } else {
      t->f32.push_back(static_cast<float>(v));
    }
  }
  return OkStatus();
}

void FromBytes(std::string_view bytes, HostTensor* t) {
  const size_t n = bytes.size() / 4;
  if (t->type == ArgType::kI32) {
    t->i32.resize(n);
    std::memcpy(t->i32.data(), bytes.data(), n * 4);
  } else {
    t->f32.resize(n);
    std::memcpy(t->f32.data(), bytes.data(), n * 4);
  }
}

// The value of `'key': ...` in a .npy header dict (up to the next top-level comma or brace).
std::optional<std::string> DictValue(const std::string& h, const std::string& key) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) k = h.find("\"" + key + "\"");
  if (k == std::string::npos) return std::nullopt;
  size_t colon = h.find(':', k + key.size() + 2);
  if (colon == std::string::npos) return std::nullopt;
  size_t i = colon + 1;
  while (i < h.size() && h[i] == ' ') ++i;
  size_t j = i;
  int depth = 0;
  for (; j < h.size(); ++j) {
    if (h[j] == '(') ++depth;
    if (h[j] == ')') --depth;
    if (depth == 0 && (h[j] == ',' || h[j] == '}')) break;
    if (depth < 0) return std::nullopt;
  }
  std::string v = h.substr(i, j - i);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

}  // namespace

StatusOr<HostTensor> ParseNpy(std::string_view b, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError(what + ": not a usable .npy file: " + why);
  };
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    return bad("no \\x93NUMPY magic");
  const int major = static_cast<uint8_t>(b[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len =
        static_cast<uint8_t>(b[8]) | (static_cast<size_t>(static_cast<uint8_t>(b[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) return bad("truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<uint8_t>(b[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    return bad("version " + std::to_string(major) + " is not supported");
  }
  if (header_len > b.size() - header_start) return bad("header longer than the file");
  const std::string h(b.substr(header_start, header_len));
  auto descr = DictValue(h, "descr");
  auto fortran = DictValue(h, "fortran_order");
  auto shape_s = DictValue(h, "shape");
  if (!descr || !fortran || !shape_s) return bad("header lacks descr, fortran_order or shape");
  HostTensor t;
  const std::string d = *descr;
  if (d == "'<f4'" || d == "'=f4'" || d == "\"<f4\"") {
    t.type = ArgType::kF32;
  } else if (d == "'<i4'" || d == "'=i4'" || d == "\"<i4\"") {
    t.type = ArgType::kI32;
  } else {
    return bad("dtype " + d + " is not little-endian f32 ('<f4') or i32 ('<i4')");
  }
  if (*fortran != "False") return bad("fortran_order arrays are not supported");
  std::string s = *shape_s;
  if (s.size() < 2 || s.front() != '(' || s.back() != ')')
    return bad("shape " + s + " is not a tuple");
  s = s.substr(1, s.size() - 2);
  std::stringstream ss(s);
  std::string item;
  int64_t n = 1;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' '), z = item.find_last_not_of(' ');
    if (a == std::string::npos) continue;  // "(5,)"
    item = item.substr(a, z - a + 1);
    if (item.empty() || item.size() > 12 ||
        item.find_first_not_of("0123456789") != std::string::npos) {
      return bad("shape entry '" + item + "'");
    }
    const int64_t dim = std::strtoll(item.c_str(), nullptr, 10);
    if (dim != 0 && n > kMaxElements / dim) return bad("shape too large");
    n *= dim;
    t.shape.push_back(dim);
  }
  const size_t data_start = header_start + header_len;
  const uint64_t want = static_cast<uint64_t>(n) * 4;
  if (b.size() - data_start != want) {
    return bad("data is " + std::to_string(b.size() - data_start) + " bytes, shape needs " +
               std::to_string(want));
  }
  FromBytes(b.substr(data_start), &t);
  return t;
}

StatusOr<HostTensor> ReadNpy(const std::string& path) {
  FG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path, kMaxTensorFileBytes));
  return ParseNpy(bytes, "'" + path + "'");
}

std::string NpyBytes(const HostTensor& t) {
  std::string header = "{'descr': '";
  header += t.type == ArgType::kI32 ? "<i4" : "<f4";
  header += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    header += std::to_string(t.shape[i]);
    if (t.shape.size() == 1 || i + 1 < t.shape.size()) header += ",";
    if (i + 1 < t.shape.size()) header += " ";
  }
  header += "), }";
  // Pad with spaces so magic + length + header + '\n' is a multiple of 64 (as NumPy does).
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const size_t n = static_cast<size_t>(t.elements());
  const char* data = t.type == ArgType::kI32 ? reinterpret_cast<const char*>(t.i32.data())
                                             : reinterpret_cast<const char*>(t.f32.data());
  out.append(data, n * 4);
  return out;
}

Status WriteNpy(const std::string& path, const HostTensor& t) {
  return WriteFileAtomically(path, NpyBytes(t));
}

StatusOr<HostTensor> ParseTensorArg(std::string_view spec) {
  if (!spec.empty() && spec[0] == '@') return ReadNpy(std::string(spec.substr(1)));
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos) {
    return InvalidArgumentError(
        "'" + std::string(spec.substr(0, 64)) +
        "' is neither SHAPExTYPE=VALUES, SHAPExTYPE=@file.bin nor @file.npy");
  }
  HostTensor t;
  FG_RETURN_IF_ERROR(ParseShapeType(spec.substr(0, eq), &t.shape, &t.type));
  std::string_view rest = spec.substr(eq + 1);
  if (!rest.empty() && rest[0] == '@') {
    const std::string path(rest.substr(1));
    const uint64_t want = static_cast<uint64_t>(t.elements()) * 4;
    // Never more than the shape needs is read (the size is checked first).
    auto read = ReadFileToString(path, want);
    if (!read.ok() && read.status().code() == StatusCode::kResourceExhausted) {
      return InvalidArgumentError("'" + path + "' is larger than the " + std::to_string(want) +
                                  " bytes " + std::string(spec.substr(0, eq)) + " needs");
    }
    FG_ASSIGN_OR_RETURN(std::string bytes, std::move(read));
    if (bytes.size() != want) {
      return InvalidArgumentError("'" + path + "' has " + std::to_string(bytes.size()) +
                                  " bytes, " + std::string(spec.substr(0, eq)) + " needs " +
                                  std::to_string(want));
    }
    FromBytes(bytes, &t);
    return t;
  }
  FG_RETURN_IF_ERROR(ParseValues(rest, &t));
  return t;
}

std::string FormatTensor(const HostTensor& t, int64_t max_elements) {
  std::string s = ShapeTypeString(t.shape, t.type) + "=";
  const int64_t n = t.elements();
  char buf[48];
  auto element = [&](int64_t i) {
    if (t.type == ArgType::kI32) {
      std::snprintf(buf, sizeof buf, "%d", t.i32[i]);
    } else {
      std::snprintf(buf, sizeof buf, "%G", static_cast<double>(t.f32[i]));
    }
    s += buf;
  };
  if (t.shape.size() <= 1) {
    for (int64_t i = 0; i < n && i < max_elements; ++i) {
      if (i) s += ' ';
      element(i);
    }
    if (n > max_elements) s += "...";
    return s;
  }
  // Rank >= 2: rows of the last dim in brackets, nested per outer dim.
  int64_t printed = 0;
  bool truncated = false;
  std::function<void(size_t, int64_t)> rec = [&](size_t dim, int64_t base) {
    s += '[';
    const int64_t count = t.shape[dim];
    int64_t stride = 1;
    for (size_t k = dim + 1; k < t.shape.size(); ++k) stride *= t.shape[k];
    for (int64_t i = 0; i < count && !truncated; ++i) {
      if (dim + 1 == t.shape.size()) {
        if (i) s += ' ';
        element(base + i);
        if (++printed == max_elements && printed < n) {
          s += "...";
          truncated = true;
        }
      } else {
        rec(dim + 1, base + i * stride);
      }
    }
    s += ']';
  };
  // The outermost dim's entries are printed side by side without an enclosing bracket.
  const int64_t stride = t.shape[0] > 0 ? n / t.shape[0] : 0;
  for (int64_t i = 0; i < t.shape[0] && !truncated; ++i) rec(1, i * stride);
  return s;
}

}  // namespace fg::exporter
