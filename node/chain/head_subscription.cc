#include "node/chain/head_subscription.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "node/chain/eth_rpc.h"
#include "node/chain/rpc_tls.h"
#include "node/telemetry/log.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

namespace {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

// How often a blocked step looks at the stop flag.
constexpr auto kStopCheck = std::chrono::milliseconds(100);

// Runs one asynchronous operation to completion on this thread, unless the subscription is
// asked to stop first: then the socket is cancelled and the result is operation_aborted. The
// handler stops the io_context, so a timer that beast keeps armed (the idle ping) does not hold
// the caller until it fires.
template <typename Lowest, typename Initiate>
beast::error_code AwaitOrStop(net::io_context& io, Lowest& lowest, const std::atomic<bool>& stopping,
                              Initiate&& initiate) {
  bool done = false;
  beast::error_code result = net::error::operation_aborted;
  initiate([&](beast::error_code ec, auto&&...) {
    result = ec;
    done = true;
    io.stop();
  });
  while (!done) {
    if (stopping.load()) {
      lowest.cancel();
      io.restart();
      io.run_for(std::chrono::seconds(1));  // lets the cancelled operation finish
      return done ? result : beast::error_code(net::error::operation_aborted);
    }
    io.restart();
    io.run_for(kStopCheck);
  }
  return result;
}

// What a session needs from its HeadSubscription.
struct SessionContext {
  const HeadSubscriptionOptions& options;
  const RpcUrl& url;
  const std::string& shown;
  const std::string& authorization;
  const std::atomic<bool>& stopping;
  std::function<void()> on_subscribed;
  std::function<void(uint64_t)> on_head;
};

Status StepError(const std::string& step, const SessionContext& c, const beast::error_code& ec) {
  if (ec == beast::error::timeout) return DeadlineExceeded(step + " the RPC at " + c.shown + " timed out");
  return Unavailable(step + " the RPC at " + c.shown + ": " + ec.message());
}

// The WebSocket handshake, the eth_subscribe request and the notifications, until the
// connection fails or the subscription is asked to stop (OK).
template <typename Ws>
Status Subscribe(net::io_context& io, Ws& ws, const SessionContext& c) {
  auto& lowest = beast::get_lowest_layer(ws);
  lowest.expires_never();  // the WebSocket timeouts below take over from the connect deadline
  ws.set_option(websocket::stream_base::timeout{c.options.connect_timeout, c.options.idle_timeout,
                                                /*keep_alive_pings=*/true});
  ws.set_option(websocket::stream_base::decorator([auth = c.authorization](websocket::request_type& req) {
    req.set(beast::http::field::user_agent, "consensord");
    if (!auth.empty()) req.set(beast::http::field::authorization, auth);
  }));
  ws.read_message_max(static_cast<size_t>(c.options.max_message_bytes));
  const bool default_port = c.url.port == (c.url.tls ? "443" : "80");
  const std::string host = c.url.host.find(':') != std::string::npos ? "[" + c.url.host + "]" : c.url.host;
  const std::string host_field = default_port ? host : host + ":" + c.url.port;
  beast::error_code ec = AwaitOrStop(
      io, lowest, c.stopping, [&](auto handler) { ws.async_handshake(host_field, c.url.target, std::move(handler)); });
  if (c.stopping.load()) return OkStatus();
  if (ec) return StepError("the WebSocket handshake with", c, ec);

  const std::string request = R"({"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]})";
  ws.text(true);
  ec = AwaitOrStop(io, lowest, c.stopping,
                   [&](auto handler) { ws.async_write(net::buffer(request), std::move(handler)); });
  if (c.stopping.load()) return OkStatus();
  if (ec) return StepError("sending eth_subscribe to", c, ec);

  std::string subscription;  // the id the endpoint gave; notifications for others are ignored
  beast::flat_buffer buffer;
  while (true) {
    buffer.clear();
    ec = AwaitOrStop(io, lowest, c.stopping, [&](auto handler) { ws.async_read(buffer, std::move(handler)); });
    if (c.stopping.load()) return OkStatus();
    if (ec == websocket::error::message_too_big) {
      return ResourceExhausted("the RPC at " + c.shown + " sent a WebSocket message over " +
                               std::to_string(c.options.max_message_bytes) + " bytes");
    }
    if (ec) return StepError("reading the head subscription from", c, ec);
    const std::string text = beast::buffers_to_string(buffer.data());
    nlohmann::json message = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (message.is_discarded() || !message.is_object()) {
      return Unavailable("the RPC at " + c.shown + " sent a subscription message that is not JSON-RPC");
    }
    if (auto id = message.find("id"); id != message.end() && *id == 1) {
      if (auto err = message.find("error"); err != message.end() && !err->is_null()) {
        const std::string why = err->is_object() && err->contains("message") && (*err)["message"].is_string()
                                    ? (*err)["message"].get<std::string>()
                                    : err->dump();
        return FailedPrecondition("the RPC at " + c.shown + " refused eth_subscribe newHeads: " + why);
      }
      auto result = message.find("result");
      if (result == message.end() || !result->is_string() || result->get<std::string>().empty()) {
        return Unavailable("the RPC at " + c.shown + " answered eth_subscribe without a subscription id");
      }
      subscription = result->get<std::string>();
      c.on_subscribed();
      continue;
    }
    auto method = message.find("method");
    auto params = message.find("params");
    if (subscription.empty() || method == message.end() || *method != "eth_subscription" || params == message.end() ||
        !params->is_object() || !params->contains("subscription") || (*params)["subscription"] != subscription ||
        !params->contains("result") || !(*params)["result"].is_object() || !(*params)["result"].contains("number")) {
      continue;  // not a head of this subscription
    }
    StatusOr<uint64_t> number = ParseQuantity((*params)["result"]["number"], "newHeads number");
    if (!number.ok()) return number.status().WithContext("the RPC at " + c.shown);
    c.on_head(*number);
  }
}

}  // namespace

