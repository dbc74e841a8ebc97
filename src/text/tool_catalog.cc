#include "src/text/tool_catalog.h"

#include <cctype>
#include <set>
#include <string>
#include <utility>

#include "src/base/mapped_file.h"

namespace fg::text {
namespace {

using nlohmann::json;

Status Err(const std::string& path, const std::string& what) {
  return InvalidArgumentError(path + ": " + what);
}

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Catalog strings are rendered verbatim between <escape> delimiters and the prompt is tokenized
// with special tokens atomic, so a description holding a control token's text would end the
// string (or the declaration) early.
Status CheckText(const std::string& path, const char* field, std::string_view text) {
  for (std::string_view token : {"<escape>", "<start_function_", "<end_function_",
                                 "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>"}) {
    if (text.find(token) != std::string_view::npos) {
      return Err(path, std::string(field) + " contains the control token text " + Quoted(token));
    }
  }
  return OkStatus();
}

// A catalog is JSON text. A file that is not (a GGUF model given by mistake, other binary data)
// is named as such before the JSON checks, whose messages ("nested deeper than 64 levels")
// would only mislead. JSON allows no control byte but \t \n \r anywhere (strings escape them).
Status CheckIsText(std::string_view text) {
  if (text.substr(0, 4) == "GGUF") {
    return InvalidArgumentError("tool catalog: a GGUF file (a model?), not JSON");
  }
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      return InvalidArgumentError("tool catalog: binary data (byte " + std::to_string(c) +
                                  " at offset " + std::to_string(i) + "), not JSON text");
    }
  }
  return OkStatus();
}

// Rejects text nested deeper than kMaxJsonNesting before nlohmann sees it: its parser is
// iterative, but everything we do afterwards (validation, dump) recurses.
Status CheckNesting(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonNesting) {
        return InvalidArgumentError("tool catalog: JSON nested deeper than " +
                                    std::to_string(kMaxJsonNesting) + " levels at byte " +
                                    std::to_string(i));
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return OkStatus();
}

StatusOr<std::string> NormalizeType(const json& t, const std::string& path) {
  std::string name;
  if (t.is_string()) {
    name = t.get<std::string>();
  } else if (t.is_array()) {
    // ["string", "null"]: a nullable STRING. Anything else is a union we cannot declare.
    int non_null = 0;
    for (const json& m : t) {
      if (!m.is_string()) return Err(path, "\"type\" must be a string");
      if (m.get<std::string>() != "null") {
        name = m.get<std::string>();
        ++non_null;
      }
    }
    if (non_null != 1) return Err(path, "union types are not supported");
  } else {
    return Err(path, "\"type\" must be a string");
  }
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::set<std::string> kTypes = {"STRING",  "NUMBER", "INTEGER",
                                               "BOOLEAN", "ARRAY",  "OBJECT"};
  if (!kTypes.count(upper)) return Err(path, "unsupported type " + Quoted(name));
  return upper;
}

bool EnumMemberFits(const std::string& type, const json& v) {
  if (type == "STRING") return v.is_string();
  if (type == "INTEGER") return v.is_number_integer();
  if (type == "NUMBER") return v.is_number();
  if (type == "BOOLEAN") return v.is_boolean();
  return false;
}

