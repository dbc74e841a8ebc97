#include "src/serve/service.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <utility>

#include "src/base/thread_pool.h"
#include "src/call/runtime_model.h"
#include "src/runtime/sampler.h"
#include "src/runtime/session.h"
#include "src/text/tokenizer.h"

namespace fg::serve {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  // Every byte of the longer string is visited whatever matches, so the time says nothing
  // about where the first difference is.
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

// Idle FunctionCallers by key (catalog, developer message, constrain mode, max calls), most
// recently used first; each holds its prefilled catalog prefix. A slot takes one out for a
// request (or builds one: a miss) and puts it back after; beyond the byte budget the least
// recently used idle ones are dropped.
class Service::CallerPool {
 public:
  explicit CallerPool(size_t budget) : budget_(budget) {}

  std::unique_ptr<FunctionCaller> Take(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (it->key == key) {
        std::unique_ptr<FunctionCaller> c = std::move(it->caller);
        bytes_ -= it->bytes;
        idle_.erase(it);
        ++hits_;
        return c;
      }
    }
    ++misses_;
    return nullptr;
  }

  void Put(const std::string& key, std::unique_ptr<FunctionCaller> caller) {
    const size_t b = caller->memory_bytes();
    std::lock_guard<std::mutex> l(mu_);
    idle_.push_front({key, std::move(caller), b});
    bytes_ += b;
    while (bytes_ > budget_ && !idle_.empty()) {
      bytes_ -= idle_.back().bytes;
      idle_.pop_back();
    }
  }

  void Stats(int64_t* hits, int64_t* misses, int64_t* entries, int64_t* bytes) const {
    std::lock_guard<std::mutex> l(mu_);
    *hits = hits_;
    *misses = misses_;
    *entries = static_cast<int64_t>(idle_.size());
    *bytes = static_cast<int64_t>(bytes_);
  }

 private:
  struct Entry {
    std::string key;
    std::unique_ptr<FunctionCaller> caller;
    size_t bytes = 0;
  };
  mutable std::mutex mu_;
  std::list<Entry> idle_;
  size_t bytes_ = 0, budget_;
  int64_t hits_ = 0, misses_ = 0;
};

// Counters for /metrics.
struct Service::Metrics {
  static constexpr std::array<double, 12> kBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                      1,    2.5,   5,    10,  30,   60};
  mutable std::mutex mu;
  std::map<std::pair<std::string, int>, int64_t> requests;  // (endpoint, status) -> count
  int64_t prompt_tokens = 0, completion_tokens = 0, cancelled = 0;
  std::map<std::string, std::array<int64_t, kBuckets.size() + 1>> latency;  // per endpoint
  std::map<std::string, double> latency_sum;

  void Record(const std::string& endpoint, int status, double seconds) {
    std::lock_guard<std::mutex> l(mu);
    ++requests[{endpoint, status}];
    auto& h = latency[endpoint];
    size_t i = 0;
    while (i < kBuckets.size() && seconds > kBuckets[i]) ++i;
    ++h[i];
    latency_sum[endpoint] += seconds;
  }
};

Service::Service(std::shared_ptr<const CallModel> model, const ServiceOptions& options)
    : model_(std::move(model)),
      options_(options),
      pool_(std::make_unique<CallerPool>(options.cache_ram_bytes)),
      metrics_(std::make_unique<Metrics>()) {}

Service::~Service() = default;

