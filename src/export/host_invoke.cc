#include "src/export/host_invoke.h"

#include <utility>

namespace fg::exporter {

namespace {

std::string ArgLabel(size_t i, const Arg& a) {
  return "argument " + std::to_string(i) + " '" + a.name + "'";
}

InvokeStats StatsOf(const graph::Graph& g) {
  exec::MemoryPlan plan = exec::PlanMemory(g);
  InvokeStats s;
  s.arena_bytes = plan.arena_bytes;
  s.largest_bytes = plan.largest_bytes;
  if (plan.largest_value >= 0) s.largest_name = g.value(plan.largest_value).name;
  return s;
}

ContractSpec SpecOf(const InvokeOptions& o, const PastLengths& p) {
  ContractSpec spec;
  spec.function = o.function;
  spec.seq = o.seq;
  spec.chunk = o.chunk;
  spec.emb_input = o.emb_input;
  spec.past = p.sliding;
  spec.past_global = p.global;
  return spec;
}

SignatureOptions SignatureOptionsOf(const InvokeOptions& o) { return OptionsOf(SpecOf(o, {})); }

}  // namespace

int64_t HostTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

HostTensor HostTensor::F32(std::vector<int64_t> shape, std::vector<float> data) {
  HostTensor t;
  t.shape = std::move(shape);
  t.type = ArgType::kF32;
  t.f32 = std::move(data);
  return t;
}

HostTensor HostTensor::I32(std::vector<int64_t> shape, std::vector<int32_t> data) {
  HostTensor t;
  t.shape = std::move(shape);
  t.type = ArgType::kI32;
  t.i32 = std::move(data);
  return t;
}

std::string ShapeTypeString(const std::vector<int64_t>& shape, ArgType type) {
  std::string s;
  for (int64_t d : shape) s += (d == kDynamic ? std::string("?") : std::to_string(d)) + "x";
  return s + (type == ArgType::kI32 ? "i32" : "f32");
}

StatusOr<CheckedArguments> CheckArguments(const model::Config& c, const InvokeOptions& o,
                                          std::span<const HostTensor> args) {
  FG_ASSIGN_OR_RETURN(Signature sig, GetSignature(o.function, c, SignatureOptionsOf(o)));
  const std::string fn(FunctionName(o.function));
  if (args.size() != sig.args.size()) {
    return InvalidArgumentError(fn + " takes " + std::to_string(sig.args.size()) +
                                " arguments, got " + std::to_string(args.size()));
  }
  // P of each layer type: the rows of its first layer's K argument.
  PastLengths past{-1, -1};
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = sig.args[i];
    if (a.layer < 0 || a.name.back() != 'k') continue;
    int64_t& p = c.IsGlobal(a.layer) ? past.global : past.sliding;
    if (p < 0 && args[i].shape.size() == 4) p = args[i].shape[2];
  }
  if (past.sliding < 0) past.sliding = 0;
  if (past.global < 0) past.global = past.sliding;
  const int64_t n = o.function == Function::kWithPast ? 1 : o.chunk;
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = sig.args[i];
    const HostTensor& t = args[i];
    std::vector<int64_t> want = a.shape;
    std::string note;
    if (a.layer >= 0) {
      const bool global = c.IsGlobal(a.layer);
      want[2] = global ? past.global : past.sliding;
      note = " (P = " + std::to_string(want[2]) + " from the first " +
             (global ? "global" : "sliding") + " layer's K)";
    } else if (a.name == "maskSliding" || a.name == "maskGlobal") {
      const int64_t p = a.name == "maskGlobal" ? past.global : past.sliding;
      want[3] = p + n;
      note = " (P + C with P = " + std::to_string(p) + ")";
    }
    if (t.type != a.type) {
      return InvalidArgumentError(ArgLabel(i, a) + ": expected " +
                                  ShapeTypeString(a.shape, a.type) + ", got element type " +
                                  (t.type == ArgType::kI32 ? "i32" : "f32"));
    }
    if (t.shape != want) {
      return InvalidArgumentError(ArgLabel(i, a) + ": expected shape " +
                                  ShapeTypeString(want, a.type) + note + ", got " +
                                  ShapeTypeString(t.shape, t.type));
    }
    const size_t count = static_cast<size_t>(t.elements());
    if ((t.type == ArgType::kF32 ? t.f32.size() : t.i32.size()) != count) {
      return InvalidArgumentError(
          ArgLabel(i, a) + ": holds " +
          std::to_string(t.type == ArgType::kF32 ? t.f32.size() : t.i32.size()) +
          " values, its shape needs " + std::to_string(count));
    }
    if (a.name == "tokens" || a.name == "token") {
      for (size_t j = 0; j < t.i32.size(); ++j) {
        if (t.i32[j] < 0 || t.i32[j] >= c.vocab) {
          return OutOfRangeError(ArgLabel(i, a) + ": token id " + std::to_string(t.i32[j]) +
                                 " at index " + std::to_string(j) +
                                 " is outside the vocabulary [0, " + std::to_string(c.vocab) + ")");
        }
      }
    }
  }
  return CheckedArguments{std::move(sig), past};
}

