// `fgemma serve`'s HTTP side: cpp-httplib (Debian's libcpp-httplib-dev) around a Service.
// Keeps the socket details here: the timeouts, the worker threads, OpenAI-shaped bodies for
// errors httplib answers itself (413 for a body over --max-body, 404), and noticing that a
// client closed its connection while its request runs (so the work stops and the slot frees).
#ifndef FGEMMA_SERVE_HTTP_H_
#define FGEMMA_SERVE_HTTP_H_

#include <memory>
#include <string>

#include "fgemma/status.h"
#include "src/serve/service.h"

namespace fg::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (port() says which)
  int read_timeout_s = 30;
  int write_timeout_s = 30;
  int keep_alive_timeout_s = 5;
  int threads = 0;  // connection threads; 0: parallel + queue + 4
};

class HttpServer {
 public:
  // Binds the socket (errors: the address cannot be bound). `service` must outlive the server.
  static StatusOr<std::unique_ptr<HttpServer>> Bind(Service* service, const ServiceOptions& so,
                                                    const HttpOptions& options);
  ~HttpServer();
  int port() const;
  // Serves until Stop() (from another thread). Errors: the listener failed.
  Status Run();
  void Stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fg::serve

#endif  // FGEMMA_SERVE_HTTP_H_
