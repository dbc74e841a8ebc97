#include "src/text/call_grammar_schema.h"

#include "src/text/function_prompt.h"

namespace fg::text::grammar {
namespace {

using nlohmann::json;

constexpr uint32_t kMaxArrayItemsLimit = (1u << 23) - 1;  // what an array frame's bits can count

std::string EscapeCompact(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

void LitTrie::Add(const std::vector<int>& syms, int index, int nwords) {
  int n = 0;
  auto mark = [&](int at) {
    if (nwords == 0) return;
    nodes[at].mask.resize(nwords);
    nodes[at].mask[index / 32] |= 1u << (index % 32);
  };
  mark(0);
  if (members.size() <= static_cast<size_t>(index)) {
    members.resize(index + 1);
    paths.resize(index + 1);
  }
  members[index] = syms;
  paths[index] = {0};
  for (int sym : syms) {
    int c = Child(n, sym);
    if (c < 0) {
      c = static_cast<int>(nodes.size());
      nodes.emplace_back();
      nodes[c].depth = nodes[n].depth + 1;
      auto& v = nodes[n].next;
      v.insert(std::lower_bound(v.begin(), v.end(), std::make_pair(sym, -1)), {sym, c});
    }
    n = c;
    mark(n);
    paths[index].push_back(n);
  }
  if (nodes[n].terminal < 0) nodes[n].terminal = index;
}

StatusOr<CompiledSchema> CompiledSchema::Compile(const ToolCatalog& catalog,
                                                 const GrammarOptions& options) {
  CompiledSchema g;
  g.opts = options;
  g.compact = options.dialect == Dialect::kCompact;
  g.kv_sep = g.compact ? '=' : ':';
  g.str_open = g.compact ? '"' : kSymEscape;
  if (g.compact) {
    if (options.tool_map.empty()) {
      return InvalidArgumentError("grammar: the compact dialect needs a tool map");
    }
    for (size_t n = 0; n < options.tool_map.size(); ++n) {
      const std::string& name = options.tool_map[n];
      const Tool* tool = catalog.Find(name);
      if (tool == nullptr) {
        return InvalidArgumentError("grammar: tool map entry " + std::to_string(n) + " (\"" +
                                    name + "\") is not in the catalog");
      }
      g.compact_tool.push_back(static_cast<int>(tool - catalog.tools.data()));
    }
  }
  FG_RETURN_IF_ERROR(g.Build(catalog));
  return g;
}

int CompiledSchema::AddNode(VNode v) {
  vnodes.push_back(std::move(v));
  return static_cast<int>(vnodes.size()) - 1;
}

int CompiledSchema::AddLit(LitTrie t) {
  lits.push_back(std::move(t));
  return static_cast<int>(lits.size()) - 1;
}

std::vector<int> CompiledSchema::LiteralSymbols(const json& v) const {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (compact) return Bytes("\"" + EscapeCompact(s) + "\"");
    std::vector<int> out{kSymEscape};
    for (int b : Bytes(s)) out.push_back(b);
    out.push_back(kSymEscape);
    return out;
  }
  return Bytes(v.dump());
}

// Items an array takes at most: the schema's maxItems, else the grammar's default.
uint32_t CompiledSchema::ArrayLimit(int64_t max_items) const {
  const int64_t n = max_items >= 0 ? max_items : opts.max_array_items;
  return static_cast<uint32_t>(std::min<int64_t>(n, kMaxArrayItemsLimit));
}

StatusOr<int> CompiledSchema::CompileValue(const Schema& s, int depth, const std::string& path) {
  if (depth > kMaxValueDepth) {
    return InvalidArgumentError(path + ": nested deeper than the parser accepts");
  }
  if (!s.enum_values.empty()) {
    LitTrie t;
    for (size_t i = 0; i < s.enum_values.size(); ++i) {
      t.Add(LiteralSymbols(s.enum_values[i]), static_cast<int>(i), 0);
    }
    VNode v;
    v.type = VNode::kLiteral;
    v.depth = depth;
    v.lit = AddLit(std::move(t));
    return AddNode(std::move(v));
  }
  if (s.type == "STRING") return str_node;
  if (s.type == "INTEGER") return int_node;
  if (s.type == "NUMBER") return num_node;
  if (s.type == "BOOLEAN") return bool_node;
  if (s.type == "ARRAY") {
    VNode v;
    v.type = VNode::kArray;
    v.depth = depth;
    v.max_items = ArrayLimit(s.max_items);
    if (depth + 1 <= kMaxValueDepth) {
      if (s.items != nullptr) {
        FG_ASSIGN_OR_RETURN(v.item, CompileValue(*s.items, depth + 1, path + "[]"));
      } else {
        v.item = any_node[depth + 1];
      }
    }
    return AddNode(std::move(v));
  }
  if (s.type == "OBJECT") {
    if (s.properties.empty()) return any_obj[depth];
    return CompileObject(s, depth, path, false);
  }
  return InvalidArgumentError(path + ": unsupported type \"" + s.type + "\"");
}

StatusOr<int> CompiledSchema::CompileObject(const Schema& s, int depth, const std::string& path,
                                            bool args) {
  VNode v;
  v.type = VNode::kObject;
  v.depth = depth;
  v.args = args;
  const int n = static_cast<int>(s.properties.size());
  v.nwords = (n + 31) / 32;
  v.required.assign(v.nwords, 0);
  LitTrie keys;
  int i = 0;
  for (const auto& [key, child] : s.properties) {
    if (compact && (key.find('=') != std::string::npos || key.find(' ') != std::string::npos)) {
      return InvalidArgumentError(path + "." + key +
                                  ": key cannot be written in the compact dialect");
    }
    std::vector<int> syms = Bytes(key);
    syms.push_back(static_cast<int>(kv_sep));
    keys.Add(syms, i, v.nwords);
    FG_ASSIGN_OR_RETURN(int child_node, CompileValue(child, depth + 1, path + "." + key));
    v.values.push_back(child_node);
    if (std::find(s.required.begin(), s.required.end(), key) != s.required.end()) {
      v.required[i / 32] |= 1u << (i % 32);
    }
    ++i;
  }
  v.lit = AddLit(std::move(keys));
  return AddNode(std::move(v));
}

Status CompiledSchema::Build(const ToolCatalog& catalog) {
  // Shared scalar nodes.
  auto scalar = [&](VNode::Type type) {
    VNode v;
    v.type = type;
    return AddNode(std::move(v));
  };
  str_node = scalar(VNode::kString);
  int_node = scalar(VNode::kInteger);
  num_node = scalar(VNode::kNumber);
  {
    LitTrie t;
    t.Add(Bytes("true"), 0, 0);
    t.Add(Bytes("false"), 1, 0);
    VNode v;
    v.type = VNode::kLiteral;
    v.lit = AddLit(std::move(t));
    bool_node = AddNode(std::move(v));
  }
  // Free values by depth (deepest first so each can name the next level).
  any_node.fill(-1);
  any_arr.fill(-1);
  any_obj.fill(-1);
  for (int d = kMaxValueDepth; d >= 1; --d) {
    VNode any;
    any.type = VNode::kAny;
    any.depth = d;
    any_node[d] = AddNode(any);
    VNode arr;
    arr.type = VNode::kArray;
    arr.depth = d;
    arr.max_items = ArrayLimit(-1);
    arr.item = d + 1 <= kMaxValueDepth ? any_node[d + 1] : -1;
    any_arr[d] = AddNode(arr);
    VNode obj;
    obj.type = VNode::kFreeObject;
    obj.depth = d;
    obj.item = d + 1 <= kMaxValueDepth ? any_node[d + 1] : -1;
    any_obj[d] = AddNode(obj);
  }
  for (const Tool& t : catalog.tools) {
    FG_ASSIGN_OR_RETURN(int node, CompileObject(t.parameters, 1, t.name, true));
    tool_args.push_back(node);
  }
  if (!compact) {
    LitTrie calls;
    for (size_t i = 0; i < catalog.tools.size(); ++i) {
      calls.Add(Bytes("call:" + catalog.tools[i].name + "{"), static_cast<int>(i), 0);
    }
    call_lit = AddLit(std::move(calls));
  }
  if (vnodes.size() >= (1u << 24)) return InvalidArgumentError("catalog too large for a grammar");
  return OkStatus();
}

}  // namespace fg::text::grammar
