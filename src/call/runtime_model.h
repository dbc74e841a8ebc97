// The runtime::Model inside a CallModel, for front ends that also generate text or tokenize with
// the plain vocabulary from the same loaded file (the C ABI, src/capi) instead of loading it
// twice.
#ifndef FGEMMA_CALL_RUNTIME_MODEL_H_
#define FGEMMA_CALL_RUNTIME_MODEL_H_

#include "fgemma/function_caller.h"
#include "src/runtime/model.h"

namespace fg::call {

// Valid while `model` lives; immutable (shareable between threads like the CallModel).
const runtime::Model& RuntimeModel(const CallModel& model);

}  // namespace fg::call

#endif  // FGEMMA_CALL_RUNTIME_MODEL_H_
