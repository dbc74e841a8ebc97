// Placeholder: the K-quant kernels (Q4_K, Q5_K, Q6_K, Q8_K) replace this file.
#include "src/kernels/registry.h"

namespace fg::kernels::internal {

void RegisterKQuantOps(Isa, OpsTable&) {}

}  // namespace fg::kernels::internal