StatusOr<Schema> ParseSchema(const json& j, const std::string& path, int depth) {
  if (depth > kMaxSchemaDepth) {
    return Err(path, "schema nested deeper than " + std::to_string(kMaxSchemaDepth) + " levels");
  }
  if (!j.is_object()) return Err(path, "schema must be an object");
  Schema s;
  if (j.contains("type")) {
    FG_ASSIGN_OR_RETURN(s.type, NormalizeType(j["type"], path));
  } else if (j.contains("properties")) {
    s.type = "OBJECT";
  } else if (j.contains("items")) {
    s.type = "ARRAY";
  } else {
    return Err(path, "missing \"type\"");
  }
  if (j.contains("description")) {
    if (!j["description"].is_string()) return Err(path, "\"description\" must be a string");
    s.description = j["description"].get<std::string>();
    FG_RETURN_IF_ERROR(CheckText(path, "\"description\"", s.description));
  }
  if (j.contains("enum")) {
    const json& e = j["enum"];
    if (!e.is_array() || e.empty()) return Err(path, "\"enum\" must be a non-empty array");
    for (size_t i = 0; i < e.size(); ++i) {
      if (!EnumMemberFits(s.type, e[i])) {
        return Err(path, "enum[" + std::to_string(i) + "] does not match type " + s.type);
      }
      if (e[i].is_string()) {
        FG_RETURN_IF_ERROR(CheckText(path, "enum member", e[i].get_ref<const std::string&>()));
      }
      for (const json& prev : s.enum_values) {
        if (prev == e[i]) return Err(path, "enum[" + std::to_string(i) + "] is a duplicate");
      }
      s.enum_values.push_back(e[i]);
    }
  }
  if (j.contains("properties")) {
    if (s.type != "OBJECT") return Err(path, "\"properties\" on a non-object type " + s.type);
    const json& props = j["properties"];
    if (!props.is_object()) return Err(path, "\"properties\" must be an object");
    for (const auto& [key, value] : props.items()) {
      const std::string sub = path + ".properties." + key;
      if (!IsValidPropertyKey(key)) return Err(sub, "invalid property name");
      FG_ASSIGN_OR_RETURN(Schema child, ParseSchema(value, sub, depth + 1));
      s.properties.emplace(key, std::move(child));
    }
  }
  if (j.contains("required")) {
    if (s.type != "OBJECT") return Err(path, "\"required\" on a non-object type " + s.type);
    const json& req = j["required"];
    if (!req.is_array()) return Err(path, "\"required\" must be an array of strings");
    for (const json& r : req) {
      if (!r.is_string()) return Err(path, "\"required\" must be an array of strings");
      const std::string key = r.get<std::string>();
      if (!s.properties.count(key)) {
        return Err(path, "required key " + Quoted(key) + " is not in properties");
      }
      for (const std::string& prev : s.required) {
        if (prev == key) return Err(path, "required key " + Quoted(key) + " listed twice");
      }
      s.required.push_back(key);
    }
  }
  if (j.contains("items")) {
    if (s.type != "ARRAY") return Err(path, "\"items\" on a non-array type " + s.type);
    FG_ASSIGN_OR_RETURN(Schema items, ParseSchema(j["items"], path + ".items", depth + 1));
    s.items = std::make_shared<const Schema>(std::move(items));
  }
  if (j.contains("maxItems")) {
    if (s.type != "ARRAY") return Err(path, "\"maxItems\" on a non-array type " + s.type);
    const json& m = j["maxItems"];
    if (!m.is_number_integer() || m.get<int64_t>() < 0) {
      return Err(path, "\"maxItems\" must be a non-negative integer");
    }
    s.max_items = m.get<int64_t>();
  }
  return s;
}

StatusOr<Tool> ParseTool(const json& entry, const std::string& path) {
  if (!entry.is_object()) return Err(path, "tool must be an object");
  const json* fn = &entry;
  if (entry.contains("function")) {
    if (entry.contains("type") &&
        (!entry["type"].is_string() || entry["type"].get<std::string>() != "function")) {
      return Err(path, "unsupported tool type " + entry["type"].dump());
    }
    fn = &entry["function"];
    if (!fn->is_object()) return Err(path, "\"function\" must be an object");
  }
  Tool tool;
  if (!fn->contains("name")) return Err(path, "missing \"name\"");
  if (!(*fn)["name"].is_string()) return Err(path, "\"name\" must be a string");
  tool.name = (*fn)["name"].get<std::string>();
  const std::string named = path + " (" + Quoted(tool.name) + ")";
  if (!IsValidToolName(tool.name)) {
    return Err(named, "invalid name (1..64 characters of A-Z a-z 0-9 _ . -)");
  }
  if (fn->contains("description")) {
    if (!(*fn)["description"].is_string()) return Err(named, "\"description\" must be a string");
    tool.description = (*fn)["description"].get<std::string>();
    FG_RETURN_IF_ERROR(CheckText(named, "\"description\"", tool.description));
  }
  tool.parameters.type = "OBJECT";
  if (fn->contains("parameters")) {
    const json& p = (*fn)["parameters"];
    if (!p.is_object()) return Err(path, "parameters must be an object schema");
    if (p.contains("type")) {
      StatusOr<std::string> t = NormalizeType(p["type"], path + ".parameters");
      if (!t.ok() || *t != "OBJECT") return Err(path, "parameters must be an object schema");
    }
    json params = p;
    params["type"] = "object";
    FG_ASSIGN_OR_RETURN(tool.parameters, ParseSchema(params, path + ".parameters", 0));
    tool.has_parameters = true;
  }
  if (fn->contains("examples")) {
    const json& e = (*fn)["examples"];
    if (!e.is_array()) return Err(named, "\"examples\" must be an array of strings");
    for (const json& x : e) {
      if (!x.is_string() || x.get_ref<const std::string&>().empty()) {
        return Err(named, "\"examples\" must be an array of non-empty strings");
      }
      FG_RETURN_IF_ERROR(CheckText(named, "\"examples\"", x.get<std::string>()));
      tool.examples.push_back(x.get<std::string>());
    }
  }
  return tool;
}

}  // namespace

