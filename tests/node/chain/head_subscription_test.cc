// The newHeads subscription against a scripted WebSocket endpoint on loopback that plays a
// broken or hostile chain node: garbage, oversized frames, a refused subscription, silence.
// Whatever it does, the subscriber never crashes or hangs, delivers only its own subscription's
// heads, reconnects, and stops when asked. The real endpoint (anvil) is in
// tests/functional/operator_test.cc.
#include "node/chain/head_subscription.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/node/chain/loopback_acceptor.h"

namespace consensor::node {
namespace {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// Runs `script` on each connection the acceptor takes (the connection's number counts from 1).
// A script's I/O errors end that connection only.
class ScriptedWsEndpoint {
 public:
  using Script = std::function<void(websocket::stream<tcp::socket>& ws, int connection)>;

  explicit ScriptedWsEndpoint(Script script) : script_(std::move(script)) {}

  std::string url() const { return acceptor_.url("ws"); }
  int connections() const { return acceptor_.connections(); }
  bool stopping() const { return acceptor_.stopping(); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  void Record(std::string request) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(std::move(request));
  }

 private:
  Script script_;
  std::mutex mu_;
  std::vector<std::string> requests_;
  // Last: its thread serves with the members above.
  testing_chain::LoopbackAcceptor acceptor_{[this](tcp::socket socket, int n) {
    try {
      websocket::stream<tcp::socket> ws(std::move(socket));
      script_(ws, n);
    } catch (const std::exception&) {
      // The subscriber hung up: the next connection gets the next step of the script.
    }
  }};
};

// The handshake and the subscription request, recorded.
void AcceptAndReadRequest(ScriptedWsEndpoint* endpoint, websocket::stream<tcp::socket>& ws) {
  ws.accept();
  beast::flat_buffer buffer;
  ws.read(buffer);
  endpoint->Record(beast::buffers_to_string(buffer.data()));
}

void Send(websocket::stream<tcp::socket>& ws, const std::string& text) {
  ws.text(true);
  ws.write(net::buffer(text));
}

std::string Head(const std::string& subscription, const std::string& number) {
  return R"({"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":")" + subscription +
         R"(","result":{"number":")" + number + R"(","hash":"0x00"}}})";
}

// Reads until the subscriber hangs up (its reads and pings keep the connection alive).
void HoldUntilClosed(websocket::stream<tcp::socket>& ws) {
  beast::flat_buffer buffer;
  while (true) ws.read(buffer);
}

class HeadRecorder {
 public:
  void Add(uint64_t head) {
    std::lock_guard<std::mutex> lock(mu_);
    heads_.push_back(head);
  }
  std::vector<uint64_t> heads() {
    std::lock_guard<std::mutex> lock(mu_);
    return heads_;
  }

 private:
  std::mutex mu_;
  std::vector<uint64_t> heads_;
};

HeadSubscriptionOptions FastRetry(const std::string& url) {
  HeadSubscriptionOptions options;
  options.url = url;
  options.min_backoff = std::chrono::milliseconds(10);
  options.max_backoff = std::chrono::milliseconds(50);
  options.max_message_bytes = 64 << 10;
  return options;
}

