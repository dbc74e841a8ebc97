// GGUF parsing. Layout (little-endian), ref: ggml/docs/gguf.md and ggml/src/gguf.cpp:
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv | n_kv x (string key, u32 type, value)
//   | n_tensors x (string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset)
//   | padding to `general.alignment` | tensor data
// Every read goes through Cursor, which checks the remaining bytes first, so no count or length
// from the file is trusted before it is bounded by the file size.
#include "src/gguf/reader.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

namespace fg::gguf {

namespace {

std::string Quote(std::string_view s) {
  // Names from hostile files may hold anything; keep messages printable and short.
  std::string out = "'";
  size_t n = std::min<size_t>(s.size(), 96);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > n) out += "...";
  out += "'";
  return out;
}

// Size in bytes of a scalar value type; 0 for string/array/unknown.
uint64_t ScalarSize(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return 0;
  }
  return 0;
}

bool KnownValueType(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kFloat64); }

template <typename T>
T LoadLE(const uint8_t* p) {
  // GGUF is little-endian; fgemma only targets little-endian hosts (x86-64, AArch64).
  static_assert(std::endian::native == std::endian::little);
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> b) : b_(b) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return b_.size() - pos_; }

  Status Need(uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      return DataLossError("truncated " + std::string(what) + " at byte " +
                           std::to_string(pos_) + ": needs " + std::to_string(n) +
                           " bytes, file has " + std::to_string(remaining()) + " left");
    }
    return OkStatus();
  }
  template <typename T>
  StatusOr<T> Read(std::string_view what) {
    FG_RETURN_IF_ERROR(Need(sizeof(T), what));
    T v = LoadLE<T>(b_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  StatusOr<std::string_view> ReadString(std::string_view what) {
    FG_ASSIGN_OR_RETURN(uint64_t len, Read<uint64_t>(what));
    if (len > remaining()) {
      return DataLossError("truncated string (" + std::string(what) + ") at byte " +
                           std::to_string(pos_) + ": length " + std::to_string(len) +
                           " exceeds the " + std::to_string(remaining()) + " bytes left");
    }
    std::string_view s(reinterpret_cast<const char*>(b_.data() + pos_), len);
    pos_ += len;
    return s;
  }
  const uint8_t* Skip(uint64_t n) {  // caller checked Need(n)
    const uint8_t* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }

 private:
  std::span<const uint8_t> b_;
  uint64_t pos_ = 0;
};

// Reads one scalar of type `t` into `v` (t is a scalar type).
Status ReadScalar(Cursor& c, ValueType t, Value& v) {
  v.type = t;
  switch (t) {
    case ValueType::kUint8: {
      FG_ASSIGN_OR_RETURN(v.u, c.Read<uint8_t>("uint8 value"));
      return OkStatus();
    }
    case ValueType::kBool: {
      FG_ASSIGN_OR_RETURN(v.u, c.Read<uint8_t>("bool value"));
      return OkStatus();
    }
    case ValueType::kInt8: {
      FG_ASSIGN_OR_RETURN(v.i, c.Read<int8_t>("int8 value"));
      return OkStatus();
    }
    case ValueType::kUint16: {
      FG_ASSIGN_OR_RETURN(v.u, c.Read<uint16_t>("uint16 value"));
      return OkStatus();
    }
    case ValueType::kInt16: {
      FG_ASSIGN_OR_RETURN(v.i, c.Read<int16_t>("int16 value"));
      return OkStatus();
    }
    case ValueType::kUint32: {
      FG_ASSIGN_OR_RETURN(v.u, c.Read<uint32_t>("uint32 value"));
      return OkStatus();
    }
    case ValueType::kInt32: {
      FG_ASSIGN_OR_RETURN(v.i, c.Read<int32_t>("int32 value"));
      return OkStatus();
    }
    case ValueType::kUint64: {
      FG_ASSIGN_OR_RETURN(v.u, c.Read<uint64_t>("uint64 value"));
      return OkStatus();
    }
    case ValueType::kInt64: {
      FG_ASSIGN_OR_RETURN(v.i, c.Read<int64_t>("int64 value"));
      return OkStatus();
    }
    case ValueType::kFloat32: {
      FG_ASSIGN_OR_RETURN(uint32_t bits, c.Read<uint32_t>("float32 value"));
      v.u = bits;  // raw bits, so a writer can reproduce NaN payloads exactly
      v.f = std::bit_cast<float>(bits);
      return OkStatus();
    }
    case ValueType::kFloat64: {
      FG_ASSIGN_OR_RETURN(v.u, c.Read<uint64_t>("float64 value"));
      v.f = std::bit_cast<double>(v.u);
      return OkStatus();
    }
    case ValueType::kString:
    case ValueType::kArray:
      break;
  }
  return InternalError("ReadScalar on a non-scalar type");
}

Status ReadValue(Cursor& c, uint32_t raw_type, Value& v) {
  if (!KnownValueType(raw_type)) {
    return DataLossError("unknown value type id " + std::to_string(raw_type));
  }
  ValueType t = static_cast<ValueType>(raw_type);
  v.type = t;
  if (t == ValueType::kString) {
    FG_ASSIGN_OR_RETURN(v.str, c.ReadString("string value"));
    return OkStatus();
  }
  if (t != ValueType::kArray) return ReadScalar(c, t, v);

  FG_ASSIGN_OR_RETURN(uint32_t raw_elem, c.Read<uint32_t>("array element type"));
  if (!KnownValueType(raw_elem)) {
    return DataLossError("unknown array element type id " + std::to_string(raw_elem));
  }
  v.elem_type = static_cast<ValueType>(raw_elem);
  if (v.elem_type == ValueType::kArray) {
    return UnimplementedError("nested arrays are not supported");
  }
  FG_ASSIGN_OR_RETURN(v.count, c.Read<uint64_t>("array length"));
  if (v.elem_type == ValueType::kString) {
    // Each string takes at least its 8-byte length: bound the count before reserving.
    if (v.count > c.remaining() / 8) {
      return DataLossError("array of " + std::to_string(v.count) +
                           " strings is larger than the file (" + std::to_string(c.remaining()) +
                           " bytes left)");
    }
    v.data = c.Skip(0);
    for (uint64_t k = 0; k < v.count; ++k) {
      auto s = c.ReadString("string array element");
      if (!s.ok()) return s.status().WithContext("element " + std::to_string(k));
    }
    v.strings = StringList(v.data, v.count);
    return OkStatus();
  }
  uint64_t esize = ScalarSize(v.elem_type);
  uint64_t bytes;
  if (__builtin_mul_overflow(v.count, esize, &bytes) || bytes > c.remaining()) {
    return DataLossError("array of " + std::to_string(v.count) + " " +
                         std::string(ValueTypeName(v.elem_type)) +
                         " elements is larger than the file (" + std::to_string(c.remaining()) +
                         " bytes left)");
  }
  v.data = c.Skip(bytes);
  return OkStatus();
}

bool IsInteger(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64:
      return true;
    default:
      return false;
  }
}
bool IsSigned(ValueType t) {
  return t == ValueType::kInt8 || t == ValueType::kInt16 || t == ValueType::kInt32 ||
         t == ValueType::kInt64;
}

}  // namespace