struct HeadSubscription::Impl {
  RpcUrl url;
  std::string shown;
  std::unique_ptr<ssl::context> tls;  // wss only
  std::string authorization;
};

StatusOr<std::unique_ptr<HeadSubscription>> HeadSubscription::Start(HeadSubscriptionOptions options,
                                                                    std::function<void(uint64_t head)> on_head,
                                                                    MetricsRegistry* metrics) {
  std::unique_ptr<HeadSubscription> sub(new HeadSubscription());
  sub->impl_ = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(sub->impl_->url, ParseWsRpcUrl(options.url));
  sub->impl_->shown = RedactRpcUrl(options.url);
  if (sub->impl_->url.tls) {
    ASSIGN_OR_RETURN(sub->impl_->tls, NewRpcTlsContext(options.ca_file));
  }
  if (sub->impl_->url.has_userinfo) {
    sub->impl_->authorization = RpcBasicAuthorization(sub->impl_->url.username, sub->impl_->url.password);
  }
  if (options.max_message_bytes < 4096) return InvalidArgument("head subscription: max_message_bytes under 4096");
  sub->options_ = std::move(options);
  sub->on_head_ = std::move(on_head);
  if (metrics) {
    sub->connected_gauge_ = metrics->AddGauge(
        "consensor_chain_ws_connected", "1 while the newHeads subscription to the chain endpoint is established.");
    sub->heads_counter_ =
        metrics->AddCounter("consensor_chain_ws_heads_total", "New chain heads the WebSocket subscription delivered.");
    sub->failures_counter_ = metrics->AddCounter(
        "consensor_chain_ws_failures_total",
        "Head subscription connections that failed or were lost (each is retried after a backoff).");
  }
  sub->thread_ = std::thread([raw = sub.get()] { raw->Run(); });
  return sub;
}

HeadSubscription::~HeadSubscription() { Shutdown(); }

void HeadSubscription::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status HeadSubscription::last_failure() const {
  std::lock_guard<std::mutex> lock(failure_mu_);
  return last_failure_;
}

bool HeadSubscription::WaitBackoff(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(stop_mu_);
  return !stop_cv_.wait_for(lock, wait, [this] { return stopping_.load(); });
}

void HeadSubscription::Run() {
  auto backoff = options_.min_backoff;
  while (!stopping_.load()) {
    const uint64_t subscribed_before = subscriptions_.load();
    Status lost = Session();
    if (connected_gauge_) connected_gauge_->Set(0);
    if (stopping_.load()) break;
    if (failures_counter_) failures_counter_->Increment();
    {
      std::lock_guard<std::mutex> lock(failure_mu_);
      last_failure_ = lost;
    }
    ++failures_;
    // A connection that subscribed was healthy: start the backoff over.
    if (subscriptions_.load() != subscribed_before) backoff = options_.min_backoff;
    Log(LogLevel::kWarn, "chain head subscription failed; the poll goes on, retrying",
        {{"error", lost.ToString()}, {"retry_ms", std::to_string(backoff.count())}});
    if (!WaitBackoff(backoff)) break;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

Status HeadSubscription::Session() {
  net::io_context io;
  SessionContext context{options_,
                         impl_->url,
                         impl_->shown,
                         impl_->authorization,
                         stopping_,
                         [this] {
                           ++subscriptions_;
                           if (connected_gauge_) connected_gauge_->Set(1);
                         },
                         [this](uint64_t head) {
                           ++heads_;
                           if (heads_counter_) heads_counter_->Increment();
                           on_head_(head);
                         }};
  try {
    tcp::resolver resolver(io);
    beast::error_code ec;
    auto endpoints = resolver.resolve(impl_->url.host, impl_->url.port, ec);
    if (ec) return Unavailable("cannot resolve the RPC host of " + impl_->shown + ": " + ec.message());
    auto connect = [&](beast::tcp_stream& lowest) -> Status {
      lowest.expires_after(options_.connect_timeout);
      beast::error_code cec = AwaitOrStop(io, lowest, stopping_,
                                          [&](auto handler) { lowest.async_connect(endpoints, std::move(handler)); });
      if (cec && !stopping_.load()) return StepError("connecting to", context, cec);
      return OkStatus();
    };
    if (!impl_->tls) {
      websocket::stream<beast::tcp_stream> ws(io);
      RETURN_IF_ERROR(connect(beast::get_lowest_layer(ws)));
      if (stopping_.load()) return OkStatus();
      return Subscribe(io, ws, context);
    }
    websocket::stream<beast::ssl_stream<beast::tcp_stream>> ws(io, *impl_->tls);
    RETURN_IF_ERROR(SetRpcTlsPeerName(ws.next_layer().native_handle(), impl_->url.host, impl_->shown));
    auto& lowest = beast::get_lowest_layer(ws);
    RETURN_IF_ERROR(connect(lowest));
    if (stopping_.load()) return OkStatus();
    ec = AwaitOrStop(io, lowest, stopping_, [&](auto handler) {
      ws.next_layer().async_handshake(ssl::stream_base::client, std::move(handler));
    });
    if (stopping_.load()) return OkStatus();
    if (ec) return RpcTlsHandshakeError(ws.next_layer().native_handle(), ec, impl_->shown, options_.ca_file);
    return Subscribe(io, ws, context);
  } catch (const std::exception& e) {
    return Unavailable("head subscription to " + impl_->shown + ": " + e.what());
  }
}

}  // namespace consensor::node
