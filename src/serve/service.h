// The OpenAI-compatible service behind `fgemma serve` (docs/serve.md), without HTTP: a request
// (method, path, Authorization header, body, a way to know the client left) in, a response
// (status, content type, a body or server-sent events) out. src/serve/http.h puts it on a
// socket with cpp-httplib; the tests call it directly too.
//
// Concurrency: Handle() may be called from any number of threads. At most `parallel` requests
// run the model at once (slots), at most `queue` more wait for a slot (beyond that: 429); a
// request waits at most its timeout. Each slot runs a FunctionCaller of the request's catalog
// taken from a pool shared by every slot: the callers of recently used catalogs are kept with
// their prefilled catalog prefix (the prefix cache), least recently used ones dropped beyond
// `cache_ram_bytes`. With batching (the default) every busy slot's forward passes run as one
// (runtime::StepBatcher: each step waits for the busy slots' next tokens, up to batch_wait_us,
// and reads the weights once for all of them); without, the slots run side by side, each its
// own forward passes. Because a FunctionCaller's answer does not depend on anything but its
// catalog, options and request (every kernel is batch- and thread-count-invariant), a request
// gets the same answer whatever runs beside it.
#ifndef FGEMMA_SERVE_SERVICE_H_
#define FGEMMA_SERVE_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fgemma/function_caller.h"
#include "src/base/thread_pool.h"
#include "src/runtime/step_batcher.h"
#include "src/serve/openai.h"

namespace fg::serve {

struct ServiceOptions {
  std::string model_name = "fgemma";  // what /v1/models lists and responses name
  int parallel = 4;                   // slots (>= 1)
  int queue = 64;                     // requests waiting for a slot at most (>= 0)
  std::string api_key;                // "": no authentication
  size_t cache_ram_bytes = size_t{512} << 20;  // idle callers (prefix caches) kept at most
  std::string cache_dir;              // FunctionCallerOptions::cache_dir
  int threads = 1;                    // threads of each slot's forward passes (unbatched)
  // Continuous batching (runtime::StepBatcher): the forward passes of every busy slot run as
  // one, on batch_threads threads, waiting at most batch_wait_us for the slots to come.
  bool batching = true;
  int batch_threads = 1;
  int64_t batch_wait_us = 2000;
  // Prepack the weights' matmul panels at start-up (runtime::Model::PrepackPanels): a batched
  // step of a few tokens then skips packing them per call; costs their bytes in memory.
  bool prepack = true;
  int64_t context = 0;                // FunctionCallerOptions::context
  int draft_tokens = 2;
  double tool_channel = -1;           // FunctionCallerOptions::tool_channel
  bool argument_check = true;         // FunctionCallerOptions::argument_check
  bool fill_arguments = true;         // FunctionCallerOptions::fill_arguments
  int fix_typos = -1;                 // FunctionCallerOptions::fix_typos
  double blend = FunctionCallerOptions{}.blend;  // FunctionCallerOptions::blend
  double copy_bias = -1;              // FunctionCallerOptions::copy_bias
  double timeout_s = 120;             // a request's whole time (queue + work) at most
  Limits limits;
};

struct HttpRequest {
  std::string method, path;
  std::string authorization;  // the Authorization header ("" when absent)
  std::string body;
  std::function<bool()> disconnected;  // null: never
};

// Sends one server-sent event; false once the client is gone.
using EventSender = std::function<bool(const std::string& event)>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // A streamed answer (body unused): produce() is called once, after Handle returned, on the
  // thread that writes the response; it runs the request and sends its events as the model
  // decodes them. The request's slot is held until produce returns, or until the response is
  // dropped unsent.
  bool stream = false;
  std::function<void(const EventSender& send)> produce;
};

// Compares two strings in time that depends only on their lengths (an API key check).
bool ConstantTimeEquals(const std::string& a, const std::string& b);

class Service {
 public:
  // InvalidArgument for bad options.
  static StatusOr<std::unique_ptr<Service>> Create(std::shared_ptr<const CallModel> model,
                                                   const ServiceOptions& options);
  ~Service();

  HttpResponse Handle(const HttpRequest& request);

  // Stops admitting requests (503 "shutting down"); those admitted go on. WaitIdle returns once
  // none is left.
  void BeginDrain();
  bool draining() const;
  void WaitIdle();

  // Prometheus text (GET /metrics).
  std::string MetricsText() const;

  struct Counters {
    int busy = 0, waiting = 0;
    int64_t cache_hits = 0, cache_misses = 0, cache_entries = 0, cancelled = 0;
    runtime::StepBatcher::Stats batches;  // zeros without batching
  };
  Counters counters() const;

 private:
  Service(std::shared_ptr<const CallModel> model, const ServiceOptions& options);
  class CallerPool;
  struct Metrics;
  enum class Admit { kOk, kQueueFull, kTimeout, kCancelled, kDraining };
  Admit Acquire(std::chrono::steady_clock::time_point deadline,
                const std::function<bool()>& cancelled);
  void Release();
  // An admitted request's slot, released when the request is done (a streamed one: when its
  // events are sent).
  class SlotGuard {
   public:
    explicit SlotGuard(Service* service) : service_(service) {}
    SlotGuard(const SlotGuard&) = delete;
    SlotGuard& operator=(const SlotGuard&) = delete;
    ~SlotGuard() { service_->Release(); }

   private:
    Service* service_;
  };
  // Acquire, and the response to send when the request gets no slot (503, 429, 499).
  std::optional<HttpResponse> AdmitOrRefuse(std::chrono::steady_clock::time_point deadline,
                                            const std::function<bool()>& cancelled);
  struct Admitted;
  // Takes a slot for `run` (nullopt), or the refusal to send.
  std::optional<HttpResponse> TakeSlot(const HttpRequest& request, Admitted* run);
  struct ChatRun;
  HttpResponse Chat(const HttpRequest& request);
  // Runs an admitted chat request: the answer (send == nullptr) or, streamed, its events sent
  // as they come (the returned response then unused).
  HttpResponse RunChat(ChatRun& run, const HttpRequest& request, const EventSender* send);
  struct TextRun;
  HttpResponse Completion(const HttpRequest& request);
  HttpResponse RunCompletion(TextRun& run, const HttpRequest& request, const EventSender* send);
  HttpResponse Error(const ApiError& e) const;
  std::string NextId();

  std::shared_ptr<const CallModel> model_;
  ServiceOptions options_;
  std::unique_ptr<CallerPool> pool_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<ThreadPool> batch_pool_;
  std::unique_ptr<runtime::StepBatcher> batcher_;  // null without batching
  mutable std::mutex mu_;
  std::condition_variable slot_cv_, idle_cv_;
  int busy_ = 0, waiting_ = 0, handling_ = 0;
  bool draining_ = false;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace fg::serve

#endif  // FGEMMA_SERVE_SERVICE_H_
