// The chain flags shared by the CLI commands that talk to the AVS contracts (`consensor
// operator`, `evidence`, `verify`):
//   --rpc URL          (default $CONSENSOR_RPC, else http://127.0.0.1:8545); http:// or https://
//   --rpc-ca-file FILE (default $CONSENSOR_RPC_CA_FILE) https: PEM CAs trusted instead of the system store
//   --deployment FILE  (default contracts/deployments/<chain id of the RPC>.json)
// and, for commands that sign transactions, the operator key:
//   --keystore FILE (--password-file FILE | --password-env VAR), or --devnet-key N.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/secp256k1_sign.h"
#include "common/status.h"
#include "node/chain/abi.h"
#include "node/chain/chain_client.h"
#include "node/chain/eth_rpc.h"
#include "node/cli/cli_args.h"

namespace consensor::node {

inline constexpr uint64_t kDevnetChainId = 31337;
inline constexpr size_t kDevnetKeyCount = 10;  // all ten of anvil's default accounts

// anvil's default-mnemonic account `index` (0..9): public test keys, for devnets and tests only.
// INVALID_ARGUMENT for an index out of range.
StatusOr<Secp256k1Secret> DevnetKey(size_t index);

struct ChainSession {
  std::unique_ptr<EthRpc> rpc;
  std::unique_ptr<ChainClient> chain;  // uses rpc
};

// Connects to the RPC, loads the deployment for its chain, reads the key when one is given (a
// devnet key only on chain 31337) and checks that the RPC serves the deployment's chain.
// With need_key, a missing key is INVALID_ARGUMENT.
StatusOr<ChainSession> OpenChainSession(const ParsedArgs& args, bool need_key);

// Decimal ether, trailing zeros dropped: "1.5 ETH".
std::string FormatEther(const Uint256& wei);

}  // namespace consensor::node
