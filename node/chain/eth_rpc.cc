#include "node/chain/eth_rpc.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <charconv>
#include <thread>

namespace consensor::node {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

class HttpTransport final : public JsonRpcTransport {
 public:
  HttpTransport(std::string url, std::string host, std::string port, std::string target, HttpRpcOptions options)
      : url_(std::move(url)),
        host_(std::move(host)),
        port_(std::move(port)),
        target_(std::move(target)),
        options_(options) {}

  StatusOr<nlohmann::json> Call(const std::string& method, const nlohmann::json& params,
                                std::string* error_data) override {
    nlohmann::json request = {{"jsonrpc", "2.0"}, {"id", ++next_id_}, {"method", method}, {"params", params}};
    ASSIGN_OR_RETURN(std::string body, Post(request.dump()));
    nlohmann::json response = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (response.is_discarded() || !response.is_object()) {
      return Unavailable(method + ": the RPC at " + url_ + " answered with something that is not JSON-RPC");
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
    if (result == response.end()) return Unavailable(method + ": the RPC at " + url_ + " answered without a result");
    return *result;
  }

 private:
  StatusOr<std::string> Post(const std::string& payload) {
    try {
      net::io_context io;
      net::ip::tcp::resolver resolver(io);
      beast::tcp_stream stream(io);
      stream.expires_after(options_.timeout);
      beast::error_code ec;
      auto endpoints = resolver.resolve(host_, port_, ec);
      if (ec) return Unavailable("cannot resolve the RPC host of " + url_ + ": " + ec.message());
      stream.connect(endpoints, ec);
      if (ec) return Unavailable("cannot reach the RPC at " + url_ + ": " + ec.message());
      http::request<http::string_body> req{http::verb::post, target_, 11};
      req.set(http::field::host, host_);
      req.set(http::field::content_type, "application/json");
      req.body() = payload;
      req.prepare_payload();
      http::write(stream, req, ec);
      if (ec) return Unavailable("sending to the RPC at " + url_ + ": " + ec.message());
      beast::flat_buffer buffer;
      http::response_parser<http::string_body> parser;
      parser.body_limit(static_cast<uint64_t>(options_.max_response_bytes));
      http::read(stream, buffer, parser, ec);
      if (ec == beast::error::timeout) return DeadlineExceeded("the RPC at " + url_ + " did not answer in time");
      if (ec) return Unavailable("reading from the RPC at " + url_ + ": " + ec.message());
      stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
      auto& res = parser.get();
      if (res.result_int() != 200) {
        return Unavailable("the RPC at " + url_ + " answered HTTP " + std::to_string(res.result_int()));
      }
      return std::move(res.body());
    } catch (const std::exception& e) {
      return Unavailable("RPC at " + url_ + ": " + e.what());
    }
  }

  std::string url_, host_, port_, target_;
  HttpRpcOptions options_;
  std::atomic<int64_t> next_id_{0};
};

bool IsHexDigit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

int HexValue(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

}  // namespace

StatusOr<std::unique_ptr<JsonRpcTransport>> NewHttpRpcTransport(const std::string& url, HttpRpcOptions options) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return InvalidArgument("RPC URL must start with http://, got '" + url + "'");
  std::string rest = url.substr(scheme.size());
  std::string target = "/";
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    target = rest.substr(slash);
    rest = rest.substr(0, slash);
  }
  // host:port, [v6]:port; without a port, 80.
  const size_t bracket = rest.find(']');
  const size_t colon = rest.rfind(':');
  std::string host = rest, port = "80";
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (!host.empty() && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port_number = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), port_number);
  if (host.empty() || ec != std::errc() || ptr != port.data() + port.size() || port_number <= 0 ||
      port_number > 65535) {
    return InvalidArgument("RPC URL '" + url + "' needs a host and a port between 1 and 65535");
  }
  return std::unique_ptr<JsonRpcTransport>(new HttpTransport(url, host, port, target, options));
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
