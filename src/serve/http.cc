#include "src/serve/http.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include <httplib.h>

#include "src/text/tokenizer.h"

namespace fg::serve {

namespace {

// The socket of the connection a request came on, found by its addresses: httplib 0.11 does
// not hand the descriptor to handlers, so the process's descriptors are searched for the socket
// whose peer is (remote_addr, remote_port) and whose own port is `local_port`. -1 if none.
// The descriptor stays this connection's while its handler runs (the connection's thread
// closes it only after the handler returns).
int FindConnection(const std::string& remote_addr, int remote_port, int local_port) {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int found = -1;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd < 0) continue;
    sockaddr_storage peer{}, self{};
    socklen_t pl = sizeof(peer), sl = sizeof(self);
    if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &pl) != 0 ||
        ::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&self), &sl) != 0) {
      continue;
    }
    char host[INET6_ADDRSTRLEN] = {0};
    int pport = -1, sport = -1;
    if (peer.ss_family == AF_INET && self.ss_family == AF_INET) {
      const auto* p = reinterpret_cast<const sockaddr_in*>(&peer);
      ::inet_ntop(AF_INET, &p->sin_addr, host, sizeof(host));
      pport = ntohs(p->sin_port);
      sport = ntohs(reinterpret_cast<const sockaddr_in*>(&self)->sin_port);
    } else if (peer.ss_family == AF_INET6 && self.ss_family == AF_INET6) {
      const auto* p = reinterpret_cast<const sockaddr_in6*>(&peer);
      ::inet_ntop(AF_INET6, &p->sin6_addr, host, sizeof(host));
      pport = ntohs(p->sin6_port);
      sport = ntohs(reinterpret_cast<const sockaddr_in6*>(&self)->sin6_port);
    } else {
      continue;
    }
    if (pport == remote_port && sport == local_port && remote_addr == host) {
      found = static_cast<int>(fd);
      break;
    }
  }
  ::closedir(d);
  return found;
}

// True once the peer has closed (or reset) the connection: a hang-up, or readable with nothing
// to read. A pipelined next request (readable with data) is not a close.
bool PeerClosed(int fd) {
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0;
  }
  return false;
}

std::string ErrorBody(int status, const std::string& message, const std::string& code) {
  ApiError e;
  e.http_status = status;
  e.message = message;
  e.code = code;
  return e.ToJson().dump();
}

}  // namespace

struct HttpServer::Impl {
  Service* service = nullptr;
  httplib::Server server;
  int port = -1;
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;
int HttpServer::port() const { return impl_->port; }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Bind(Service* service,
                                                       const ServiceOptions& so,
                                                       const HttpOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->service = service;
  httplib::Server& s = impl->server;
  const int threads = options.threads > 0 ? options.threads : so.parallel + so.queue + 4;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_read_timeout(options.read_timeout_s, 0);
  s.set_write_timeout(options.write_timeout_s, 0);
  s.set_keep_alive_timeout(options.keep_alive_timeout_s);
  s.set_payload_max_length(so.limits.max_body_bytes);
  const size_t max_body = so.limits.max_body_bytes;
  // Errors httplib answers itself (a body over the limit, a path no handler takes, a request it
  // cannot read) get OpenAI-shaped bodies; handlers' own errors already have theirs.
  s.set_error_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string body;
    if (res.status == 413) {
      body = ErrorBody(413,
                       "the request body is larger than the server's --max-body of " +
                           std::to_string(max_body) + " bytes",
                       "body_too_large");
    } else if (res.status == 404) {
      body = ErrorBody(404, "no such endpoint: " + text::ToValidUtf8(req.path), "not_found");
    } else {
      body = ErrorBody(res.status, "bad HTTP request", "bad_request");
    }
    res.set_content(body, "application/json");
  });
  Impl* self = impl.get();
  auto handle = [self](const httplib::Request& req, httplib::Response& res) {
    HttpRequest r;
    r.method = req.method;
    r.path = req.path;
    r.authorization = req.get_header_value("Authorization");
    r.body = req.body;
    // Looked up on the first check. Shared: a streamed answer checks it after this handler has
    // returned (httplib runs the content provider while `req` still lives).
    auto fd = std::make_shared<int>(-2);
    r.disconnected = [&req, fd]() {
      if (*fd == -2) *fd = FindConnection(req.remote_addr, req.remote_port, req.local_port);
      return *fd >= 0 && PeerClosed(*fd);
    };
    HttpResponse out = self->service->Handle(r);
    res.status = out.status;
    if (!out.stream) {
      res.set_content(out.body, out.content_type.c_str());
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    // The answer is computed here, on this connection's thread, each event written as the
    // model settles it.
    res.set_chunked_content_provider(
        out.content_type, [produce = std::move(out.produce)](size_t, httplib::DataSink& sink) {
          bool open = true;
          produce([&](const std::string& e) {
            open = open && sink.is_writable() && sink.write(e.data(), e.size());
            return open;
          });
          if (open) sink.done();
          return open;
        });
  };
  for (const char* path : {"/health", "/metrics", "/v1/models", "/models",
                           "/v1/chat/completions", "/chat/completions", "/v1/completions",
                           "/completions"}) {
    s.Get(path, handle);
    s.Post(path, handle);
  }
  if (options.port == 0) {
    impl->port = s.bind_to_any_port(options.host);
  } else if (s.bind_to_port(options.host, options.port)) {
    impl->port = options.port;
  }
  if (impl->port < 0) {
    return IoError("cannot listen on " + options.host + ":" + std::to_string(options.port) +
                   " (in use, or not an address of this machine)");
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

Status HttpServer::Run() {
  if (!impl_->server.listen_after_bind()) return IoError("the HTTP listener failed");
  return OkStatus();
}

void HttpServer::Stop() { impl_->server.stop(); }

}  // namespace fg::serve
