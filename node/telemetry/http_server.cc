#include "node/telemetry/http_server.h"

#ifndef BOOST_ASIO_NO_DEPRECATED
#define BOOST_ASIO_NO_DEPRECATED
#endif

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "node/telemetry/log.h"

namespace consensor::node {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// What every connection needs from the server; shared so a session never points into a
// server object that is being torn down.
struct Shared {
  HttpHandler handler;
  HttpServerOptions options;
};

bool IsHttpParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

bool HasControlChars(std::string_view s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) return true;
  }
  return false;
}

size_t BufferLimit(const HttpServerOptions& opt) {
  const size_t max = std::numeric_limits<size_t>::max();
  const size_t header = std::min(opt.max_header_bytes, max / 4);
  const size_t body = std::min(opt.max_body_bytes, max / 4);
  return header + body + 4096;
}

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using RequestParser = http::request_parser<http::string_body>;

void ConfigureParser(RequestParser& parser, const HttpServerOptions& opt) {
  parser.header_limit(
      static_cast<std::uint32_t>(std::min<size_t>(opt.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
  parser.body_limit(opt.max_body_bytes);
}

std::unique_ptr<Response> ErrorResponse(http::status status, std::string_view text) {
  auto res = std::make_unique<Response>(status, 11);
  res->set(http::field::server, "consensord");
  res->set(http::field::content_type, "text/plain; charset=utf-8");
  res->keep_alive(false);  // the parser is in an unknown state; never read after an error
  res->body() = std::string(text);
  res->prepare_payload();
  return res;
}

// The answer to a read that failed with `ec`; null when there is nobody to answer (the client
// went away or timed out, or the server is shutting down).
std::unique_ptr<Response> ReadErrorResponse(const beast::error_code& ec) {
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return ErrorResponse(http::status::request_header_fields_too_large, "request header too large\n");
  }
  if (ec == http::error::body_limit) return ErrorResponse(http::status::payload_too_large, "request body too large\n");
  if (IsHttpParseError(ec) && ec != http::error::end_of_stream && ec != http::error::partial_message &&
      ec != http::error::short_read) {
    return ErrorResponse(http::status::bad_request, "malformed request\n");
  }
  return nullptr;
}

std::unique_ptr<Response> BuildResponse(const Request& req, const HttpHandler& handler) {
  const bool head = req.method() == http::verb::head;
  auto res = std::make_unique<Response>();
  res->version(req.version() == 10 ? 10 : 11);
  res->set(http::field::server, "consensord");

  int status = 200;
  bool keep_alive = req.keep_alive();
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  const std::string_view target(req.target().data(), req.target().size());
  if (req.method() != http::verb::get && !head) {
    status = 405;
    res->set(http::field::allow, "GET, HEAD");
    body = "method not allowed\n";
  } else if (target.empty() || target[0] != '/') {
    status = 400;
    keep_alive = false;
    body = "request target must be an absolute path\n";
  } else {
    const std::string path(target.substr(0, target.find_first_of("?#")));
    try {
      HttpResponse r = handler(path);
      status = r.status;
      content_type = std::move(r.content_type);
      body = std::move(r.body);
    } catch (const std::exception& e) {
      Log(LogLevel::kError, "http handler threw", {{"path", path}, {"error", e.what()}});
      status = 500;
      body = "internal error\n";
    } catch (...) {
      Log(LogLevel::kError, "http handler threw", {{"path", path}});
      status = 500;
      body = "internal error\n";
    }
    if (status < 200 || status > 599) {
      Log(LogLevel::kError, "http handler returned an invalid status", {{"path", path}, {"status", status}});
      status = 500;
      content_type = "text/plain; charset=utf-8";
      body = "internal error\n";
    }
  }
  // A handler must not be able to inject headers through the content type.
  if (content_type.empty() || HasControlChars(content_type)) content_type = "text/plain; charset=utf-8";

  res->result(static_cast<unsigned>(status));
  res->keep_alive(keep_alive);
  if (status == 204 || status == 304) {
    // No body allowed, and no Content-Length either.
  } else {
    res->set(http::field::content_type, content_type);
    const size_t length = body.size();
    if (head) {
      res->content_length(length);  // what a GET would have sent; no body follows
    } else {
      res->body() = std::move(body);
      res->prepare_payload();
    }
  }
  return res;
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<const Shared> shared)
      : stream_(std::move(socket)),
        shared_(std::move(shared)),
        // Bounded so pipelined bytes cannot grow it without limit; room for chunk framing.
        buffer_(BufferLimit(shared_->options)) {}

  void Start() { DoRead(); }

  // Called on the server thread at shutdown; pending operations complete with an error.
  void Close() {
    closed_ = true;
    stream_.close();
  }

 private:
  void DoRead() {
    if (closed_) return;
    const HttpServerOptions& opt = shared_->options;
    parser_.emplace();
    ConfigureParser(*parser_, opt);
    // The deadline covers the idle wait as well as the request itself, so neither an idle
    // keep-alive client nor a slow sender can hold a connection slot for long.
    stream_.expires_after(opt.read_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (closed_) return;
    if (ec) {
      if (auto res = ReadErrorResponse(ec)) return Write(std::move(res));
      return Shutdown();  // the client went away or timed out, or we are shutting down
    }
    Write(BuildResponse(parser_->release(), shared_->handler));
  }

  void Write(std::unique_ptr<http::response<http::string_body>> res) {
    if (closed_) return;
    res_ = std::move(res);
    stream_.expires_after(shared_->options.read_timeout);  // a client that never reads is dropped too
    http::async_write(stream_, *res_, [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(beast::error_code ec) {
    if (closed_) return;
    const bool close = ec || res_->need_eof();
    res_.reset();
    if (close) return Shutdown();
    DoRead();
  }

  void Shutdown() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
    closed_ = true;
  }

  beast::tcp_stream stream_;
  std::shared_ptr<const Shared> shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::unique_ptr<http::response<http::string_body>> res_;
  bool closed_ = false;
};

class HttpServerImpl final : public HttpServer {
 public:
  explicit HttpServerImpl(std::shared_ptr<const Shared> shared)
      : ioc_(1), acceptor_(ioc_), retry_timer_(ioc_), shared_(std::move(shared)) {}

  ~HttpServerImpl() override { Stop(); }

  Status Listen(const std::string& address) {
    ASSIGN_OR_RETURN(auto host_port, SplitHostPort(address));
    const auto& [host, port] = host_port;
    std::vector<tcp::endpoint> endpoints;
    beast::error_code ec;
    const net::ip::address ip = net::ip::make_address(host, ec);
    if (!ec) {
      endpoints.emplace_back(ip, static_cast<unsigned short>(port));
    } else {
      tcp::resolver resolver(ioc_);
      auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::numeric_service, ec);
      if (ec)
        return InvalidArgument("cannot resolve host '" + host + "' in address '" + address + "': " + ec.message());
      for (const auto& entry : results) endpoints.push_back(entry.endpoint());
      if (endpoints.empty())
        return InvalidArgument("host '" + host + "' in address '" + address + "' has no addresses");
    }

    beast::error_code last;
    for (const tcp::endpoint& ep : endpoints) {
      beast::error_code ignored;
      acceptor_.close(ignored);
      acceptor_.open(ep.protocol(), last);
      if (last) continue;
      // Lets a restarted node rebind while old connections sit in TIME_WAIT; on Linux it does
      // not allow two listeners on one port.
      acceptor_.set_option(net::socket_base::reuse_address(true), ignored);
      acceptor_.bind(ep, last);
      if (last) continue;
      acceptor_.listen(net::socket_base::max_listen_connections, last);
      if (last) continue;
      const tcp::endpoint local = acceptor_.local_endpoint(last);
      if (last) continue;
      port_ = local.port();
      return OkStatus();
    }
    beast::error_code ignored;
    acceptor_.close(ignored);
    const std::string what = "cannot listen on " + address + ": " + last.message();
    if (last == net::error::address_in_use) {
      return FailedPrecondition(what + " (is another process using the port?)");
    }
    if (last == net::error::access_denied) return PermissionDenied(what);
    return Unavailable(what);
  }

  void Run() {
    DoAccept();
    thread_ = std::thread([this] { ThreadMain(); });
  }

  int port() const override { return port_; }

  void Stop() override {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (!stop_requested_) {
      stop_requested_ = true;
      net::post(ioc_, [this] { ShutdownOnServerThread(); });
    }
    // Stop from inside a handler cannot join its own thread; the posted shutdown still runs.
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

 private:
  void ThreadMain() {
    for (;;) {
      try {
        ioc_.run();
        return;  // no more work: the acceptor and every connection are closed
      } catch (const std::exception& e) {
        Log(LogLevel::kError, "http server: unexpected exception", {{"error", e.what()}});
      } catch (...) {
        Log(LogLevel::kError, "http server: unexpected exception");
      }
    }
  }

  void DoAccept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) { OnAccept(ec, std::move(socket)); });
  }

  void OnAccept(beast::error_code ec, tcp::socket socket) {
    if (stopping_) {
      beast::error_code ignored;
      socket.close(ignored);
      return;
    }
    if (ec) {
      if (ec == net::error::operation_aborted) return;
      // E.g. out of file descriptors: back off instead of spinning on the failing accept.
      Log(LogLevel::kWarn, "http server: accept failed", {{"error", ec.message()}});
      retry_timer_.expires_after(std::chrono::milliseconds(100));
      retry_timer_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec && !stopping_) DoAccept();
      });
      return;
    }
    std::erase_if(sessions_, [](const std::weak_ptr<Session>& s) { return s.expired(); });
    if (sessions_.size() >= static_cast<size_t>(shared_->options.max_connections)) {
      beast::error_code ignored;
      socket.close(ignored);  // over the cap: refuse at once rather than queue
    } else {
      auto session = std::make_shared<Session>(std::move(socket), shared_);
      sessions_.push_back(session);
      session->Start();
    }
    DoAccept();
  }

  void ShutdownOnServerThread() {
    stopping_ = true;
    beast::error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
    for (auto& weak : sessions_) {
      if (auto session = weak.lock()) session->Close();
    }
    sessions_.clear();
  }

  net::io_context ioc_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_timer_;
  std::shared_ptr<const Shared> shared_;
  std::vector<std::weak_ptr<Session>> sessions_;  // server thread only
  bool stopping_ = false;                         // server thread only
  int port_ = 0;
  std::mutex stop_mu_;
  bool stop_requested_ = false;
  std::thread thread_;
};

