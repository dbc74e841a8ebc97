// Tool catalogs for FunctionGemma function calling: parsed from JSON, validated, and modelled as
// the subset of JSON Schema the FunctionGemma declaration format can express.
//
// Accepted shapes (the declaration format: docs/model.md "FunctionGemma prompt and output"):
//   * OpenAI-style: [{"type":"function","function":{name, description, parameters}}, ...]
//     or the object {"tools":[...]} holding that array;
//   * a bare list: [{name, description, parameters}, ...];
//   * the seed's shape: {"id":..., "functions":[...]} (entries bare or OpenAI-wrapped).
// Errors are InvalidArgument and name the offending entry by its JSON path:
//   tools[2]: missing "name"
//   tools[1] ("set_light"): duplicate name
//   tools[0].parameters.properties.room: unsupported type "date"
//   tools[3]: parameters must be an object schema
// Invalid JSON reports the parser's byte position. Hostile input is bounded: at most 16 MiB of
// text, JSON nesting <= 64 (checked before parsing), schema nesting <= 16. Descriptions and enum
// strings may not contain control-token text (<escape>, <start_function_*>, <end_function_*>,
// <start_of_turn>, <end_of_turn>, <bos>, <eos>): rendered verbatim and tokenized with special
// tokens atomic, it would break the declaration.
#ifndef FGEMMA_TEXT_TOOL_CATALOG_H_
#define FGEMMA_TEXT_TOOL_CATALOG_H_

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fgemma/status.h"

namespace fg::text {

inline constexpr size_t kMaxCatalogBytes = 16u << 20;
inline constexpr int kMaxJsonNesting = 64;    // brackets in the catalog text
inline constexpr int kMaxSchemaDepth = 16;    // nested properties/items below "parameters"

// One schema node. `type` is upper-cased: STRING, NUMBER, INTEGER, BOOLEAN, ARRAY or OBJECT
// (input is case-insensitive; ["string","null"] style unions with one non-null member are
// accepted as that member).
struct Schema {
  std::string type;
  std::string description;  // empty when absent
  // enum members as JSON scalars (strings for STRING, integers for INTEGER, numbers for NUMBER,
  // booleans for BOOLEAN), in catalog order. JSON values, not strings, so a parsed argument can
  // be compared with operator== and rendered exactly (strings <escape>d, the rest bare).
  std::vector<nlohmann::json> enum_values;
  std::map<std::string, Schema> properties;  // OBJECT only; sorted by key
  std::vector<std::string> required;         // OBJECT only; each key exists in properties
  std::shared_ptr<const Schema> items;       // ARRAY only; null when the catalog gives none
  int64_t max_items = -1;                    // ARRAY only: "maxItems"; -1 when absent
};

struct Tool {
  std::string name;
  std::string description;  // empty when absent
  Schema parameters;        // always type OBJECT
  // False when the catalog gave no "parameters" at all (the official template then omits the
  // whole parameters block; an explicit empty object schema still renders one).
  bool has_parameters = false;
  // Requests that ask for this tool ("examples": an array of non-empty strings beside "name";
  // fgemma's own field, not OpenAI's). Not declared to the model: only the noisy-channel tool
  // prior's text of the tool lists them (call::ChannelPromptTokens).
  std::vector<std::string> examples;
};

struct ToolCatalog {
  std::string id;  // the seed shape's "id"; empty otherwise
  std::vector<Tool> tools;

  // Exact name lookup; nullptr when absent.
  const Tool* Find(std::string_view name) const;
};

// Parses and validates a catalog in any of the accepted shapes.
StatusOr<ToolCatalog> ParseToolCatalog(std::string_view json_text);
// Same, from an already parsed document.
StatusOr<ToolCatalog> ParseToolCatalogJson(const nlohmann::json& doc);
// Reads and parses a catalog file; errors are prefixed with the path. An unreadable file keeps
// ReadFileToString's code (NotFound/Io), a bad catalog is InvalidArgument.
StatusOr<ToolCatalog> LoadToolCatalog(const std::string& path);

// True for names the call syntax can carry bare: 1..64 chars of [A-Za-z0-9_.-].
bool IsValidToolName(std::string_view name);
// True for property keys the call syntax can carry bare: 1..128 bytes, none of
// ':' ',' '{' '}' '[' ']' '<' '>' '"', whitespace or control characters.
bool IsValidPropertyKey(std::string_view key);

}  // namespace fg::text

#endif  // FGEMMA_TEXT_TOOL_CATALOG_H_
