// The AVS contracts through the C++ chain client and the `consensor` CLI, on a real anvil
// with the contracts deployed by the forge script: registration and stake, the operator set
// at a past block, equivocation and dispute slashing, withdrawal, and the errors an operator
// sees. Stake changes are checked independently with `cast call`.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/address.h"
#include "common/secp256k1_sign.h"
#include "consensus/attestation.h"
#include "node/chain/chain_client.h"
#include "node/chain/chain_view.h"
#include "node/chain/eth_rpc.h"
#include "node/cli/operator_command.h"
#include "node/telemetry/metrics.h"
#include "tests/functional/anvil_harness.h"
#include "tests/test_paths.h"

namespace consensor {
namespace {

namespace fs = std::filesystem;
using testing_support::AnvilProcess;
using testing_support::CommandResult;

const char* const kKeys[] = {
    "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
};

Secp256k1Secret Key(int i) { return *Hash256FromHex(kKeys[i]); }
Address20 Addr(int i) { return *AddressFromSecretKey(Key(i)); }
std::string AddrHex(int i) { return "0x" + ToHex(Addr(i)); }

Hash256 H(uint8_t v) {
  Hash256 h{};
  h[31] = v;
  return h;
}

nlohmann::json AttestationJson(const consensus::Attestation& a, const std::array<uint8_t, 65>* sig) {
  nlohmann::json j = {{"task_id", "0x" + ToHex(a.task_id)},
                      {"result_root", "0x" + ToHex(a.result_root)},
                      {"trace_root", "0x" + ToHex(a.trace_root)},
                      {"reference_block", a.reference_block}};
  if (sig) j["signature"] = "0x" + ToHex(*sig);
  return j;
}

class OperatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("consensor-operator-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    anvil_ = std::make_unique<AnvilProcess>((dir_ / "anvil.log").string());
    ASSERT_TRUE(anvil_->Start()) << anvil_->Log();
    // Deploy with the project's forge script, into a file of this test's own.
    deployment_rel_ = "deployments/test-" + std::to_string(getpid()) + ".json";
    deployment_ = testing_support::SourceDir() + "/contracts/" + deployment_rel_;
    CommandResult deploy = testing_support::DeployContracts(
        anvil_->url(), deployment_rel_,
        "WITHDRAWAL_DELAY_BLOCKS=20 MAX_REFERENCE_AGE=2 CHALLENGE_WINDOW_BLOCKS=2 EVIDENCE_DEADLINE_BLOCKS=15 "
        "ACTIVATION_DELAY_BLOCKS=2");
    ASSERT_EQ(deploy.exit_code, 0) << deploy.out;
    auto d = node::LoadDeployment(deployment_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    deployed_ = *d;
    rpc_ = std::make_unique<node::EthRpc>(std::move(node::NewHttpRpcTransport(anvil_->url())).value());
  }
  void TearDown() override {
    anvil_.reset();
    fs::remove(deployment_);
    fs::remove_all(dir_);
  }

  CommandResult Cli(const std::string& args) {
    return testing_support::RunCommand(testing_support::CliBinary(),
                                       args + " --rpc " + anvil_->url() + " --deployment " + deployment_);
  }
  // Independent of our client: cast reads the registry.
  std::string CastCall(const std::string& signature, const std::string& arg) {
    CommandResult r = testing_support::RunCommand(
        testing_support::FoundryTool("cast"),
        "call --rpc-url " + anvil_->url() + " 0x" + ToHex(deployed_.registry) + " '" + signature + "' " + arg);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return r.out.substr(0, r.out.find_first_of(" \n"));
  }
  // Mines `n` empty blocks (anvil mines one block per transaction otherwise).
  void Mine(int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(rpc_->transport()->Call("evm_mine", nlohmann::json::array()).ok());
  }
  std::string WriteEvidence(const std::string& name, const nlohmann::json& j) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << j.dump(2);
    return path;
  }