Status InvalidAddress(const std::string& address, const std::string& why) {
  return InvalidArgument("invalid address '" + address + "': " + why);
}

}  // namespace

StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address) {
  if (address.empty()) return InvalidArgument("empty address (expected host:port, e.g. 127.0.0.1:9100)");
  std::string host;
  std::string port_text;
  if (address[0] == '[') {
    const size_t close = address.find(']');
    if (close == std::string::npos) return InvalidAddress(address, "missing ']' after IPv6 host");
    host = address.substr(1, close - 1);
    if (close + 1 >= address.size() || address[close + 1] != ':') {
      return InvalidAddress(address, "missing port (expected [host]:port)");
    }
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) return InvalidAddress(address, "missing port (expected host:port)");
    host = address.substr(0, colon);
    if (host.find(':') != std::string::npos) {
      return InvalidAddress(address, "IPv6 hosts must be in brackets, e.g. [::1]:9100");
    }
    port_text = address.substr(colon + 1);
  }
  if (host.empty()) return InvalidAddress(address, "missing host (use 0.0.0.0 to listen on every interface)");
  for (char ch : host) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7F || ch == '/' || ch == '[' || ch == ']') {
      return InvalidAddress(address, "host contains invalid characters");
    }
  }
  if (port_text.empty() || port_text.size() > 5) {
    return InvalidAddress(address, "port must be a number from 0 to 65535");
  }
  int port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9') return InvalidAddress(address, "port must be a number from 0 to 65535");
    port = port * 10 + (c - '0');
  }
  if (port > 65535) return InvalidAddress(address, "port must be a number from 0 to 65535");
  return std::make_pair(std::move(host), port);
}