std::string_view ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kUint8: return "uint8";
    case ValueType::kInt8: return "int8";
    case ValueType::kUint16: return "uint16";
    case ValueType::kInt16: return "int16";
    case ValueType::kUint32: return "uint32";
    case ValueType::kInt32: return "int32";
    case ValueType::kFloat32: return "float32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kUint64: return "uint64";
    case ValueType::kInt64: return "int64";
    case ValueType::kFloat64: return "float64";
  }
  return "unknown";
}

StatusOr<std::unique_ptr<File>> File::Open(const std::string& path) {
  auto m = MappedFile::Open(path);
  if (!m.ok()) return m.status();
  std::unique_ptr<File> f(new File());
  f->mapping_ = std::move(m).value();
  f->bytes_ = f->mapping_->bytes();
  Status s = f->Parse();
  if (!s.ok()) return std::move(s).WithContext(path);
  return f;
}

StatusOr<std::unique_ptr<File>> File::FromBytes(std::span<const uint8_t> bytes) {
  std::unique_ptr<File> f(new File());
  f->bytes_ = bytes;
  FG_RETURN_IF_ERROR(f->Parse());
  return f;
}

Status File::Parse() {
  Status s = [&]() -> Status {
    Cursor c(bytes_);
    FG_RETURN_IF_ERROR(c.Need(4, "magic"));
    const uint8_t* magic = c.Skip(4);
    if (std::memcmp(magic, "GGUF", 4) != 0) {
      return DataLossError("bad magic " + Quote(std::string_view(
                                              reinterpret_cast<const char*>(magic), 4)) +
                           ": not a GGUF file");
    }
    FG_ASSIGN_OR_RETURN(version_, c.Read<uint32_t>("version"));
    if (version_ == 1) {
      return UnimplementedError(
          "GGUF version 1 is not supported (it used 32-bit counts); re-convert the model");
    }
    if (version_ != 2 && version_ != 3) {
      uint32_t swapped = __builtin_bswap32(version_);
      if (swapped >= 1 && swapped <= 3) {
        return UnimplementedError("bad version: big-endian GGUF (version " +
                                  std::to_string(swapped) + ") is not supported");
      }
      if (version_ == 0) return DataLossError("bad version 0");
      return UnimplementedError("bad version " + std::to_string(version_) +
                                ": only GGUF versions 2 and 3 are supported");
    }
    FG_ASSIGN_OR_RETURN(uint64_t n_tensors, c.Read<uint64_t>("tensor count"));
    FG_ASSIGN_OR_RETURN(uint64_t n_kv, c.Read<uint64_t>("metadata count"));
    // A key/value takes at least 13 bytes (8 key length + 4 type + 1 value); a tensor info at
    // least 24 (8 name length + 4 n_dims + 4 type + 8 offset).
    if (n_kv > c.remaining() / 13) {
      return DataLossError("huge metadata count " + std::to_string(n_kv) + " for a file of " +
                           std::to_string(bytes_.size()) + " bytes");
    }
    if (n_tensors > c.remaining() / 24) {
      return DataLossError("huge tensor count " + std::to_string(n_tensors) +
                           " for a file of " + std::to_string(bytes_.size()) + " bytes");
    }

    metadata_.reserve(n_kv);
    key_index_.reserve(n_kv);
    for (uint64_t k = 0; k < n_kv; ++k) {
      auto key = c.ReadString("metadata key");
      if (!key.ok()) return key.status().WithContext("metadata entry " + std::to_string(k));
      KeyValue kv;
      kv.key = *key;
      auto type = c.Read<uint32_t>("value type");
      Status vs = type.ok() ? ReadValue(c, *type, kv.value) : type.status();
      if (!vs.ok()) return std::move(vs).WithContext("key " + Quote(kv.key));
      if (!key_index_.emplace(kv.key, metadata_.size()).second) {
        return DataLossError("duplicate key " + Quote(kv.key));
      }
      metadata_.push_back(std::move(kv));
    }

    if (const Value* a = Find("general.alignment"); a != nullptr) {
      if (a->type != ValueType::kUint32) {
        return InvalidArgumentError("key 'general.alignment' must be uint32, is " +
                                    std::string(ValueTypeName(a->type)));
      }
      if (a->u == 0 || (a->u & (a->u - 1)) != 0) {
        return InvalidArgumentError("key 'general.alignment' is " + std::to_string(a->u) +
                                    ", not a power of two");
      }
      alignment_ = a->u;
    }

    tensors_.reserve(n_tensors);
    tensor_index_.reserve(n_tensors);
    for (uint64_t k = 0; k < n_tensors; ++k) {
      TensorInfo t;
      auto name = c.ReadString("tensor name");
      if (!name.ok()) return name.status().WithContext("tensor info " + std::to_string(k));
      t.name = *name;
      Status ts = [&]() -> Status {
        FG_ASSIGN_OR_RETURN(uint32_t n_dims, c.Read<uint32_t>("n_dims"));
        if (n_dims == 0 || n_dims > 4) {
          return DataLossError("n_dims is " + std::to_string(n_dims) + " (must be 1..4)");
        }
        uint64_t ne[4] = {1, 1, 1, 1};
        for (uint32_t d = 0; d < n_dims; ++d) {
          FG_ASSIGN_OR_RETURN(ne[d], c.Read<uint64_t>("dimension"));
        }
        FG_ASSIGN_OR_RETURN(uint32_t type_id, c.Read<uint32_t>("tensor type"));
        FG_ASSIGN_OR_RETURN(t.offset, c.Read<uint64_t>("tensor offset"));
        auto info = tensor::LookupDType(type_id);
        if (!info) {
          return UnimplementedError("unknown tensor type id " + std::to_string(type_id));
        }
        t.type = info->type;
        int64_t n = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
          if (ne[d] == 0) return DataLossError("dimension " + std::to_string(d) + " is 0");
          if (ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
              __builtin_mul_overflow(n, static_cast<int64_t>(ne[d]), &n)) {
            return DataLossError("shape overflow: element count does not fit in 64 bits");
          }
        }
        t.n_elements = n;
        // ggml's ne[0] is the innermost (row) dimension; store outermost-first.
        for (int d = static_cast<int>(n_dims) - 1; d >= 0; --d) {
          t.shape.push_back(static_cast<int64_t>(ne[d]));
        }
        if (static_cast<int64_t>(ne[0]) % info->block_elems != 0) {
          return DataLossError("row size " + std::to_string(ne[0]) +
                               " is not a multiple of the " + std::string(info->name) +
                               " block size " + std::to_string(info->block_elems));
        }
        uint64_t blocks = static_cast<uint64_t>(n / info->block_elems);
        if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info->block_bytes),
                                   &t.size_bytes)) {
          return DataLossError("shape overflow: byte size does not fit in 64 bits");
        }
        if (t.offset % alignment_ != 0) {
          return DataLossError("misaligned tensor offset " + std::to_string(t.offset) +
                               " (alignment " + std::to_string(alignment_) + ")");
        }
        return OkStatus();
      }();
      if (!ts.ok()) return std::move(ts).WithContext("tensor " + Quote(t.name));
      if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
        return DataLossError("duplicate tensor name " + Quote(t.name));
      }
      tensors_.push_back(std::move(t));
    }

    // The data section starts at the next multiple of the alignment.
    uint64_t pos = c.pos();
    uint64_t pad = (alignment_ - pos % alignment_) % alignment_;
    data_offset_ = pos + pad;
    if (!tensors_.empty() && data_offset_ > bytes_.size()) {
      return DataLossError("truncated: tensor data section starts at byte " +
                           std::to_string(data_offset_) + " past the end of the file (" +
                           std::to_string(bytes_.size()) + " bytes)");
    }
    uint64_t data_size = data_offset_ <= bytes_.size() ? bytes_.size() - data_offset_ : 0;
    for (TensorInfo& t : tensors_) {
      uint64_t end;
      if (__builtin_add_overflow(t.offset, t.size_bytes, &end) || end > data_size) {
        return DataLossError("tensor " + Quote(t.name) + ": data at offset " +
                             std::to_string(t.offset) + " (+" + std::to_string(t.size_bytes) +
                             " bytes) is past end of file (data section holds " +
                             std::to_string(data_size) + " bytes)");
      }
      t.data = bytes_.data() + data_offset_ + t.offset;
    }
    // Tensors must not overlap (a weight aliasing another is corruption, not a feature).
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(tensors_.size());
    for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t k = 1; k < by_offset.size(); ++k) {
      const TensorInfo* a = by_offset[k - 1];
      const TensorInfo* b = by_offset[k];
      if (a->offset + a->size_bytes > b->offset) {
        return DataLossError("tensor " + Quote(b->name) + " overlaps tensor " + Quote(a->name));
      }
    }
    return OkStatus();
  }();
  if (!s.ok()) return std::move(s).WithContext("gguf");
  return OkStatus();
}