StatusOr<std::unique_ptr<Service>> Service::Create(std::shared_ptr<const CallModel> model,
                                                   const ServiceOptions& options) {
  if (model == nullptr) return InvalidArgumentError("serve: no model");
  if (options.parallel < 1) return InvalidArgumentError("--parallel must be >= 1");
  if (options.queue < 0) return InvalidArgumentError("--queue must be >= 0");
  if (options.threads < 1) return InvalidArgumentError("threads must be >= 1");
  if (options.batching && (options.batch_threads < 1 || options.batch_wait_us < 0)) {
    return InvalidArgumentError("batch threads must be >= 1 and the batch wait >= 0");
  }
  if (options.timeout_s <= 0) return InvalidArgumentError("--timeout must be > 0");
  if (options.limits.max_tokens < 1 || options.limits.default_max_tokens < 1) {
    return InvalidArgumentError("--max-tokens must be >= 1");
  }
  std::unique_ptr<Service> service(new Service(std::move(model), options));
  if (options.batching) {
    service->batch_pool_ = std::make_unique<ThreadPool>(options.batch_threads);
    if (options.prepack) {
      FG_RETURN_IF_ERROR(call::PrepackPanels(*service->model_, service->batch_pool_.get()));
    }
    runtime::StepBatcher::Options bo;
    bo.pool = service->batch_pool_.get();
    bo.wait = std::chrono::microseconds(options.batch_wait_us);
    FG_ASSIGN_OR_RETURN(service->batcher_,
                        runtime::StepBatcher::Create(call::RuntimeModel(*service->model_), bo));
  }
  return service;
}

Service::Admit Service::Acquire(Clock::time_point deadline,
                                const std::function<bool()>& cancelled) {
  std::unique_lock<std::mutex> l(mu_);
  if (draining_) return Admit::kDraining;
  if (busy_ + waiting_ >= options_.parallel + options_.queue) return Admit::kQueueFull;
  ++waiting_;
  while (busy_ >= options_.parallel) {
    slot_cv_.wait_for(l, std::chrono::milliseconds(50));
    Admit why = Admit::kOk;
    if (cancelled && cancelled()) why = Admit::kCancelled;
    if (Clock::now() > deadline) why = Admit::kTimeout;
    if (why != Admit::kOk) {
      --waiting_;
      idle_cv_.notify_all();
      return why;
    }
  }
  --waiting_;
  ++busy_;
  // A busy slot is a participant: each batched step waits for its next tokens.
  if (batcher_ != nullptr) batcher_->Enter();
  return Admit::kOk;
}

void Service::Release() {
  if (batcher_ != nullptr) batcher_->Exit();
  std::lock_guard<std::mutex> l(mu_);
  --busy_;
  slot_cv_.notify_one();
  idle_cv_.notify_all();
}

void Service::BeginDrain() {
  std::lock_guard<std::mutex> l(mu_);
  draining_ = true;
}

bool Service::draining() const {
  std::lock_guard<std::mutex> l(mu_);
  return draining_;
}

void Service::WaitIdle() {
  std::unique_lock<std::mutex> l(mu_);
  idle_cv_.wait(l, [&] { return busy_ == 0 && waiting_ == 0 && handling_ == 0; });
}

Service::Counters Service::counters() const {
  Counters c;
  {
    std::lock_guard<std::mutex> l(mu_);
    c.busy = busy_;
    c.waiting = waiting_;
  }
  int64_t bytes = 0;
  pool_->Stats(&c.cache_hits, &c.cache_misses, &c.cache_entries, &bytes);
  std::lock_guard<std::mutex> l(metrics_->mu);
  c.cancelled = metrics_->cancelled;
  if (batcher_ != nullptr) c.batches = batcher_->stats();
  return c;
}

std::string Service::NextId() {
  char b[32];
  std::snprintf(b, sizeof(b), "%" PRIx64, next_id_.fetch_add(1));
  return b;
}

HttpResponse Service::Error(const ApiError& e) const {
  HttpResponse r;
  r.status = e.http_status;
  r.body = e.ToJson().dump();
  return r;
}