  fs::path dir_;
  std::unique_ptr<AnvilProcess> anvil_;
  std::string deployment_rel_, deployment_;
  node::Deployment deployed_;
  std::unique_ptr<node::EthRpc> rpc_;
};

TEST_F(OperatorTest, RegisterSlashAndWithdrawOnChain) {
  // Four operators with 2 ETH each, through the CLI.
  for (int i = 1; i <= 4; ++i) {
    CommandResult r = Cli("operator register --stake 2ether --endpoint 127.0.0.1:" + std::to_string(7400 + i) +
                          " --devnet-key " + std::to_string(i));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("registered with 2 ETH"), std::string::npos) << r.out;
  }
  CommandResult status = Cli("operator status --devnet-key 1");
  ASSERT_EQ(status.exit_code, 0) << status.out;
  EXPECT_NE(status.out.find("status     active"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("127.0.0.1:7401"), std::string::npos) << status.out;
  // The stake counts A = 2 blocks after it arrived (flash stake, docs/SECURITY.md).
  EXPECT_EQ(CastCall("stakeOf(address)(uint256)", AddrHex(4)), "0");
  CommandResult pending = Cli("operator deregister --devnet-key 4");
  EXPECT_EQ(pending.exit_code, 1);
  EXPECT_NE(pending.out.find("StakePendingActivation"), std::string::npos) << pending.out;
  Mine(2);
  EXPECT_EQ(CastCall("stakeOf(address)(uint256)", AddrHex(1)), "2000000000000000000");

  auto reference = rpc_->BlockNumber();
  ASSERT_TRUE(reference.ok());
  const uint64_t ref = *reference;

  // The errors an operator sees: the contract's custom error by name, and wrong-chain checks.
  CommandResult twice = Cli("operator register --stake 2ether --endpoint x:1 --devnet-key 1");
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_NE(twice.out.find("AlreadyRegistered(0x70997970C51812dc3A010C7d01b50e0d17dc79C8)"), std::string::npos)
      << twice.out;
  CommandResult below = Cli("operator register --stake 0.5ether --endpoint x:1 --devnet-key 0");
  EXPECT_EQ(below.exit_code, 1);
  EXPECT_NE(below.out.find("StakeBelowMinimum(500000000000000000, 1000000000000000000)"), std::string::npos)
      << below.out;
  CommandResult nokey = Cli("operator deregister");
  EXPECT_EQ(nokey.exit_code, 1);
  EXPECT_NE(nokey.out.find("--keystore FILE or --devnet-key N"), std::string::npos) << nokey.out;

  // The operator set at the reference block, after more blocks have been mined.
  ASSERT_EQ(Cli("operator deregister --devnet-key 4").exit_code, 0);
  node::ChainClient reader(rpc_.get(), deployed_, std::nullopt);
  auto set = reader.OperatorsAt(ref);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ(set->size(), 4u);
  for (int i = 1; i <= 4; ++i) EXPECT_EQ((*set)[i - 1].address, Addr(i));
  // Read in pages (operatorsAtPage), the list is the same whatever the page size.
  for (uint64_t page : {1, 2, 3, 4, 5}) {
    auto paged = reader.OperatorsAt(ref, page);
    ASSERT_TRUE(paged.ok()) << paged.status().ToString();
    ASSERT_EQ(paged->size(), set->size()) << "page size " << page;
    for (size_t i = 0; i < set->size(); ++i) {
      EXPECT_EQ((*paged)[i].address, (*set)[i].address);
      EXPECT_EQ((*paged)[i].stake, (*set)[i].stake);
    }
  }
  EXPECT_FALSE(reader.OperatorsAt(ref, 0).ok());
  auto now_set = reader.OperatorsAt(*rpc_->BlockNumber());
  ASSERT_TRUE(now_set.ok());
  EXPECT_EQ(now_set->size(), 3u);  // operator 4 is exiting: no active stake now
  CommandResult set_cli = Cli("operator set --block " + std::to_string(ref));
  EXPECT_NE(set_cli.out.find("operators at block " + std::to_string(ref) + ": 4"), std::string::npos) << set_cli.out;

  consensus::Eip712Domain domain{deployed_.chain_id, deployed_.manager};

  // Dispute: operator 2 signed result 9; operators 1, 3 and 4 (6 of 8 ETH at the reference
  // block) certified result 5. Certificate signers go in ascending address order.
  consensus::Attestation accused{H(8), H(9), H(3), ref}, certified{H(8), H(5), H(3), ref};
  auto accused_sig = consensus::SignAttestation(Key(2), domain, accused);
  ASSERT_TRUE(accused_sig.ok());
  std::vector<int> signers = {1, 3, 4};
  std::sort(signers.begin(), signers.end(), [](int x, int y) { return Addr(x) < Addr(y); });
  nlohmann::json certificate = nlohmann::json::array();
  for (int i : signers) certificate.push_back("0x" + ToHex(*consensus::SignAttestation(Key(i), domain, certified)));
  nlohmann::json dispute = {{"kind", "dispute"},
                            {"accused", AttestationJson(accused, &*accused_sig)},
                            {"certified", AttestationJson(certified, nullptr)},
                            {"certificate", certificate}};
  // Too few signers first: 2 of 8 ETH is under the threshold.
  nlohmann::json weak = dispute;
  weak["certificate"] = nlohmann::json::array({certificate[0]});
  CommandResult under = Cli("evidence submit " + WriteEvidence("weak.json", weak) + " --devnet-key 0");
  EXPECT_EQ(under.exit_code, 1);
  EXPECT_NE(under.out.find("InsufficientQuorum"), std::string::npos) << under.out;
  CommandResult disputed = Cli("evidence submit " + WriteEvidence("dispute.json", dispute) + " --devnet-key 0");
  ASSERT_EQ(disputed.exit_code, 0) << disputed.out;
  EXPECT_EQ(CastCall("stakeOf(address)(uint256)", AddrHex(2)), "0");
  EXPECT_EQ(CastCall("stakeOf(address)(uint256)", AddrHex(3)), "2000000000000000000");

  // Equivocation: operator 1 signs two results for one task; anyone may report it.
  consensus::Attestation a1{H(7), H(1), H(3), ref}, a2{H(7), H(2), H(3), ref};
  auto s1 = consensus::SignAttestation(Key(1), domain, a1);
  auto s2 = consensus::SignAttestation(Key(1), domain, a2);
  ASSERT_TRUE(s1.ok() && s2.ok());
  std::string equivocation = WriteEvidence(
      "equivocation.json",
      {{"kind", "equivocation"}, {"attestations", {AttestationJson(a1, &*s1), AttestationJson(a2, &*s2)}}});
  CommandResult slashed = Cli("evidence submit " + equivocation + " --devnet-key 0");
  ASSERT_EQ(slashed.exit_code, 0) << slashed.out;
  EXPECT_EQ(CastCall("stakeOf(address)(uint256)", AddrHex(1)), "0");
  auto info1 = reader.GetOperatorInfo(Addr(1));
  ASSERT_TRUE(info1.ok());
  EXPECT_TRUE(info1->slashed);
  // The same evidence twice: refused, with the contract's reason.
  CommandResult replay = Cli("evidence submit " + equivocation + " --devnet-key 0");
  EXPECT_EQ(replay.exit_code, 1);
  EXPECT_NE(replay.out.find("EvidenceAlreadyUsed"), std::string::npos) << replay.out;

  // Operator 1's stake is gone now: the dispute certificate it signed with 3 and 4 backs nothing
  // any more (issue 16: a certificate's stake must still be at risk).
  std::vector<std::vector<uint8_t>> certificate_sigs;
  for (const auto& sig : certificate) certificate_sigs.push_back(*node::ParseData(sig.get<std::string>(), "sig"));
  auto stale = reader.VerifyCertificate(certified, certificate_sigs);
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.status().message().find("SignerNoLongerSlashable(" + AddressToChecksumHex(Addr(1)) + ")"),
            std::string::npos)
      << stale.status().message();

