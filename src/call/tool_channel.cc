#include "src/call/tool_channel.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "src/call/logit_processors.h"
#include "src/kernels/grad.h"
#include "src/kernels/kernel_set.h"
#include "src/kernels/matmul.h"

namespace fg::call {

std::string ChannelToolText(const text::Tool& tool) {
  std::string params, descriptions;
  for (const auto& [key, schema] : tool.parameters.properties) {
    if (!params.empty()) params += ", ";
    params += key;
    if (!schema.enum_values.empty()) {
      params += ": ";
      const size_t n = std::min(schema.enum_values.size(), kChannelEnumMembers);
      for (size_t i = 0; i < n; ++i) {
        if (i > 0) params += "|";
        const nlohmann::json& e = schema.enum_values[i];
        params += e.is_string() ? e.get<std::string>() : e.dump();
      }
      if (schema.enum_values.size() > n) params += "|...";
    }
    if (!schema.description.empty()) {
      std::string_view d = schema.description;
      while (!d.empty() && (d.back() == '.' || d.back() == ' ')) d.remove_suffix(1);
      descriptions += (descriptions.empty() ? " Parameters: " : "; ") + key + ": ";
      descriptions += d;
    }
  }
  std::string out = "Function " + tool.name + "(" + params + "): " + tool.description;
  if (!descriptions.empty())
    out += (tool.description.empty() ? descriptions.substr(1) : descriptions) + ".";
  return out;
}

std::string ChannelCallText(const text::Tool& tool, const nlohmann::json& arguments,
                            bool with_description) {
  std::string call = tool.name + "(";
  bool first = true;
  for (const auto& [key, value] : arguments.items()) {  // nlohmann::json keeps keys sorted
    if (!first) call += ", ";
    first = false;
    call += key + "=" + value.dump();
  }
  call += ")";
  std::string out = "Function " + tool.name + "(): ";
  if (with_description && !tool.description.empty()) out += tool.description + " ";
  return out + "Called as " + call + ".";
}

namespace {

// `copy` (argument `key`'s string) cut back when it is a copy of the request that ends with " N"
// where the request goes on with a word that makes N the value of another argument that the
// call `arguments` has with that value ("Max 12 kilos": "Max 12" -> "Max" beside `kg` 12; not
// "Inside Out 2" in "Inside Out 2 at 3:15"); nullopt otherwise.
std::optional<std::string> WithoutRunOnNumber(const text::Tool& tool, std::string_view request,
                                              const std::string& key, const nlohmann::json& copy,
                                              const nlohmann::json& arguments) {
  const std::string& v = copy.get_ref<const std::string&>();
  const size_t space = v.find_last_of(' ');
  const size_t at = request.find(v);
  if (space == std::string::npos || at == std::string_view::npos) return std::nullopt;
  const std::string_view last = std::string_view(v).substr(space + 1);
  if (last.find_first_not_of("0123456789.") != std::string_view::npos) return std::nullopt;
  const nlohmann::json n = nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
  if (!n.is_number()) return std::nullopt;
  // The word after the copy: N with it must name another argument, one the call has as N.
  size_t b = at + v.size(), e = b;
  while (b < request.size() && request[b] == ' ') ++b;
  for (e = b; e < request.size() && std::isalpha(static_cast<unsigned char>(request[e])); ++e) {
  }
  if (b == at + v.size() || e == b) return std::nullopt;
  const std::vector<SaidArgument> named =
      SaidArguments(std::string(last) + " " + std::string(request.substr(b, e - b)), tool);
  const bool other = std::any_of(named.begin(), named.end(), [&](const SaidArgument& a) {
    return a.key != key && a.value == n && arguments.contains(a.key) && arguments.at(a.key) == n;
  });
  const size_t keep = v.find_last_not_of(" ,", space);
  if (!other || keep == std::string::npos) return std::nullopt;
  return v.substr(0, keep + 1);
}

// `copy` (argument `key`'s string) cut back when it is a copy of the request that ends with the
// words of another argument's string value, and a word that joined them ("Turkish Japanese"
// beside `language_b` "Japanese"; "I would like a coffee in Hindi" beside `language` "Hindi" ->
// "I would like a coffee"); nullopt otherwise. No copied label in the project's data ends with
// another argument's value (0 of 4,481).
std::optional<std::string> WithoutOtherValue(std::string_view request, const std::string& key,
                                             const nlohmann::json& copy,
                                             const nlohmann::json& arguments) {
  const std::string& v = copy.get_ref<const std::string&>();
  if (request.find(v) == std::string_view::npos) return std::nullopt;
  for (const auto& [other, value] : arguments.items()) {
    if (other == key || !value.is_string()) continue;
    const std::string& w = value.get_ref<const std::string&>();
    if (w.empty() || w.size() + 1 >= v.size() || !v.ends_with(" " + w)) continue;
    std::string_view kept = std::string_view(v).substr(0, v.size() - w.size() - 1);
    const size_t space = kept.find_last_of(' ');
    if (space != std::string_view::npos) {
      static constexpr std::string_view kJoins[] = {"in", "into", "to", "for", "and", "on", "at"};
      const std::string_view last = kept.substr(space + 1);
      if (std::find(std::begin(kJoins), std::end(kJoins), last) != std::end(kJoins)) {
        kept = kept.substr(0, space);
      }
    }
    while (!kept.empty() && (kept.back() == ' ' || kept.back() == ',')) kept.remove_suffix(1);
    // Two arguments that copied one phrase ("the credit card" beside "credit card"): no cut to
    // its determiner.
    static constexpr std::string_view kDeterminers[] = {"the",  "a",   "an",   "my",
                                                        "your", "our", "this", "that"};
    if (kept.empty() || std::find(std::begin(kDeterminers), std::end(kDeterminers),
                                  LowerCase(kept)) != std::end(kDeterminers)) {
      continue;
    }
    return std::string(kept);
  }
  return std::nullopt;
}

// The request with every occurrence of the call's other string values (not `key`'s; case
// aside) blanked out: what it says besides them.
std::string WithoutOtherStrings(const std::string& request, const std::string& key,
                                const nlohmann::json& arguments) {
  std::string out = request;
  const std::string lower = LowerCase(request);
  for (const auto& [k, v] : arguments.items()) {
    if (k == key || !v.is_string() || v.get_ref<const std::string&>().empty()) continue;
    const std::string s = LowerCase(v.get_ref<const std::string&>());
    for (size_t at = lower.find(s); at != std::string::npos; at = lower.find(s, at + s.size())) {
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(at),
                out.begin() + static_cast<std::ptrdiff_t>(at + s.size()), ' ');
    }
  }
  return out;
}

}  // namespace

