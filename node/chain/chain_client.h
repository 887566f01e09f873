// The node's chain client: reads and writes the Consensor AVS contracts (docs/CONTRACTS.md)
// through JSON-RPC. Writes are EIP-1559 transactions signed locally; a revert comes back as
// FAILED_PRECONDITION naming the contract's custom error with its arguments. Keys are never
// logged or put in messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/status.h"
#include "consensus/attestation.h"
#include "consensus/operator_set.h"
#include "node/chain/abi.h"
#include "node/chain/eth_rpc.h"

namespace consensor::node {

// contracts/deployments/<chainid>.json, written by contracts/script/Deploy.s.sol.
struct Deployment {
  uint64_t chain_id = 0;
  Address20 registry{};
  Address20 manager{};
  uint64_t deploy_block = 0;
};
StatusOr<Deployment> LoadDeployment(const std::string& path);

struct TxOutcome {
  std::string tx_hash;
  uint64_t block_number = 0;
  uint64_t gas_used = 0;
};

struct OperatorInfo {
  uint8_t status = 0;  // 0 unregistered, 1 active, 2 exiting, (3 withdrawn)
  bool slashed = false;
  Uint256 stake{};
  Uint256 pending_withdrawal{};
  uint64_t withdrawable_at_block = 0;
  std::string endpoint;
};
std::string OperatorStatusName(uint8_t status);

// A slashing event from the service manager (docs/CONTRACTS.md, "Events").
struct SlashEvent {
  std::string kind;  // "equivocation" or "dispute"
  Address20 operator_address{};
  Hash256 task_id{};
  Uint256 amount{};
  Address20 reporter{};
  uint64_t block_number = 0;
  std::string tx_hash;
};

// What verifyCertificate reports about a certificate (docs/CONTRACTS.md).
// The deployment's time parameters and replication floor, from the service manager
// (docs/SECURITY.md, section 5).
struct DeploymentParams {
  uint64_t max_reference_age = 0;         // R
  uint64_t challenge_window_blocks = 0;   // W
  uint64_t evidence_deadline_blocks = 0;  // E
  uint32_t min_replicas = 0;
};

struct CertificateStake {
  Uint256 signed_stake{};
  Uint256 total_stake{};
  bool meets_threshold = false;
};

// What a signer key signs, raw, to let `owner` bind it on the registry (docs/CONTRACTS.md,
// "Proof of possession"): keccak256(abi.encode(keccak256("consensor.signer-binding.v1"),
// chain_id, registry, owner, signer)).
Hash256 SignerBindingDigest(uint64_t chain_id, const Address20& registry, const Address20& owner,
                            const Address20& signer);
// The proof of possession `signer_key` gives `owner` on this deployment: 65 bytes r || s || v.
StatusOr<std::array<uint8_t, 65>> MakeSignerProof(const Secp256k1Secret& signer_key, const Deployment& deployment,
                                                  const Address20& owner);
// OK when `proof` is `signer`'s proof for `owner` on this deployment; INVALID_ARGUMENT saying
// which key made it otherwise (the contract would revert SignerProofInvalid).
Status CheckSignerProof(std::span<const uint8_t> proof, const Deployment& deployment, const Address20& owner,
                        const Address20& signer);

// Decodes revert data against the contracts' custom errors: "StakeBelowMinimum(1, 1000)".
std::string DescribeRevert(const std::string& revert_data_hex);

class ChainClient {
 public:
  ChainClient(EthRpc* rpc, Deployment deployment, std::optional<Secp256k1Secret> key);

  // FAILED_PRECONDITION when the RPC's chain is not the deployment's.
  Status CheckChain();
  std::optional<Address20> address() const { return address_; }

