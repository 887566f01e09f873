#include "node/chain/eth_rpc.h"

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <map>
#include <mutex>
#include <thread>

#include "node/chain/rpc_tls.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;

bool IsHexDigit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

int HexValue(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

// "host", "host:port", "[v6]" or "[v6]:port" with a plain host name or IP literal and, when
// present, a port 1..65535. The brackets are removed from *host; *port is empty without one.
bool SplitHostPort(const std::string& hostport, std::string* host, std::string* port) {
  std::string h, p;
  bool has_port = false;
  if (!hostport.empty() && hostport.front() == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string::npos) return false;
    h = hostport.substr(1, close - 1);
    if (h.empty() || !std::all_of(h.begin(), h.end(), [](char c) { return IsHexDigit(c) || c == ':' || c == '.'; })) {
      return false;
    }
    const std::string after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      has_port = true;
      p = after.substr(1);
    }
  } else {
    const size_t colon = hostport.find(':');
    h = hostport.substr(0, colon);
    if (colon != std::string::npos) {
      has_port = true;
      p = hostport.substr(colon + 1);
    }
    if (h.empty() || !std::all_of(h.begin(), h.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
        })) {
      return false;
    }
  }
  if (has_port) {
    if (p.empty() || p.size() > 5 ||
        !std::all_of(p.begin(), p.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      return false;
    }
    const int n = std::stoi(p);
    if (n < 1 || n > 65535) return false;
  }
  *host = std::move(h);
  *port = std::move(p);
  return true;
}

// %XX escapes decoded; false for a malformed escape.
bool PercentDecode(const std::string& in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size() || !IsHexDigit(in[i + 1]) || !IsHexDigit(in[i + 2])) return false;
    out->push_back(static_cast<char>(HexValue(in[i + 1]) << 4 | HexValue(in[i + 2])));
    i += 2;
  }
  return true;
}

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

// Runs one asynchronous operation to completion. The stream's deadline (expires_after) bounds
// asynchronous operations only, so every network step goes through here.
template <typename Initiate>
beast::error_code Await(net::io_context& io, Initiate&& initiate) {
  beast::error_code result = net::error::operation_aborted;
  initiate([&result](beast::error_code ec, auto&&...) { result = ec; });
  io.restart();
  io.run();
  return result;
}

class HttpTransport final : public JsonRpcTransport {
 public:
  HttpTransport(RpcUrl url, std::string shown, std::unique_ptr<ssl::context> tls, HttpRpcOptions options)
      : url_(std::move(url)), shown_(std::move(shown)), tls_(std::move(tls)), options_(std::move(options)) {
    if (url_.has_userinfo) authorization_ = RpcBasicAuthorization(url_.username, url_.password);
  }

  StatusOr<nlohmann::json> Call(const std::string& method, const nlohmann::json& params,
                                std::string* error_data) override {
    nlohmann::json request = {{"jsonrpc", "2.0"}, {"id", ++next_id_}, {"method", method}, {"params", params}};
    ASSIGN_OR_RETURN(std::string body, Post(request.dump()));
    nlohmann::json response = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (response.is_discarded() || !response.is_object()) {
      return Unavailable(method + ": the RPC at " + shown_ + " answered with something that is not JSON-RPC");
    }
    if (auto err = response.find("error"); err != response.end() && !err->is_null()) {
      std::string message = err->is_object() && err->contains("message") && (*err)["message"].is_string()
                                ? (*err)["message"].get<std::string>()
                                : err->dump();
      if (error_data && err->is_object() && err->contains("data") && (*err)["data"].is_string()) {
        *error_data = (*err)["data"].get<std::string>();
      }
      return FailedPrecondition(method + ": " + message);
    }
    auto result = response.find("result");
    if (result == response.end()) return Unavailable(method + ": the RPC at " + shown_ + " answered without a result");
    return *result;
  }

 private:
  // One kept-alive plain connection (reuse_connection): its io_context lives as long as it does.
  struct KeptConnection {
    net::io_context io;
    beast::tcp_stream stream{io};
  };

