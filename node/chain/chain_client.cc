#include "node/chain/chain_client.h"

#include <algorithm>
#include <array>

#include "common/file_io.h"
#include "common/keccak.h"
#include "node/chain/eth_tx.h"
#include "node/keys/keystore.h"

namespace consensor::node {

namespace {

// Every custom error of the contracts (docs/CONTRACTS.md), so a revert reads as its name.
constexpr const char* kContractErrors[] = {"TaskIdMismatch()",
                                           "ReferenceBlockMismatch()",
                                           "SameResultRoot()",
                                           "SignerMismatch(address,address)",
                                           "ReferenceBlockNotFinal(uint256,uint256)",
                                           "AccusedNotOperatorAtReferenceBlock(address)",
                                           "EmptyCertificate()",
                                           "SignersNotAscending(address,address)",
                                           "SignerNotOperatorAtReferenceBlock(address)",
                                           "InsufficientQuorum(uint256,uint256,uint256)",
                                           "EvidenceAlreadyUsed(address,bytes32)",
                                           "EvidenceExpired(uint256,uint256)",
                                           "SignerAlreadySlashedForTask(address,bytes32)",
                                           "SignerNoLongerSlashable(address)",
                                           "NothingToSlash(address)",
                                           "InvalidSignatureLength(uint256)",
                                           "InvalidSignatureS()",
                                           "InvalidSignatureV(uint8)",
                                           "InvalidSignature()",
                                           "TransferFailed(address,uint256)",
                                           "Reentrancy()",
                                           "UnexpectedEther(address)",
                                           "AlreadyRegistered(address)",
                                           "NotActive(address)",
                                           "NotExiting(address)",
                                           "OperatorWasSlashed(address)",
                                           "StakeBelowMinimum(uint256,uint256)",
                                           "ZeroAmount()",
                                           "EmptyEndpoint()",
                                           "EndpointTooLong(uint256,uint256)",
                                           "WithdrawalDelayNotPassed(uint256,uint256)",
                                           "OnlySlasher(address)",
                                           "StakeOverflow()",
                                           "BlockNumberOverflow()",
                                           "NotRegistered(address)",
                                           "ZeroSigner()",
                                           "SignerAlreadyBound(address,address)",
                                           "SignerIsAnOwner(address)",
                                           "OwnerIsASigner(address)",
                                           "StakePendingActivation(uint256)",
                                           "SignerProofInvalid(address)",
                                           "ActivationDelayTooShort(uint256,uint256)",
                                           "WithdrawalDelayTooShort(uint256,uint256)"};

std::string ValueText(const AbiValue& v) {
  switch (v.kind) {
    case AbiValue::Kind::kUint: return Uint256ToDecimal(v.uint);
    case AbiValue::Kind::kBool: return v.boolean ? "true" : "false";
    case AbiValue::Kind::kAddress: return AddressToChecksumHex(v.address);
    default: return "0x" + ToHex(v.bytes);
  }
}

StatusOr<Address20> ParseAddress(const nlohmann::json& j, const std::string& what) {
  if (!j.is_string()) return InvalidArgument(what + " must be an address string");
  auto a = AddressFromHex(j.get<std::string>());
  if (!a.ok()) return InvalidArgument(what + ": " + a.status().message());
  return *a;
}

AbiValue AttestationTuple(const consensus::Attestation& a) {
  return AbiValue::Tuple({AbiValue::Bytes32(a.task_id), AbiValue::Bytes32(a.result_root),
                          AbiValue::Bytes32(a.trace_root), AbiValue::Uint(a.reference_block)});
}

// bytes[] of a certificate, as slashDispute and verifyCertificate take it.
AbiValue SignatureArray(const std::vector<std::vector<uint8_t>>& sigs) {
  std::vector<AbiValue> items;
  items.reserve(sigs.size());
  for (const auto& s : sigs) items.push_back(AbiValue::Bytes(s));
  return AbiValue::Array(std::move(items));
}

std::string Hex0x(const Address20& a) { return "0x" + ToHex(a); }

}  // namespace

std::string OperatorStatusName(uint8_t status) {
  switch (status) {
    case 0: return "unregistered";
    case 1: return "active";
    case 2: return "exiting";
    case 3: return "withdrawn";
    default: return "unknown(" + std::to_string(status) + ")";
  }
}

std::string DescribeRevert(const std::string& revert_data_hex) {
  auto data = ParseData(revert_data_hex, "revert data");
  if (!data.ok() || data->empty()) return "reverted without a reason";
  // Matched on the 4-byte selector before anything is decoded; the selectors are hashed once.
  static const std::vector<std::array<uint8_t, 4>> selectors = [] {
    std::vector<std::array<uint8_t, 4>> out;
    for (const char* signature : kContractErrors) {
      auto selector = FunctionSelector(signature);
      out.push_back(selector.ok() ? *selector : std::array<uint8_t, 4>{});
    }
    return out;
  }();
  for (size_t e = 0; e < selectors.size(); ++e) {
    if (data->size() < 4 || !std::equal(selectors[e].begin(), selectors[e].end(), data->begin())) continue;
    const char* signature = kContractErrors[e];
    auto args = DecodeError(signature, *data);
    if (!args.ok()) continue;
    std::string name(signature, std::string_view(signature).find('('));
    std::string text = name + "(";
    for (size_t i = 0; i < args->size(); ++i) text += (i ? ", " : "") + ValueText((*args)[i]);
    return text + ")";
  }
  if (auto reason = DecodeRevertReason(*data); reason.ok()) return "Error(\"" + *reason + "\")";
  return "unknown revert data " + revert_data_hex.substr(0, 74);
}

StatusOr<Deployment> LoadDeployment(const std::string& path) {
  ASSIGN_OR_RETURN(auto bytes, consensor::ReadFileBytes(path, 1 << 20));
  auto j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("deployment file '" + path + "' is not a JSON object");
  Deployment d;
  if (!j.contains("chainId") || !j["chainId"].is_number_unsigned()) {
    return InvalidArgument("deployment file '" + path + "': chainId must be a number");
  }
  d.chain_id = j["chainId"].get<uint64_t>();
  ASSIGN_OR_RETURN(d.registry,
                   ParseAddress(j.value("NativeStakeRegistry", nlohmann::json()), path + ": NativeStakeRegistry"));
  ASSIGN_OR_RETURN(d.manager, ParseAddress(j.value("ConsensorServiceManager", nlohmann::json()),
                                           path + ": ConsensorServiceManager"));
  if (j.contains("deployBlock") && j["deployBlock"].is_number_unsigned())
    d.deploy_block = j["deployBlock"].get<uint64_t>();
  return d;
}

ChainClient::ChainClient(EthRpc* rpc, Deployment deployment, std::optional<Secp256k1Secret> key)
    : rpc_(rpc), deployment_(deployment), key_(key) {
  if (key_) {
    auto a = AddressFromSecretKey(*key_);
    if (a.ok()) address_ = *a;
  }
}

Status ChainClient::CheckChain() {
  ASSIGN_OR_RETURN(uint64_t chain_id, rpc_->ChainId());
  if (chain_id != deployment_.chain_id) {
    return FailedPrecondition("wrong chain: the RPC serves chain id " + std::to_string(chain_id) +
                              ", the deployment is for chain id " + std::to_string(deployment_.chain_id));
  }
  return OkStatus();
}

StatusOr<std::vector<uint8_t>> ChainClient::View(const Address20& to, std::string_view signature,
                                                 std::span<const AbiValue> args) {
  ASSIGN_OR_RETURN(auto data, EncodeCall(signature, args));
  std::string revert;
  auto out = rpc_->Call(Hex0x(to), data, "latest", &revert);
  if (!out.ok() && !revert.empty()) {
    return FailedPrecondition(std::string(signature) + " reverted: " + DescribeRevert(revert));
  }
  return out;
}

StatusOr<OperatorInfo> ChainClient::GetOperatorInfo(const Address20& operator_address) {
  const AbiValue args[] = {AbiValue::Address(operator_address)};
  ASSIGN_OR_RETURN(auto out, View(deployment_.registry, "operatorInfo(address)", args));
  ASSIGN_OR_RETURN(auto v, AbiDecode("(uint8,bool,uint256,uint256,uint256,string)", out));
  OperatorInfo info;
  ASSIGN_OR_RETURN(uint64_t status, v[0].AsUint64());
  info.status = static_cast<uint8_t>(status);
  info.slashed = v[1].boolean;
  info.stake = v[2].uint;
  info.pending_withdrawal = v[3].uint;
  ASSIGN_OR_RETURN(info.withdrawable_at_block, v[4].AsUint64());
  ASSIGN_OR_RETURN(info.endpoint, v[5].AsString());
  return info;
}

StatusOr<std::vector<consensus::WeightedOperator>> ChainClient::OperatorsAt(uint64_t block_number, uint64_t page_size) {
  if (page_size == 0) return InvalidArgument("operatorsAt page size must be positive");
  // Read in pages: the whole list grows with every owner that ever registered (about 7,700 gas
  // each), and one eth_call over a long history would exceed an RPC node's gas cap. A page of
  // kOperatorsPageSize owners costs about 8M gas. Owners registered between two pages only
  // append and have no stake at a final block, so the pages add up to the list at that block.
  std::vector<consensus::WeightedOperator> registered;
  uint64_t start = 0;
  for (;;) {
    const AbiValue args[] = {AbiValue::Uint(block_number), AbiValue::Uint(start), AbiValue::Uint(page_size)};
    ASSIGN_OR_RETURN(auto out, View(deployment_.registry, "operatorsAtPage(uint256,uint256,uint256)", args));
    ASSIGN_OR_RETURN(auto v, AbiDecode("(address[],uint256[],uint256,uint256)", out));
    if (v[0].items.size() != v[1].items.size()) {
      return DataLoss("operatorsAtPage returned arrays of different lengths");
    }
    ASSIGN_OR_RETURN(uint64_t next, v[2].AsUint64());
    ASSIGN_OR_RETURN(uint64_t total, v[3].AsUint64());
    if (next > total || (next <= start && next != total) || next - std::min(next, start) > page_size ||
        v[0].items.size() > next - std::min(next, start)) {
      return DataLoss("operatorsAtPage returned an inconsistent page (start " + std::to_string(start) + ", next " +
                      std::to_string(next) + ", total " + std::to_string(total) + ")");
    }
    for (size_t i = 0; i < v[0].items.size(); ++i) registered.push_back({v[0].items[i].address, v[1].items[i].uint});
    if (next == total) break;
    start = next;
  }
  return registered;
}

StatusOr<Uint256> ChainClient::MinimumStake() {
  ASSIGN_OR_RETURN(auto out, View(deployment_.registry, "minimumStake()", {}));
  ASSIGN_OR_RETURN(auto v, AbiDecode("(uint256)", out));
  return v[0].uint;
}

StatusOr<CertificateStake> ChainClient::VerifyCertificate(const consensus::Attestation& certified,
                                                          const std::vector<std::vector<uint8_t>>& sigs) {
  const AbiValue args[] = {AttestationTuple(certified), SignatureArray(sigs)};
  ASSIGN_OR_RETURN(auto out,
                   View(deployment_.manager, "verifyCertificate((bytes32,bytes32,bytes32,uint64),bytes[])", args));
  ASSIGN_OR_RETURN(auto v, AbiDecode("(uint256,uint256,bool)", out));
  return CertificateStake{v[0].uint, v[1].uint, v[2].boolean};
}

StatusOr<uint64_t> ChainClient::ThresholdBps() {
  ASSIGN_OR_RETURN(auto out, View(deployment_.manager, "thresholdBps()", {}));
  ASSIGN_OR_RETURN(auto v, AbiDecode("(uint256)", out));
  return v[0].AsUint64();
}

StatusOr<DeploymentParams> ChainClient::ReadDeploymentParams() {
  auto read = [&](const char* getter) -> StatusOr<uint64_t> {
    auto out = View(deployment_.manager, std::string(getter) + "()", {});
    if (!out.ok()) {
      return out.status().WithContext(std::string("reading the manager's ") + getter +
                                      " (a deployment from before issue 16 has none: redeploy)");
    }
    ASSIGN_OR_RETURN(auto v, AbiDecode("(uint256)", *out));
    return v[0].AsUint64();
  };
  DeploymentParams p;
  ASSIGN_OR_RETURN(p.max_reference_age, read("maxReferenceAge"));
  ASSIGN_OR_RETURN(p.challenge_window_blocks, read("challengeWindowBlocks"));
  ASSIGN_OR_RETURN(p.evidence_deadline_blocks, read("evidenceDeadlineBlocks"));
  ASSIGN_OR_RETURN(uint64_t min_replicas, read("minReplicas"));
  if (p.max_reference_age == 0 || p.challenge_window_blocks == 0 || min_replicas == 0 || min_replicas > UINT32_MAX) {
    return FailedPrecondition("the service manager's parameters are out of range");
  }
  p.min_replicas = static_cast<uint32_t>(min_replicas);
  return p;
}

StatusOr<uint64_t> ChainClient::FinalityBlock(uint64_t reference_block) {
  const AbiValue args[] = {AbiValue::Uint(reference_block)};
  ASSIGN_OR_RETURN(auto out, View(deployment_.manager, "finalityBlock(uint64)", args));
  ASSIGN_OR_RETURN(auto v, AbiDecode("(uint256)", out));
  return v[0].AsUint64();
}

StatusOr<bool> ChainClient::EvidenceUsed(const Address20& operator_address, const Hash256& task_id) {
  const AbiValue args[] = {AbiValue::Address(operator_address), AbiValue::Bytes32(task_id)};
  ASSIGN_OR_RETURN(auto out, View(deployment_.manager, "evidenceUsed(address,bytes32)", args));
  ASSIGN_OR_RETURN(auto v, AbiDecode("(bool)", out));
  return v[0].boolean;
}

StatusOr<std::vector<SlashEvent>> ChainClient::SlashEvents(uint64_t from_block, uint64_t to_block) {
  static constexpr const char* kEquivocation =
      "EquivocationSlashed(address indexed,bytes32 indexed,uint256,address indexed,uint256)";
  static constexpr const char* kDispute =
      "DisputeSlashed(address indexed,bytes32 indexed,uint256,address indexed,uint256,bytes32,uint256)";
  ASSIGN_OR_RETURN(Hash256 equivocation_topic, EventTopic(kEquivocation));
  ASSIGN_OR_RETURN(Hash256 dispute_topic, EventTopic(kDispute));
  nlohmann::json filter = {{"address", Hex0x(deployment_.manager)},
                           {"fromBlock", QuantityHex(from_block)},
                           {"toBlock", QuantityHex(to_block)},
                           {"topics", nlohmann::json::array({nlohmann::json::array(
                                          {"0x" + ToHex(equivocation_topic), "0x" + ToHex(dispute_topic)})})}};
  ASSIGN_OR_RETURN(auto logs, rpc_->GetLogs(filter));
  std::vector<SlashEvent> events;
  for (const auto& log : logs) {
    if (!log.is_object() || !log.contains("topics") || !log["topics"].is_array() || log["topics"].empty()) {
      return InvalidArgument("eth_getLogs returned a log without topics");
    }
    std::vector<Hash256> topics;
    for (const auto& t : log["topics"]) {
      ASSIGN_OR_RETURN(auto bytes, ParseData(t, "log topic"));
      if (bytes.size() != 32) return InvalidArgument("log topic is not 32 bytes");
      Hash256 h;
      std::copy(bytes.begin(), bytes.end(), h.begin());
      topics.push_back(h);
    }
    ASSIGN_OR_RETURN(auto data, ParseData(log.value("data", nlohmann::json("0x")), "log data"));
    SlashEvent e;
    e.kind = topics[0] == equivocation_topic ? "equivocation" : "dispute";
    ASSIGN_OR_RETURN(auto v, DecodeEventLog(e.kind == "equivocation" ? kEquivocation : kDispute, topics, data));
    e.operator_address = v[0].address;
    ASSIGN_OR_RETURN(e.task_id, v[1].AsBytes32());
    e.amount = v[2].uint;
    e.reporter = v[3].address;
    ASSIGN_OR_RETURN(e.block_number, ParseQuantity(log.value("blockNumber", nlohmann::json()), "log blockNumber"));
    if (log.contains("transactionHash") && log["transactionHash"].is_string()) e.tx_hash = log["transactionHash"];
    events.push_back(std::move(e));
  }
  return events;
}

StatusOr<TxOutcome> ChainClient::Transact(const Address20& to, std::vector<uint8_t> data, const Uint256& value) {
  if (!key_ || !address_) return FailedPrecondition("this command needs an operator key (--keystore or --devnet-key)");
  RETURN_IF_ERROR(CheckChain());
  const std::string from = Hex0x(*address_);
  // Estimating first turns a revert into its custom error before anything is signed or sent.
  std::string revert;
  auto gas = rpc_->EstimateGas(from, Hex0x(to), data, Uint256ToHex(value), &revert);
  if (!gas.ok()) {
    if (!revert.empty()) return FailedPrecondition("transaction would revert: " + DescribeRevert(revert));
    return gas.status();
  }
  ASSIGN_OR_RETURN(auto fees, rpc_->SuggestFees());
  ASSIGN_OR_RETURN(uint64_t nonce, rpc_->GetTransactionCount(from, "pending"));
  Eip1559Transaction tx;
  tx.chain_id = deployment_.chain_id;
  tx.nonce = nonce;
  tx.max_priority_fee_per_gas = Uint256FromU64(fees.max_priority_fee_per_gas);
  // Room for the base fee to double before the transaction stops being includable.
  tx.max_fee_per_gas = Uint256FromU64(2 * fees.base_fee_per_gas + fees.max_priority_fee_per_gas);
  tx.gas_limit = *gas + *gas / 5;
  tx.to = to;
  tx.value = value;
  tx.data = std::move(data);
  ASSIGN_OR_RETURN(auto raw, SignTransaction(*key_, tx));
  ASSIGN_OR_RETURN(std::string hash, rpc_->SendRawTransaction(raw));
  ASSIGN_OR_RETURN(auto receipt, rpc_->WaitForReceipt(hash, receipt_timeout_));
  TxOutcome outcome;
  outcome.tx_hash = hash;
  ASSIGN_OR_RETURN(outcome.block_number,
                   ParseQuantity(receipt.value("blockNumber", nlohmann::json()), "receipt blockNumber"));
  ASSIGN_OR_RETURN(outcome.gas_used, ParseQuantity(receipt.value("gasUsed", nlohmann::json()), "receipt gasUsed"));
  if (receipt.value("status", std::string()) != "0x1") {
    return FailedPrecondition("transaction " + hash + " reverted in block " + std::to_string(outcome.block_number));
  }
  return outcome;
}

Hash256 SignerBindingDigest(uint64_t chain_id, const Address20& registry, const Address20& owner,
                            const Address20& signer) {
  // abi.encode of five static words: the tag, the chain id, then three left-padded addresses.
  std::array<uint8_t, 5 * 32> words{};
  const Hash256 tag = Keccak256("consensor.signer-binding.v1");
  std::copy(tag.begin(), tag.end(), words.begin());
  const Uint256 chain = Uint256FromU64(chain_id);
  std::copy(chain.begin(), chain.end(), words.begin() + 32);
  size_t offset = 64;
  for (const Address20* a : {&registry, &owner, &signer}) {
    std::copy(a->begin(), a->end(), words.begin() + offset + 12);
    offset += 32;
  }
  return Keccak256(words);
}

StatusOr<std::array<uint8_t, 65>> MakeSignerProof(const Secp256k1Secret& signer_key, const Deployment& deployment,
                                                  const Address20& owner) {
  ASSIGN_OR_RETURN(const Address20 signer, AddressFromSecretKey(signer_key));
  ASSIGN_OR_RETURN(
      auto sig, SignDigest(signer_key, SignerBindingDigest(deployment.chain_id, deployment.registry, owner, signer)));
  return ToBytes65(sig);
}

Status CheckSignerProof(std::span<const uint8_t> proof, const Deployment& deployment, const Address20& owner,
                        const Address20& signer) {
  auto sig = FromBytes65(proof);
  if (!sig.ok()) return InvalidArgument("the signer proof is not a signature: " + sig.status().message());
  auto made_by = RecoverAddress(SignerBindingDigest(deployment.chain_id, deployment.registry, owner, signer), *sig);
  if (!made_by.ok()) return InvalidArgument("the signer proof does not verify: " + made_by.status().message());
  if (*made_by != signer) {
    return InvalidArgument("the signer proof is not " + AddressToChecksumHex(signer) + "'s proof for owner " +
                           AddressToChecksumHex(owner) + " on chain " + std::to_string(deployment.chain_id) +
                           " (make it with the signer's key: consensor operator signer-proof --owner " +
                           AddressToChecksumHex(owner) + ")");
  }
  return OkStatus();
}

StatusOr<TxOutcome> ChainClient::Register(const std::string& endpoint, const Uint256& stake_wei,
                                          std::optional<Address20> signer, std::span<const uint8_t> signer_proof) {
  if (!signer || (address_ && *signer == *address_)) {
    const AbiValue args[] = {AbiValue::String(endpoint)};
    ASSIGN_OR_RETURN(auto data, EncodeCall("register(string)", args));
    return Transact(deployment_.registry, std::move(data), stake_wei);
  }
  const AbiValue args[] = {AbiValue::Address(*signer), AbiValue::String(endpoint), AbiValue::Bytes(signer_proof)};
  ASSIGN_OR_RETURN(auto data, EncodeCall("register(address,string,bytes)", args));
  return Transact(deployment_.registry, std::move(data), stake_wei);
}

StatusOr<TxOutcome> ChainClient::RotateSigner(const Address20& new_signer, std::span<const uint8_t> signer_proof) {
  const AbiValue args[] = {AbiValue::Address(new_signer), AbiValue::Bytes(signer_proof)};
  ASSIGN_OR_RETURN(auto data, EncodeCall("rotateSigner(address,bytes)", args));
  return Transact(deployment_.registry, std::move(data), Uint256{});
}

StatusOr<std::array<uint8_t, 65>> ChainClient::SignerProofFor(const Address20& owner) const {
  if (!key_) return FailedPrecondition("a signer proof needs the signer's key");
  return MakeSignerProof(*key_, deployment_, owner);
}

StatusOr<Hash256> ChainClient::RegistrySignerBindingDigest(const Address20& owner, const Address20& signer) {
  const AbiValue args[] = {AbiValue::Address(owner), AbiValue::Address(signer)};
  ASSIGN_OR_RETURN(auto out, View(deployment_.registry, "signerBindingDigest(address,address)", args));
  ASSIGN_OR_RETURN(auto v, AbiDecode("(bytes32)", out));
  return v[0].AsBytes32();
}

StatusOr<uint64_t> ChainClient::ActivationDelayBlocks() {
  auto out = View(deployment_.registry, "activationDelayBlocks()", {});
  if (!out.ok()) {
    return out.status().WithContext(
        "reading the registry's activationDelayBlocks (a deployment from before "
        "the activation delay has none: redeploy)");
  }
  ASSIGN_OR_RETURN(auto v, AbiDecode("(uint256)", *out));
  return v[0].AsUint64();
}

StatusOr<Address20> ChainClient::SignerOf(const Address20& owner) {
  const AbiValue args[] = {AbiValue::Address(owner)};
  ASSIGN_OR_RETURN(auto out, View(deployment_.registry, "signerOf(address)", args));
  ASSIGN_OR_RETURN(auto v, AbiDecode("(address)", out));
  return v[0].address;
}

StatusOr<Address20> ChainClient::OwnerOf(const Address20& signer) {
  const AbiValue args[] = {AbiValue::Address(signer)};
  ASSIGN_OR_RETURN(auto out, View(deployment_.registry, "ownerOf(address)", args));
  ASSIGN_OR_RETURN(auto v, AbiDecode("(address)", out));
  return v[0].address;
}

StatusOr<uint64_t> ChainClient::ActivationBlockOf(const Address20& owner) {
  const AbiValue args[] = {AbiValue::Address(owner)};
  ASSIGN_OR_RETURN(auto out, View(deployment_.registry, "activationBlockOf(address)", args));
  ASSIGN_OR_RETURN(auto v, AbiDecode("(uint256)", out));
  return v[0].AsUint64();
}

StatusOr<TxOutcome> ChainClient::Deregister() {
  ASSIGN_OR_RETURN(auto data, EncodeCall("deregister()", {}));
  return Transact(deployment_.registry, std::move(data), Uint256{});
}

StatusOr<TxOutcome> ChainClient::Withdraw() {
  ASSIGN_OR_RETURN(auto data, EncodeCall("withdraw()", {}));
  return Transact(deployment_.registry, std::move(data), Uint256{});
}

StatusOr<TxOutcome> ChainClient::SlashEquivocation(const consensus::Attestation& a1, std::span<const uint8_t> sig1,
                                                   const consensus::Attestation& a2, std::span<const uint8_t> sig2) {
  const AbiValue args[] = {AttestationTuple(a1), AbiValue::Bytes(sig1), AttestationTuple(a2), AbiValue::Bytes(sig2)};
  ASSIGN_OR_RETURN(auto data, EncodeCall("slashEquivocation((bytes32,bytes32,bytes32,uint64),bytes,"
                                         "(bytes32,bytes32,bytes32,uint64),bytes)",
                                         args));
  return Transact(deployment_.manager, std::move(data), Uint256{});
}

StatusOr<TxOutcome> ChainClient::SlashDispute(const consensus::Attestation& accused,
                                              std::span<const uint8_t> accused_sig,
                                              const consensus::Attestation& certified,
                                              const std::vector<std::vector<uint8_t>>& certificate_sigs) {
  const AbiValue args[] = {AttestationTuple(accused), AbiValue::Bytes(accused_sig), AttestationTuple(certified),
                           SignatureArray(certificate_sigs)};
  ASSIGN_OR_RETURN(auto data, EncodeCall("slashDispute((bytes32,bytes32,bytes32,uint64),bytes,"
                                         "(bytes32,bytes32,bytes32,uint64),bytes[])",
                                         args));
  return Transact(deployment_.manager, std::move(data), Uint256{});
}

}  // namespace consensor::node
