#include "src/gguf/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "src/base/file_io.h"
#include "src/base/temp_files.h"

namespace fg::gguf {

namespace {

using tensor::DType;

uint64_t ScalarBytes(ValueType t) {
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
    default:
      return 0;
  }
}

class Buf {
 public:
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void Str(std::string_view s) {
    U64(s.size());
    Raw(s.data(), s.size());
  }
  void Raw(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    data.insert(data.end(), b, b + n);
  }
  std::vector<uint8_t> data;
};

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

Writer::Writer(uint64_t alignment) {
  if (alignment != 32) SetAlignment(alignment);
}

Status Writer::SetVersion(uint32_t version) {
  if (version != 2 && version != 3) {
    return InvalidArgumentError("gguf writer: version " + std::to_string(version) +
                                " not supported (2 or 3)");
  }
  version_ = version;
  return OkStatus();
}

void Writer::SetAlignment(uint64_t alignment) {
  // Stored as uint32 like ggml; a value that does not fit is caught at write time.
  SetScalar("general.alignment", ValueType::kUint32,
            alignment > std::numeric_limits<uint32_t>::max() ? 0 : alignment);
}

Writer::Kv& Writer::Slot(std::string_view key, ValueType type) {
  for (Kv& kv : kvs_) {
    if (kv.key == key) {
      kv = Kv{};
      kv.key = std::string(key);
      kv.type = type;
      return kv;
    }
  }
  kvs_.emplace_back();
  kvs_.back().key = std::string(key);
  kvs_.back().type = type;
  return kvs_.back();
}

void Writer::SetScalar(std::string_view key, ValueType type, uint64_t bits) {
  Slot(key, type).bits = bits;
}

void Writer::SetUint8(std::string_view k, uint8_t v) { SetScalar(k, ValueType::kUint8, v); }
void Writer::SetInt8(std::string_view k, int8_t v) {
  SetScalar(k, ValueType::kInt8, static_cast<uint8_t>(v));
}
void Writer::SetUint16(std::string_view k, uint16_t v) { SetScalar(k, ValueType::kUint16, v); }
void Writer::SetInt16(std::string_view k, int16_t v) {
  SetScalar(k, ValueType::kInt16, static_cast<uint16_t>(v));
}
void Writer::SetUint32(std::string_view k, uint32_t v) { SetScalar(k, ValueType::kUint32, v); }
void Writer::SetInt32(std::string_view k, int32_t v) {
  SetScalar(k, ValueType::kInt32, static_cast<uint32_t>(v));
}
void Writer::SetUint64(std::string_view k, uint64_t v) { SetScalar(k, ValueType::kUint64, v); }
void Writer::SetInt64(std::string_view k, int64_t v) {
  SetScalar(k, ValueType::kInt64, static_cast<uint64_t>(v));
}
void Writer::SetFloat32(std::string_view k, float v) {
  SetScalar(k, ValueType::kFloat32, std::bit_cast<uint32_t>(v));
}
void Writer::SetFloat64(std::string_view k, double v) {
  SetScalar(k, ValueType::kFloat64, std::bit_cast<uint64_t>(v));
}
void Writer::SetBool(std::string_view k, bool v) { SetScalar(k, ValueType::kBool, v ? 1 : 0); }
void Writer::SetString(std::string_view k, std::string_view v) {
  Slot(k, ValueType::kString).str = std::string(v);
}
void Writer::SetStringArray(std::string_view k, const std::vector<std::string>& v) {
  Kv& kv = Slot(k, ValueType::kArray);
  kv.elem_type = ValueType::kString;
  kv.count = v.size();
  kv.strings = v;
}
void Writer::SetFloat32Array(std::string_view k, const std::vector<float>& v) {
  SetArray(k, ValueType::kFloat32, v.size(),
           {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)})
      .IgnoreError();  // sizes agree by construction
}
void Writer::SetInt32Array(std::string_view k, const std::vector<int32_t>& v) {
  SetArray(k, ValueType::kInt32, v.size(),
           {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(int32_t)})
      .IgnoreError();  // sizes agree by construction
}