  StatusOr<std::string> Post(const std::string& payload) {
    if (!tls_ && options_.reuse_connection) return PostReusing(payload);
    try {
      net::io_context io;
      net::ip::tcp::resolver resolver(io);
      beast::error_code ec;
      auto endpoints = resolver.resolve(url_.host, url_.port, ec);
      if (ec) return Unavailable("cannot resolve the RPC host of " + shown_ + ": " + ec.message());
      if (!tls_) {
        beast::tcp_stream stream(io);
        stream.expires_after(options_.timeout);
        RETURN_IF_ERROR(Connect(io, stream, endpoints));
        auto body = Exchange(io, stream, payload);
        stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
        return body;
      }
      beast::ssl_stream<beast::tcp_stream> stream(io, *tls_);
      beast::get_lowest_layer(stream).expires_after(options_.timeout);
      RETURN_IF_ERROR(VerifyPeerName(stream.native_handle()));
      RETURN_IF_ERROR(Connect(io, beast::get_lowest_layer(stream), endpoints));
      ec = Await(io, [&](auto handler) { stream.async_handshake(ssl::stream_base::client, std::move(handler)); });
      if (ec) return HandshakeError(stream.native_handle(), ec);
      auto body = Exchange(io, stream, payload);
      // No TLS close_notify exchange: the response was framed by its length, so a truncation
      // cannot pass unnoticed, and waiting for the server's close_notify would only add delay.
      beast::get_lowest_layer(stream).socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
      return body;
    } catch (const std::exception& e) {
      return Unavailable("RPC at " + shown_ + ": " + e.what());
    }
  }

  // The kept connection when there is one, else a new one; after a clean answer that allows it,
  // the connection is kept for the next call (one is kept; concurrent calls open their own).
  StatusOr<std::string> PostReusing(const std::string& payload) {
    try {
      std::unique_ptr<KeptConnection> connection;
      {
        std::lock_guard<std::mutex> lock(kept_mu_);
        connection = std::move(kept_);
      }
      if (connection) {
        ExchangeOutcome outcome;
        connection->stream.expires_after(options_.timeout);
        auto body = Exchange(connection->io, connection->stream, payload, &outcome);
        if (body.ok() || outcome.answer_started) {
          if (body.ok() && outcome.keep_alive) Keep(std::move(connection));
          return body;
        }
        // Closed by the server while kept (an idle timeout, a restart): nothing was answered,
        // so the call goes once more on a new connection.
      }
      connection = std::make_unique<KeptConnection>();
      beast::error_code ec;
      net::ip::tcp::resolver resolver(connection->io);
      auto endpoints = resolver.resolve(url_.host, url_.port, ec);
      if (ec) return Unavailable("cannot resolve the RPC host of " + shown_ + ": " + ec.message());
      connection->stream.expires_after(options_.timeout);
      RETURN_IF_ERROR(Connect(connection->io, connection->stream, endpoints));
      ExchangeOutcome outcome;
      auto body = Exchange(connection->io, connection->stream, payload, &outcome);
      if (body.ok() && outcome.keep_alive) Keep(std::move(connection));
      return body;
    } catch (const std::exception& e) {
      return Unavailable("RPC at " + shown_ + ": " + e.what());
    }
  }

  void Keep(std::unique_ptr<KeptConnection> connection) {
    std::lock_guard<std::mutex> lock(kept_mu_);
    if (!kept_) kept_ = std::move(connection);
  }

  Status Connect(net::io_context& io, beast::tcp_stream& stream, const net::ip::tcp::resolver::results_type& to) {
    beast::error_code ec = Await(io, [&](auto handler) { stream.async_connect(to, std::move(handler)); });
    if (ec == beast::error::timeout) return DeadlineExceeded("connecting to the RPC at " + shown_ + " timed out");
    if (ec) return Unavailable("cannot reach the RPC at " + shown_ + ": " + ec.message());
    return OkStatus();
  }

  Status VerifyPeerName(SSL* ssl) { return SetRpcTlsPeerName(ssl, url_.host, shown_); }

