// The HTTP transport's kept connection (HttpRpcOptions::reuse_connection) against a scripted
// JSON-RPC endpoint on loopback: calls share one TCP connection while the server keeps it
// open, a connection the server closed while it was kept is replaced without failing the call,
// and a server that never answers still fails the call (once, not in a loop).
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <string>
#include <thread>

#include "node/chain/eth_rpc.h"
#include "tests/node/chain/loopback_acceptor.h"

namespace consensor::node {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// How the endpoint treats each connection.
enum class Serving {
  kKeepAlive,           // answers every request on the connection
  kOneAnswerThenDrop,   // answers one request, then closes without saying so (no Connection: close)
  kOneAnswerThenClose,  // answers one request with Connection: close
  kNeverAnswer,         // reads the request and closes
};

// Answers eth_blockNumber with 0x2a on each connection the acceptor takes, as `serving` says.
class ScriptedRpcEndpoint {
 public:
  explicit ScriptedRpcEndpoint(Serving serving) : serving_(serving) {}

  std::string url() const { return acceptor_.url("http"); }
  int connections() const { return acceptor_.connections(); }
  int requests() const { return requests_.load(); }

 private:
  void Serve(tcp::socket socket) {
    beast::error_code ec;
    beast::flat_buffer buffer;
    while (true) {
      http::request<http::string_body> req;
      http::read(socket, buffer, req, ec);
      if (ec) break;
      ++requests_;
      if (serving_ == Serving::kNeverAnswer) break;
      http::response<http::string_body> res{http::status::ok, 11};
      res.set(http::field::content_type, "application/json");
      res.keep_alive(serving_ != Serving::kOneAnswerThenClose);
      res.body() = R"({"jsonrpc":"2.0","id":1,"result":"0x2a"})";
      res.prepare_payload();
      http::write(socket, res, ec);
      if (ec || serving_ != Serving::kKeepAlive) break;
    }
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

  const Serving serving_;
  std::atomic<int> requests_{0};
  // Last: its thread serves with the members above.
  testing_chain::LoopbackAcceptor acceptor_{[this](tcp::socket socket, int) { Serve(std::move(socket)); }};
};

std::unique_ptr<JsonRpcTransport> Transport(const std::string& url, bool reuse) {
  HttpRpcOptions options;
  options.timeout = std::chrono::milliseconds(5000);
  options.reuse_connection = reuse;
  auto transport = NewHttpRpcTransport(url, options);
  EXPECT_TRUE(transport.ok()) << transport.status().ToString();
  return std::move(*transport);
}

void ExpectBlockNumbers(JsonRpcTransport& transport, int calls) {
  for (int i = 0; i < calls; ++i) {
    auto result = transport.Call("eth_blockNumber", nlohmann::json::array());
    ASSERT_TRUE(result.ok()) << "call " << i << ": " << result.status().ToString();
    EXPECT_EQ(*result, "0x2a");
  }
}

TEST(HttpRpcReuseConnection, CallsShareOneConnectionWhileTheServerKeepsIt) {
  ScriptedRpcEndpoint endpoint(Serving::kKeepAlive);
  auto transport = Transport(endpoint.url(), /*reuse=*/true);
  ExpectBlockNumbers(*transport, 5);
  EXPECT_EQ(endpoint.requests(), 5);
  EXPECT_EQ(endpoint.connections(), 1);
}

TEST(HttpRpcReuseConnection, WithoutItEachCallHasItsOwnConnection) {
  ScriptedRpcEndpoint endpoint(Serving::kKeepAlive);
  auto transport = Transport(endpoint.url(), /*reuse=*/false);
  ExpectBlockNumbers(*transport, 3);
  EXPECT_EQ(endpoint.connections(), 3);
}

TEST(HttpRpcReuseConnection, AConnectionClosedWhileKeptIsReplacedAndTheCallSucceeds) {
  ScriptedRpcEndpoint endpoint(Serving::kOneAnswerThenDrop);
  auto transport = Transport(endpoint.url(), /*reuse=*/true);
  ExpectBlockNumbers(*transport, 4);
  // Calls 2..4 each found the kept connection closed and were sent again on a new one.
  EXPECT_EQ(endpoint.connections(), 4);
}

TEST(HttpRpcReuseConnection, AnAnswerWithConnectionCloseIsNotKept) {
  ScriptedRpcEndpoint endpoint(Serving::kOneAnswerThenClose);
  auto transport = Transport(endpoint.url(), /*reuse=*/true);
  ExpectBlockNumbers(*transport, 3);
  EXPECT_EQ(endpoint.connections(), 3);
  EXPECT_EQ(endpoint.requests(), 3);  // nothing was sent on a connection the server closed
}

TEST(HttpRpcReuseConnection, AServerThatNeverAnswersFailsTheCallOnce) {
  ScriptedRpcEndpoint endpoint(Serving::kNeverAnswer);
  auto transport = Transport(endpoint.url(), /*reuse=*/true);
  auto result = transport->Call("eth_blockNumber", nlohmann::json::array());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
  EXPECT_EQ(endpoint.requests(), 1);  // a new connection's failure is not retried
}

}  // namespace
}  // namespace consensor::node
