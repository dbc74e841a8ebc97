// GGUF writer (version 3 by default, 2 on request): metadata of every value type, tensors with
// a DType, an outermost-first shape and raw bytes, written atomically (temp file + rename; on
// error no partial file is left at the destination).
//
// Layout follows ggml's gguf writer (ref: ggml/src/gguf.cpp gguf_write_to_buf): keys in
// insertion order, tensor infos in insertion order, each tensor's data at the next multiple of
// the alignment, zero padding after the header and after every tensor. Writer::FromFile keeps a
// file's key order, tensor order, alignment and offsets, so reading a file and writing it back
// reproduces it byte for byte.
#ifndef FGEMMA_GGUF_WRITER_H_
#define FGEMMA_GGUF_WRITER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fgemma/status.h"
#include "src/gguf/reader.h"
#include "src/tensor/dtype.h"

namespace fg::gguf {

class Writer {
 public:
  // Fills a tensor's bytes at write time (`out` has exactly the tensor's byte size), so large
  // synthetic models never hold more than one tensor in memory.
  using Generator = std::function<Status(std::span<uint8_t> out)>;

  // `alignment` other than 32 is recorded as general.alignment (uint32).
  explicit Writer(uint64_t alignment = 32);

  // A writer holding `file`'s version, metadata (same order), tensors (same order, same
  // offsets) and trailing bytes. Tensor data is viewed in place: `file` must outlive the writer.
  static StatusOr<Writer> FromFile(const File& file);

  // GGUF version written: 3 (default) or 2 (same layout; for compatibility tests).
  Status SetVersion(uint32_t version);
  // Sets general.alignment (must be a power of two, checked at write time).
  void SetAlignment(uint64_t alignment);

  // Metadata setters: replace the value of an existing key in place, else append the key.
  void SetUint8(std::string_view key, uint8_t v);
  void SetInt8(std::string_view key, int8_t v);
  void SetUint16(std::string_view key, uint16_t v);
  void SetInt16(std::string_view key, int16_t v);
  void SetUint32(std::string_view key, uint32_t v);
  void SetInt32(std::string_view key, int32_t v);
  void SetUint64(std::string_view key, uint64_t v);
  void SetInt64(std::string_view key, int64_t v);
  void SetFloat32(std::string_view key, float v);
  void SetFloat64(std::string_view key, double v);
  void SetBool(std::string_view key, bool v);
  void SetString(std::string_view key, std::string_view v);
  void SetStringArray(std::string_view key, const std::vector<std::string>& v);
  void SetFloat32Array(std::string_view key, const std::vector<float>& v);
  void SetInt32Array(std::string_view key, const std::vector<int32_t>& v);
  // A numeric array of `count` elements of `elem_type` from little-endian `raw` bytes.
  Status SetArray(std::string_view key, ValueType elem_type, uint64_t count,
                  std::span<const uint8_t> raw);
  // Copies one value as read by the reader (any type, including arrays of strings).
  Status SetValue(std::string_view key, const Value& v);
  bool Remove(std::string_view key);
  bool Has(std::string_view key) const;

  // Tensors, in file order. Names must be unique, non-empty and shorter than 64 bytes
  // (ggml's GGML_MAX_NAME); shapes are outermost-first with 1..4 positive dimensions; the
  // innermost dimension must be a multiple of the type's block size.
  Status AddTensor(std::string_view name, tensor::DType type, std::vector<int64_t> shape,
                   std::vector<uint8_t> data);
  // As AddTensor, without a copy: `data` must stay valid until the last write.
  Status AddTensorView(std::string_view name, tensor::DType type, std::vector<int64_t> shape,
                       std::span<const uint8_t> data);
  Status AddTensorGenerated(std::string_view name, tensor::DType type, std::vector<int64_t> shape,
                            Generator generate);

  size_t num_tensors() const { return tensors_.size(); }
  size_t num_keys() const { return kvs_.size(); }

  // Writes the file atomically to `path`.
  Status WriteFile(const std::string& path) const;
  // The file image in memory (tests, fuzz seeds).
  StatusOr<std::vector<uint8_t>> ToBytes() const;

 private:
  struct Kv {
    std::string key;
    ValueType type = ValueType::kUint8;
    uint64_t bits = 0;  // scalars: raw little-endian bits, zero-extended
    std::string str;
    ValueType elem_type = ValueType::kUint8;
    uint64_t count = 0;
    std::vector<uint8_t> raw;          // numeric array payload
    std::vector<std::string> strings;  // string array elements
  };
  struct Tensor {
    std::string name;
    tensor::DType type;
    std::vector<int64_t> shape;  // outermost-first
    uint64_t size_bytes = 0;
    std::optional<uint64_t> offset;  // fixed by FromFile; else the next aligned position
    std::vector<uint8_t> owned;
    std::span<const uint8_t> view;
    Generator generate;
  };
  using Sink = std::function<Status(const uint8_t* data, size_t n)>;

  Kv& Slot(std::string_view key, ValueType type);
  void SetScalar(std::string_view key, ValueType type, uint64_t bits);
  Status CheckTensor(std::string_view name, tensor::DType type, const std::vector<int64_t>& shape,
                     uint64_t* size_bytes) const;
  StatusOr<uint64_t> Alignment() const;
  Status Emit(const Sink& sink) const;

  uint32_t version_ = 3;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
  std::optional<std::vector<uint8_t>> tail_;  // bytes after the last tensor (FromFile)
};

}  // namespace fg::gguf

#endif  // FGEMMA_GGUF_WRITER_H_