  Status HandshakeError(SSL* ssl, const beast::error_code& ec) {
    return RpcTlsHandshakeError(ssl, ec, shown_, options_.ca_file);
  }

  struct ExchangeOutcome {
    bool answer_started = false;  // some byte of a response arrived
    bool keep_alive = false;      // the answer was complete and lets the connection stay open
  };

  template <typename Stream>
  StatusOr<std::string> Exchange(net::io_context& io, Stream& stream, const std::string& payload,
                                 ExchangeOutcome* outcome = nullptr) {
    http::request<http::string_body> req{http::verb::post, url_.target, 11};
    const bool default_port = url_.port == (url_.tls ? "443" : "80");
    const std::string host = url_.host.find(':') != std::string::npos ? "[" + url_.host + "]" : url_.host;
    req.set(http::field::host, default_port ? host : host + ":" + url_.port);
    req.set(http::field::content_type, "application/json");
    if (!authorization_.empty()) req.set(http::field::authorization, authorization_);
    req.body() = payload;
    req.prepare_payload();
    beast::error_code ec = Await(io, [&](auto handler) { http::async_write(stream, req, std::move(handler)); });
    if (ec == beast::error::timeout) return DeadlineExceeded("sending to the RPC at " + shown_ + " timed out");
    if (ec) return Unavailable("sending to the RPC at " + shown_ + ": " + ec.message());
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(static_cast<uint64_t>(options_.max_response_bytes));
    ec = Await(io, [&](auto handler) { http::async_read(stream, buffer, parser, std::move(handler)); });
    if (outcome) outcome->answer_started = parser.got_some() || buffer.size() > 0 || ec == beast::error::timeout;
    if (ec == beast::error::timeout) return DeadlineExceeded("the RPC at " + shown_ + " did not answer in time");
    if (ec) return Unavailable("reading from the RPC at " + shown_ + ": " + ec.message());
    auto& res = parser.get();
    // Bytes past the answer would be read as the next call's: such a connection is not kept.
    if (outcome) outcome->keep_alive = res.keep_alive() && buffer.size() == 0;
    if (res.result_int() != 200) {
      return Unavailable("the RPC at " + shown_ + " answered HTTP " + std::to_string(res.result_int()));
    }
    return std::move(res.body());
  }

  const RpcUrl url_;
  const std::string shown_;                  // RedactRpcUrl of the URL: the only form that goes into messages
  const std::unique_ptr<ssl::context> tls_;  // https only; shared by the calls' connections
  const HttpRpcOptions options_;
  std::string authorization_;
  std::atomic<int64_t> next_id_{0};
  std::mutex kept_mu_;
  std::unique_ptr<KeptConnection> kept_;  // reuse_connection: the idle connection, if any
};

}  // namespace

std::string RedactRpcUrl(const std::string& url) {
  const size_t sep = url.find("://");
  if (sep == std::string::npos) return "***";
  const std::string scheme = url.substr(0, sep);
  if (scheme.empty() || scheme.size() > 16 || !std::all_of(scheme.begin(), scheme.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '.' || c == '-';
      })) {
    return "***";
  }
  std::string rest = url.substr(sep + 3);
  // User info ends at the last '@' before any query or fragment. A '/' before that '@' (a
  // password with an unescaped slash, or an '@' in the path) makes the host ambiguous: hide it.
  const size_t query = rest.find_first_of("?#");
  const size_t at = rest.rfind('@', query == std::string::npos ? std::string::npos : query);
  const bool userinfo = at != std::string::npos;
  if (userinfo) {
    if (rest.substr(0, at).find('/') != std::string::npos) return scheme + "://***";
    rest = rest.substr(at + 1);
  }
  const size_t end = rest.find_first_of("/?#");
  const std::string hostport = rest.substr(0, end);
  const std::string tail = end == std::string::npos ? "" : rest.substr(end);
  std::string host, port;
  if (!SplitHostPort(hostport, &host, &port)) return scheme + "://***";
  std::string out = scheme + "://" + (userinfo ? "***@" : "") + hostport;
  if (!tail.empty() && tail != "/") out += "/***";
  return out;
}

