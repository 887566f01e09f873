// A TCP endpoint on loopback for the chain clients' tests: accepts connections one at a time on
// its own thread and hands each to `serve` with its number (counting from 1). The scripted chain
// endpoints of head_subscription_test.cc (WebSocket) and eth_rpc_reuse_test.cc (HTTP) sit on it.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>

namespace consensor::node::testing_chain {

class LoopbackAcceptor {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using Serve = std::function<void(Socket socket, int connection)>;

  explicit LoopbackAcceptor(Serve serve)
      : serve_(std::move(serve)),
        acceptor_(io_, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Loop(); });
  }
  ~LoopbackAcceptor() {
    stopping_ = true;
    // Unblocks accept() with a connection the loop drops.
    boost::asio::io_context io;
    Socket wake(io);
    boost::beast::error_code ec;
    wake.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port_), ec);
    thread_.join();
  }
  LoopbackAcceptor(const LoopbackAcceptor&) = delete;
  LoopbackAcceptor& operator=(const LoopbackAcceptor&) = delete;

  std::string url(const std::string& scheme) const { return scheme + "://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  bool stopping() const { return stopping_.load(); }

 private:
  void Loop() {
    while (!stopping_) {
      Socket socket(io_);
      boost::beast::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stopping_) return;
      const int n = ++connections_;
      serve_(std::move(socket), n);
    }
  }

  const Serve serve_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

}  // namespace consensor::node::testing_chain
