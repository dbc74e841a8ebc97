#include "src/call/tool_channel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "src/kernels/grad.h"
#include "src/kernels/kernel_set.h"

namespace fg::call {

std::string ChannelToolText(const text::Tool& tool) {
  std::string params;
  for (const auto& [key, schema] : tool.parameters.properties) {
    (void)schema;
    if (!params.empty()) params += ", ";
    params += key;
  }
  return "Function " + tool.name + "(" + params + "): " + tool.description;
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

StatusOr<std::unique_ptr<ToolChannel>> ToolChannel::Create(const runtime::Model& model,
                                                           const text::Tokenizer& tk,
                                                           const text::ToolCatalog& catalog,
                                                           ThreadPool* pool) {
  auto c = std::unique_ptr<ToolChannel>(new ToolChannel());
  c->tk_ = &tk;
  c->vocab_ = model.config().vocab;
  const std::vector<int32_t> ask = tk.Encode(kAsk, /*add_special=*/false, /*parse_special=*/false);
  runtime::SessionOptions so;
  so.context = 1 + kChannelToolTokens + static_cast<int64_t>(ask.size()) + kChannelRequestTokens;
  so.pool = pool;
  so.lora_from = so.context;  // the base model everywhere
  FG_ASSIGN_OR_RETURN(c->session_, runtime::Session::Create(model, so));
  for (const text::Tool& tool : catalog.tools) {
    std::vector<int32_t> ids = {tk.vocab().bos};
    std::vector<int32_t> body =
        tk.Encode(ChannelToolText(tool), /*add_special=*/false, /*parse_special=*/false);
    if (static_cast<int64_t>(body.size()) > kChannelToolTokens) body.resize(kChannelToolTokens);
    ids.insert(ids.end(), body.begin(), body.end());
    ids.insert(ids.end(), ask.begin(), ask.end());
    c->last_.push_back(ids.back());
    ids.pop_back();
    c->session_->Reset();
    FG_RETURN_IF_ERROR(c->session_->Append(ids, runtime::LogitsRequest::None()));
    c->tools_.push_back(c->session_->Save());
    c->tools_.back().logits.clear();
  }
  return c;
}

StatusOr<std::vector<double>> ToolChannel::Score(std::string_view request) {
  std::vector<int32_t> req = tk_->Encode(request, /*add_special=*/false, /*parse_special=*/false);
  if (req.empty()) return InvalidArgumentError("tool channel: the request is empty");
  if (static_cast<int64_t>(req.size()) > kChannelRequestTokens) req.resize(kChannelRequestTokens);
  const auto n = static_cast<int64_t>(req.size());
  std::vector<double> out(tools_.size());
  std::vector<int32_t> seq(static_cast<size_t>(n));
  const kernels::ElementOps& ops = kernels::ActiveKernelSet().element;
  for (size_t t = 0; t < tools_.size(); ++t) {
    FG_RETURN_IF_ERROR(session_->Restore(tools_[t]));
    // The rows of the tool text's last token and of every request token but the last predict
    // the request's tokens; kChannelChunk rows of logits at a time.
    seq[0] = last_[t];
    std::copy(req.begin(), req.end() - 1, seq.begin() + 1);
    double sum = 0;
    for (int64_t i0 = 0; i0 < n; i0 += kChannelChunk) {
      const int64_t m = std::min(kChannelChunk, n - i0);
      FG_RETURN_IF_ERROR(session_->Append(std::span<const int32_t>(seq).subspan(i0, m),
                                          runtime::LogitsRequest::Full(m)));
      const std::span<const float> logits = session_->logits();
      for (int64_t i = 0; i < m; ++i) {
        sum -= kernels::CrossEntropyRow(ops, logits.data() + i * vocab_, vocab_,
                                        req[static_cast<size_t>(i0 + i)]);
      }
    }
    out[t] = sum;
  }
  return out;
}

size_t ToolChannel::memory_bytes() const {
  size_t n = session_->cache_bytes() + session_->scratch_bytes();
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
      const double after = LogSumExp(*prior_, Fitting(t));
      if (std::isfinite(after)) cand[j] += static_cast<float>(after - before);
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
