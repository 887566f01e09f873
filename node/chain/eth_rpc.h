// Ethereum JSON-RPC over HTTP (Boost.Beast): the transport of the node's chain client.
// The transport is an interface so unit tests can substitute a fake; functional tests use a
// real anvil. Every failure is a Status that says what went wrong and where, and no request
// body (which may carry a signed transaction) is ever logged.
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
  std::chrono::milliseconds timeout{10000};  // connect + request + response, per call
  int64_t max_response_bytes = int64_t{64} << 20;
};

// url: "http://host:port" or "http://host:port/path". Only plain HTTP (local or private nodes);
// INVALID_ARGUMENT for anything else. Connection failures are UNAVAILABLE naming the URL.
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