namespace {

ApiError MakeError(int status, std::string message, std::string type, std::string code = "") {
  ApiError e;
  e.http_status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

// A FunctionCaller or model error for a request's answer.
ApiError FromStatus(const Status& s, bool timed_out) {
  if (s.code() == StatusCode::kFailedPrecondition && s.message() == "cancelled") {
    return timed_out ? MakeError(504, "the request took longer than the server's --timeout",
                                 "timeout_error", "timeout")
                     : MakeError(499, "the client closed the connection", "cancelled");
  }
  switch (s.code()) {
    case StatusCode::kInvalidArgument: return BadRequest(s.message(), "messages");
    case StatusCode::kUnimplemented: return BadRequest(s.message());
    case StatusCode::kOutOfRange: {
      ApiError e = BadRequest(s.message(), "messages");
      e.code = "context_length_exceeded";
      return e;
    }
    default: return MakeError(500, s.message(), "server_error");
  }
}

// A request's time limit and cancel check: Cancelled() once the deadline has passed (timed_out
// is then set: the answer is a 504, not a 499) or the client has left.
struct RequestLimit {
  RequestLimit(const HttpRequest& r, double timeout_s)
      : request(r),
        deadline(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_s))) {}
  RequestLimit(const HttpRequest& r, Clock::time_point d) : request(r), deadline(d) {}
  bool Cancelled() {
    if (Clock::now() > deadline) {
      timed_out = true;
      return true;
    }
    return request.disconnected && request.disconnected();
  }
  const HttpRequest& request;
  Clock::time_point deadline;
  bool timed_out = false;
};

std::string Endpoint(const std::string& path) {
  if (path == "/chat/completions") return "/v1/chat/completions";
  if (path == "/completions") return "/v1/completions";
  if (path == "/models") return "/v1/models";
  return path;
}

}  // namespace

HttpResponse Service::Handle(const HttpRequest& request) {
  const auto t0 = Clock::now();
  {
    std::lock_guard<std::mutex> l(mu_);
    ++handling_;
  }
  const std::string endpoint = Endpoint(request.path);
  HttpResponse r;
  const bool known = endpoint == "/health" || endpoint == "/metrics" ||
                     endpoint == "/v1/models" || endpoint == "/v1/chat/completions" ||
                     endpoint == "/v1/completions";
  const bool post = endpoint == "/v1/chat/completions" || endpoint == "/v1/completions";
  if (!known) {
    r = Error(MakeError(404, "no such endpoint: " + text::ToValidUtf8(request.path),
                        "invalid_request_error", "not_found"));
  } else if (request.method != (post ? "POST" : "GET")) {
    r = Error(MakeError(405, "use " + std::string(post ? "POST" : "GET") + " for " + endpoint,
                        "invalid_request_error", "method_not_allowed"));
  } else if (endpoint == "/health") {
    // Open without a key (a load balancer's probe); 503 while draining.
    if (draining()) {
      r.status = 503;
      r.body = R"({"status":"shutting down"})";
    } else {
      r.body = R"({"status":"ok"})";
    }
  } else if (!options_.api_key.empty() &&
             !ConstantTimeEquals(request.authorization, "Bearer " + options_.api_key)) {
    r = Error(MakeError(401, "missing or wrong API key (Authorization: Bearer KEY)",
                        "invalid_request_error", "invalid_api_key"));
  } else if (endpoint == "/metrics") {
    r.content_type = "text/plain; version=0.0.4";
    r.body = MetricsText();
  } else if (endpoint == "/v1/models") {
    json m = {{"id", options_.model_name},
              {"object", "model"},
              {"created", 0},
              {"owned_by", "fgemma"}};
    r.body = json{{"object", "list"}, {"data", json::array({m})}}.dump();
  } else if (endpoint == "/v1/chat/completions") {
    r = Chat(request);
  } else {
    r = Completion(request);
  }
  // The request ends here, or, streamed, once its events are sent (or the response is dropped
  // unsent): WaitIdle waits for it, and its latency is the whole stream's.
  struct Done {
    Done(Service* s, std::string e, int st, Clock::time_point t)
        : service(s), endpoint(std::move(e)), status(st), t0(t) {}
    Done(const Done&) = delete;
    Done& operator=(const Done&) = delete;
    Service* service;
    std::string endpoint;
    int status;
    Clock::time_point t0;
    ~Done() {
      const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      service->metrics_->Record(endpoint, status, seconds);
      {
        std::lock_guard<std::mutex> l(service->mu_);
        --service->handling_;
      }
      service->idle_cv_.notify_all();
    }
  };
  auto done = std::make_shared<Done>(this, known ? endpoint : "other", r.status, t0);
  if (r.produce) {
    r.produce = [produce = std::move(r.produce), done](const EventSender& send) { produce(send); };
  }
  return r;
}