namespace {

// `plain` and `secure` are the accepted schemes (http/https or ws/wss).
StatusOr<RpcUrl> ParseUrlWithSchemes(const std::string& url, const std::string& plain, const std::string& secure) {
  const std::string shown = RedactRpcUrl(url);
  const size_t sep = url.find("://");
  std::string scheme = sep == std::string::npos ? "" : url.substr(0, sep);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (scheme != plain && scheme != secure) {
    return InvalidArgument("RPC URL must start with " + plain + ":// or " + secure + "://, got '" + shown + "'");
  }
  // Spaces or control characters would end up in the request line.
  if (std::any_of(url.begin(), url.end(), [](unsigned char c) { return c <= 0x20 || c == 0x7f; })) {
    return InvalidArgument("RPC URL '" + shown + "' contains spaces or control characters");
  }
  RpcUrl out;
  out.tls = scheme == secure;
  std::string rest = url.substr(sep + 3);
  const size_t end = rest.find_first_of("/?#");
  std::string authority = rest.substr(0, end);
  std::string target = end == std::string::npos ? "" : rest.substr(end);
  if (const size_t at = authority.rfind('@'); at != std::string::npos) {
    const std::string userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const size_t colon = userinfo.find(':');
    if (!PercentDecode(userinfo.substr(0, colon), &out.username) ||
        (colon != std::string::npos && !PercentDecode(userinfo.substr(colon + 1), &out.password))) {
      return InvalidArgument("RPC URL '" + shown + "' has a malformed %-escape in its user info");
    }
    out.has_userinfo = true;
  }
  if (!SplitHostPort(authority, &out.host, &out.port)) {
    return InvalidArgument("RPC URL '" + shown + "' needs a host and a port between 1 and 65535");
  }
  if (out.port.empty()) out.port = out.tls ? "443" : "80";
  target = target.substr(0, target.find('#'));
  if (target.empty() || target.front() != '/') target = "/" + target;
  out.target = std::move(target);
  return out;
}

}  // namespace

StatusOr<RpcUrl> ParseRpcUrl(const std::string& url) { return ParseUrlWithSchemes(url, "http", "https"); }

StatusOr<RpcUrl> ParseWsRpcUrl(const std::string& url) { return ParseUrlWithSchemes(url, "ws", "wss"); }

std::string RpcBasicAuthorization(const std::string& username, const std::string& password) {
  return "Basic " + Base64(username + ":" + password);
}

StatusOr<std::unique_ptr<ssl::context>> NewRpcTlsContext(const std::string& ca_file) {
  std::unique_ptr<ssl::context> tls;
  try {
    tls = std::make_unique<ssl::context>(ssl::context::tls_client);
  } catch (const std::exception& e) {
    return Internal(std::string("cannot create a TLS context: ") + e.what());
  }
  SSL_CTX_set_min_proto_version(tls->native_handle(), TLS1_2_VERSION);
  beast::error_code ec;
  tls->set_verify_mode(ssl::verify_peer, ec);
  if (!ec) {
    if (ca_file.empty()) {
      tls->set_default_verify_paths(ec);
    } else {
      tls->load_verify_file(ca_file, ec);
      if (ec) return InvalidArgument("cannot load the RPC CA file '" + ca_file + "': " + ec.message());
    }
  }
  if (ec) return Internal("cannot set up TLS certificate verification: " + ec.message());
  return tls;
}

Status SetRpcTlsPeerName(SSL* ssl, const std::string& host, const std::string& shown) {
  beast::error_code not_ip;
  net::ip::make_address(host, not_ip);
  bool ok;
  if (not_ip) {
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    ok = SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 && SSL_set1_host(ssl, host.c_str()) == 1;
  } else {
    ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  }
  if (!ok) return Internal("cannot set up TLS host verification for the RPC at " + shown);
  return OkStatus();
}

