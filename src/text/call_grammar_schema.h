// The call grammar's schema compiler (internal to CallGrammar): a catalog's tools compiled into
// value nodes (one per schema position: its type, its keys or members, its item node) and
// literal tries (keys with their separator, enum members, official call headers) that the
// automaton (call_grammar_machine.h) walks. Immutable once compiled.
#ifndef FGEMMA_TEXT_CALL_GRAMMAR_SCHEMA_H_
#define FGEMMA_TEXT_CALL_GRAMMAR_SCHEMA_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fgemma/status.h"
#include "src/text/call_grammar.h"
#include "src/text/call_grammar_symbols.h"
#include "src/text/call_parser.h"
#include "src/text/tool_catalog.h"

namespace fg::text::grammar {

// A set of symbol strings; per node the key indices below it (for keys seen once).
struct LitTrie {
  struct Node {
    std::vector<std::pair<int, int>> next;  // (symbol, child) sorted by symbol
    int terminal = -1;
    std::vector<uint32_t> mask;
    int depth = 0;  // symbols from the root
  };
  std::vector<Node> nodes = std::vector<Node>(1);
  // Per member index: its symbols and the node after each prefix (path[k] after k symbols).
  std::vector<std::vector<int>> members, paths;

  int Child(int n, int sym) const {
    const auto& v = nodes[n].next;
    auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(sym, -1));
    return it != v.end() && it->first == sym ? it->second : -1;
  }
  void Add(const std::vector<int>& syms, int index, int nwords);
  // True if member `index` passes through `node`.
  bool Through(int index, int node) const {
    const std::vector<int>& p = paths[index];
    const size_t d = static_cast<size_t>(nodes[node].depth);
    return d < p.size() && p[d] == node;
  }
};

struct VNode {
  enum Type { kString, kLiteral, kInteger, kNumber, kArray, kObject, kFreeObject, kAny };
  Type type = kString;
  int depth = 0;
  int lit = -1;   // kLiteral: the members; kObject: the keys (each followed by its separator)
  int item = -1;  // kArray: item node (-1: only [] is possible); kFreeObject: value node
  uint32_t max_items = 0;           // kArray: items at most (with item >= 0)
  std::vector<int> values;          // kObject: value node per key index
  std::vector<uint32_t> required;   // kObject: mask words
  int nwords = 0;                   // kObject: seen-mask words kept in the frame
  bool args = false;                // kObject: the tool's arguments
};

// The symbols of a byte string.
inline std::vector<int> Bytes(std::string_view s) {
  std::vector<int> out;
  for (char c : s) out.push_back(static_cast<uint8_t>(c));
  return out;
}

struct CompiledSchema {
  // Compiles `catalog` (non-empty) under `options` (checked by CallGrammar::Create). Errors: a
  // tool map entry not in the catalog, a schema the grammar cannot express.
  static StatusOr<CompiledSchema> Compile(const ToolCatalog& catalog,
                                          const GrammarOptions& options);

  GrammarOptions opts;
  bool compact = false;
  uint32_t kv_sep = ':';
  int str_open = 0;  // kSymEscape, compact '"'

  std::vector<VNode> vnodes;
  std::vector<LitTrie> lits;
  int call_lit = -1;                // official: "call:NAME{" -> tool index
  std::vector<int> tool_args;       // per catalog tool: its arguments node
  std::vector<int> compact_tool;    // per N: catalog tool index
  int str_node = -1, int_node = -1, num_node = -1, bool_node = -1;
  // Free values by depth: any value, an array of them, an object of at most one free key.
  std::array<int, kMaxValueDepth + 2> any_node{}, any_arr{}, any_obj{};

 private:
  Status Build(const ToolCatalog& catalog);
  int AddNode(VNode v);
  int AddLit(LitTrie t);
  std::vector<int> LiteralSymbols(const nlohmann::json& v) const;
  uint32_t ArrayLimit(int64_t max_items) const;
  StatusOr<int> CompileValue(const Schema& s, int depth, const std::string& path);
  StatusOr<int> CompileObject(const Schema& s, int depth, const std::string& path, bool args);
};

}  // namespace fg::text::grammar

#endif  // FGEMMA_TEXT_CALL_GRAMMAR_SCHEMA_H_