StatusOr<std::vector<HostTensor>> HostInvoke(const model::Config& c, const model::Weights& w,
                                             const exec::WeightResolver& resolver,
                                             const InvokeOptions& o,
                                             std::span<const HostTensor> args, InvokeStats* stats) {
  FG_ASSIGN_OR_RETURN(CheckedArguments checked, CheckArguments(c, o, args));
  return HostInvokeChecked(c, w, resolver, o, args, checked, stats);
}

StatusOr<std::vector<HostTensor>> HostInvokeChecked(const model::Config& c,
                                                    const model::Weights& w,
                                                    const exec::WeightResolver& resolver,
                                                    const InvokeOptions& o,
                                                    std::span<const HostTensor> args,
                                                    const CheckedArguments& checked,
                                                    InvokeStats* stats) {
  FG_ASSIGN_OR_RETURN(graph::Graph g, BuildContractFunction(c, w, SpecOf(o, checked.past)));
  if (stats != nullptr) *stats = StatsOf(g);
  const std::string fn(FunctionName(o.function));
  auto created = exec::Executor::Create(std::move(g), resolver, o.pool, o.exec);
  if (!created.ok()) return created.status().WithContext(fn);
  std::unique_ptr<exec::Executor> e = std::move(created).value();
  const graph::Graph& graph = e->graph();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& name = graph.value(graph.inputs()[i]).name;
    if (args[i].type == ArgType::kI32) {
      FG_RETURN_IF_ERROR(e->SetInput(name, std::span<const int32_t>(args[i].i32)));
    } else {
      FG_RETURN_IF_ERROR(e->SetInput(name, std::span<const float>(args[i].f32)));
    }
  }
  FG_RETURN_IF_ERROR(e->Run().WithContext(fn));
  std::vector<HostTensor> results;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const graph::Value& v = graph.value(graph.outputs()[i]);
    const std::string& name = graph.output_names()[i];
    if (v.type == graph::ValueType::kI32) {
      FG_ASSIGN_OR_RETURN(std::span<const int32_t> d, e->OutputI32(name));
      results.push_back(HostTensor::I32(v.shape, {d.begin(), d.end()}));
    } else {
      FG_ASSIGN_OR_RETURN(std::span<const float> d, e->OutputF32(name));
      results.push_back(HostTensor::F32(v.shape, {d.begin(), d.end()}));
    }
  }
  return results;
}

StatusOr<InvokeStats> PlanFunction(const model::Config& c, const model::Weights& w,
                                   const ContractSpec& spec) {
  FG_ASSIGN_OR_RETURN(graph::Graph g, BuildContractFunction(c, w, spec));
  return StatsOf(g);
}

}  // namespace fg::exporter
