// The chain client's JSON-RPC transport against a real anvil.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/secp256k1_sign.h"
#include "node/chain/abi.h"
#include "node/chain/eth_rpc.h"
#include "node/chain/eth_tx.h"
#include "tests/functional/anvil_harness.h"

namespace consensor {
namespace {

using node::EthRpc;
using testing_support::AnvilProcess;

class ChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = (std::filesystem::temp_directory_path() / ("consensor-anvil-" + std::to_string(getpid()) + ".log")).string();
    anvil_ = std::make_unique<AnvilProcess>(log_);
    ASSERT_TRUE(anvil_->Start()) << "anvil did not start (run scripts/setup.sh): " << testing_support::AnvilBinary()
                                 << "\n"
                                 << anvil_->Log();
    auto transport = node::NewHttpRpcTransport(anvil_->url());
    ASSERT_TRUE(transport.ok()) << transport.status().ToString();
    rpc_ = std::make_unique<EthRpc>(std::move(transport).value());
  }
  void TearDown() override {
    anvil_.reset();
    std::filesystem::remove(log_);
  }

  std::string log_;
  std::unique_ptr<AnvilProcess> anvil_;
  std::unique_ptr<EthRpc> rpc_;
};

TEST_F(ChainTest, ReadsChainState) {
  auto chain_id = rpc_->ChainId();
  ASSERT_TRUE(chain_id.ok()) << chain_id.status().ToString();
  EXPECT_EQ(*chain_id, 31337u);
  auto block = rpc_->BlockNumber();
  ASSERT_TRUE(block.ok());
  EXPECT_EQ(*block, 0u);
  auto balance = rpc_->GetBalanceHex(testing_support::kAnvilAddress0);
  ASSERT_TRUE(balance.ok());
  EXPECT_EQ(*balance, "0x21e19e0c9bab2400000");  // 10000 ETH
  auto nonce = rpc_->GetTransactionCount(testing_support::kAnvilAddress0);
  ASSERT_TRUE(nonce.ok());
  EXPECT_EQ(*nonce, 0u);
  auto fees = rpc_->SuggestFees();
  ASSERT_TRUE(fees.ok()) << fees.status().ToString();
  EXPECT_GT(fees->base_fee_per_gas, 0u);
  // A call to an address without code returns no data.
  auto empty = rpc_->Call("0x0000000000000000000000000000000000001234", {0x12, 0x34, 0x56, 0x78});
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());
  auto receipt = rpc_->GetTransactionReceipt("0x" + std::string(64, '1'));
  ASSERT_TRUE(receipt.ok());
  EXPECT_FALSE(receipt->has_value());
  auto logs = rpc_->GetLogs({{"fromBlock", "0x0"}, {"toBlock", "latest"}});
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  EXPECT_TRUE(logs->is_array()) << logs->dump();
}

TEST_F(ChainTest, ErrorsAreClear) {
  // The node's own error, with the method named.
  auto bad = rpc_->GetTransactionCount("not-an-address");
  EXPECT_EQ(bad.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("eth_getTransactionCount"), std::string::npos) << bad.status().message();
  // A receipt that never comes.
  auto wait = rpc_->WaitForReceipt("0x" + std::string(64, '2'), std::chrono::milliseconds(200));
  EXPECT_EQ(wait.status().code(), StatusCode::kDeadlineExceeded);
  // Nothing listening.
  anvil_->Stop();
  auto gone = rpc_->ChainId();
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(gone.status().message().find(anvil_->url()), std::string::npos) << gone.status().message();
  // Malformed URLs never reach the network (https is accepted: tests/functional/https_rpc_test.cc).
  for (const char* url : {"ws://127.0.0.1:8545", "127.0.0.1:8545", "http://:8545", "http://host:0", "http://h:99999"}) {
    EXPECT_EQ(node::NewHttpRpcTransport(url).status().code(), StatusCode::kInvalidArgument) << url;
  }
}

std::array<uint8_t, 32> Key(const std::string& hex) {
  std::array<uint8_t, 32> k{};
  auto h = Hash256FromHex(hex);
  if (h.ok()) k = *h;
  return k;
}