// Not a timing assertion: a generous deadline for something that happens in milliseconds.
template <typename Pred>
bool WaitFor(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

TEST(HeadSubscriptionTest, GarbageOversizedAndForeignMessagesNeverReachTheCaller) {
  // 1: garbage after the handshake; 2: an oversized frame; 3: a head number that is no number;
  // 4: honest, with a foreign subscription's head in between.
  ScriptedWsEndpoint* self = nullptr;
  ScriptedWsEndpoint endpoint([&self](websocket::stream<tcp::socket>& ws, int connection) {
    AcceptAndReadRequest(self, ws);
    switch (connection) {
      case 1: Send(ws, "this is not JSON-RPC {"); break;
      case 2:
        Send(ws, R"({"jsonrpc":"2.0","id":1,"result":"0xa1"})");
        Send(ws, std::string(256 << 10, ' '));  // four times the subscriber's cap
        break;
      case 3:
        Send(ws, R"({"jsonrpc":"2.0","id":1,"result":"0xa1"})");
        Send(ws, Head("0xa1", "0xzz"));
        break;
      default:
        Send(ws, R"({"jsonrpc":"2.0","id":1,"result":"0xa1"})");
        Send(ws, Head("0xforeign", "0x99"));
        Send(ws, R"({"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0xa1"}})");
        Send(ws, Head("0xa1", "0x10"));
        Send(ws, Head("0xa1", "0x11"));
        break;
    }
    HoldUntilClosed(ws);
  });
  self = &endpoint;
  HeadRecorder recorder;
  auto sub = HeadSubscription::Start(FastRetry(endpoint.url()), [&](uint64_t h) { recorder.Add(h); });
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return recorder.heads().size() >= 2; }));
  (*sub)->Shutdown();  // while connected and idle
  EXPECT_EQ(recorder.heads(), (std::vector<uint64_t>{0x10, 0x11}));
  EXPECT_EQ(endpoint.connections(), 4);
  EXPECT_EQ((*sub)->subscriptions(), 3u);  // connections 2, 3 and 4 subscribed
  for (const std::string& request : endpoint.requests()) {
    EXPECT_NE(request.find(R"("method":"eth_subscribe")"), std::string::npos) << request;
    EXPECT_NE(request.find(R"("params":["newHeads"])"), std::string::npos) << request;
  }
}

TEST(HeadSubscriptionTest, RefusedSubscriptionIsRetriedAndStopsWhenAsked) {
  // An endpoint without subscriptions (an HTTP-only provider behind a WebSocket gateway).
  ScriptedWsEndpoint* self = nullptr;
  ScriptedWsEndpoint endpoint([&self](websocket::stream<tcp::socket>& ws, int) {
    AcceptAndReadRequest(self, ws);
    Send(ws, R"({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"the method eth_subscribe does not exist"}})");
    HoldUntilClosed(ws);
  });
  self = &endpoint;
  HeadRecorder recorder;
  auto sub = HeadSubscription::Start(FastRetry(endpoint.url()), [&](uint64_t h) { recorder.Add(h); });
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return endpoint.connections() >= 3; }));
  (*sub)->Shutdown();
  EXPECT_TRUE(recorder.heads().empty());
  EXPECT_EQ((*sub)->subscriptions(), 0u);
}

TEST(HeadSubscriptionTest, SilentEndpointDoesNotHoldShutdown) {
  // Takes the TCP connection and never answers the WebSocket handshake.
  ScriptedWsEndpoint* self = nullptr;
  ScriptedWsEndpoint endpoint([&self](websocket::stream<tcp::socket>&, int) {
    while (!self->stopping()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  self = &endpoint;
  auto sub = HeadSubscription::Start(FastRetry(endpoint.url()), [](uint64_t) {});
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return endpoint.connections() >= 1; }));
  (*sub)->Shutdown();  // returns although the handshake is still waiting (a hang fails the test)
  EXPECT_EQ((*sub)->subscriptions(), 0u);
}

TEST(HeadSubscriptionTest, BadOptionsAreRefusedAtStart) {
  auto http = HeadSubscription::Start(FastRetry("http://127.0.0.1:8545"), [](uint64_t) {});
  ASSERT_FALSE(http.ok());
  EXPECT_EQ(http.status().code(), StatusCode::kInvalidArgument);
  HeadSubscriptionOptions wss = FastRetry("wss://127.0.0.1:8546");
  wss.ca_file = "/nonexistent/ca.pem";
  auto tls = HeadSubscription::Start(wss, [](uint64_t) {});
  ASSERT_FALSE(tls.ok());
  EXPECT_EQ(tls.status().code(), StatusCode::kInvalidArgument);
  HeadSubscriptionOptions tiny = FastRetry("ws://127.0.0.1:8546");
  tiny.max_message_bytes = 16;
  EXPECT_EQ(HeadSubscription::Start(tiny, [](uint64_t) {}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace consensor::node