const Value* File::Find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

void File::ReleasePages(const TensorInfo& t) const {
  if (mapping_ != nullptr && t.data != nullptr) mapping_->Release({t.data, t.size_bytes});
}

const TensorInfo* File::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Status Missing(std::string_view key) {
  return NotFoundError("gguf: key '" + std::string(key) + "' not found");
}
Status WrongType(std::string_view key, const Value& v, std::string_view want) {
  std::string have(ValueTypeName(v.type));
  if (v.type == ValueType::kArray) have += " of " + std::string(ValueTypeName(v.elem_type));
  return InvalidArgumentError("gguf: key '" + std::string(key) + "' is " + have + ", expected " +
                              std::string(want));
}

}  // namespace

StatusOr<uint64_t> File::GetUint(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (!IsInteger(v->type)) return WrongType(key, *v, "an unsigned integer");
  if (IsSigned(v->type)) {
    if (v->i < 0) {
      return OutOfRangeError("gguf: key '" + std::string(key) + "' is negative (" +
                             std::to_string(v->i) + ")");
    }
    return static_cast<uint64_t>(v->i);
  }
  return v->u;
}

StatusOr<int64_t> File::GetInt(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (!IsInteger(v->type)) return WrongType(key, *v, "an integer");
  if (IsSigned(v->type)) return v->i;
  if (v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return OutOfRangeError("gguf: key '" + std::string(key) + "' does not fit in int64");
  }
  return static_cast<int64_t>(v->u);
}

