// A small HTTP/1.1 server (Boost.Beast) for /metrics and the EigenLayer node API.
// GET and HEAD only; anything else gets 405. It is hardened for hostile clients: request header
// size and body size are capped, each connection has a read deadline, and the number of open
// connections is bounded, so a slow or malicious client cannot exhaust memory or threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace consensor::node {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Limits for hostile clients. The defaults suit /metrics and the node API; tests shorten them.
struct HttpServerOptions {
  std::chrono::milliseconds read_timeout{10000};  // per request, from the first byte awaited to the last
  size_t max_header_bytes = 8 * 1024;             // request line + headers; beyond: 431
  size_t max_body_bytes = 64 * 1024;              // beyond: 413 (GET and HEAD carry none anyway)
  int max_connections = 64;                       // beyond: new connections are closed at once
};

// Called for every GET/HEAD with the path (query string stripped). Must be thread-safe.
using HttpHandler = std::function<HttpResponse(const std::string& path)>;

class HttpServer {
 public:
  // Binds to `address` ("127.0.0.1:9100", "[::1]:9100", or port 0 for any free port) and
  // serves on its own thread until Stop() or destruction.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address, HttpHandler handler);
  static StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address, HttpHandler handler,
                                                     const HttpServerOptions& options);
  virtual ~HttpServer() = default;
  virtual int port() const = 0;  // the bound port
  // Idempotent; returns when the serving thread has exited. Call it (and destroy the server)
  // from outside the handler: the serving thread cannot wait for itself.
  virtual void Stop() = 0;
};

// What the server answers on a fresh connection that receives `bytes` and then is closed by the
// client: the serialized response to the first request, or empty when the server would close
// without answering (an incomplete request). The same parser limits and response rules as a
// live connection; for tests and the fuzz target, which need no socket.
std::string AnswerHttpRequest(std::string_view bytes, const HttpHandler& handler, const HttpServerOptions& options);

// Splits "host:port" / "[v6]:port"; INVALID_ARGUMENT with a clear message otherwise.
StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address);

}  // namespace consensor::node