namespace {

bool HasDigit(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A free string of `schema` (not an enum's member) in `value`, at any depth, with a digit.
bool FreeStringHasDigit(const text::Schema& schema, const nlohmann::json& value) {
  if (value.is_string()) {
    return schema.enum_values.empty() && HasDigit(value.get_ref<const std::string&>());
  }
  if (value.is_array() && schema.items != nullptr) {
    return std::any_of(value.begin(), value.end(), [&](const nlohmann::json& item) {
      return FreeStringHasDigit(*schema.items, item);
    });
  }
  if (value.is_object()) {
    for (const auto& [key, member] : value.items()) {
      const auto prop = schema.properties.find(key);
      if (prop != schema.properties.end() && FreeStringHasDigit(prop->second, member)) return true;
    }
  }
  return false;
}

bool IsRequired(const text::Schema& params, std::string_view key) {
  return std::find(params.required.begin(), params.required.end(), key) != params.required.end();
}

}  // namespace

bool InventsNumbers(const text::Tool& tool, const nlohmann::json& arguments,
                    std::string_view request) {
  if (!arguments.is_object()) return false;
  const text::Schema& params = tool.parameters;
  const bool has_number =
      std::any_of(arguments.items().begin(), arguments.items().end(), [&](const auto& item) {
        const auto prop = params.properties.find(item.key());
        if (prop == params.properties.end()) return false;
        return FreeStringHasDigit(prop->second, item.value()) ||
               (item.value().is_number() && IsRequired(params, item.key()));
      });
  // The request's numbers are read only for a call that has one.
  return has_number && !HasDigit(request) && SaidNumberValues(request).empty();
}

std::vector<std::string> UnsaidArguments(const text::Tool& tool, const nlohmann::json& arguments,
                                         const SaidFacts& said) {
  std::vector<std::string> keys;
  if (!arguments.is_object()) return keys;
  const text::Schema& params = tool.parameters;
  // Another argument whose string value equals `value`, case aside, and is required or an enum
  // member.
  auto repeats_fixed_value = [&](const std::string& key, const std::string& value) {
    const std::string v = LowerCase(value);
    return std::any_of(arguments.items().begin(), arguments.items().end(), [&](const auto& o) {
      if (o.key() == key || !o.value().is_string() ||
          LowerCase(o.value().template get_ref<const std::string&>()) != v) {
        return false;
      }
      const auto prop = params.properties.find(o.key());
      return IsRequired(params, o.key()) ||
             (prop != params.properties.end() && !prop->second.enum_values.empty());
    });
  };
  // Optional numbers the request does not say, and optional free strings with a word that
  // starts no word of the request: dropped without asking.
  const std::vector<std::string> request_words = LowerCaseWords(said.request);
  for (const auto& [key, value] : arguments.items()) {
    const auto prop = params.properties.find(key);
    if (IsRequired(params, key) || prop == params.properties.end() ||
        !prop->second.enum_values.empty()) {
      continue;
    }
    bool unsaid = false;
    if (value.is_number()) {
      const double v = std::abs(value.get<double>());  // RequestNumbers reads no sign
      auto says = [&](const std::vector<double>& numbers) {
        return std::any_of(numbers.begin(), numbers.end(),
                           [&](double n) { return std::abs(n - v) <= 1e-9 * std::max(1.0, v); });
      };
      // Said only inside another argument's string ("7" of `time` "7:20 am") is not said.
      unsaid = !says(said.numbers) ||
               !says(SaidNumberValues(WithoutOtherStrings(said.request, key, arguments)));
    } else if (value.is_string()) {
      const std::vector<std::string> words = LowerCaseWords(value.get<std::string>());
      unsaid = std::any_of(words.begin(), words.end(), [&](const std::string& w) {
        return std::none_of(request_words.begin(), request_words.end(),
                            [&](const std::string& r) { return r.starts_with(w); });
      });
      // The value of a required or enum argument repeated (`category: "this_month"` beside
      // `period: "this_month"`), case aside.
      unsaid = unsaid || repeats_fixed_value(key, value.get_ref<const std::string&>());
    } else if (value.is_array() && prop->second.items != nullptr &&
               prop->second.items->type == "STRING" && prop->second.items->enum_values.empty()) {
      // An array of free strings with an item holding another of the call's string values
      // (`rooms: ["at 11 pm"]` beside `time: "11 pm"`).
      // (The binding is captured through a reference: clang before 16 cannot capture one.)
      unsaid = std::any_of(value.begin(), value.end(), [&, &k = key](const nlohmann::json& item) {
        return item.is_string() && WithoutOtherStrings(item.get<std::string>(), k, arguments) !=
                                       item.get_ref<const std::string&>();
      });
    }
    if (unsaid) keys.push_back(key);
  }
  return keys;
}

std::vector<std::string> FillArguments(const text::Tool& tool, std::span<const std::string> open,
                                       const nlohmann::json& other, const SaidFacts* said,
                                       nlohmann::json* arguments) {
  std::vector<std::string> added;
  if (!other.is_object() || !arguments->is_object()) return added;
  nlohmann::json merged = *arguments;
  for (const std::string& key : open) {
    if (!other.contains(key) || merged.contains(key)) continue;
    merged[key] = other[key];
    added.push_back(key);
  }
  if (said != nullptr && !added.empty()) {
    auto leave_out = [&](const std::string& key) {
      const auto it = std::find(added.begin(), added.end(), key);
      if (it == added.end()) return;
      merged.erase(key);
      added.erase(it);
    };
    for (const std::string& key : UnsaidArguments(tool, merged, *said)) leave_out(key);
    // An enum member the request does not say: the partner's guess, not the request's.
    for (const std::string& key : std::vector<std::string>(added)) {
      const auto prop = tool.parameters.properties.find(key);
      if (prop == tool.parameters.properties.end() || prop->second.enum_values.empty()) continue;
      const text::Schema& schema = prop->second;
      const int member = SaidEnumMember(said->request, schema);
      if (member < 0 || schema.enum_values[static_cast<size_t>(member)] != merged[key]) {
        leave_out(key);
      }
    }
  }
  *arguments = std::move(merged);
  return added;
}

StatusOr<CheckedArguments> CheckArguments(const text::Tool& tool, const nlohmann::json& arguments,
                                          const CallScorer& score, const SaidFacts* said) {
  CheckedArguments out{arguments};
  if (!arguments.is_object()) return out;
  const text::Schema& params = tool.parameters;
  auto kept = [&](const std::string& key, const nlohmann::json& value) {
    return said != nullptr && std::find(said->arguments.begin(), said->arguments.end(),
                                        SaidArgument{key, value}) != said->arguments.end();
  };
  if (said != nullptr) {
    for (const std::string& key : UnsaidArguments(tool, arguments, *said)) {
      out.arguments.erase(key);
      ++out.dropped;
    }
  }
  // Free strings that ran on into another argument's number or string: cut back.
  if (said != nullptr) {
    for (auto& [key, value] : out.arguments.items()) {
      const auto prop = params.properties.find(key);
      if (!value.is_string() || prop == params.properties.end() ||
          !prop->second.enum_values.empty()) {
        continue;
      }
      if (auto cut = WithoutRunOnNumber(tool, said->request, key, value, out.arguments)) {
        value = std::move(*cut);
        ++out.replaced;
      } else if (auto rest = WithoutOtherValue(said->request, key, value, out.arguments)) {
        value = std::move(*rest);
        ++out.replaced;
      }
    }
  }
  const nlohmann::json checked = out.arguments;  // what is left to ask about
  // The candidates: the call as decoded, then one per optional argument left out, then one per
  // other enum member of each argument.
  std::vector<nlohmann::json> cands = {checked};
  std::vector<std::string> optional;
  for (const auto& [key, value] : checked.items()) {
    if (kept(key, value)) continue;
    if (!IsRequired(params, key)) {
      optional.push_back(key);
      nlohmann::json without = checked;
      without.erase(key);
      cands.push_back(std::move(without));
    }
  }
  struct Member {
    std::string key;
    size_t cand;
  };
  std::vector<Member> members;
  for (const auto& [key, value] : checked.items()) {
    const auto prop = params.properties.find(key);
    if (prop == params.properties.end() || kept(key, value)) continue;
    for (const nlohmann::json& m : prop->second.enum_values) {
      if (m == value) continue;
      nlohmann::json with = checked;
      with[key] = m;
      members.push_back({key, cands.size()});
      cands.push_back(std::move(with));
    }
  }
  if (cands.size() == 1) return out;
  FG_ASSIGN_OR_RETURN(const std::vector<double> s, score(cands));
  if (s.size() != cands.size()) return InternalError("argument check: a score per candidate");
  for (size_t i = 0; i < optional.size(); ++i) {
    if (s[i + 1] > s[0]) {
      out.arguments.erase(optional[i]);
      ++out.dropped;
    }
  }
  // Per argument that stays, its best other member when it beats the call by the margin.
  for (size_t i = 0; i < members.size();) {
    const std::string& key = members[i].key;
    size_t best = 0;
    double best_score = s[0] + kEnumCheckMargin;
    for (; i < members.size() && members[i].key == key; ++i) {
      if (s[members[i].cand] > best_score) {
        best = members[i].cand;
        best_score = s[best];
      }
    }
    if (best != 0 && out.arguments.contains(key)) {
      out.arguments[key] = cands[best][key];
      ++out.replaced;
    }
  }
  return out;
}

namespace {

constexpr std::string_view kAsk = "\nA user asks for it: \"";

// log sum exp over the values of `v` at `ids`; -inf for none.
double LogSumExp(const std::vector<double>& v, const std::vector<size_t>& ids) {
  double mx = -std::numeric_limits<double>::infinity();
  for (size_t i : ids) mx = std::max(mx, v[i]);
  if (!std::isfinite(mx)) return mx;
  double z = 0;
  for (size_t i : ids) z += std::exp(v[i] - mx);
  return mx + std::log(z);
}

}  // namespace

std::vector<int32_t> ChannelPromptTokens(const text::Tokenizer& tk, const text::Tool& tool) {
  std::vector<int32_t> ids = {tk.vocab().bos};
  std::vector<int32_t> body =
      tk.Encode(ChannelToolText(tool), /*add_special=*/false, /*parse_special=*/false);
  if (static_cast<int64_t>(body.size()) > kChannelToolTokens) body.resize(kChannelToolTokens);
  ids.insert(ids.end(), body.begin(), body.end());
  // The tool's example requests, as many whole ones as kChannelExampleTokens holds.
  std::vector<int32_t> examples;
  std::string text = " For example:";
  for (size_t i = 0; i < tool.examples.size(); ++i) {
    text += (i == 0 ? " \"" : "; \"") + tool.examples[i] + "\"";
    std::vector<int32_t> more =
        tk.Encode(text + ".", /*add_special=*/false, /*parse_special=*/false);
    if (static_cast<int64_t>(more.size()) > kChannelExampleTokens) break;
    examples = std::move(more);
  }
  ids.insert(ids.end(), examples.begin(), examples.end());
  const std::vector<int32_t> ask = tk.Encode(kAsk, /*add_special=*/false, /*parse_special=*/false);
  ids.insert(ids.end(), ask.begin(), ask.end());
  return ids;
}

StatusOr<std::vector<int32_t>> ChannelRequestTokens(const text::Tokenizer& tk,
                                                    std::string_view request) {
  std::vector<int32_t> req = tk.Encode(request, /*add_special=*/false, /*parse_special=*/false);
  if (req.empty()) return InvalidArgumentError("tool channel: the request is empty");
  if (static_cast<int64_t>(req.size()) > kChannelRequestTokens) req.resize(kChannelRequestTokens);
  return req;
}

StatusOr<std::unique_ptr<ToolChannel>> ToolChannel::Create(const runtime::Model& model,
                                                           const text::Tokenizer& tk,
                                                           const text::ToolCatalog& catalog,
                                                           ThreadPool* pool) {
  auto c = std::unique_ptr<ToolChannel>(new ToolChannel());
  c->tk_ = &tk;
  c->pool_ = pool;
  c->hidden_size_ = model.config().hidden;
  const StatusOr<kernels::WeightMatrix> head = runtime::WeightMatrixOf(*model.weights().output);
  if (!head.ok() || head->cols != c->hidden_size_) {
    return InternalError("tool channel: the LM head does not fit the hidden state");
  }
  c->head_ = *head;
  c->ask_ = tk.Encode(kAsk, /*add_special=*/false, /*parse_special=*/false);
  // Each tool's prompt: <bos>, its text (cut), the ask; the session holds the longest and a
  // request after it.
  std::vector<std::vector<int32_t>> prompts;
  // (A call's text for the argument check fits too.)
  int64_t longest = 1 + kChannelCallTokens + static_cast<int64_t>(c->ask_.size());
  for (const text::Tool& tool : catalog.tools) {
    c->names_.push_back(tool.name);
    std::vector<int32_t> ids = ChannelPromptTokens(tk, tool);
    longest = std::max(longest, static_cast<int64_t>(ids.size()));
    prompts.push_back(std::move(ids));
  }
  runtime::SessionOptions so;
  so.context = longest + kChannelRequestTokens;
  so.pool = pool;
  so.lora_from = so.context;  // the base model, but for Score's request rows (below)
  FG_ASSIGN_OR_RETURN(c->session_, runtime::Session::Create(model, so));
  for (std::vector<int32_t>& ids : prompts) {
    c->last_.push_back(ids.back());
    ids.pop_back();
    c->session_->Reset();
    FG_RETURN_IF_ERROR(c->session_->Append(ids, runtime::LogitsRequest::None()));
    c->tools_.push_back(c->session_->Save());  // no logits: a kNone Append leaves none
  }
  return c;
}

StatusOr<std::vector<int32_t>> ToolChannel::RequestTokens(std::string_view request) const {
  return ChannelRequestTokens(*tk_, request);
}

StatusOr<std::vector<double>> ToolChannel::SumRuns(std::span<const int32_t> req, int64_t runs) {
  const auto n = static_cast<int64_t>(req.size());
  std::vector<int32_t> targets(static_cast<size_t>(runs * n));
  for (int64_t t = 0; t < runs; ++t) std::copy(req.begin(), req.end(), targets.begin() + t * n);
  std::vector<double> logp(targets.size());
  FG_RETURN_IF_ERROR(ApplyHead(targets, logp));
  std::vector<double> out(static_cast<size_t>(runs), 0.0);
  for (int64_t t = 0; t < runs; ++t) {
    for (int64_t i = 0; i < n; ++i)
      out[static_cast<size_t>(t)] += logp[static_cast<size_t>(t * n + i)];
  }
  return out;
}

StatusOr<std::vector<double>> ToolChannel::Score(std::string_view request) {
  FG_ASSIGN_OR_RETURN(const std::vector<int32_t> req, RequestTokens(request));
  const auto n = static_cast<int64_t>(req.size());
  const auto tools = static_cast<int64_t>(tools_.size());
  // Each tool's run gives the final-norm hidden states of the rows that predict the request's
  // tokens (its text's last token's and every request token's but the last); the LM head then
  // runs once over all tools' rows (ApplyHead), so its weights are packed once per request.
  hidden_.resize(static_cast<size_t>(tools * n * hidden_size_));
  // An adapter trained for the prior (Model::adapters_in_channel) applies to these rows: from
  // the tool's text's last token on, as `fgemma tune --objective` trained it.
  const bool adapted = session_->model().adapters_in_channel();
  std::vector<int32_t> seq(static_cast<size_t>(n));
  Status run = OkStatus();
  for (int64_t t = 0; t < tools; ++t) {
    const runtime::Session::Snapshot& tool = tools_[static_cast<size_t>(t)];
    run = session_->Restore(tool);
    if (!run.ok()) break;
    if (adapted) session_->set_lora_from(tool.position);
    seq[0] = last_[static_cast<size_t>(t)];
    std::copy(req.begin(), req.end() - 1, seq.begin() + 1);
    run = session_->Append(seq, runtime::LogitsRequest::Hidden(n));
    if (!run.ok()) break;
    const std::span<const float> h = session_->last_hidden();
    std::copy(h.begin(), h.end(), hidden_.begin() + t * n * hidden_size_);
  }
  session_->set_lora_from(session_->context());  // ScoreCalls runs the base model
  FG_RETURN_IF_ERROR(run);
  return SumRuns(req, tools);
}

StatusOr<std::vector<double>> ToolChannel::ScoreCalls(
    std::span<const std::pair<const text::Tool*, nlohmann::json>> calls, std::string_view request) {
  FG_ASSIGN_OR_RETURN(const std::vector<int32_t> req, RequestTokens(request));
  const auto n = static_cast<int64_t>(req.size());
  const auto runs = static_cast<int64_t>(calls.size());
  hidden_.resize(static_cast<size_t>(runs * n * hidden_size_));
  // <bos>, the call's text (the context fits kChannelCallTokens of it with the ask and the
  // request), the ask, the request but its last token: the last n rows predict the request.
  constexpr int64_t room = kChannelCallTokens;
  std::vector<std::vector<int32_t>> seqs;
  size_t shared = std::numeric_limits<size_t>::max();  // the runs' common first tokens
  for (int64_t t = 0; t < runs; ++t) {
    const auto& [tool, arguments] = calls[static_cast<size_t>(t)];
    std::vector<int32_t> body = tk_->Encode(ChannelCallText(*tool, arguments), false, false);
    if (static_cast<int64_t>(body.size()) > room) {  // a long description goes first
      body =
          tk_->Encode(ChannelCallText(*tool, arguments, /*with_description=*/false), false, false);
      if (static_cast<int64_t>(body.size()) > room) body.resize(static_cast<size_t>(room));
    }
    std::vector<int32_t> seq = {tk_->vocab().bos};
    seq.insert(seq.end(), body.begin(), body.end());
    // At most the text but its last token, so that each run appends the ask and the request.
    shared = std::min(shared, body.size());
    if (!seqs.empty()) {
      const auto diff = std::mismatch(seq.begin(), seq.end(), seqs[0].begin(), seqs[0].end()).first;
      shared = std::min(shared, static_cast<size_t>(diff - seq.begin()));
    }
    seq.insert(seq.end(), ask_.begin(), ask_.end());
    seq.insert(seq.end(), req.begin(), req.end() - 1);
    seqs.push_back(std::move(seq));
  }
  // The shared tokens ("Function NAME(): DESCRIPTION Called as NAME(" for the argument check's
  // candidates) are run once; the chunk split changes no bit of the rows after them.
  session_->Reset();
  std::optional<runtime::Session::Snapshot> start;
  if (runs > 1 && shared > 0) {
    FG_RETURN_IF_ERROR(
        session_->Append(std::span(seqs[0]).first(shared), runtime::LogitsRequest::None()));
    start = session_->Save();
  } else {
    shared = 0;
  }
  for (int64_t t = 0; t < runs; ++t) {
    const std::vector<int32_t>& seq = seqs[static_cast<size_t>(t)];
    if (start) {
      FG_RETURN_IF_ERROR(session_->Restore(*start));
    } else {
      session_->Reset();
    }
    FG_RETURN_IF_ERROR(
        session_->Append(std::span(seq).subspan(shared), runtime::LogitsRequest::Hidden(n)));
    const std::span<const float> h = session_->last_hidden();
    std::copy(h.begin(), h.end(), hidden_.begin() + t * n * hidden_size_);
  }
  return SumRuns(req, runs);
}

// log softmax(hidden_[r] . head^T)[targets[r]] for every row r: the head in slices of
// kHeadSlice vocabulary rows (a multiple of the panels' 16 rows) over groups of at most
// kHeadRows hidden rows, a running log-sum-exp per row, so no row of full logits is kept.
Status ToolChannel::ApplyHead(std::span<const int32_t> targets, std::span<double> logp) {
  constexpr int64_t kHeadSlice = 8192, kHeadRows = 64;
  const auto rows = static_cast<int64_t>(targets.size());
  const kernels::ElementOps& ops = kernels::ActiveKernelSet().element;
  std::vector<double> lse(static_cast<size_t>(rows), -std::numeric_limits<double>::infinity());
  std::vector<double> hit(static_cast<size_t>(rows), 0.0);
  for (int64_t r0 = 0; r0 < rows; r0 += kHeadRows) {
    const int64_t m = std::min(kHeadRows, rows - r0);
    for (int64_t v0 = 0; v0 < head_.rows; v0 += kHeadSlice) {
      kernels::WeightMatrix w = head_;
      w.data = head_.row(v0);
      w.rows = std::min(kHeadSlice, head_.rows - v0);
      logits_.resize(static_cast<size_t>(m * w.rows));
      kernels::MatMul(w, hidden_.data() + r0 * hidden_size_, m, logits_.data(), w.rows, pool_);
      for (int64_t i = 0; i < m; ++i) {
        const float* y = logits_.data() + i * w.rows;
        // log sum exp of the slice = its cross entropy at entry 0 + y[0] (the kernel's own
        // max-shifted sum).
        const double part = static_cast<double>(kernels::CrossEntropyRow(ops, y, w.rows, 0)) + y[0];
        double& l = lse[static_cast<size_t>(r0 + i)];
        l = std::isinf(l) ? part : std::max(l, part) + std::log1p(std::exp(-std::fabs(l - part)));
        const int32_t t = targets[static_cast<size_t>(r0 + i)];
        if (t >= v0 && t < v0 + w.rows) hit[static_cast<size_t>(r0 + i)] = y[t - v0];
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    logp[static_cast<size_t>(r)] = hit[static_cast<size_t>(r)] - lse[static_cast<size_t>(r)];
  return OkStatus();
}

size_t ToolChannel::memory_bytes() const {
  size_t n = session_->cache_bytes() + session_->scratch_bytes() +
             (hidden_.capacity() + logits_.capacity()) * sizeof(float);
  for (const auto& s : tools_) {
    for (const auto& k : s.k) n += k.size() * sizeof(float);
    for (const auto& v : s.v) n += v.size() * sizeof(float);
  }
  return n;
}

namespace {

class ToolPrior : public LogitProcessor {
 public:
  ToolPrior(const std::vector<std::string>* names, const std::vector<double>* prior,
            const text::Tokenizer* tk, int32_t start_call)
      : names_(names), prior_(prior), tk_(tk), start_call_(start_call) {}

  void Restrict(const SampleStep& step, std::span<float> cand) override {
    if (!active_) return;
    const double before = LogSumExp(*prior_, Fitting(text_));
    if (!std::isfinite(before)) return;
    for (size_t j = 0; j < step.allowed.size(); ++j) {
      if (!std::isfinite(cand[j])) continue;
      const std::string t = text_ + tk_->TokenToPiece(step.allowed[j], /*special=*/true);
      if (t.size() <= kCall.size()) continue;  // not into the name yet
      const std::vector<size_t> fitting = Fitting(t);
      const double after = LogSumExp(*prior_, fitting);
      if (std::isfinite(after)) {
        cand[j] += static_cast<float>(after - before);
      } else if (!fitting.empty() && after < 0) {
        cand[j] = -std::numeric_limits<float>::infinity();  // every tool it leads to ruled out
      }
    }
  }
  void Written(int32_t tok) override {
    if (tok == start_call_) {
      active_ = true;
      text_.clear();
      return;
    }
    if (!active_) return;
    text_ += tk_->TokenToPiece(tok, /*special=*/true);
    if (text_.find('{') != std::string::npos || text_.size() > kMaxText) active_ = false;
  }

 private:
  static constexpr std::string_view kCall = "call:";
  static constexpr size_t kMaxText = 4096;

  // The tools whose name fits text (written since <start_function_call>): text is "call:" and
  // a start of the name, or "call:NAME{..." with the whole name. Empty when text does not start
  // with "call:" (a prefix of it fits every tool).
  std::vector<size_t> Fitting(std::string_view text) const {
    std::vector<size_t> ids;
    if (text.size() < kCall.size()) {
      if (kCall.substr(0, text.size()) != text) return ids;
      for (size_t i = 0; i < names_->size(); ++i) ids.push_back(i);
      return ids;
    }
    if (text.substr(0, kCall.size()) != kCall) return ids;
    std::string_view name = text.substr(kCall.size());
    const size_t brace = name.find('{');
    const bool whole = brace != std::string_view::npos;
    if (whole) name = name.substr(0, brace);
    for (size_t i = 0; i < names_->size(); ++i) {
      const std::string& n = (*names_)[i];
      if (whole ? n == name : n.compare(0, name.size(), name) == 0) ids.push_back(i);
    }
    return ids;
  }

  const std::vector<std::string>* names_;
  const std::vector<double>* prior_;
  const text::Tokenizer* tk_;
  int32_t start_call_;
  bool active_ = false;
  std::string text_;
};

}  // namespace

std::unique_ptr<LogitProcessor> MakeToolPrior(const std::vector<std::string>* names,
                                              const std::vector<double>* prior,
                                              const text::Tokenizer* pieces, int32_t start_call) {
  return std::make_unique<ToolPrior>(names, prior, pieces, start_call);
}

}  // namespace fg::call