Status Writer::SetArray(std::string_view key, ValueType elem_type, uint64_t count,
                        std::span<const uint8_t> raw) {
  uint64_t es = ScalarBytes(elem_type);
  uint64_t want;
  if (es == 0) {
    return InvalidArgumentError("gguf writer: key '" + std::string(key) + "': array of " +
                                std::string(ValueTypeName(elem_type)) +
                                " needs SetStringArray or is not supported");
  }
  if (__builtin_mul_overflow(count, es, &want) || want != raw.size()) {
    return InvalidArgumentError("gguf writer: key '" + std::string(key) + "': " +
                                std::to_string(count) + " elements do not match " +
                                std::to_string(raw.size()) + " bytes");
  }
  Kv& kv = Slot(key, ValueType::kArray);
  kv.elem_type = elem_type;
  kv.count = count;
  kv.raw.assign(raw.begin(), raw.end());
  return OkStatus();
}

Status Writer::SetValue(std::string_view key, const Value& v) {
  switch (v.type) {
    case ValueType::kString:
      SetString(key, v.str);
      return OkStatus();
    case ValueType::kArray:
      if (v.elem_type == ValueType::kString) {
        SetStringArray(key, std::vector<std::string>(v.strings.begin(), v.strings.end()));
        return OkStatus();
      }
      return SetArray(key, v.elem_type, v.count,
                      // The reader bounded count by the bytes of a mapped file: fits size_t.
                      {v.data, static_cast<size_t>(v.count * ScalarBytes(v.elem_type))});
    case ValueType::kInt8:
    case ValueType::kInt16:
    case ValueType::kInt32:
    case ValueType::kInt64: {
      uint64_t bits = static_cast<uint64_t>(v.i);
      uint64_t n = ScalarBytes(v.type);
      if (n < 8) bits &= (uint64_t{1} << (8 * n)) - 1;
      SetScalar(key, v.type, bits);
      return OkStatus();
    }
    default:
      SetScalar(key, v.type, v.u);  // unsigned, bool and float raw bits
      return OkStatus();
  }
}

bool Writer::Remove(std::string_view key) {
  auto it = std::find_if(kvs_.begin(), kvs_.end(), [&](const Kv& kv) { return kv.key == key; });
  if (it == kvs_.end()) return false;
  kvs_.erase(it);
  return true;
}

bool Writer::Has(std::string_view key) const {
  return std::any_of(kvs_.begin(), kvs_.end(), [&](const Kv& kv) { return kv.key == key; });
}

Status Writer::CheckTensor(std::string_view name, DType type, const std::vector<int64_t>& shape,
                           uint64_t* size_bytes) const {
  std::string who = "gguf writer: tensor '" + std::string(name) + "': ";
  if (name.empty() || name.size() >= 64) {
    return InvalidArgumentError(who + "name must be 1..63 bytes (ggml's GGML_MAX_NAME)");
  }
  for (const Tensor& t : tensors_) {
    if (t.name == name) return InvalidArgumentError(who + "duplicate tensor name");
  }
  if (shape.empty() || shape.size() > 4) {
    return InvalidArgumentError(who + "needs 1..4 dimensions, has " +
                                std::to_string(shape.size()));
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) return InvalidArgumentError(who + "dimension " + std::to_string(d));
    if (__builtin_mul_overflow(n, d, &n)) return InvalidArgumentError(who + "shape overflows");
  }
  const tensor::DTypeInfo& info = tensor::Info(type);
  if (shape.back() % info.block_elems != 0) {
    return InvalidArgumentError(who + "row size " + std::to_string(shape.back()) +
                                " is not a multiple of the " + std::string(info.name) +
                                " block size " + std::to_string(info.block_elems));
  }
  if (__builtin_mul_overflow(static_cast<uint64_t>(n / info.block_elems),
                             static_cast<uint64_t>(info.block_bytes), size_bytes)) {
    return InvalidArgumentError(who + "byte size overflows");
  }
  return OkStatus();
}