std::string AnswerHttpRequest(std::string_view bytes, const HttpHandler& handler, const HttpServerOptions& options) {
  RequestParser parser;
  ConfigureParser(parser, options);
  parser.eager(true);
  beast::error_code ec;
  std::string_view rest = bytes;
  while (!parser.is_done() && !rest.empty()) {
    const size_t used = parser.put(net::buffer(rest.data(), rest.size()), ec);
    rest.remove_prefix(used);
    if (ec == http::error::need_more) {
      // Needs bytes that never come. Offering the unconsumed rest again without new bytes breaks
      // beast's contract (a chunk header then trips its assertions); the server's reads only
      // call again with more.
      ec = {};
      break;
    } else if (ec) {
      break;
    }
  }
  if (!ec && !parser.is_done()) {
    if (!parser.got_some()) return {};  // closed before a request started: end_of_stream
    parser.put_eof(ec);                 // closed mid-request
  }
  std::unique_ptr<Response> res = ec ? ReadErrorResponse(ec) : BuildResponse(parser.release(), handler);
  if (!res) return {};
  std::ostringstream out;
  out << *res;
  return out.str();
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address, HttpHandler handler) {
  return Start(address, std::move(handler), HttpServerOptions{});
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address, HttpHandler handler,
                                                        const HttpServerOptions& options) {
  if (!handler) return InvalidArgument("http server: no handler");
  if (options.read_timeout.count() <= 0 || options.max_connections < 1 || options.max_header_bytes < 64) {
    return InvalidArgument("http server: read_timeout, max_connections and max_header_bytes must be positive");
  }
  try {
    auto shared = std::make_shared<Shared>();
    shared->handler = std::move(handler);
    shared->options = options;
    auto server = std::make_unique<HttpServerImpl>(std::move(shared));
    RETURN_IF_ERROR(server->Listen(address));
    server->Run();
    return std::unique_ptr<HttpServer>(std::move(server));
  } catch (const std::exception& e) {
    return Internal("http server on " + address + ": " + e.what());
  }
}

}  // namespace consensor::node
