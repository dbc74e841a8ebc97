// The compiled-graph contract (docs/contract.md): function names, argument and result
// lists in their exact order, shapes and dtypes, and the host-side inputs a consumer builds
// (RoPE tables with the sign folded in, additive chunk masks). The emitter, `fgemma invoke`
// and manifest.json all read the signatures from here, so they cannot disagree.
#ifndef FGEMMA_EXPORT_CONTRACT_H_
#define FGEMMA_EXPORT_CONTRACT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fgemma/status.h"
#include "src/graph/graph.h"
#include "src/model/gemma3/config.h"

namespace fg::exporter {

enum class Function {
  kRedecode,         // gemma
  kRedecodeAt,       // gemma_at
  kPrefill,          // gemma_prefill
  kPrefillAt,        // gemma_prefill_at
  kWithPast,         // gemma_with_past
  kPrefillWithPast,  // gemma_prefill_with_past
};
inline constexpr Function kAllFunctions[] = {Function::kRedecode,  Function::kRedecodeAt,
                                             Function::kPrefill,   Function::kPrefillAt,
                                             Function::kWithPast,  Function::kPrefillWithPast};

std::string_view FunctionName(Function f);  // "gemma_at"
// The --graph spelling of the seed's exporter: redecode, redecode_at, prefill, prefill_at,
// with_past, prefill_with_past.
std::string_view GraphName(Function f);
std::optional<Function> ParseGraphName(std::string_view name);
// The function named `name` (FunctionName's spelling, "module." prefix accepted), if any.
std::optional<Function> ParseFunctionName(std::string_view name);
// "module." + fn unless fn already contains a '.' (the IREE C API wants qualified names).
std::string Qualified(std::string_view fn);

enum class ArgType { kI32, kF32 };
// A `?` dimension (the past length P): the graph's own marker, so shapes pass through unchanged.
inline constexpr int64_t kDynamic = graph::kDynamic;

struct Arg {
  std::string name;            // "tokens", "cosSliding", "l3.k", "maskGlobal", "select", "token"
  std::vector<int64_t> shape;  // outermost-first; kDynamic for P-dependent dims
  ArgType type = ArgType::kF32;
  int64_t layer = -1;          // the layer of a per-layer K/V ("l3.k" -> 3), else -1
};

struct Signature {
  Function function;
  std::vector<Arg> args;
  std::vector<Arg> results;
};

struct SignatureOptions {
  int64_t seq = 24;        // S of the fixed-length graphs
  int64_t chunk = 32;      // C of gemma_prefill_with_past
  bool emb_input = false;  // the embeddings-input variant: `emb` right after tokens/token
};

// The signature of `f` for a model, per docs/contract.md's tables and argument-order rule.
// InvalidArgument for S or C outside [1, 65536].
StatusOr<Signature> GetSignature(Function f, const model::Config& config,
                                 const SignatureOptions& options);

// RoPE rows for positions pos..pos+n-1 in the contract's layout: for i < D/2,
// a = p * base^(-2i/D) (double), cos[i] = cos[i+D/2] = cos(a), sin[i] = -sin(a),
// sin[i+D/2] = +sin(a), stored f32; row-major [n, D].
void ContractRopeRows(int64_t pos, int64_t n, int64_t head_dim, double base,
                      std::vector<float>* cos, std::vector<float>* sin);

// The additive mask of gemma_prefill_with_past, shape [1, heads, C, P + C]: row i is absolute
// position pos + i, key j is absolute position pos - P + j; 0 where row i attends key j
// (key <= row, and for a sliding mask key >= row - window + 1), -1e30 elsewhere. Rows
// i >= n_real are padding and attend only to themselves. Rows are identical across heads.
std::vector<float> ContractChunkMask(int64_t pos, int64_t past, int64_t chunk, int64_t n_real,
                                     int64_t window /* 0: global */, int64_t heads);

inline constexpr float kMaskedValue = -1e30f;

}  // namespace fg::exporter

#endif  // FGEMMA_EXPORT_CONTRACT_H_
