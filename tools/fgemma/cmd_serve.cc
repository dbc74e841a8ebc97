// fgemma serve: an OpenAI-compatible HTTP server for function calling (docs/serve.md). Built into
// its own executable, fgemma-serve (serve_main.cc), which `fgemma serve` runs (cmd_serve_exec.cc):
// the HTTP library and the TLS, zlib and brotli libraries it links are loaded by the server only,
// never by `fgemma call` and the other commands.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fgemma/function_caller.h"
#include "src/base/thread_pool.h"
#include "tools/fgemma/commands.h"
#include "tools/fgemma/common_flags.h"
#include "tools/fgemma/flags.h"

#include "src/serve/http.h"
#include "src/serve/service.h"

namespace fg::cli {

int CmdServeMain(int argc, char** argv) {
  std::string host = "127.0.0.1", api_key, cache_dir, alias = "fgemma";
  int64_t port = 8080, parallel = 4, queue = 64, cache_ram = 512, max_body = 1 << 20,
          max_messages = 64, max_tools = 64, max_tokens = 1024, default_tokens = 256,
          max_calls = 1, timeout = 120, draft = FunctionCallerOptions{}.draft_tokens,
          batch_wait_us = 2000;
  bool no_batching = false, no_prepack = false;
  FlagParser p("serve",
               "Serve function calling over HTTP with OpenAI's API (/v1/chat/completions with "
               "tools, /v1/completions, /v1/models, /health, /metrics).");
  CommonFlags common;
  common.Register(p, CommonFlags::kModel);
  p.AddString("--host", &host, "ADDR",
              "Address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 for every "
              "interface, then set --api-key)");
  p.AddInt("--port", &port, "N", "Port (default 8080; 0: any free port, printed at start)");
  p.AddInt("--parallel", &parallel, "N", "Requests run at once, one slot each (default 4)");
  p.AddInt("--queue", &queue, "N",
           "Requests waiting for a slot at most; more get 429 (default 64)");
  p.AddString("--api-key", &api_key, "KEY",
              "Require \"Authorization: Bearer KEY\" on every endpoint but /health (default "
              "$FGEMMA_API_KEY; none when unset)");
  p.AddInt("--cache-ram", &cache_ram, "MiB",
           "Memory for the prefilled catalog prompts of idle slots' callers, least recently used "
           "dropped first (default 512)");
  p.AddString("--cache-dir", &cache_dir, "DIR",
              "Also keep prefilled catalog prompts in DIR, as fgemma call --cache-dir");
  common.Register(p, CommonFlags::kContext | CommonFlags::kThreads);
  p.AddInt("--max-body", &max_body, "BYTES", "Largest request body (default 1048576; 413 beyond)");
  p.AddInt("--max-messages", &max_messages, "N", "Messages per request at most (default 64)");
  p.AddInt("--max-tools", &max_tools, "N", "Tools per request at most (default 64)");
  p.AddInt("--max-tokens", &max_tokens, "N",
           "Largest max_tokens a request may ask for (default 1024)");
  p.AddInt("-n,--default-tokens", &default_tokens, "N",
           "max_tokens when a request gives none (default 256, as fgemma call -n)");
  p.AddInt("--max-calls", &max_calls, "N",
           "Calls per answer when a request allows parallel tool calls (default 1)");
  p.AddInt("--timeout", &timeout, "S",
           "A request's time at most, waiting and running (default 120; then 504)");
  p.AddInt("--draft", &draft, "N", "As fgemma call --draft (default 2)");
  p.AddBool("--no-batching", &no_batching,
            "Run each slot's forward passes on its own instead of one batched pass for all busy "
            "slots (the answers are the same)");
  p.AddBool("--no-prepack", &no_prepack,
            "Do not prepack the weights' matmul panels at start-up (saves their memory, ~280 MiB "
            "for the 270M Q4_K_M model, and makes batched steps slower)");
  p.AddInt("--batch-wait", &batch_wait_us, "US",
           "How long a batched step waits for the busy slots' next tokens at most, in "
           "microseconds (default 2000)");
  p.AddString("--alias", &alias, "NAME", "The model name /v1/models lists (default fgemma)");
  common.Register(p, CommonFlags::kLora | CommonFlags::kCallLora | CommonFlags::kToolChannel);
  p.AddNote(
      "Continuous batching (the default): the forward passes of all busy slots run as one, on -t "
      "threads (default: the cores this process may use); with --no-batching -t is per slot "
      "(default: those cores / --parallel, at least 1). "
      "Answers are greedy unless a request sets temperature, and equal `fgemma call`'s for the "
      "same catalog and request. SIGINT/SIGTERM: finish the requests admitted, refuse new ones "
      "(503), exit 0. Exit codes: 0 after a signal, 1 runtime error (model, port), 2 usage.");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto usage = [&](const std::string& m) {
    return ReportError("serve", InvalidArgumentError(m), true);
  };
  if (Status s = common.Check(); !s.ok()) return usage(s.message());
  if (port < 0 || port > 65535) return usage("--port must be in [0, 65535]");
  if (parallel < 1 || parallel > 256) return usage("--parallel must be in [1, 256]");
  if (queue < 0 || queue > 4096) return usage("--queue must be in [0, 4096]");
  if (cache_ram < 0 || cache_ram > (int64_t{1} << 30)) return usage("--cache-ram must be >= 0");
  if (max_body < 1024 || max_body > (int64_t{1} << 30)) {
    return usage("--max-body must be in [1024, 1073741824]");
  }
  if (max_messages < 1 || max_tools < 1) return usage("--max-messages and --max-tools must be >= 1");
  if (max_tokens < 1 || default_tokens < 1 || default_tokens > max_tokens) {
    return usage("--max-tokens and -n must be >= 1, -n at most --max-tokens");
  }
  if (max_calls < 1 || max_calls > 64) return usage("--max-calls must be in [1, 64]");
  if (timeout < 1 || timeout > 86400) return usage("--timeout must be in [1, 86400]");
  if (draft < 0 || draft > 16) return usage("--draft must be in [0, 16]");
  if (batch_wait_us < 0 || batch_wait_us > 1000000) {
    return usage("--batch-wait must be in [0, 1000000]");
  }
  if (p.WasSet("--cache-dir") && cache_dir.empty()) {
    return usage("--cache-dir needs a folder, got ''");
  }
  if (!p.WasSet("--api-key")) {
    if (const char* k = std::getenv("FGEMMA_API_KEY")) api_key = k;
  }
  if (p.WasSet("--api-key") && api_key.empty()) return usage("--api-key is empty");

  serve::ServiceOptions so;
  so.model_name = alias;
  so.parallel = static_cast<int>(parallel);
  so.queue = static_cast<int>(queue);
  so.api_key = api_key;
  so.cache_ram_bytes = static_cast<size_t>(cache_ram) << 20;
  so.cache_dir = cache_dir;
  so.batching = !no_batching;
  so.batch_wait_us = batch_wait_us;
  so.prepack = !no_prepack;
  so.batch_threads =
      common.ThreadsOrZero() > 0 ? common.ThreadsOrZero() : ThreadPool::DefaultThreads();
  // Batched, a slot's own threads compute only its few grammar-allowed logit rows and, with
  // an adapter trained after the catalog prefix, that prefix (it needs the base weights).
  so.threads = common.ThreadsOrZero() > 0 && no_batching
                   ? common.ThreadsOrZero()
                   : std::max(1, ThreadPool::DefaultThreads() / static_cast<int>(parallel));
  so.context = common.ContextOrZero();
  so.draft_tokens = static_cast<int>(draft);
  common.ApplyCallFlags(so);
  so.timeout_s = static_cast<double>(timeout);
  so.limits.max_body_bytes = static_cast<size_t>(max_body);
  so.limits.max_messages = static_cast<size_t>(max_messages);
  so.limits.max_tools = static_cast<size_t>(max_tools);
  so.limits.max_tokens = max_tokens;
  so.limits.default_max_tokens = default_tokens;
  so.limits.max_calls = static_cast<int>(max_calls);

  // Signals are taken by one thread (sigwait) from here on: every thread started later
  // inherits the mask, so none runs the default handler mid-request.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  auto model_path = common.ModelPath();
  if (!model_path.ok()) return ReportError("serve", model_path.status());
  auto model = CallModel::Load(*model_path, common.CallAdapters(), common.PriorAdapters());
  if (!model.ok()) return ReportError("serve", model.status());
  if (Status s = common.CheckContext((*model)->trained_context()); !s.ok()) {
    return usage(s.message());
  }
  auto service = serve::Service::Create(*model, so);
  if (!service.ok()) return usage(service.status().message());
  serve::HttpOptions ho;
  ho.host = host;
  ho.port = static_cast<int>(port);
  auto http = serve::HttpServer::Bind(service->get(), so, ho);
  if (!http.ok()) return ReportError("serve", http.status());

  std::atomic<bool> done{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (done.load()) return;
    std::fprintf(stderr, "fgemma serve: signal %d: finishing the requests in flight\n", sig);
    (*service)->BeginDrain();
    (*service)->WaitIdle();
    // A signal before the listener started would make one Stop() a no-op: repeat until Run()
    // has returned.
    while (!done.load()) {
      (*http)->Stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  if (so.batching) {
    std::printf("fgemma serve: listening on http://%s:%d (%lld slots, batched on %d threads)\n",
                host.c_str(), (*http)->port(), static_cast<long long>(parallel),
                so.batch_threads);
  } else {
    std::printf("fgemma serve: listening on http://%s:%d (%lld slots, %d threads each)\n",
                host.c_str(), (*http)->port(), static_cast<long long>(parallel), so.threads);
  }
  FlushStdout();
  Status run = (*http)->Run();
  done.store(true);
  pthread_kill(waiter.native_handle(), SIGTERM);  // wakes sigwait if no signal came
  waiter.join();
  if (!run.ok()) return ReportError("serve", run);
  std::fprintf(stderr, "fgemma serve: stopped\n");
  return kExitOk;
}

}  // namespace fg::cli
