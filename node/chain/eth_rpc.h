// Ethereum JSON-RPC over HTTP or HTTPS (Boost.Beast, Boost.Asio SSL on OpenSSL): the transport
// of the node's chain client. The transport is an interface so unit tests can substitute a fake;
// functional tests use a real anvil. Every failure is a Status that says what went wrong and
// where. No request body (which may carry a signed transaction) is ever logged, and an RPC URL
// appears in messages only through RedactRpcUrl: hosted RPCs put API keys in the path, the query
// or the user info.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "common/status.h"

namespace consensor::node {

class JsonRpcTransport {
 public:
  virtual ~JsonRpcTransport() = default;
  // Returns the "result" member. A JSON-RPC error object becomes FAILED_PRECONDITION with the
  // node's message; its "data" (revert data for eth_call / estimateGas) goes to *error_data.
  virtual StatusOr<nlohmann::json> Call(const std::string& method, const nlohmann::json& params,
                                        std::string* error_data = nullptr) = 0;
};

struct HttpRpcOptions {
  std::chrono::milliseconds timeout{10000};  // connect + TLS handshake + request + response, per call
  int64_t max_response_bytes = int64_t{64} << 20;
  // https only: a PEM file of CA certificates trusted instead of the system's default store
  // (for an RPC behind a private CA or a self-signed certificate). Empty: the system store.
  std::string ca_file;
  // http only: keep the connection open after a call (HTTP/1.1 keep-alive) and send the next
  // call on it, instead of a new TCP connection per call. A kept connection that the server has
  // closed meanwhile (the call fails before any byte of an answer) is replaced and the call sent
  // once more on a new one, so only callers whose calls may be sent twice (reads) turn this on.
  bool reuse_connection = false;
};

class MetricsRegistry;

// Wraps `inner` so that each call is counted by method in consensor_chain_rpc_requests_total
// {client, method}, each failure in consensor_chain_rpc_errors_total {client, method}, and each
// duration in consensor_chain_rpc_seconds {client}. `client` names the caller ("view",
// "evidence"); methods are the eth_* names this code calls, so the label set stays small.
std::unique_ptr<JsonRpcTransport> NewMeteredRpcTransport(std::unique_ptr<JsonRpcTransport> inner,
                                                         MetricsRegistry* metrics, std::string client);

// The parts of an RPC URL: scheme://[user[:password]@]host[:port][/path][?query][#fragment].
struct RpcUrl {
  bool tls = false;    // https
  std::string host;    // without the brackets of an IPv6 literal
  std::string port;    // decimal; 80 or 443 when the URL has none
  std::string target;  // path and query as sent in the request line; "/" when the URL has no path
  bool has_userinfo = false;
  std::string username;  // percent-decoded
  std::string password;  // percent-decoded
};

// INVALID_ARGUMENT (naming only the redacted URL) for anything but an http:// or https:// URL
// with a host and a port between 1 and 65535. The scheme is case-insensitive; the fragment is
// dropped.
StatusOr<RpcUrl> ParseRpcUrl(const std::string& url);
// The same for the WebSocket endpoint of the head subscription: ws:// or wss:// (tls), default
// ports 80 and 443.
StatusOr<RpcUrl> ParseWsRpcUrl(const std::string& url);

// The URL as it may be printed or logged: scheme://host:port with any user info replaced by
// "***@" and any path, query or fragment beyond a bare "/" replaced by "/***", e.g.
// "https://***@rpc.example.org:443/***" for "https://u:p@rpc.example.org/v3/KEY?apikey=K".
// Anything not shaped like scheme://host[:port] becomes "***" after the scheme (or "***"
// entirely), so a malformed URL never leaks either.
std::string RedactRpcUrl(const std::string& url);

// url: see RpcUrl. https verifies the server's certificate chain (against options.ca_file or
// the system store) and its host name or IP address, and sends SNI for host names. User info is
// sent as HTTP Basic authorization. A malformed URL or an unreadable ca_file is
// INVALID_ARGUMENT; connection failures are UNAVAILABLE and a certificate that does not verify
// is FAILED_PRECONDITION, each naming the redacted URL.
StatusOr<std::unique_ptr<JsonRpcTransport>> NewHttpRpcTransport(const std::string& url, HttpRpcOptions options = {});

// Hex helpers for JSON-RPC quantities and data ("0x1a", "0x00ff...").
std::string QuantityHex(uint64_t v);
StatusOr<uint64_t> ParseQuantity(const nlohmann::json& v, const std::string& what);
std::string DataHex(const std::vector<uint8_t>& bytes);
StatusOr<std::vector<uint8_t>> ParseData(const nlohmann::json& v, const std::string& what);

// Typed calls the chain client needs.
class EthRpc {
 public:
  explicit EthRpc(std::unique_ptr<JsonRpcTransport> transport) : transport_(std::move(transport)) {}

  StatusOr<uint64_t> ChainId();
  StatusOr<uint64_t> BlockNumber();
  struct BlockHeader {
    Hash256 hash{};
    uint64_t timestamp = 0;  // unix seconds, as the block's proposer set it
  };
  // Block `number` (eth_getBlockByNumber); NOT_FOUND while it is not mined.
  StatusOr<BlockHeader> Block(uint64_t number);
  StatusOr<Hash256> BlockHash(uint64_t number);
  // Balance in wei as a 0x-quantity string (may exceed 64 bits).
  StatusOr<std::string> GetBalanceHex(const std::string& address_hex);
  StatusOr<uint64_t> GetTransactionCount(const std::string& address_hex, const std::string& block = "pending");
  // eth_call; a revert is FAILED_PRECONDITION and its data goes to *revert_data.
  StatusOr<std::vector<uint8_t>> Call(const std::string& to_hex, const std::vector<uint8_t>& data,
                                      const std::string& block = "latest", std::string* revert_data = nullptr);
  StatusOr<uint64_t> EstimateGas(const std::string& from_hex, const std::string& to_hex,
                                 const std::vector<uint8_t>& data, const std::string& value_hex = "0x0",
                                 std::string* revert_data = nullptr);
  // Suggested fees: max priority fee and base fee of the latest block.
  struct Fees {
    uint64_t base_fee_per_gas = 0;
    uint64_t max_priority_fee_per_gas = 0;
  };
  StatusOr<Fees> SuggestFees();
  StatusOr<std::string> SendRawTransaction(const std::vector<uint8_t>& raw);  // returns the tx hash
  // nullopt while the transaction is pending.
  StatusOr<std::optional<nlohmann::json>> GetTransactionReceipt(const std::string& tx_hash);
  // Polls until the receipt exists or the timeout passes (DEADLINE_EXCEEDED).
  StatusOr<nlohmann::json> WaitForReceipt(const std::string& tx_hash, std::chrono::milliseconds timeout,
                                          std::chrono::milliseconds poll = std::chrono::milliseconds(100));
  StatusOr<nlohmann::json> GetLogs(const nlohmann::json& filter);

  JsonRpcTransport* transport() { return transport_.get(); }

 private:
  std::unique_ptr<JsonRpcTransport> transport_;
};

}  // namespace consensor::node
