// manifest.json of an export (docs/contract.md "manifest.json"): the v1 keys in v1's
// order, then fgemma's additions. Written with nlohmann::ordered_json (names escaped, key order
// kept).
#ifndef FGEMMA_EXPORT_MANIFEST_H_
#define FGEMMA_EXPORT_MANIFEST_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fgemma/status.h"
#include "src/export/contract.h"
#include "src/export/stablehlo.h"
#include "src/model/gemma3/config.h"

namespace fg::exporter {

struct ManifestSpec {
  std::string model;  // general.name, else the file name
  model::Config config;
  SignatureOptions options;        // seq, chunk, emb_input of the exported functions
  WeightType dtype = WeightType::kBf16;
  std::vector<Function> exported;  // functions written to <name>.mlir
  bool one_module = false;         // ... or all of them to module.mlir
  std::string archive = "model.irpa";
  int64_t bos = 2, eos = 1, eot = 106;
  std::string embedding_parameter = "token_embd.weight";
  // The toolMap object (v1: {"0": "set_lights", ..., "none": null}).
  nlohmann::ordered_json tool_map;
};

// The default toolMap: the seed's six home tools ("0": "set_lights", ... "5": "get_weather",
// as examples/seed_home_toolmap.json), "none" maps to null.
nlohmann::ordered_json DefaultToolMap();

// Checks a --tool-map document: a JSON object whose values are strings or null.
StatusOr<nlohmann::ordered_json> ParseToolMap(const std::string& text);

StatusOr<nlohmann::ordered_json> BuildManifest(const ManifestSpec& spec);

}  // namespace fg::exporter

#endif  // FGEMMA_EXPORT_MANIFEST_H_