std::optional<HttpResponse> Service::AdmitOrRefuse(Clock::time_point deadline,
                                                   const std::function<bool()>& cancelled) {
  switch (Acquire(deadline, cancelled)) {
    case Admit::kOk:
      return std::nullopt;
    case Admit::kDraining:
      return Error(MakeError(503, "the server is shutting down", "server_error", "unavailable"));
    case Admit::kQueueFull:
      return Error(MakeError(429,
                             "every slot is busy and the queue is full (the server's --parallel "
                             "and --queue)",
                             "rate_limit_error", "queue_full"));
    case Admit::kTimeout:
      return Error(MakeError(503, "no slot came free within the server's --timeout",
                             "server_error", "timeout"));
    case Admit::kCancelled: {
      std::lock_guard<std::mutex> l(metrics_->mu);
      ++metrics_->cancelled;
      return Error(MakeError(499, "the client closed the connection", "cancelled"));
    }
  }
  return Error(MakeError(500, "unknown admission state", "server_error"));
}

namespace {

// An error as a server-sent event (a stream that already sent its 200): "data: {"error":...}".
std::string ErrorEvent(const HttpResponse& e) { return "data: " + e.body + "\n\n"; }

// Sends a streamed request's events until the client is gone (then `gone`: the work stops).
struct Emitter {
  const EventSender* send;
  bool gone = false;
  void operator()(const std::vector<std::string>& events) {
    for (const std::string& e : events) {
      if (!gone && !(*send)(e)) gone = true;
    }
  }
};

}  // namespace

// What an admitted request carries from its handler into its run (a streamed one: into the
// response's producer, which runs after the handler returned): the slot, the deadline, and,
// streamed, the handler's request without its body.
struct Service::Admitted {
  std::unique_ptr<SlotGuard> slot;
  Clock::time_point deadline;
  HttpRequest request;
};

std::optional<HttpResponse> Service::TakeSlot(const HttpRequest& request, Admitted* run) {
  RequestLimit limit(request, options_.timeout_s);
  std::function<bool()> cancelled = [&limit] { return limit.Cancelled(); };
  if (std::optional<HttpResponse> refused = AdmitOrRefuse(limit.deadline, cancelled)) {
    return refused;
  }
  run->slot = std::make_unique<SlotGuard>(this);
  run->deadline = limit.deadline;
  return std::nullopt;
}

// A streamed answer: the run moves into the producer, which calls go(run, request, &send).
template <class Run, class Go>
HttpResponse Streamed(std::shared_ptr<Run> run, const HttpRequest& request, Go go) {
  run->request = request;
  run->request.body.clear();
  HttpResponse r;
  r.stream = true;
  r.content_type = "text/event-stream";
  r.produce = [run, go](const EventSender& send) { go(*run, run->request, &send); };
  return r;
}

struct Service::ChatRun : Admitted {
  ChatRequest cr;
  std::string key;  // the caller pool's
  std::unique_ptr<FunctionCaller> caller;
};