  StatusOr<OperatorInfo> GetOperatorInfo(const Address20& operator_address);
  // The registry's operators at a block with their stake there, in registration order (stake
  // may be zero); consensus::OperatorSet::FromRegistry turns it into the protocol's view.
  // The registry's operatorsAt(block_number), read in pages of page_size (> 0) owners.
  static constexpr uint64_t kOperatorsPageSize = 1000;
  StatusOr<std::vector<consensus::WeightedOperator>> OperatorsAt(uint64_t block_number,
                                                                 uint64_t page_size = kOperatorsPageSize);
  StatusOr<Uint256> MinimumStake();
  // eth_call of the manager's verifyCertificate: the contract's own certificate checks at the
  // chain head. A revert comes back as FAILED_PRECONDITION naming the custom error.
  StatusOr<CertificateStake> VerifyCertificate(const consensus::Attestation& certified,
                                               const std::vector<std::vector<uint8_t>>& sigs);
  StatusOr<uint64_t> ThresholdBps();
  StatusOr<DeploymentParams> ReadDeploymentParams();
  // The manager's finalityBlock(ref): the last block of the challenge window.
  StatusOr<uint64_t> FinalityBlock(uint64_t reference_block);
  // True once `operator_address` was slashed for `task_id` (evidence is single-use).
  StatusOr<bool> EvidenceUsed(const Address20& operator_address,
                              const Hash256& task_id);  // the manager's thresholdBps(), basis points of total stake
  // Slashing events in [from_block, to_block] (eth_getLogs on the manager, decoded). Nodes poll
  // this to see evidence land.
  StatusOr<std::vector<SlashEvent>> SlashEvents(uint64_t from_block, uint64_t to_block);

  // Registers the key's address as the OWNER of an operator whose attestations `signer` signs
  // (docs/CONTRACTS.md, "Owner and signer"), with the signer's proof of possession
  // (MakeSignerProof); without a signer, or with the key's own address, the key signs itself
  // (register(string)). The stake counts activationDelayBlocks later.
  StatusOr<TxOutcome> Register(const std::string& endpoint, const Uint256& stake_wei,
                               std::optional<Address20> signer = std::nullopt,
                               std::span<const uint8_t> signer_proof = {});
  // The owner (this key) makes `new_signer` its signer from the end of the mined block on.
  StatusOr<TxOutcome> RotateSigner(const Address20& new_signer, std::span<const uint8_t> signer_proof);
  // This key's proof of possession for `owner` (the key is the signer being bound).
  StatusOr<std::array<uint8_t, 65>> SignerProofFor(const Address20& owner) const;
  // The registry's own signerBindingDigest(owner, signer) (eth_call).
  StatusOr<Hash256> RegistrySignerBindingDigest(const Address20& owner, const Address20& signer);
  const Deployment& deployment() const { return deployment_; }
  // The registry's activationDelayBlocks(): A, blocks from a deposit to the block it counts at.
  StatusOr<uint64_t> ActivationDelayBlocks();
  // The current signer of the operator `owner` (zero when it never registered).
  StatusOr<Address20> SignerOf(const Address20& owner);
  // The owner a signer is bound to (zero when it never was a signer).
  StatusOr<Address20> OwnerOf(const Address20& signer);
  // First block from which all of `owner`'s deposited stake counts.
  StatusOr<uint64_t> ActivationBlockOf(const Address20& owner);
  StatusOr<TxOutcome> Deregister();
  StatusOr<TxOutcome> Withdraw();
  StatusOr<TxOutcome> SlashEquivocation(const consensus::Attestation& a1, std::span<const uint8_t> sig1,
                                        const consensus::Attestation& a2, std::span<const uint8_t> sig2);
  StatusOr<TxOutcome> SlashDispute(const consensus::Attestation& accused, std::span<const uint8_t> accused_sig,
                                   const consensus::Attestation& certified,
                                   const std::vector<std::vector<uint8_t>>& certificate_sigs);

  consensus::Eip712Domain domain() const { return {deployment_.chain_id, deployment_.manager}; }

 private:
  StatusOr<std::vector<uint8_t>> View(const Address20& to, std::string_view signature, std::span<const AbiValue> args);
  StatusOr<TxOutcome> Transact(const Address20& to, std::vector<uint8_t> data, const Uint256& value);

  EthRpc* rpc_;
  Deployment deployment_;
  std::optional<Secp256k1Secret> key_;
  std::optional<Address20> address_;
  std::chrono::milliseconds receipt_timeout_{60000};
};

}  // namespace consensor::node
