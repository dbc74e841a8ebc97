// Writer of IREE parameter archives (.irpa): named byte blobs an IREE module loads as
// `#flow.parameter.named<"model"::"KEY">` globals (iree-run-module --parameters=model=X.irpa).
// Format: IREE runtime/src/iree/schemas/parameter_archive.h, header version 0: a header, an
// entry table (16-byte aligned data entries), a metadata segment with the names, and a storage
// segment whose entries start at file offsets aligned to each entry's alignment (64 by
// default, so IREE can map them in place). The namespace is fg::exporter (`export` is a C++
// keyword).
#ifndef FGEMMA_EXPORT_IRPA_H_
#define FGEMMA_EXPORT_IRPA_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "fgemma/status.h"

namespace fg::exporter {

class IrpaWriter {
 public:
  // Fills an entry's bytes at write time (`out` has exactly the entry's length), so a 500 MB
  // archive never needs more than one tensor in memory.
  using Fill = std::function<Status(std::span<uint8_t> out)>;

  // Adds a parameter. Names must be unique and non-empty; alignment a power of two >= 1.
  Status Add(std::string name, uint64_t length, Fill fill, uint64_t alignment = 64);

  // Called after each entry is written: bytes written so far, total bytes.
  using Progress = std::function<void(uint64_t done, uint64_t total)>;
  // Writes atomically (temp file, then rename); on error nothing is left at `path`.
  Status WriteFile(const std::string& path, const Progress& progress = nullptr) const;

  size_t size() const { return entries_.size(); }
  // Size of the file WriteFile produces.
  uint64_t FileSize() const;

 private:
  struct Entry {
    std::string name;
    uint64_t length;
    Fill fill;
    uint64_t alignment;
  };
  struct Layout {
    uint64_t entry_table_offset, entry_table_length;
    uint64_t metadata_offset, metadata_length;
    uint64_t storage_offset, storage_length;
    std::vector<uint64_t> name_offsets;     // relative to the metadata segment
    std::vector<uint64_t> storage_offsets;  // relative to the storage segment
    uint64_t file_size;
  };
  Layout ComputeLayout() const;
  std::vector<uint8_t> HeaderAndTables(const Layout& l) const;

  std::vector<Entry> entries_;
};

}  // namespace fg::exporter

#endif  // FGEMMA_EXPORT_IRPA_H_
