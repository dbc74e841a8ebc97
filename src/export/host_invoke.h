// Runs a contract function on the host (the oracle of docs/contract.md): checks the arguments
// against the signature, builds the function's graph with the concrete past length of its K/V
// arguments, and runs it with the CPU executor. `fgemma invoke` and the agreement tests use it.
#ifndef FGEMMA_EXPORT_HOST_INVOKE_H_
#define FGEMMA_EXPORT_HOST_INVOKE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fgemma/status.h"
#include "src/base/thread_pool.h"
#include "src/exec/executor.h"
#include "src/export/contract.h"
#include "src/export/contract_graphs.h"
#include "src/model/gemma3/config.h"
#include "src/model/gemma3/weights.h"

namespace fg::exporter {

// One argument or result: a dense row-major tensor (f32 or i32).
struct HostTensor {
  std::vector<int64_t> shape;
  ArgType type = ArgType::kF32;
  std::vector<float> f32;    // when type == kF32
  std::vector<int32_t> i32;  // when type == kI32
  int64_t elements() const;

  static HostTensor F32(std::vector<int64_t> shape, std::vector<float> data);
  static HostTensor I32(std::vector<int64_t> shape, std::vector<int32_t> data);
};

// "1x1x?x256xf32" (iree-run-module's spelling; ? for a dynamic dim).
std::string ShapeTypeString(const std::vector<int64_t>& shape, ArgType type);

struct InvokeOptions {
  Function function = Function::kRedecodeAt;
  int64_t seq = 24;
  int64_t chunk = 32;
  bool emb_input = false;
  ThreadPool* pool = nullptr;  // not owned
  exec::ExecOptions exec;
};

// The memory a function's graph plans (exec::PlanMemory): the biggest value and the arena.
struct InvokeStats {
  std::string largest_name;
  uint64_t largest_bytes = 0;
  uint64_t arena_bytes = 0;
};

// The past lengths a function's arguments imply, after checking every argument against the
// signature: count, dtype, shape (P of sliding and global layers read from their first K),
// token ids inside [0, vocab). Errors name the argument ("argument 3 'l0.k': ...").
// Returns them with the signature the arguments were checked against.
struct PastLengths {
  int64_t sliding = 0, global = 0;
};
struct CheckedArguments {
  Signature signature;
  PastLengths past;
};
StatusOr<CheckedArguments> CheckArguments(const model::Config& config,
                                          const InvokeOptions& options,
                                          std::span<const HostTensor> args);

// Checks, builds and runs. Results in signature order with their concrete shapes.
// stats (when not null) gets the graph's memory plan, computed only then.
StatusOr<std::vector<HostTensor>> HostInvoke(const model::Config& config,
                                             const model::Weights& weights,
                                             const exec::WeightResolver& resolver,
                                             const InvokeOptions& options,
                                             std::span<const HostTensor> args,
                                             InvokeStats* stats = nullptr);

// HostInvoke without the checks, for arguments CheckArguments accepted as `checked` with the
// same options (a caller that checks first, to report argument errors its own way).
StatusOr<std::vector<HostTensor>> HostInvokeChecked(const model::Config& config,
                                                    const model::Weights& weights,
                                                    const exec::WeightResolver& resolver,
                                                    const InvokeOptions& options,
                                                    std::span<const HostTensor> args,
                                                    const CheckedArguments& checked,
                                                    InvokeStats* stats = nullptr);

// The plan of a function's graph without weights data or running it (past: P of every layer).
StatusOr<InvokeStats> PlanFunction(const model::Config& config, const model::Weights& weights,
                                   const ContractSpec& spec);

}  // namespace fg::exporter

#endif  // FGEMMA_EXPORT_HOST_INVOKE_H_