HttpResponse Service::Chat(const HttpRequest& request) {
  auto run = std::make_shared<ChatRun>();
  ChatRequest& cr = run->cr;
  if (auto e = ParseChatRequest(request.body, options_.limits, &cr)) return Error(*e);
  if (std::optional<HttpResponse> refused = TakeSlot(request, run.get())) return *refused;

  run->key = cr.catalog_json + '\x1f' + cr.developer_message + '\x1f' +
             std::to_string(static_cast<int>(cr.constrain)) + '\x1f' +
             std::to_string(cr.max_calls) + '\x1f' + cr.named_tool;
  run->caller = pool_->Take(run->key);
  if (run->caller == nullptr) {
    FunctionCallerOptions o;
    o.constrain = cr.constrain;
    o.max_calls = cr.max_calls;
    o.max_tokens = options_.limits.default_max_tokens;
    o.context = options_.context;
    o.threads = options_.threads;
    o.cache_dir = options_.cache_dir;
    o.developer_message = cr.developer_message;
    if (cr.tool_choice == ToolChoice::kNamed) o.grammar_tools = {cr.named_tool};
    o.draft_tokens = options_.draft_tokens;
    o.tool_channel = options_.tool_channel;
    o.argument_check = options_.argument_check;
    o.fill_arguments = options_.fill_arguments;
    o.fix_typos = options_.fix_typos;
    o.blend = options_.blend;
    o.copy_bias = options_.copy_bias;
    o.on_warning = [](const std::string& m) {
      std::fprintf(stderr, "fgemma serve: warning: %s\n", m.c_str());
    };
    auto c = FunctionCaller::Create(model_, cr.catalog_json, o);
    if (!c.ok()) {
      if (c.status().code() == StatusCode::kInvalidArgument) {
        return Error(BadRequest(c.status().message(), "tools"));
      }
      if (c.status().code() == StatusCode::kOutOfRange) {
        ApiError e = BadRequest(c.status().message(), "tools");
        e.code = "context_length_exceeded";
        return Error(e);
      }
      return Error(MakeError(500, c.status().message(), "server_error"));
    }
    run->caller = std::move(*c);
    if (Status s = call::UseBatcher(*run->caller, batcher_.get()); !s.ok()) {
      return Error(MakeError(500, s.message(), "server_error"));
    }
  }
  // tool_choice "auto" runs as "required" on a base model taught to call by an adapter
  // (FunctionCaller::constrain()); the stream and the answer follow the mode as run.
  cr.constrain = run->caller->constrain();
  if (!cr.stream) return RunChat(*run, request, nullptr);
  return Streamed(run, request, [this](ChatRun& r, const HttpRequest& q, const EventSender* send) {
    RunChat(r, q, send);
  });
}