  // Both slashes are visible as events, decoded from the chain's logs.
  auto events = reader.SlashEvents(0, *rpc_->BlockNumber());
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].kind, "equivocation");
  EXPECT_EQ((*events)[1].operator_address, Addr(1));
  EXPECT_EQ((*events)[1].task_id, H(7));
  EXPECT_EQ(Uint256ToDecimal((*events)[1].amount), "2000000000000000000");
  EXPECT_EQ((*events)[1].reporter, Addr(0));
  EXPECT_EQ((*events)[0].kind, "dispute");
  EXPECT_EQ((*events)[0].operator_address, Addr(2));
  EXPECT_EQ((*events)[0].task_id, H(8));

  // More stake than the account holds: refused before anything is sent.
  CommandResult poor = Cli("operator register --stake 20000ether --endpoint x:1 --devnet-key 5");
  EXPECT_EQ(poor.exit_code, 1);
  EXPECT_NE(poor.out.find("error: register: "), std::string::npos) << poor.out;
  EXPECT_NE(poor.out.find("nsufficient funds"), std::string::npos) << poor.out;

  // Withdrawal waits for the delay (20 blocks), then pays out.
  CommandResult early = Cli("operator withdraw --devnet-key 4");
  EXPECT_EQ(early.exit_code, 1);
  EXPECT_NE(early.out.find("WithdrawalDelayNotPassed"), std::string::npos) << early.out;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(rpc_->transport()->Call("evm_mine", nlohmann::json::array()).ok());
  }
  CommandResult withdrawn = Cli("operator withdraw --devnet-key 4");
  EXPECT_EQ(withdrawn.exit_code, 0) << withdrawn.out;
  EXPECT_EQ(CastCall("slashableStakeOf(address)(uint256)", AddrHex(4)), "0");

  // Malformed evidence and an unreachable chain: clear errors, exit 1.
  CommandResult malformed =
      Cli("evidence submit " + WriteEvidence("bad.json", {{"kind", "equivocation"}}) + " --devnet-key 0");
  EXPECT_EQ(malformed.exit_code, 1);
  EXPECT_NE(malformed.out.find("two signed attestations"), std::string::npos) << malformed.out;
  CommandResult unreachable = testing_support::RunCommand(
      testing_support::CliBinary(),
      "operator status --address " + AddrHex(3) + " --rpc http://127.0.0.1:1 --deployment " + deployment_);
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_NE(unreachable.out.find("cannot reach"), std::string::npos) << unreachable.out;
}