Status Writer::AddTensor(std::string_view name, DType type, std::vector<int64_t> shape,
                         std::vector<uint8_t> data) {
  uint64_t size;
  FG_RETURN_IF_ERROR(CheckTensor(name, type, shape, &size));
  if (data.size() != size) {
    return InvalidArgumentError("gguf writer: tensor '" + std::string(name) + "': has " +
                                std::to_string(data.size()) + " bytes, shape and type need " +
                                std::to_string(size));
  }
  Tensor t{std::string(name), type, std::move(shape), size, std::nullopt, std::move(data), {}, {}};
  tensors_.push_back(std::move(t));
  return OkStatus();
}

Status Writer::AddTensorView(std::string_view name, DType type, std::vector<int64_t> shape,
                             std::span<const uint8_t> data) {
  uint64_t size;
  FG_RETURN_IF_ERROR(CheckTensor(name, type, shape, &size));
  if (data.size() != size) {
    return InvalidArgumentError("gguf writer: tensor '" + std::string(name) + "': has " +
                                std::to_string(data.size()) + " bytes, shape and type need " +
                                std::to_string(size));
  }
  tensors_.push_back(Tensor{std::string(name), type, std::move(shape), size, std::nullopt, {},
                            data, {}});
  return OkStatus();
}

Status Writer::AddTensorGenerated(std::string_view name, DType type, std::vector<int64_t> shape,
                                  Generator generate) {
  uint64_t size;
  FG_RETURN_IF_ERROR(CheckTensor(name, type, shape, &size));
  tensors_.push_back(Tensor{std::string(name), type, std::move(shape), size, std::nullopt, {}, {},
                            std::move(generate)});
  return OkStatus();
}

StatusOr<Writer> Writer::FromFile(const File& file) {
  Writer w;
  FG_RETURN_IF_ERROR(w.SetVersion(file.version()));
  for (const KeyValue& kv : file.metadata()) FG_RETURN_IF_ERROR(w.SetValue(kv.key, kv.value));
  uint64_t end = 0;
  for (const TensorInfo& t : file.tensors()) {
    FG_RETURN_IF_ERROR(
        w.AddTensorView(t.name, t.type, t.shape, {t.data, static_cast<size_t>(t.size_bytes)}));
    w.tensors_.back().offset = t.offset;
    end = std::max(end, t.offset + t.size_bytes);
  }
  // Keep whatever follows the last tensor (normally its zero padding) verbatim.
  uint64_t data_end = file.data_offset() + end;
  if (data_end <= file.bytes().size()) {
    w.tail_.emplace(file.bytes().begin() + data_end, file.bytes().end());
  }
  return w;
}

StatusOr<uint64_t> Writer::Alignment() const {
  for (const Kv& kv : kvs_) {
    if (kv.key != "general.alignment") continue;
    if (kv.type != ValueType::kUint32 || kv.bits == 0 || (kv.bits & (kv.bits - 1)) != 0) {
      return InvalidArgumentError(
          "gguf writer: general.alignment must be a uint32 power of two");
    }
    return kv.bits;
  }
  return uint64_t{32};
}