HttpResponse Service::RunChat(ChatRun& run, const HttpRequest& request, const EventSender* send) {
  const ChatRequest& cr = run.cr;
  RequestLimit limit(request, run.deadline);
  Emitter emit{send};
  CallControl control = cr.control;
  control.cancelled = [&] { return emit.gone || limit.Cancelled(); };
  const std::string id = NextId();
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const std::string model = cr.model.empty() ? options_.model_name : cr.model;
  std::optional<ChatStream> stream;
  std::string output;
  if (send != nullptr) {
    // "required"/named: calls are streamed while decoding when the tokens the caller may write
    // surely fit one (ChatStream): max_tokens, or what the context leaves after the prompt.
    int64_t budget = -1;
    if (cr.constrain == ConstrainMode::kCall) {
      auto prompt = cr.single_request() ? run.caller->PromptTokens(cr.turns[0].text)
                                        : run.caller->ConversationTokens(cr.turns);
      if (prompt.ok()) {
        budget = std::min<int64_t>(cr.control.max_tokens.value_or(0),
                                   run.caller->context() - static_cast<int64_t>(prompt->size()));
      }
    }
    stream.emplace(cr, "chatcmpl-" + id, created, model, budget);
    // A caller that checks the arguments after decoding (FunctionCallerOptions::argument_check)
    // answers with the checked calls, so the stream sends its answer at the end (Finish), the
    // same answer a request without `stream` gets; other callers stream while decoding.
    if (!run.caller->checks_arguments()) {
      control.on_piece = [&](std::string_view piece) {
        output += piece;
        emit(stream->Update(output));
      };
    }
  }
  auto result = cr.single_request() ? run.caller->Call(cr.turns[0].text, control)
                                    : run.caller->CallConversation(cr.turns, control);
  if (!result.ok()) {
    const Status& s = result.status();
    const bool reusable = s.code() == StatusCode::kInvalidArgument ||
                          s.code() == StatusCode::kOutOfRange ||
                          s.code() == StatusCode::kUnimplemented ||
                          s.code() == StatusCode::kFailedPrecondition;
    if (reusable) pool_->Put(run.key, std::move(run.caller));
    if (s.code() == StatusCode::kFailedPrecondition) {
      std::lock_guard<std::mutex> l(metrics_->mu);
      ++metrics_->cancelled;
    }
    HttpResponse e = Error(FromStatus(s, limit.timed_out));
    if (send != nullptr) emit({ErrorEvent(e)});
    return e;
  }
  pool_->Put(run.key, std::move(run.caller));
  const ChatAnswer a = MakeChatAnswer(*result, cr, id);
  {
    std::lock_guard<std::mutex> l(metrics_->mu);
    metrics_->prompt_tokens += a.prompt_tokens;
    metrics_->completion_tokens += a.completion_tokens;
  }
  HttpResponse r;
  if (send != nullptr) {
    emit(stream->Finish(a));
  } else {
    r.body = ChatCompletionJson(a, "chatcmpl-" + id, created, model)
                 .dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return r;
}

struct Service::TextRun : Admitted {
  CompletionRequest cr;
  std::vector<int32_t> prompt;
  int64_t context = 0;
};

HttpResponse Service::Completion(const HttpRequest& request) {
  auto run = std::make_shared<TextRun>();
  CompletionRequest& cr = run->cr;
  if (auto e = ParseCompletionRequest(request.body, options_.limits, &cr)) return Error(*e);
  if (std::optional<HttpResponse> refused = TakeSlot(request, run.get())) return *refused;

  // Raw completion: the prompt as `fgemma run --raw` takes it (BOS, special tokens parsed),
  // sampled token by token with the full head until <eos> or max_tokens.
  const runtime::Model& rm = call::RuntimeModel(*model_);
  const text::Tokenizer& tk = call::CallTokenizer(*model_);
  run->prompt = tk.Encode(cr.prompt, /*add_special=*/true, /*parse_special=*/true);
  int64_t context = options_.context;
  const int64_t trained = rm.config().context_length;
  if (context == 0) context = trained > 0 ? std::min<int64_t>(2048, trained) : 2048;
  run->context = context;
  if (static_cast<int64_t>(run->prompt.size()) >= context) {
    ApiError e = BadRequest("the prompt has " + std::to_string(run->prompt.size()) +
                                " tokens, more than fits the context of " +
                                std::to_string(context),
                            "prompt");
    e.code = "context_length_exceeded";
    return Error(e);
  }
  if (!cr.stream) return RunCompletion(*run, request, nullptr);
  return Streamed(run, request, [this](TextRun& r, const HttpRequest& q, const EventSender* send) {
    RunCompletion(r, q, send);
  });
}

HttpResponse Service::RunCompletion(TextRun& run, const HttpRequest& request,
                                    const EventSender* send) {
  const CompletionRequest& cr = run.cr;
  RequestLimit limit(request, run.deadline);
  Emitter emit{send};
  const std::string id = "cmpl-" + NextId();
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const std::string model = cr.model.empty() ? options_.model_name : cr.model;
  std::optional<TextStream> stream;
  if (send != nullptr) stream.emplace(cr.stop, cr.include_usage, id, created, model);
  auto fail = [&](const HttpResponse& e) {
    if (send != nullptr) emit({ErrorEvent(e)});
    return e;
  };
  const runtime::Model& rm = call::RuntimeModel(*model_);
  const text::Tokenizer& tk = call::CallTokenizer(*model_);
  ThreadPool pool(options_.threads);
  runtime::SessionOptions so;
  so.context = run.context;
  so.pool = &pool;
  so.batcher = batcher_.get();
  auto session = runtime::Session::Create(rm, so);
  if (!session.ok()) return fail(Error(MakeError(500, session.status().message(), "server_error")));
  runtime::SamplingParams sp;
  sp.temperature = cr.control.temperature.value_or(0.0);
  if (cr.control.top_k) sp.top_k = *cr.control.top_k;
  if (cr.control.top_p) sp.top_p = *cr.control.top_p;
  if (cr.control.seed) sp.seed = *cr.control.seed;
  runtime::Sampler sampler(sp);
  const int64_t max_new = std::min<int64_t>(*cr.control.max_tokens,
                                            run.context - static_cast<int64_t>(run.prompt.size()));
  TextAnswer a;
  a.prompt_tokens = static_cast<int64_t>(run.prompt.size());
  a.finish_reason = "length";
  std::vector<int32_t> out, pending = run.prompt;
  while (static_cast<int64_t>(out.size()) < max_new) {
    if (emit.gone || limit.Cancelled()) {
      std::lock_guard<std::mutex> l(metrics_->mu);
      ++metrics_->cancelled;
      return fail(Error(FromStatus(FailedPreconditionError("cancelled"), limit.timed_out)));
    }
    if (Status s = (*session)->Append(pending); !s.ok()) {
      return fail(Error(MakeError(500, s.message(), "server_error")));
    }
    const int32_t tok = sampler.Sample((*session)->logits());
    if (tok == tk.vocab().eos) {
      a.finish_reason = "stop";
      break;
    }
    out.push_back(tok);
    pending = {tok};
    a.text = tk.Decode(out);
    if (send != nullptr) emit(stream->Update(a.text));
    if (CutAtStop(&a.text, cr.stop)) {
      a.finish_reason = "stop";
      break;
    }
  }
  a.completion_tokens = static_cast<int64_t>(out.size());
  {
    std::lock_guard<std::mutex> l(metrics_->mu);
    metrics_->prompt_tokens += a.prompt_tokens;
    metrics_->completion_tokens += a.completion_tokens;
  }
  HttpResponse r;
  if (send != nullptr) {
    emit(stream->Finish(a));
  } else {
    r.body = CompletionJson(a, id, created, model).dump(-1, ' ', false,
                                                        json::error_handler_t::replace);
  }
  return r;
}

std::string Service::MetricsText() const {
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };
  const Counters c = counters();
  int64_t hits = 0, misses = 0, entries = 0, bytes = 0;
  pool_->Stats(&hits, &misses, &entries, &bytes);
  std::lock_guard<std::mutex> l(metrics_->mu);
  line("# HELP fgemma_requests_total Requests answered, by endpoint and HTTP status.");
  line("# TYPE fgemma_requests_total counter");
  for (const auto& [k, n] : metrics_->requests) {
    line("fgemma_requests_total{endpoint=\"" + k.first + "\",status=\"" +
         std::to_string(k.second) + "\"} " + std::to_string(n));
  }
  line("# HELP fgemma_prompt_tokens_total Prompt tokens of answered requests.");
  line("# TYPE fgemma_prompt_tokens_total counter");
  line("fgemma_prompt_tokens_total " + std::to_string(metrics_->prompt_tokens));
  line("# HELP fgemma_completion_tokens_total Generated tokens of answered requests.");
  line("# TYPE fgemma_completion_tokens_total counter");
  line("fgemma_completion_tokens_total " + std::to_string(metrics_->completion_tokens));
  line("# HELP fgemma_request_duration_seconds Time from the request to its response.");
  line("# TYPE fgemma_request_duration_seconds histogram");
  for (const auto& [ep, h] : metrics_->latency) {
    int64_t cum = 0;
    for (size_t i = 0; i < Metrics::kBuckets.size(); ++i) {
      cum += h[i];
      char le[32];
      std::snprintf(le, sizeof(le), "%g", Metrics::kBuckets[i]);
      line("fgemma_request_duration_seconds_bucket{endpoint=\"" + ep + "\",le=\"" + le + "\"} " +
           std::to_string(cum));
    }
    cum += h[Metrics::kBuckets.size()];
    line("fgemma_request_duration_seconds_bucket{endpoint=\"" + ep + "\",le=\"+Inf\"} " +
         std::to_string(cum));
    char sum[64];
    std::snprintf(sum, sizeof(sum), "%.6f", metrics_->latency_sum.at(ep));
    line("fgemma_request_duration_seconds_sum{endpoint=\"" + ep + "\"} " + sum);
    line("fgemma_request_duration_seconds_count{endpoint=\"" + ep + "\"} " + std::to_string(cum));
  }
  line("# HELP fgemma_prefix_cache_hits_total Requests that found their catalog's prefilled "
       "caller idle.");
  line("# TYPE fgemma_prefix_cache_hits_total counter");
  line("fgemma_prefix_cache_hits_total " + std::to_string(hits));
  line("# HELP fgemma_prefix_cache_misses_total Requests that built a caller (prefill or disk).");
  line("# TYPE fgemma_prefix_cache_misses_total counter");
  line("fgemma_prefix_cache_misses_total " + std::to_string(misses));
  line("# HELP fgemma_prefix_cache_entries Idle callers kept.");
  line("# TYPE fgemma_prefix_cache_entries gauge");
  line("fgemma_prefix_cache_entries " + std::to_string(entries));
  line("# HELP fgemma_prefix_cache_bytes Bytes the idle callers hold reserved.");
  line("# TYPE fgemma_prefix_cache_bytes gauge");
  line("fgemma_prefix_cache_bytes " + std::to_string(bytes));
  line("# HELP fgemma_slots_busy Slots running a request.");
  line("# TYPE fgemma_slots_busy gauge");
  line("fgemma_slots_busy " + std::to_string(c.busy));
  line("# HELP fgemma_slots_total Slots (--parallel).");
  line("# TYPE fgemma_slots_total gauge");
  line("fgemma_slots_total " + std::to_string(options_.parallel));
  line("# HELP fgemma_queue_waiting Requests waiting for a slot.");
  line("# TYPE fgemma_queue_waiting gauge");
  line("fgemma_queue_waiting " + std::to_string(c.waiting));
  line("# HELP fgemma_cancelled_total Requests stopped because the client left or time ran out.");
  line("# TYPE fgemma_cancelled_total counter");
  line("fgemma_cancelled_total " + std::to_string(metrics_->cancelled));
  line("# HELP fgemma_batch_steps_total Batched forward passes run (continuous batching).");
  line("# TYPE fgemma_batch_steps_total counter");
  line("fgemma_batch_steps_total " + std::to_string(c.batches.steps));
  line("# HELP fgemma_batch_sequences_total Slots' steps those passes ran (per pass: the batch).");
  line("# TYPE fgemma_batch_sequences_total counter");
  line("fgemma_batch_sequences_total " + std::to_string(c.batches.sequences));
  line("# HELP fgemma_batch_max_sequences The largest batch so far.");
  line("# TYPE fgemma_batch_max_sequences gauge");
  line("fgemma_batch_max_sequences " + std::to_string(c.batches.max_sequences));
  line("# HELP fgemma_batch_seconds_total Time spent running batched forward passes.");
  line("# TYPE fgemma_batch_seconds_total counter");
  char secs[64];
  std::snprintf(secs, sizeof(secs), "%.6f", c.batches.run_seconds);
  line(std::string("fgemma_batch_seconds_total ") + secs);
  return o;
}


}  // namespace fg::serve