// Issue 16, hole 9: a cold owner key holds the stake, a hot signer key signs. The operator set
// lists the signer; only the owner is paid; a rotation keeps the old key's earlier statements
// slashable (from the owner's stake) and the old key can never be bound again.
TEST_F(OperatorTest, OwnerAndSignerKeysAreSeparate) {
  // The node's key proves possession for its owner; the owner binds it with that proof.
  CommandResult proof6 = Cli("operator signer-proof --owner " + AddrHex(5) + " --devnet-key 6");
  ASSERT_EQ(proof6.exit_code, 0) << proof6.out;
  const std::string proof_for_6 = proof6.out.substr(0, proof6.out.find('\n'));
  CommandResult r = Cli("operator register --stake 2ether --endpoint 127.0.0.1:7405 --signer " + AddrHex(6) +
                        " --signer-proof " + proof_for_6 + " --devnet-key 5");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("signer " + AddressToChecksumHex(Addr(6))), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stake counts from block"), std::string::npos) << r.out;
  Mine(2);
  auto head = rpc_->BlockNumber();
  ASSERT_TRUE(head.ok());
  const uint64_t ref = *head;
  node::ChainClient reader(rpc_.get(), deployed_, std::nullopt);
  auto set = reader.OperatorsAt(ref);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ(set->size(), 1u);
  EXPECT_EQ((*set)[0].address, Addr(6));  // attestations recover to the signer
  // The node looks itself up by its signing key.
  auto info = reader.GetOperatorInfo(Addr(6));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->endpoint, "127.0.0.1:7405");
  CommandResult status = Cli("operator status --address " + AddrHex(6));
  EXPECT_NE(status.out.find("owner      " + AddressToChecksumHex(Addr(5))), std::string::npos) << status.out;

  // The hot key controls no stake.
  CommandResult hot = Cli("operator deregister --devnet-key 6");
  EXPECT_EQ(hot.exit_code, 1);
  EXPECT_NE(hot.out.find("NotActive"), std::string::npos) << hot.out;

  // Rotate to key 7; key 6 can never come back.
  CommandResult proof7 = Cli("operator signer-proof --owner " + AddrHex(5) + " --devnet-key 7");
  ASSERT_EQ(proof7.exit_code, 0) << proof7.out;
  CommandResult rotated = Cli("operator rotate-signer --signer " + AddrHex(7) + " --signer-proof " +
                              proof7.out.substr(0, proof7.out.find('\n')) + " --devnet-key 5");
  ASSERT_EQ(rotated.exit_code, 0) << rotated.out;
  CommandResult back =
      Cli("operator rotate-signer --signer " + AddrHex(6) + " --signer-proof " + proof_for_6 + " --devnet-key 5");
  EXPECT_EQ(back.exit_code, 1);
  EXPECT_NE(back.out.find("SignerAlreadyBound"), std::string::npos) << back.out;
  Mine(1);
  auto now_set = reader.OperatorsAt(*rpc_->BlockNumber());
  ASSERT_TRUE(now_set.ok());
  ASSERT_EQ(now_set->size(), 1u);
  EXPECT_EQ((*now_set)[0].address, Addr(7));

  // Key 6 equivocated about `ref`, before the rotation: still slashable, from the owner's stake.
  consensus::Eip712Domain domain{deployed_.chain_id, deployed_.manager};
  consensus::Attestation a1{H(7), H(1), H(3), ref}, a2{H(7), H(2), H(3), ref};
  auto s1 = consensus::SignAttestation(Key(6), domain, a1);
  auto s2 = consensus::SignAttestation(Key(6), domain, a2);
  ASSERT_TRUE(s1.ok() && s2.ok());
  std::string equivocation = WriteEvidence(
      "old-signer.json",
      {{"kind", "equivocation"}, {"attestations", {AttestationJson(a1, &*s1), AttestationJson(a2, &*s2)}}});
  CommandResult slashed = Cli("evidence submit " + equivocation + " --devnet-key 0");
  ASSERT_EQ(slashed.exit_code, 0) << slashed.out;
  EXPECT_EQ(CastCall("slashableStakeOf(address)(uint256)", AddrHex(5)), "0");
}