StatusOr<double> File::GetFloat(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type != ValueType::kFloat32 && v->type != ValueType::kFloat64) {
    return WrongType(key, *v, "float32 or float64");
  }
  return v->f;
}

StatusOr<bool> File::GetBool(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type != ValueType::kBool) return WrongType(key, *v, "bool");
  return v->u != 0;
}

StatusOr<std::string_view> File::GetString(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type != ValueType::kString) return WrongType(key, *v, "string");
  return v->str;
}

StatusOr<const StringList*> File::GetStringList(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type != ValueType::kArray || v->elem_type != ValueType::kString) {
    return WrongType(key, *v, "array of string");
  }
  return &v->strings;
}

StatusOr<std::vector<std::string_view>> File::GetStringArray(std::string_view key) const {
  FG_ASSIGN_OR_RETURN(const StringList* list, GetStringList(key));
  return std::vector<std::string_view>(list->begin(), list->end());
}

StatusOr<std::vector<float>> File::GetFloatArray(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type != ValueType::kArray || v->elem_type != ValueType::kFloat32) {
    return WrongType(key, *v, "array of float32");
  }
  std::vector<float> out(v->count);
  if (v->count != 0) std::memcpy(out.data(), v->data, v->count * sizeof(float));
  return out;
}

StatusOr<std::vector<int32_t>> File::GetInt32Array(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type != ValueType::kArray || v->elem_type != ValueType::kInt32) {
    return WrongType(key, *v, "array of int32");
  }
  std::vector<int32_t> out(v->count);
  if (v->count != 0) std::memcpy(out.data(), v->data, v->count * sizeof(int32_t));
  return out;
}

}  // namespace fg::gguf