Status RpcTlsHandshakeError(SSL* ssl, const boost::system::error_code& ec, const std::string& shown,
                            const std::string& ca_file) {
  if (ec == beast::error::timeout) return DeadlineExceeded("the TLS handshake with the RPC at " + shown + " timed out");
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    std::string hint = ca_file.empty() ? " (checked against the system's CA store; for a private CA or a self-signed "
                                         "certificate give its CA with --rpc-ca-file or chain.rpc_ca_file)"
                                       : " (checked against the CA file " + ca_file + ")";
    return FailedPrecondition("the TLS certificate of the RPC at " + shown +
                              " does not verify: " + X509_verify_cert_error_string(verify) + hint);
  }
  return Unavailable("the TLS handshake with the RPC at " + shown + " failed: " + ec.message());
}

StatusOr<std::unique_ptr<JsonRpcTransport>> NewHttpRpcTransport(const std::string& url, HttpRpcOptions options) {
  ASSIGN_OR_RETURN(RpcUrl parsed, ParseRpcUrl(url));
  std::unique_ptr<ssl::context> tls;
  if (parsed.tls) {
    ASSIGN_OR_RETURN(tls, NewRpcTlsContext(options.ca_file));
  }
  std::string shown = RedactRpcUrl(url);
  return std::unique_ptr<JsonRpcTransport>(
      new HttpTransport(std::move(parsed), std::move(shown), std::move(tls), std::move(options)));
}

namespace {

class MeteredTransport final : public JsonRpcTransport {
 public:
  MeteredTransport(std::unique_ptr<JsonRpcTransport> inner, MetricsRegistry* metrics, std::string client)
      : inner_(std::move(inner)), metrics_(metrics), client_(std::move(client)) {
    seconds_ = metrics_->AddHistogram("consensor_chain_rpc_seconds", "Duration of the node's chain JSON-RPC calls.",
                                      {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}, {{"client", client_}});
  }

  StatusOr<nlohmann::json> Call(const std::string& method, const nlohmann::json& params,
                                std::string* error_data) override {
    const auto [requests, errors] = CountersFor(method);
    requests->Increment();
    const auto start = std::chrono::steady_clock::now();
    StatusOr<nlohmann::json> result = inner_->Call(method, params, error_data);
    seconds_->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!result.ok()) errors->Increment();
    return result;
  }

 private:
  std::pair<Counter*, Counter*> CountersFor(const std::string& method) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_method_.find(method);
    if (it == by_method_.end()) {
      const MetricsRegistry::Labels labels = {{"client", client_}, {"method", method}};
      Counter* requests = metrics_->AddCounter("consensor_chain_rpc_requests_total",
                                               "JSON-RPC calls the node made to its chain endpoint.", labels);
      Counter* errors = metrics_->AddCounter(
          "consensor_chain_rpc_errors_total",
          "JSON-RPC calls to the chain endpoint that failed (transport, HTTP or JSON-RPC error).", labels);
      it = by_method_.emplace(method, std::make_pair(requests, errors)).first;
    }
    return it->second;
  }

  std::unique_ptr<JsonRpcTransport> inner_;
  MetricsRegistry* metrics_;
  const std::string client_;
  Histogram* seconds_ = nullptr;
  std::mutex mu_;
  std::map<std::string, std::pair<Counter*, Counter*>> by_method_;
};

}  // namespace

std::unique_ptr<JsonRpcTransport> NewMeteredRpcTransport(std::unique_ptr<JsonRpcTransport> inner,
                                                         MetricsRegistry* metrics, std::string client) {
  if (metrics == nullptr) return inner;
  return std::make_unique<MeteredTransport>(std::move(inner), metrics, std::move(client));
}

std::string QuantityHex(uint64_t v) {
  char buf[32];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v, 16);
  return "0x" + std::string(buf, ptr);
}