// The squatter: it knows a node's public signing address (from the victim's pending
// registration, its logs, its gossip) and tries to bind it to its own stake first, so that the
// victim's signatures count as its own and the victim can never register that key. The CLI
// refuses before sending; sent anyway, straight through the chain client, the registry reverts.
// Only the victim's own owner, with the signer's proof, binds it.
TEST_F(OperatorTest, SquatterCannotBindAnotherNodesKey) {
  const int victim_owner = 3, victim_signer = 6, squatter = 4;
  // The digest is the registry's own.
  node::ChainClient reader(rpc_.get(), deployed_, std::nullopt);
  auto on_chain = reader.RegistrySignerBindingDigest(Addr(victim_owner), Addr(victim_signer));
  ASSERT_TRUE(on_chain.ok()) << on_chain.status().ToString();
  EXPECT_EQ(*on_chain,
            node::SignerBindingDigest(deployed_.chain_id, deployed_.registry, Addr(victim_owner), Addr(victim_signer)));

  CommandResult made =
      Cli("operator signer-proof --owner " + AddrHex(victim_owner) + " --devnet-key " + std::to_string(victim_signer));
  ASSERT_EQ(made.exit_code, 0) << made.out;
  const std::string victims_proof = made.out.substr(0, made.out.find('\n'));
  ASSERT_EQ(victims_proof.size(), 2u + 130u) << made.out;

  // Through the CLI: without a proof (usage, exit 2), with the victim's proof copied (exit 1).
  const std::string squat = "operator register --stake 2ether --endpoint 127.0.0.1:7410 --signer " +
                            AddrHex(victim_signer) + " --devnet-key " + std::to_string(squatter);
  CommandResult no_proof = Cli(squat);
  EXPECT_EQ(no_proof.exit_code, 2) << no_proof.out;
  EXPECT_NE(no_proof.out.find("needs its --signer-proof"), std::string::npos) << no_proof.out;
  CommandResult copied = Cli(squat + " --signer-proof " + victims_proof);
  EXPECT_EQ(copied.exit_code, 1) << copied.out;
  EXPECT_NE(copied.out.find("is not " + AddressToChecksumHex(Addr(victim_signer)) + "'s proof"), std::string::npos)
      << copied.out;
  CommandResult garbage = Cli(squat + " --signer-proof 0x1234");
  EXPECT_EQ(garbage.exit_code, 1) << garbage.out;
  EXPECT_NE(garbage.out.find("--signer-proof"), std::string::npos) << garbage.out;

  // Straight to the contract: the copied proof, and a proof made by the squatter's own key.
  node::ChainClient attacker(rpc_.get(), deployed_, Key(squatter));
  auto stake = node::ParseEtherAmount("2ether");
  ASSERT_TRUE(stake.ok());
  std::vector<uint8_t> copied_bytes = *BytesFromHex(victims_proof.substr(2));
  auto sent = attacker.Register("127.0.0.1:7410", *stake, Addr(victim_signer), copied_bytes);
  ASSERT_FALSE(sent.ok());
  EXPECT_NE(sent.status().message().find("SignerProofInvalid"), std::string::npos) << sent.status().ToString();
  auto own = node::MakeSignerProof(Key(squatter), deployed_, Addr(squatter));
  ASSERT_TRUE(own.ok());
  sent = attacker.Register("127.0.0.1:7410", *stake, Addr(victim_signer), *own);
  ASSERT_FALSE(sent.ok());
  EXPECT_NE(sent.status().message().find("SignerProofInvalid"), std::string::npos) << sent.status().ToString();
  EXPECT_EQ(CastCall("ownerOf(address)(address)", AddrHex(victim_signer)),
            "0x0000000000000000000000000000000000000000");

  // The victim binds its key with its proof.
  CommandResult victim =
      Cli("operator register --stake 2ether --endpoint 127.0.0.1:7411 --signer " + AddrHex(victim_signer) +
          " --signer-proof " + victims_proof + " --devnet-key " + std::to_string(victim_owner));
  ASSERT_EQ(victim.exit_code, 0) << victim.out;
  auto bound_to = reader.OwnerOf(Addr(victim_signer));
  ASSERT_TRUE(bound_to.ok());
  EXPECT_EQ(*bound_to, Addr(victim_owner));
}