bool IsValidToolName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

bool IsValidPropertyKey(std::string_view key) {
  if (key.empty() || key.size() > 128) return false;
  for (char c : key) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return false;
    switch (c) {
      case ':': case ',': case '{': case '}': case '[': case ']': case '<': case '>': case '"':
        return false;
      default:
        break;
    }
  }
  return true;
}

const Tool* ToolCatalog::Find(std::string_view name) const {
  for (const Tool& t : tools) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

StatusOr<ToolCatalog> ParseToolCatalogJson(const json& doc) {
  ToolCatalog catalog;
  const json* list = nullptr;
  std::string prefix = "tools";
  if (doc.is_array()) {
    list = &doc;
  } else if (doc.is_object() && doc.contains("tools")) {
    list = &doc["tools"];
  } else if (doc.is_object() && doc.contains("functions")) {
    list = &doc["functions"];
    prefix = "functions";
    if (doc.contains("id")) {
      const json& id = doc["id"];
      if (id.is_string()) {
        catalog.id = id.get<std::string>();
      } else if (id.is_number_integer()) {
        catalog.id = id.dump();
      } else {
        return InvalidArgumentError("tool catalog: \"id\" must be a string or an integer");
      }
    }
  } else {
    return InvalidArgumentError(
        "tool catalog: expected an array of tools or an object with \"tools\" or \"functions\"");
  }
  if (!list->is_array()) return InvalidArgumentError(prefix + ": must be an array");
  if (list->empty()) return InvalidArgumentError(prefix + ": the catalog has no tools");
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = prefix + "[" + std::to_string(i) + "]";
    FG_ASSIGN_OR_RETURN(Tool tool, ParseTool((*list)[i], path));
    if (catalog.Find(tool.name) != nullptr) {
      return Err(path + " (" + Quoted(tool.name) + ")", "duplicate name");
    }
    catalog.tools.push_back(std::move(tool));
  }
  return catalog;
}

StatusOr<ToolCatalog> ParseToolCatalog(std::string_view json_text) {
  if (json_text.size() > kMaxCatalogBytes) {
    return InvalidArgumentError("tool catalog: larger than " + std::to_string(kMaxCatalogBytes) +
                                " bytes");
  }
  FG_RETURN_IF_ERROR(CheckIsText(json_text));
  FG_RETURN_IF_ERROR(CheckNesting(json_text));
  json doc;
  try {
    doc = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    std::string what = e.what();
    const size_t cut = what.find("] ");
    if (cut != std::string::npos) what = what.substr(cut + 2);
    return InvalidArgumentError("tool catalog: invalid JSON at byte " + std::to_string(e.byte) +
                                ": " + what);
  } catch (const json::exception& e) {
    // Not only parse_error: a number too large for a double throws out_of_range.406 (found by
    // fuzz/text_tool_catalog_fuzz.cc).
    std::string what = e.what();
    const size_t cut = what.find("] ");
    if (cut != std::string::npos) what = what.substr(cut + 2);
    return InvalidArgumentError("tool catalog: invalid JSON: " + what);
  }
  return ParseToolCatalogJson(doc);
}

StatusOr<ToolCatalog> LoadToolCatalog(const std::string& path) {
  FG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  StatusOr<ToolCatalog> catalog = ParseToolCatalog(text);
  if (!catalog.ok()) return catalog.status().WithContext(path);
  return catalog;
}

}  // namespace fg::text