Status Writer::Emit(const Sink& sink) const {
  FG_ASSIGN_OR_RETURN(uint64_t align, Alignment());
  Buf h;
  h.Raw("GGUF", 4);
  h.U32(version_);
  h.U64(tensors_.size());
  h.U64(kvs_.size());
  for (const Kv& kv : kvs_) {
    h.Str(kv.key);
    h.U32(static_cast<uint32_t>(kv.type));
    if (kv.type == ValueType::kString) {
      h.Str(kv.str);
    } else if (kv.type == ValueType::kArray) {
      h.U32(static_cast<uint32_t>(kv.elem_type));
      h.U64(kv.count);
      if (kv.elem_type == ValueType::kString) {
        for (const std::string& s : kv.strings) h.Str(s);
      } else {
        h.Raw(kv.raw.data(), kv.raw.size());
      }
    } else {
      h.Raw(&kv.bits, ScalarBytes(kv.type));  // little-endian host
    }
  }
  // Lay out the data section: fixed offsets (FromFile) or the next aligned position.
  std::vector<uint64_t> offsets;
  uint64_t cur = 0;
  for (const Tensor& t : tensors_) {
    uint64_t off = t.offset ? *t.offset : AlignUp(cur, align);
    if (off < cur || off % align != 0) {
      return InvalidArgumentError("gguf writer: tensor '" + t.name + "': offset " +
                                  std::to_string(off) + " overlaps or is misaligned");
    }
    offsets.push_back(off);
    cur = off + t.size_bytes;
  }
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const Tensor& t = tensors_[k];
    h.Str(t.name);
    h.U32(static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) h.U64(*it);  // ne[0] innermost
    h.U32(static_cast<uint32_t>(t.type));
    h.U64(offsets[k]);
  }
  h.data.resize(AlignUp(h.data.size(), align), 0);
  FG_RETURN_IF_ERROR(sink(h.data.data(), h.data.size()));

  static const uint8_t kZeros[4096] = {};
  auto pad = [&](uint64_t n) -> Status {
    while (n > 0) {
      size_t c = std::min<uint64_t>(n, sizeof(kZeros));
      FG_RETURN_IF_ERROR(sink(kZeros, c));
      n -= c;
    }
    return OkStatus();
  };
  cur = 0;
  std::vector<uint8_t> scratch;
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const Tensor& t = tensors_[k];
    FG_RETURN_IF_ERROR(pad(offsets[k] - cur));
    if (t.generate) {
      scratch.assign(t.size_bytes, 0);
      Status s = t.generate(scratch);
      if (!s.ok()) return std::move(s).WithContext("tensor '" + t.name + "'");
      FG_RETURN_IF_ERROR(sink(scratch.data(), scratch.size()));
    } else {
      std::span<const uint8_t> d = t.owned.empty() ? t.view : std::span<const uint8_t>(t.owned);
      FG_RETURN_IF_ERROR(sink(d.data(), d.size()));
    }
    cur = offsets[k] + t.size_bytes;
  }
  if (tail_) return sink(tail_->data(), tail_->size());
  return pad(AlignUp(cur, align) - cur);
}

StatusOr<std::vector<uint8_t>> Writer::ToBytes() const {
  std::vector<uint8_t> out;
  FG_RETURN_IF_ERROR(Emit([&](const uint8_t* p, size_t n) {
    out.insert(out.end(), p, p + n);
    return OkStatus();
  }));
  return out;
}

Status Writer::WriteFile(const std::string& path) const {
  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return IoError("cannot create '" + tmpl + "': " + ErrnoText());
  // Removed (and the descriptor closed) on every failure, an exception (bad_alloc while
  // emitting) or SIGINT/SIGTERM.
  TempPath tmp(tmpl);
  ScopedFd owned(fd);
  Status s = Emit([&](const uint8_t* p, size_t n) -> Status {
    while (n > 0) {
      ssize_t w = ::write(fd, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return IoError("write to '" + tmpl + "' failed: " + ErrnoText());
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return OkStatus();
  });
  if (s.ok() && ::fchmod(fd, 0644) != 0) s = IoError("chmod '" + tmpl + "': " + ErrnoText());
  if (s.ok() && ::fsync(fd) != 0) s = IoError("fsync '" + tmpl + "': " + ErrnoText());
  if (::close(owned.Release()) != 0 && s.ok()) s = IoError("close '" + tmpl + "': " + ErrnoText());
  if (s.ok() && ::rename(tmpl.c_str(), path.c_str()) != 0) {
    s = IoError("cannot rename '" + tmpl + "' to '" + path + "': " + ErrnoText());
  }
  if (s.ok()) tmp.Keep();
  return s;
}

}  // namespace fg::gguf