// With few confirmations a node can read an operator set or a seed block's hash that a
// reorganization then replaces. The chain view must not keep serving the replaced ones: every
// node would otherwise derive its committees from a chain the others no longer see.
TEST_F(OperatorTest, ChainViewDropsWhatAReorgReplaced) {
  node::ChainViewOptions options;
  options.rpc_url = anvil_->url();
  options.poll_interval = std::chrono::milliseconds(50);
  auto view = node::RpcChainView::Open(options, deployed_);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_TRUE((*view)->Start({}).ok());

  auto snapshot_id = rpc_->transport()->Call("evm_snapshot", nlohmann::json::array());
  ASSERT_TRUE(snapshot_id.ok()) << snapshot_id.status().ToString();
  ASSERT_EQ(Cli("operator register --stake 2ether --endpoint 127.0.0.1:7401 --devnet-key 1").exit_code, 0);
  Mine(3);  // the stake counts A = 2 blocks after it arrived
  const uint64_t block = *rpc_->BlockNumber();
  auto before = (*view)->OperatorsAt(block);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_EQ((*before)->operators.size(), 1u);
  auto hash_before = (*view)->BlockHashAt(block);
  ASSERT_TRUE(hash_before.ok());

  // The registration's blocks are replaced by empty ones, and the chain grows past `block`.
  auto reverted = rpc_->transport()->Call("evm_revert", nlohmann::json::array({*snapshot_id}));
  ASSERT_TRUE(reverted.ok()) << reverted.status().ToString();
  ASSERT_TRUE(reverted->is_boolean() && reverted->get<bool>());
  while (*rpc_->BlockNumber() < block + 1) Mine(1);
  auto hash_now = rpc_->BlockHash(block);
  ASSERT_TRUE(hash_now.ok());
  ASSERT_NE(*hash_now, *hash_before);

  // Within a few polls the view answers for the new chain.
  bool caught_up = false;
  for (int i = 0; i < 200 && !caught_up; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto hash = (*view)->BlockHashAt(block);
    auto set = (*view)->OperatorsAt(block);
    caught_up = hash.ok() && *hash == *hash_now && set.ok() && (*set)->operators.empty();
  }
  EXPECT_TRUE(caught_up) << "the chain view still serves the replaced block's hash or operator set";
  (*view)->Shutdown();
}