StatusOr<uint64_t> ParseQuantity(const nlohmann::json& v, const std::string& what) {
  if (!v.is_string()) return InvalidArgument(what + ": expected a hex quantity string");
  const std::string s = v.get<std::string>();
  if (s.size() < 3 || s.size() > 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) {
    return InvalidArgument(what + ": '" + s.substr(0, 40) + "' is not a 64-bit hex quantity");
  }
  uint64_t out = 0;
  for (size_t i = 2; i < s.size(); ++i) {
    if (!IsHexDigit(s[i])) return InvalidArgument(what + ": '" + s.substr(0, 40) + "' is not a hex quantity");
    out = (out << 4) | static_cast<uint64_t>(HexValue(s[i]));
  }
  return out;
}

std::string DataHex(const std::vector<uint8_t>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "0x";
  out.reserve(2 + bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

StatusOr<std::vector<uint8_t>> ParseData(const nlohmann::json& v, const std::string& what) {
  if (!v.is_string()) return InvalidArgument(what + ": expected a hex data string");
  const std::string s = v.get<std::string>();
  if (s.size() < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || s.size() % 2 != 0) {
    return InvalidArgument(what + ": not 0x-prefixed hex data of whole bytes");
  }
  std::vector<uint8_t> out;
  out.reserve((s.size() - 2) / 2);
  for (size_t i = 2; i < s.size(); i += 2) {
    if (!IsHexDigit(s[i]) || !IsHexDigit(s[i + 1])) return InvalidArgument(what + ": invalid hex digit");
    out.push_back(static_cast<uint8_t>(HexValue(s[i]) << 4 | HexValue(s[i + 1])));
  }
  return out;
}

StatusOr<uint64_t> EthRpc::ChainId() {
  ASSIGN_OR_RETURN(auto v, transport_->Call("eth_chainId", nlohmann::json::array()));
  return ParseQuantity(v, "eth_chainId");
}

StatusOr<uint64_t> EthRpc::BlockNumber() {
  ASSIGN_OR_RETURN(auto v, transport_->Call("eth_blockNumber", nlohmann::json::array()));
  return ParseQuantity(v, "eth_blockNumber");
}

StatusOr<Hash256> EthRpc::BlockHash(uint64_t number) {
  ASSIGN_OR_RETURN(BlockHeader header, Block(number));
  return header.hash;
}

StatusOr<EthRpc::BlockHeader> EthRpc::Block(uint64_t number) {
  ASSIGN_OR_RETURN(auto v,
                   transport_->Call("eth_getBlockByNumber", nlohmann::json::array({QuantityHex(number), false})));
  if (v.is_null()) return NotFound("block " + std::to_string(number) + " is not mined yet");
  if (!v.is_object() || !v.contains("hash")) return InvalidArgument("eth_getBlockByNumber: expected a block object");
  if (auto n = v.find("number"); n != v.end()) {
    ASSIGN_OR_RETURN(uint64_t got, ParseQuantity(*n, "block number"));
    if (got != number) {
      return InvalidArgument("eth_getBlockByNumber(" + std::to_string(number) + ") answered block " +
                             std::to_string(got));
    }
  }
  ASSIGN_OR_RETURN(auto bytes, ParseData(v["hash"], "block hash"));
  if (bytes.size() != 32) return InvalidArgument("eth_getBlockByNumber: a block hash is 32 bytes");
  BlockHeader header;
  std::copy(bytes.begin(), bytes.end(), header.hash.begin());
  if (!v.contains("timestamp")) return InvalidArgument("eth_getBlockByNumber: a block has a timestamp");
  ASSIGN_OR_RETURN(header.timestamp, ParseQuantity(v["timestamp"], "block timestamp"));
  return header;
}

StatusOr<std::string> EthRpc::GetBalanceHex(const std::string& address_hex) {
  ASSIGN_OR_RETURN(auto v, transport_->Call("eth_getBalance", nlohmann::json::array({address_hex, "latest"})));
  if (!v.is_string()) return InvalidArgument("eth_getBalance: expected a hex quantity");
  return v.get<std::string>();
}

StatusOr<uint64_t> EthRpc::GetTransactionCount(const std::string& address_hex, const std::string& block) {
  ASSIGN_OR_RETURN(auto v, transport_->Call("eth_getTransactionCount", nlohmann::json::array({address_hex, block})));
  return ParseQuantity(v, "eth_getTransactionCount");
}

StatusOr<std::vector<uint8_t>> EthRpc::Call(const std::string& to_hex, const std::vector<uint8_t>& data,
                                            const std::string& block, std::string* revert_data) {
  nlohmann::json call = {{"to", to_hex}, {"data", DataHex(data)}};
  ASSIGN_OR_RETURN(auto v, transport_->Call("eth_call", nlohmann::json::array({call, block}), revert_data));
  return ParseData(v, "eth_call");
}

StatusOr<uint64_t> EthRpc::EstimateGas(const std::string& from_hex, const std::string& to_hex,
                                       const std::vector<uint8_t>& data, const std::string& value_hex,
                                       std::string* revert_data) {
  nlohmann::json call = {{"from", from_hex}, {"to", to_hex}, {"data", DataHex(data)}, {"value", value_hex}};
  ASSIGN_OR_RETURN(auto v, transport_->Call("eth_estimateGas", nlohmann::json::array({call}), revert_data));
  return ParseQuantity(v, "eth_estimateGas");
}

StatusOr<EthRpc::Fees> EthRpc::SuggestFees() {
  Fees fees;
  ASSIGN_OR_RETURN(auto block, transport_->Call("eth_getBlockByNumber", nlohmann::json::array({"latest", false})));
  if (!block.is_object() || !block.contains("baseFeePerGas")) {
    return FailedPrecondition("the chain has no EIP-1559 base fee (pre-London?)");
  }
  ASSIGN_OR_RETURN(fees.base_fee_per_gas, ParseQuantity(block["baseFeePerGas"], "baseFeePerGas"));
  auto tip = transport_->Call("eth_maxPriorityFeePerGas", nlohmann::json::array());
  if (tip.ok()) {
    ASSIGN_OR_RETURN(fees.max_priority_fee_per_gas, ParseQuantity(*tip, "eth_maxPriorityFeePerGas"));
  } else {
    fees.max_priority_fee_per_gas = 1000000000;  // 1 gwei when the node cannot suggest one
  }
  return fees;
}

StatusOr<std::string> EthRpc::SendRawTransaction(const std::vector<uint8_t>& raw) {
  ASSIGN_OR_RETURN(auto v, transport_->Call("eth_sendRawTransaction", nlohmann::json::array({DataHex(raw)})));
  if (!v.is_string()) return InvalidArgument("eth_sendRawTransaction: expected a transaction hash");
  return v.get<std::string>();
}

StatusOr<std::optional<nlohmann::json>> EthRpc::GetTransactionReceipt(const std::string& tx_hash) {
  ASSIGN_OR_RETURN(auto v, transport_->Call("eth_getTransactionReceipt", nlohmann::json::array({tx_hash})));
  if (v.is_null()) return std::optional<nlohmann::json>();
  if (!v.is_object()) return InvalidArgument("eth_getTransactionReceipt: expected an object");
  return std::optional<nlohmann::json>(std::move(v));
}

StatusOr<nlohmann::json> EthRpc::WaitForReceipt(const std::string& tx_hash, std::chrono::milliseconds timeout,
                                                std::chrono::milliseconds poll) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    ASSIGN_OR_RETURN(auto receipt, GetTransactionReceipt(tx_hash));
    if (receipt) return std::move(*receipt);
    if (std::chrono::steady_clock::now() >= until) {
      return DeadlineExceeded("transaction " + tx_hash + " has no receipt after " + std::to_string(timeout.count()) +
                              " ms");
    }
    std::this_thread::sleep_for(poll);
  }
}

StatusOr<nlohmann::json> EthRpc::GetLogs(const nlohmann::json& filter) {
  ASSIGN_OR_RETURN(auto v, transport_->Call("eth_getLogs", nlohmann::json::array({filter})));
  if (!v.is_array()) return InvalidArgument("eth_getLogs: expected an array");
  return v;
}

}  // namespace consensor::node
