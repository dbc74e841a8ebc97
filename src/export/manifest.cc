#include "src/export/manifest.h"

namespace fg::exporter {

namespace {

using nlohmann::ordered_json;

ordered_json Names(const std::vector<Arg>& args) {
  ordered_json a = ordered_json::array();
  for (const Arg& x : args) a.push_back(x.name);
  return a;
}

ordered_json Described(const std::vector<Arg>& args) {
  ordered_json a = ordered_json::array();
  for (const Arg& x : args) {
    ordered_json shape = ordered_json::array();
    for (int64_t d : x.shape) {
      if (d == kDynamic) {
        shape.push_back("?");
      } else {
        shape.push_back(d);
      }
    }
    a.push_back({{"name", x.name}, {"shape", shape}, {"dtype", x.type == ArgType::kI32 ? "i32" : "f32"}});
  }
  return a;
}

// The manifest's key for each function (v1 spelling).
const char* Key(Function f) {
  switch (f) {
    case Function::kRedecode: return "redecode";
    case Function::kRedecodeAt: return "redecodeAt";
    case Function::kPrefill: return "prefill";
    case Function::kPrefillAt: return "prefillAt";
    case Function::kWithPast: return "withPast";
    case Function::kPrefillWithPast: return "prefillWithPast";
  }
  return "?";
}

}  // namespace

ordered_json DefaultToolMap() {
  // The seed's six-tool home catalog (examples/seed_home_toolmap.json; a test holds the two
  // equal). docs/contract.md names only "0": "set_lights"; the rest follow the catalog's order.
  ordered_json m = ordered_json::object();
  m["0"] = "set_lights";
  m["1"] = "set_temperature";
  m["2"] = "lock_door";
  m["3"] = "play_music";
  m["4"] = "set_timer";
  m["5"] = "get_weather";
  m["none"] = nullptr;
  return m;
}

StatusOr<ordered_json> ParseToolMap(const std::string& text) {
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("tool map: not valid JSON");
  // A whole manifest-like document may hold the map under "toolMap".
  if (j.is_object() && j.contains("toolMap")) j = j["toolMap"];
  if (!j.is_object()) return InvalidArgumentError("tool map: expected a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string() && !it.value().is_null()) {
      return InvalidArgumentError("tool map: value of \"" + it.key() +
                                  "\" must be a tool name (string) or null");
    }
  }
  return j;
}

StatusOr<ordered_json> BuildManifest(const ManifestSpec& s) {
  const model::Config& c = s.config;
  std::map<Function, Signature> sig;
  for (Function f : kAllFunctions) {
    FG_ASSIGN_OR_RETURN(sig[f], GetSignature(f, c, s.options));
  }
  SignatureOptions emb_opts = s.options;
  emb_opts.emb_input = true;
  std::map<Function, Signature> emb_sig;
  for (Function f : kAllFunctions) {
    FG_ASSIGN_OR_RETURN(emb_sig[f], GetSignature(f, c, emb_opts));
  }

  ordered_json m;
  // v1 keys, in v1's order.
  m["contractVersion"] = 1;
  m["model"] = s.model;
  ordered_json fns;
  fns["redecode"] = FunctionName(Function::kRedecode);
  fns["prefill"] = FunctionName(Function::kPrefill);
  fns["withPast"] = FunctionName(Function::kWithPast);
  fns["redecodeAt"] = FunctionName(Function::kRedecodeAt);
  fns["prefillAt"] = FunctionName(Function::kPrefillAt);
  fns["prefillWithPast"] = FunctionName(Function::kPrefillWithPast);
  m["functions"] = fns;
  m["nLayers"] = c.n_layers;
  m["headDim"] = c.head_dim;
  m["nKvHeads"] = c.n_kv_heads;
  m["seq"] = s.options.seq;
  m["maxPositions"] = c.context_length;
  m["eot"] = s.eot;
  m["slidingRopeBase"] = c.rope_base_local;
  m["globalRopeBase"] = c.rope_base_global;
  m["globalLayerPeriod"] = model::kGlobalLayerPeriod;
  m["kFirstInOutput"] = true;
  m["parameterScope"] = std::string(kParameterScope);
  ordered_json params;
  // v1's three, then (fgemma addition) every function: one archive serves them all.
  for (Function f : {Function::kRedecode, Function::kPrefill, Function::kWithPast,
                     Function::kRedecodeAt, Function::kPrefillAt, Function::kPrefillWithPast}) {
    params[Key(f)] = s.archive;
  }
  m["parameters"] = params;
  m["redecodeArgs"] = Names(sig[Function::kRedecode].args);
  m["redecodeOutputs"] = Names(sig[Function::kRedecode].results);
  m["prefillArgs"] = Names(sig[Function::kPrefill].args);
  m["prefillOutputs"] = Names(sig[Function::kPrefill].results);
  m["withPastArgs"] = Names(sig[Function::kWithPast].args);
  m["withPastOutputs"] = Names(sig[Function::kWithPast].results);
  m["redecodeAtArgs"] = Names(sig[Function::kRedecodeAt].args);
  m["prefillAtArgs"] = Names(sig[Function::kPrefillAt].args);
  m["prefillAtOutputs"] = Names(sig[Function::kPrefillAt].results);
  m["chunk"] = s.options.chunk;
  m["prefillWithPastArgs"] = Names(sig[Function::kPrefillWithPast].args);
  m["prefillWithPastOutputs"] = Names(sig[Function::kPrefillWithPast].results);
  m["toolMap"] = s.tool_map.is_null() ? DefaultToolMap() : s.tool_map;

  // fgemma additions.
  m["nHeads"] = c.n_heads;
  m["hiddenSize"] = c.hidden;
  m["vocabSize"] = c.vocab;
  m["slidingWindow"] = c.sliding_window;
  m["maskHeads"] = c.n_heads;
  m["rmsNormEps"] = c.rms_eps;
  m["dtype"] = std::string(WeightTypeName(s.dtype));
  m["normDtype"] = "f32";
  m["bos"] = s.bos;
  m["eos"] = s.eos;
  ordered_json stop = ordered_json::array({s.eos});
  if (s.eot != s.eos) stop.push_back(s.eot);
  m["stopTokens"] = stop;
  m["embInput"] = s.options.emb_input;
  m["embeddingParameter"] = s.embedding_parameter;
  m["embeddingScale"] = c.embed_scale;
  ordered_json files = ordered_json::object();
  for (Function f : s.exported) {
    files[std::string(FunctionName(f))] =
        s.one_module ? std::string("module.mlir") : std::string(FunctionName(f)) + ".mlir";
  }
  m["files"] = files;
  m["redecodeAtOutputs"] = Names(sig[Function::kRedecodeAt].results);
  for (Function f : kAllFunctions) {
    m[std::string(Key(f)) + "EmbArgs"] = Names(emb_sig[f].args);
  }
  ordered_json sigs = ordered_json::object();
  for (Function f : kAllFunctions) {
    sigs[std::string(FunctionName(f))] = {{"args", Described(sig[f].args)},
                                          {"results", Described(sig[f].results)}};
  }
  m["signatures"] = sigs;
  return m;
}

}  // namespace fg::exporter
