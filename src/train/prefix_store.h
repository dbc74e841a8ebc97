// The catalog prefixes' K/V, computed once per training run and read back after.
//
// With `--prefix base` a catalog prompt's K/V come from the base model and do not change while
// the adapter trains, so the trainer computes each prompt's once and keeps its rows here: in a
// temporary file that is unlinked as soon as it is opened (nothing is left behind, whatever
// ends the process), read back with pread. The file's pages are the kernel's page cache, not
// the trainer's memory. Values are stored as computed (f32): a read prefix is bit for bit the
// computed one, so the adapter does not depend on whether a prefix was read or computed.
#ifndef FGEMMA_TRAIN_PREFIX_STORE_H_
#define FGEMMA_TRAIN_PREFIX_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fgemma/status.h"

namespace fg::train {

class PrefixStore {
 public:
  // A store of at most `max_bytes` in a new unlinked file in `dir` (empty: the system's
  // temporary folder, $TMPDIR).
  static StatusOr<std::unique_ptr<PrefixStore>> Create(uint64_t max_bytes, const std::string& dir = "");
  ~PrefixStore();
  PrefixStore(const PrefixStore&) = delete;
  PrefixStore& operator=(const PrefixStore&) = delete;

  // Keeps rows [0, rows) of every layer's K and V cache (`row_floats` floats a row) under
  // `key`. Returns false, storing nothing, when the budget is spent or the file cannot grow
  // (a full disk): the store then takes nothing more, and the caller computes as before.
  bool Put(const std::string& key, int64_t rows, int64_t row_floats,
           const std::vector<std::vector<float>>& k, const std::vector<std::vector<float>>& v);
  // Reads `key`'s rows back into rows [0, rows) of k and v; false when `key` is not stored
  // (with that many rows); an error when the file cannot be read.
  StatusOr<bool> Get(const std::string& key, int64_t rows, int64_t row_floats,
                     std::vector<std::vector<float>>& k, std::vector<std::vector<float>>& v) const;

  uint64_t bytes() const { return end_; }
  int64_t entries() const { return static_cast<int64_t>(index_.size()); }

 private:
  PrefixStore(int fd, uint64_t max_bytes) : fd_(fd), max_bytes_(max_bytes) {}
  int fd_ = -1;
  uint64_t max_bytes_ = 0;
  uint64_t end_ = 0;
  bool full_ = false;
  struct Entry {
    uint64_t offset = 0;
    size_t layers = 0;
  };
  std::map<std::pair<std::string, int64_t>, Entry> index_;  // (key, rows) -> where
};

}  // namespace fg::train

#endif  // FGEMMA_TRAIN_PREFIX_STORE_H_
