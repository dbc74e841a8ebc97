// The StableHLO emitter: lowers graph::Graph functions to StableHLO MLIR text that
// `iree-compile` accepts as is (docs/contract.md).
//
// - Every weight is an external parameter, never a constant:
//     util.global private @"blk.0.attn_q.weight" =
//         #flow.parameter.named<"model"::"blk.0.attn_q.weight"> : tensor<1024x640xbf16>
//   declared once per module however many functions (or ops: the tied embedding / LM head)
//   use it, loaded with util.global.load and converted to f32; compute is f32.
// - Coarse graph ops expand into primitive StableHLO (dot_general, gather, reduce, select,
//   compare, iota, ...); dimensions equal to kDynamic (-1, the past length P) are printed `?`
//   and the ops that need a dynamic extent build it from stablehlo.get_dimension_size.
// - Function arguments are the graph's inputs in declaration order, then its states; results
//   are the graph's outputs in order.
#ifndef FGEMMA_EXPORT_STABLEHLO_H_
#define FGEMMA_EXPORT_STABLEHLO_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fgemma/status.h"
#include "src/graph/graph.h"

namespace fg::exporter {

// How weights are stored in the parameter archive (and typed in the module).
enum class WeightType { kBf16, kF16, kF32 };
std::string_view WeightTypeName(WeightType t);  // "bf16", "f16", "f32"
std::optional<WeightType> ParseWeightType(std::string_view name);
// The archive type of one weight: matrices (rank >= 2) take `type`; 1-D vectors (norm
// weights, a few KB in all) stay f32 so the (1 + w) scales keep full precision.
WeightType StoredWeightType(const std::vector<int64_t>& shape, WeightType type);
int64_t WeightTypeBytes(WeightType t);

inline constexpr std::string_view kParameterScope = "model";

struct EmitFunction {
  std::string name;             // the public function name, e.g. "gemma_at"
  const graph::Graph* graph = nullptr;
};

struct EmitOptions {
  WeightType weight_type = WeightType::kBf16;
};

// One module holding a global per distinct weight name and one public func.func per function.
// InvalidArgument if two functions disagree on a weight's shape or a graph is malformed.
StatusOr<std::string> EmitModule(std::span<const EmitFunction> functions,
                                 const EmitOptions& options);

}  // namespace fg::exporter

#endif  // FGEMMA_EXPORT_STABLEHLO_H_
