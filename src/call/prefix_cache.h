// The catalog prefix's KV snapshot on disk, so a new process skips prefilling the tool
// declarations.
//
// File (little-endian, the host's floats): magic "FGPREFIX", u32 version, u32 0, u64 key,
// i64 layers, i64 kv_dim, i64 local_rows, i64 n_tokens, i32 tokens[n_tokens], then per layer
// u64 rows and rows*kv_dim f32 of K then of V, then a u64 checksum of every byte before it.
// The key (PrefixCacheKey) hashes the model's identity, the kernel set and the cache geometry;
// the file also holds the prefix tokens, which must equal the request's. Anything that does not
// match (truncation, bit flips, another model or catalog, another version) is a Status, which
// the caller reports as a warning before prefilling again; files are replaced atomically
// (written to a temporary name in the same folder, then renamed).
#ifndef FGEMMA_CALL_PREFIX_CACHE_H_
#define FGEMMA_CALL_PREFIX_CACHE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fgemma/status.h"
#include "src/gguf/reader.h"
#include "src/runtime/session.h"

namespace fg::call {

inline constexpr uint32_t kPrefixCacheVersion = 1;

// 64-bit hash of bytes (FNV-1a over 8-byte words; fast, not cryptographic).
uint64_t Hash64(std::span<const uint8_t> bytes, uint64_t seed = 0);

// Cheap identity of a GGUF: its size, header + metadata + tensor table (the bytes before the
// tensor data, at most 16 MiB), and the first and last 64 KiB of tensor data.
uint64_t ModelIdentity(const gguf::File& file);

struct PrefixGeometry {
  int64_t layers = 0;
  int64_t kv_dim = 0;
  int64_t local_rows = 0;  // sliding layers' ring rows (depends on the session's max_chunk)
};

// The cache key of a prefix: model identity, geometry, the kernel set (`kernels`: ISA name and
// reference flag; results differ in the last bits between them) and the prefix tokens.
uint64_t PrefixCacheKey(uint64_t model_id, const PrefixGeometry& g, const std::string& kernels,
                        std::span<const int32_t> tokens);

// "<dir>/prefix-<16 hex digits of key>.fgkv".
std::string PrefixCachePath(const std::string& dir, uint64_t key);

// Writes the session's caches (position == tokens.size()) atomically, layer by layer straight
// from the session. Errors are Io (the caller may ignore them: the cache is an optimization).
Status SavePrefix(const std::string& path, uint64_t key, const PrefixGeometry& g,
                  std::span<const int32_t> tokens, const runtime::Session& session);

// Reads (never maps: a file truncated meanwhile must not raise SIGBUS) and checks a file, then
// copies its caches into `session` (Session::Restore over views of the buffer). NotFound when
// there is none; DataLoss for a corrupt one (checksum, truncation, impossible sizes, larger than
// this prefix's file can be, non-finite K/V values); FailedPrecondition for a stale one (another
// version, key, geometry or prefix); InvalidArgument when it does not fit `session` or is not a
// regular file. The session is changed only on success. The checksum guards against damage, not
// tampering: a cache folder must be trusted like the model file.
Status LoadPrefix(const std::string& path, uint64_t key, const PrefixGeometry& g,
                  std::span<const int32_t> tokens, runtime::Session* session);

// Creates `dir` if missing (one level) and checks that it is a writable directory. Io/NotFound
// naming the path otherwise.
Status PrepareCacheDir(const std::string& dir);

}  // namespace fg::call

#endif  // FGEMMA_CALL_PREFIX_CACHE_H_
