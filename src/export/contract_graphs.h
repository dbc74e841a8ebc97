// The six functions of the compiled-graph contract (docs/contract.md) as graphs built
// from the one model definition (model::BuildLayers, src/model/gemma3/forward.h).
//
// A graph's inputs are GetSignature's arguments, same names, same order; its outputs are the
// signature's results in order, named by Graph::output_names() ("l0.k", ..., "token"). The
// StableHLO emitter lowers these graphs with the past length P dynamic (kDynamic); the host
// (`fgemma invoke`, HostInvoke) builds them with the concrete P of its inputs.
//
// How each function computes:
// - gemma, gemma_at, gemma_prefill, gemma_prefill_at: positions 0..S-1 (iota), RoPE per layer
//   base, K/V rows [1,KV,S,D] (the prefill results), causal attention with the sliding window
//   on sliding layers.
// - gemma_with_past: RoPE from the cos/sin inputs; K/V = past ++ new row; attention over all
//   of them (no mask: the caller passes sliding layers only their last W-1 rows).
// - gemma_prefill_with_past: the same with C new rows and the additive mask inputs.
// - Heads: `_at` and the with-past functions normalize all rows, take one row (a one-hot
//   `select` dot for the fixed-length ones), apply the tied LM head to it and take the argmax:
//   no S x vocab value exists. gemma / gemma_prefill apply the head to every row.
// - Embeddings-input variants read `emb` (unscaled rows) instead of gathering; `tokens` stays
//   an (unused) argument, as the contract's signature has it.
// Weights are graph weights named by their GGUF tensor names; the tied embedding is one weight
// used by both the gather and the head.
#ifndef FGEMMA_EXPORT_CONTRACT_GRAPHS_H_
#define FGEMMA_EXPORT_CONTRACT_GRAPHS_H_

#include <cstdint>
#include <optional>

#include "fgemma/status.h"
#include "src/export/contract.h"
#include "src/graph/graph.h"
#include "src/model/gemma3/config.h"
#include "src/model/gemma3/weights.h"

namespace fg::exporter {

struct ContractSpec {
  Function function = Function::kRedecodeAt;
  int64_t seq = 24;    // S of the fixed-length functions
  int64_t chunk = 32;  // C of gemma_prefill_with_past
  // P of the with-past functions: rows of past K/V each layer receives, or kDynamic.
  // past_global, when set, is the global layers' P (sliding layers usually get fewer rows).
  int64_t past = kDynamic;
  std::optional<int64_t> past_global;
  bool emb_input = false;
};

StatusOr<graph::Graph> BuildContractFunction(const model::Config& config,
                                             const model::Weights& weights,
                                             const ContractSpec& spec);

// The signature options matching a spec.
SignatureOptions OptionsOf(const ContractSpec& spec);

}  // namespace fg::exporter

#endif  // FGEMMA_EXPORT_CONTRACT_GRAPHS_H_
