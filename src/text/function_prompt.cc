#include "src/text/function_prompt.h"

#include <string>

namespace fg::text {
namespace {

using nlohmann::json;

void AppendEscaped(std::string& out, std::string_view s) {
  out += kEscape;
  out += s;
  out += kEscape;
}

void AppendValue(std::string& out, const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      AppendEscaped(out, v.get_ref<const std::string&>());
      break;
    case json::value_t::object: {
      // nlohmann::json objects are std::map: iteration is already in sorted key order, as the
      // template's dictsort.
      out += '{';
      bool first = true;
      for (const auto& [k, item] : v.items()) {
        if (!first) out += ',';
        first = false;
        out += k;
        out += ':';
        AppendValue(out, item);
      }
      out += '}';
      break;
    }
    case json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ',';
        AppendValue(out, v[i]);
      }
      out += ']';
      break;
    }
    default:  // numbers, booleans, null: their JSON literal
      out += v.dump();
      break;
  }
}

void AppendSchema(std::string& out, const Schema& s);

void AppendProperties(std::string& out, const std::map<std::string, Schema>& props) {
  out += "properties:{";
  bool first = true;
  for (const auto& [key, child] : props) {
    if (!first) out += ',';
    first = false;
    out += key;
    out += ":{";
    AppendSchema(out, child);
    out += '}';
  }
  out += '}';
}

void AppendRequired(std::string& out, const std::vector<std::string>& required) {
  out += "required:[";
  for (size_t i = 0; i < required.size(); ++i) {
    if (i) out += ',';
    AppendEscaped(out, required[i]);
  }
  out += ']';
}

// The body of a property (or items) schema without its braces.
void AppendSchema(std::string& out, const Schema& s) {
  if (!s.description.empty()) {
    out += "description:";
    AppendEscaped(out, s.description);
    out += ',';
  }
  if (!s.enum_values.empty()) {
    out += "enum:[";
    for (size_t i = 0; i < s.enum_values.size(); ++i) {
      if (i) out += ',';
      AppendValue(out, s.enum_values[i]);
    }
    out += "],";
  }
  if (s.type == "ARRAY" && s.items != nullptr) {
    out += "items:{";
    AppendSchema(out, *s.items);
    out += "},";
  }
  if (s.type == "OBJECT") {
    AppendProperties(out, s.properties);
    out += ',';
    if (!s.required.empty()) {
      AppendRequired(out, s.required);
      out += ',';
    }
  }
  out += "type:";
  AppendEscaped(out, s.type);
}

void AppendArguments(std::string& out, const json& arguments) {
  if (arguments.is_object()) {
    AppendValue(out, arguments);
  } else {
    out += "{}";
  }
}

}  // namespace

std::string RenderDeclaration(const Tool& tool) {
  std::string out(kStartDeclaration);
  out += "declaration:";
  out += tool.name;
  out += "{description:";
  AppendEscaped(out, tool.description);
  if (tool.has_parameters) {
    out += ",parameters:{";
    if (!tool.parameters.properties.empty()) {
      AppendProperties(out, tool.parameters.properties);
      out += ',';
    }
    if (!tool.parameters.required.empty()) {
      AppendRequired(out, tool.parameters.required);
      out += ',';
    }
    out += "type:";
    AppendEscaped(out, "OBJECT");
    out += '}';
  }
  out += '}';
  out += kEndDeclaration;
  return out;
}

std::string RenderDeclarations(const ToolCatalog& catalog) {
  std::string out;
  for (const Tool& t : catalog.tools) out += RenderDeclaration(t);
  return out;
}

std::string RenderValue(const json& value) {
  std::string out;
  AppendValue(out, value);
  return out;
}

std::string RenderCall(std::string_view name, const json& arguments) {
  std::string out(kStartCall);
  out += "call:";
  out += name;
  AppendArguments(out, arguments);
  out += kEndCall;
  return out;
}

std::string RenderResponseBody(std::string_view name, const json& response) {
  std::string out = "response:";
  out += name;
  if (response.is_object()) {
    AppendValue(out, response);
  } else {
    out += "{value:";
    AppendValue(out, response);
    out += '}';
  }
  out += kEndResponse;
  return out;
}

std::string RenderResponse(std::string_view name, const json& response) {
  return std::string(kStartResponse) + RenderResponseBody(name, response);
}

std::string RenderDeveloperTurn(const ToolCatalog& catalog, const PromptOptions& options) {
  std::string out(kStartOfTurn);
  out += "developer\n";
  out += options.developer_message;
  out += RenderDeclarations(catalog);
  out += kEndOfTurn;
  out += '\n';
  return out;
}

std::string RenderPrompt(const ToolCatalog& catalog, std::string_view user_request,
                         const PromptOptions& options) {
  std::string out = RenderDeveloperTurn(catalog, options);
  out += kStartOfTurn;
  out += "user\n";
  out += user_request;
  out += kEndOfTurn;
  out += '\n';
  out += kStartOfTurn;
  out += "model\n";
  return out;
}

StatusOr<std::string> RenderConversation(const ToolCatalog& catalog,
                                         const std::vector<Message>& messages,
                                         bool add_generation_prompt,
                                         const PromptOptions& options) {
  std::string out = RenderDeveloperTurn(catalog, options);
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    out += kStartOfTurn;
    if (m.role == Message::Role::kUser) {
      if (!m.exchanges.empty()) return InvalidArgumentError(where + ": a user turn has no calls");
      out += "user\n";
      out += m.text;
      out += kEndOfTurn;
      out += '\n';
      continue;
    }
    out += "model\n";
    size_t answered = 0;
    for (const ToolExchange& x : m.exchanges) {
      out += RenderCall(x.name, x.arguments);
      answered += x.response.has_value();
    }
    if (answered != 0 && answered != m.exchanges.size()) {
      return InvalidArgumentError(where + ": some calls have responses and some do not");
    }
    if (!m.exchanges.empty() && answered == 0) {
      if (i + 1 != messages.size() || !m.text.empty()) {
        return InvalidArgumentError(where +
                                    ": calls without responses must end the conversation");
      }
      out += kStartResponse;
      return out;
    }
    for (const ToolExchange& x : m.exchanges) out += RenderResponse(x.name, *x.response);
    out += m.text;
    out += kEndOfTurn;
    out += '\n';
  }
  if (add_generation_prompt &&
      (messages.empty() || messages.back().role == Message::Role::kUser)) {
    out += kStartOfTurn;
    out += "model\n";
  }
  return out;
}

}  // namespace fg::text