// With chain.rpc_ws the view learns each mined block from anvil's newHeads subscription, long
// before its next poll (ten minutes here), and tells its head listener.
TEST_F(OperatorTest, ChainViewLearnsNewHeadsFromTheSubscriptionBeforeItsPoll) {
  node::ChainViewOptions options;
  options.rpc_url = anvil_->url();
  options.ws_url = "ws://" + anvil_->url().substr(std::string("http://").size());
  options.poll_interval = std::chrono::minutes(10);
  node::MetricsRegistry metrics;
  auto view = node::RpcChainView::Open(options, deployed_, &metrics);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  std::atomic<uint64_t> told{0};
  (*view)->SetHeadListener([&told](uint64_t head) { told = head; });
  ASSERT_TRUE((*view)->Start({}).ok());
  const uint64_t start = (*view)->head();
  ASSERT_EQ(start, *rpc_->BlockNumber());
  // Not a timing assertion: the deadline is far beyond a push, and far below the poll.
  auto wait_for_head = [&](uint64_t want) {
    for (int i = 0; i < 600 && (*view)->head() < want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return (*view)->head();
  };
  // A block mined before the subscription is confirmed is not pushed (the poll would bring
  // it): wait for the confirmation first (a generous deadline: CI machines are loaded).
  uint64_t mined = start;
  for (int i = 0;
       i < 1200 && metrics.RenderPrometheusText().find("consensor_chain_ws_connected 1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(metrics.RenderPrometheusText().find("consensor_chain_ws_connected 1"), std::string::npos)
      << metrics.RenderPrometheusText();
  // anvil may confirm the subscription a moment before it sends heads: a block mined in that
  // moment is not pushed. Mine until one is (the poll, ten minutes away, cannot be the cause).
  auto pushed = [&metrics] {
    return metrics.RenderPrometheusText().find("consensor_chain_ws_heads_total 0") == std::string::npos;
  };
  for (int i = 0; i < 20 && !pushed(); ++i) {
    Mine(1);
    ++mined;
    for (int j = 0; j < 40 && !pushed(); ++j) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(pushed()) << metrics.RenderPrometheusText();
  EXPECT_EQ(wait_for_head(mined), mined) << metrics.RenderPrometheusText();
  Mine(3);
  mined += 3;
  EXPECT_EQ(wait_for_head(mined), mined);
  EXPECT_EQ(told.load(), mined);
  const std::string text = metrics.RenderPrometheusText();
  EXPECT_NE(text.find("consensor_chain_ws_connected 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("consensor_chain_ws_heads_total 0"), std::string::npos) << text;
  (*view)->Shutdown();
}

TEST_F(OperatorTest, WrongChainIsRefused) {
  // A deployment file for another chain id than the RPC serves.
  auto json = nlohmann::json::parse(testing_support::ReadWholeFile(deployment_));
  json["chainId"] = 1;
  std::string other = (dir_ / "other.json").string();
  std::ofstream(other) << json.dump();
  CommandResult r = testing_support::RunCommand(
      testing_support::CliBinary(), "operator register --stake 2ether --endpoint x:1 --devnet-key 1 --rpc " +
                                        anvil_->url() + " --deployment " + other);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("wrong chain"), std::string::npos) << r.out;
  // Keys never appear in output.
  EXPECT_EQ(r.out.find(kKeys[1]), std::string::npos);
}

TEST(EtherAmount, Parses) {
  EXPECT_EQ(Uint256ToDecimal(*node::ParseEtherAmount("1ether")), "1000000000000000000");
  EXPECT_EQ(Uint256ToDecimal(*node::ParseEtherAmount("0.5ether")), "500000000000000000");
  EXPECT_EQ(Uint256ToDecimal(*node::ParseEtherAmount("20gwei")), "20000000000");
  EXPECT_EQ(Uint256ToDecimal(*node::ParseEtherAmount("123")), "123");
  for (const char* bad : {"", "ether", "1.5", "0.0000000000000000001ether", "-1ether", "1e18", "abc"}) {
    EXPECT_FALSE(node::ParseEtherAmount(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace consensor
