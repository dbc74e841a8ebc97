// The runtime::Model inside a CallModel, for front ends that also generate text or tokenize with
// the plain vocabulary from the same loaded file (the C ABI, src/capi) instead of loading it
// twice.
#ifndef FGEMMA_CALL_RUNTIME_MODEL_H_
#define FGEMMA_CALL_RUNTIME_MODEL_H_

#include "fgemma/function_caller.h"
#include "src/base/thread_pool.h"
#include "src/runtime/model.h"
#include "src/runtime/session.h"
#include "src/runtime/step_batcher.h"
#include "src/text/tokenizer.h"

namespace fg::call {

// Valid while `model` lives; immutable (shareable between threads like the CallModel).
const runtime::Model& RuntimeModel(const CallModel& model);
// The model the tool prior runs (CallModel::Load's prior_loras: RuntimeModel's mapping with the
// prior's adapters); null without prior_loras (the prior then runs RuntimeModel).
const runtime::Model* PriorModel(const CallModel& model);
// The tokenizer `FunctionCaller` prompts with: a base Gemma 3 vocabulary's <unused> ids 46..52
// named as FunctionGemma's function-calling tokens (what `fgemma tune` must train on).
const text::Tokenizer& CallTokenizer(const CallModel& model);
// Runs `caller`'s forward passes through `batcher` (continuous batching with other callers'
// and sessions'; nullptr: alone). The answers are the same. The batcher must run `caller`'s
// model (RuntimeModel) and outlive its use.
Status UseBatcher(FunctionCaller& caller, runtime::StepBatcher* batcher);
// The session of `caller`'s partner (FunctionCallerOptions::fill_arguments and blend: the caller
// on the tool prior's model), null without one; for tests.
const runtime::Session* PartnerSession(FunctionCaller& caller);
// Prepacks the model's matmul panels (runtime::Model::PrepackPanels): call before any caller of
// `model` is created.
Status PrepackPanels(const CallModel& model, ThreadPool* pool);

}  // namespace fg::call

#endif  // FGEMMA_CALL_RUNTIME_MODEL_H_
