// Validated GGUF reader (versions 2 and 3). The file is memory-mapped read-only and every
// count, length, offset and size is checked against the file before use; a hostile file gives a
// Status naming the problem, never a crash or a huge allocation.
//
// Shapes are converted once, here, from ggml's innermost-first ne[] to outermost-first:
// attn_q.weight with ne = [640, 1024] has shape {1024, 640} (1024 rows of 640).
#ifndef FGEMMA_GGUF_READER_H_
#define FGEMMA_GGUF_READER_H_

#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fgemma/status.h"
#include "src/base/mapped_file.h"
#include "src/tensor/dtype.h"

namespace fg::gguf {

// GGUF metadata value types (on-disk ids).
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view ValueTypeName(ValueType t);

// The elements of a string array, read from the mapping as they are visited (they were all
// validated when the file was opened): no per-element storage, which for a 262k-token
// vocabulary would be 4 MiB of views. Forward iteration only.
class StringList {
 public:
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = const std::string_view*;
    using reference = std::string_view;
    iterator() = default;
    iterator(const uint8_t* p, uint64_t left) : p_(p), left_(left) {}
    std::string_view operator*() const {
      uint64_t len;
      std::memcpy(&len, p_, sizeof(len));  // little-endian (checked in reader.cc)
      return std::string_view(reinterpret_cast<const char*>(p_) + sizeof(len), len);
    }
    iterator& operator++() {
      p_ += sizeof(uint64_t) + (**this).size();
      --left_;
      return *this;
    }
    iterator operator++(int) {
      iterator t = *this;
      ++*this;
      return t;
    }
    bool operator==(const iterator& o) const { return left_ == o.left_; }

   private:
    const uint8_t* p_ = nullptr;
    uint64_t left_ = 0;  // elements from here to the end
  };
  StringList() = default;
  StringList(const uint8_t* data, uint64_t count) : data_(data), count_(count) {}
  iterator begin() const { return iterator(data_, count_); }
  iterator end() const { return iterator(nullptr, 0); }
  uint64_t size() const { return count_; }
  bool empty() const { return count_ == 0; }

 private:
  const uint8_t* data_ = nullptr;
  uint64_t count_ = 0;
};

// One metadata value. Scalars are held widened; strings and array payloads point into the
// mapped file (valid while the File lives).
struct Value {
  ValueType type = ValueType::kUint8;
  // Scalars (type != kString/kArray): exactly one of these is meaningful, by type.
  uint64_t u = 0;   // unsigned integers and bool; for float32/float64 the raw IEEE bits
  int64_t i = 0;    // signed integers
  double f = 0.0;   // float32 / float64 (widened)
  std::string_view str;  // kString
  // kArray: element type, count and, for numeric elements, the raw little-endian payload.
  ValueType elem_type = ValueType::kUint8;
  uint64_t count = 0;
  const uint8_t* data = nullptr;
  StringList strings;  // kArray of kString: every element (validated), views into the file
};

struct KeyValue {
  std::string_view key;
  Value value;
};

struct TensorInfo {
  std::string_view name;
  tensor::DType type;
  std::vector<int64_t> shape;  // outermost-first
  int64_t n_elements = 0;
  uint64_t offset = 0;         // relative to the start of the tensor data section
  uint64_t size_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping; aligned to the file's alignment
};

class File {
 public:
  // Opens and validates `path` (mmap).
  static StatusOr<std::unique_ptr<File>> Open(const std::string& path);
  // Parses an in-memory image (the bytes must outlive the File). Used by fuzzing and tests.
  static StatusOr<std::unique_ptr<File>> FromBytes(std::span<const uint8_t> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of tensor data in the file
  std::span<const uint8_t> bytes() const { return bytes_; }
  // MappedFile::Release for a tensor's data read once and kept in another form; nothing for a
  // File made FromBytes.
  void ReleasePages(const TensorInfo& t) const;

  const std::vector<KeyValue>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  const Value* Find(std::string_view key) const;
  const TensorInfo* FindTensor(std::string_view name) const;

  // Typed getters: NotFound if absent, InvalidArgument naming the key if the type differs.
  // Integer getters accept any integer type whose value fits.
  StatusOr<uint64_t> GetUint(std::string_view key) const;
  StatusOr<int64_t> GetInt(std::string_view key) const;
  StatusOr<double> GetFloat(std::string_view key) const;  // float32 or float64
  StatusOr<bool> GetBool(std::string_view key) const;
  StatusOr<std::string_view> GetString(std::string_view key) const;
  StatusOr<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  // The same elements without copying their views (iterate it; valid while the File lives).
  StatusOr<const StringList*> GetStringList(std::string_view key) const;
  StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;   // f32 elements
  StatusOr<std::vector<int32_t>> GetInt32Array(std::string_view key) const;  // i32 elements

 private:
  File() = default;
  Status Parse();

  std::unique_ptr<MappedFile> mapping_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> key_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace fg::gguf

#endif  // FGEMMA_GGUF_READER_H_