// A transaction signed in C++ (EIP-1559, RFC 6979, low s) is accepted and mined by a real
// chain; one for another chain id is refused with the node's reason.
TEST_F(ChainTest, SignedTransactionsAreMined) {
  auto key = Key(testing_support::kAnvilKey0);
  auto from = AddressFromSecretKey(key);
  ASSERT_TRUE(from.ok());
  auto fees = rpc_->SuggestFees();
  ASSERT_TRUE(fees.ok()) << fees.status().ToString();
  auto nonce = rpc_->GetTransactionCount(testing_support::kAnvilAddress0);
  ASSERT_TRUE(nonce.ok());

  node::Eip1559Transaction tx;
  tx.chain_id = 31337;
  tx.nonce = *nonce;
  tx.max_priority_fee_per_gas = Uint256FromU64(fees->max_priority_fee_per_gas);
  tx.max_fee_per_gas = Uint256FromU64(2 * fees->base_fee_per_gas + fees->max_priority_fee_per_gas);
  tx.gas_limit = 21000;
  Address20 to{};
  to[19] = 0x42;
  tx.to = to;
  tx.value = Uint256FromU64(1234567);
  auto raw = node::SignTransaction(key, tx);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  auto hash = rpc_->SendRawTransaction(*raw);
  ASSERT_TRUE(hash.ok()) << hash.status().ToString();
  EXPECT_EQ(*hash, "0x" + ToHex(node::TransactionHash(*raw)));
  auto receipt = rpc_->WaitForReceipt(*hash, std::chrono::seconds(30));
  ASSERT_TRUE(receipt.ok()) << receipt.status().ToString();
  EXPECT_EQ((*receipt)["status"], "0x1");
  EXPECT_EQ((*receipt)["from"], "0x" + ToHex(*from));
  auto balance = rpc_->GetBalanceHex("0x0000000000000000000000000000000000000042");
  ASSERT_TRUE(balance.ok());
  EXPECT_EQ(*balance, "0x12d687");  // 1234567
  auto next_nonce = rpc_->GetTransactionCount(testing_support::kAnvilAddress0);
  ASSERT_TRUE(next_nonce.ok());
  EXPECT_EQ(*next_nonce, *nonce + 1);

  // Wrong chain id: refused by the node, with its message.
  tx.nonce = *next_nonce;
  tx.chain_id = 1;
  auto wrong = node::SignTransaction(key, tx);
  ASSERT_TRUE(wrong.ok());
  auto refused = rpc_->SendRawTransaction(*wrong);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("eth_sendRawTransaction"), std::string::npos) << refused.status().message();
  // A sender without funds: refused too.
  tx.chain_id = 31337;
  tx.nonce = 0;
  auto poor = node::SignTransaction(Key(std::string(63, '0') + "7"), tx);
  ASSERT_TRUE(poor.ok());
  auto insufficient = rpc_->SendRawTransaction(*poor);
  EXPECT_EQ(insufficient.status().code(), StatusCode::kFailedPrecondition);
}

TEST(RpcHex, QuantitiesAndData) {
  EXPECT_EQ(node::QuantityHex(0), "0x0");
  EXPECT_EQ(node::QuantityHex(255), "0xff");
  EXPECT_EQ(*node::ParseQuantity("0x1a", "q"), 26u);
  EXPECT_EQ(*node::ParseQuantity("0xffffffffffffffff", "q"), UINT64_MAX);
  EXPECT_FALSE(node::ParseQuantity("0x1ffffffffffffffff", "q").ok());  // over 64 bits
  EXPECT_FALSE(node::ParseQuantity("0x", "q").ok());
  EXPECT_FALSE(node::ParseQuantity("12", "q").ok());
  EXPECT_FALSE(node::ParseQuantity(12, "q").ok());
  EXPECT_FALSE(node::ParseQuantity("0xzz", "q").ok());
  EXPECT_EQ(node::DataHex({0x00, 0xab}), "0x00ab");
  EXPECT_EQ(*node::ParseData("0x00AB", "d"), (std::vector<uint8_t>{0x00, 0xab}));
  EXPECT_TRUE(node::ParseData("0x", "d")->empty());
  EXPECT_FALSE(node::ParseData("0xabc", "d").ok());
  EXPECT_FALSE(node::ParseData("abcd", "d").ok());
}

}  // namespace
}  // namespace consensor
