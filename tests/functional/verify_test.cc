// `consensor verify` on a real anvil with the contracts deployed by the forge script: four
// operators with equal stake, certificates signed here with anvil's dev keys over a committee
// computed with consensus::CommitteeOrder, checked by the CLI against the chain. Also the chain
// client's verifyCertificate call on its own, including the contract's custom errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <google/protobuf/util/json_util.h>

#include "consensor/v1/node.pb.h"
#include "consensus/attestation.h"
#include "consensus/committee.h"
#include "consensus/task.h"
#include "node/api/task_spec.h"
#include "node/chain/chain_client.h"
#include "node/chain/eth_rpc.h"
#include "node/cli/chain_flags.h"
#include "node/keys/keystore.h"
#include "tests/functional/anvil_harness.h"
#include "tests/test_paths.h"

namespace consensor {
namespace {

namespace fs = std::filesystem;
using testing_support::AnvilProcess;
using testing_support::CommandResult;

Secp256k1Secret Key(size_t i) { return *node::DevnetKey(i); }
Address20 Addr(size_t i) { return *AddressFromSecretKey(Key(i)); }

// The client's request; certificates carry it, and its id is what the attestations sign.
v1::SubmitTaskRequest Request(uint32_t replicas = 3, uint32_t quorum = 2, uint64_t nonce = 11) {
  v1::SubmitTaskRequest r;
  r.set_graph_sha256(std::string(62, '7') + "a1");
  (*r.mutable_inputs())["x"] = std::string(62, '5') + "b2";
  r.mutable_options()->set_nonce(nonce);
  r.mutable_options()->set_replicas(replicas);
  r.mutable_options()->set_quorum(quorum);
  r.mutable_options()->set_protocol_version(consensus::kProtocolVersion);
  return r;
}

Hash256 TaskId() { return node::TaskIdOfRequest(Request())->bytes(); }

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("consensor-verify-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    anvil_ = std::make_unique<AnvilProcess>((dir_ / "anvil.log").string());
    ASSERT_TRUE(anvil_->Start()) << anvil_->Log();
    deployment_rel_ = "deployments/test-verify-" + std::to_string(getpid()) + ".json";
    deployment_ = testing_support::SourceDir() + "/contracts/" + deployment_rel_;
    CommandResult deploy = testing_support::DeployContracts(anvil_->url(), deployment_rel_);
    ASSERT_EQ(deploy.exit_code, 0) << deploy.out;
    auto d = node::LoadDeployment(deployment_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    domain_ = {d->chain_id, d->manager};
    rpc_ = std::make_unique<node::EthRpc>(std::move(node::NewHttpRpcTransport(anvil_->url())).value());
    chain_ = std::make_unique<node::ChainClient>(rpc_.get(), *d, std::nullopt);

    // Operators 1..4 with 2 ETH each; the reference block is then made final by one more block.
    for (int i = 1; i <= 4; ++i) {
      CommandResult r = Cli("operator register --stake 2ether --endpoint 127.0.0.1:" + std::to_string(7400 + i) +
                            " --devnet-key " + std::to_string(i));
      ASSERT_EQ(r.exit_code, 0) << r.out;
    }
    // The stake counts activationDelayBlocks after it arrived: mine them.
    auto activation = chain_->ActivationDelayBlocks();
    ASSERT_TRUE(activation.ok()) << activation.status().ToString();
    ASSERT_TRUE(
        rpc_->transport()->Call("anvil_mine", nlohmann::json::array({testing_support::HexQuantity(*activation)})).ok());
    ref_ = *rpc_->BlockNumber();
    Mine();
    // The committee is drawn from the hash of block ref + R + 1 (R = 256 by default): mine it.
    auto params = chain_->ReadDeploymentParams();
    ASSERT_TRUE(params.ok()) << params.status().ToString();
    const uint64_t seed_block = consensus::SeedBlock(ref_, params->max_reference_age);
    ASSERT_TRUE(rpc_->transport()->Call("anvil_mine", nlohmann::json::array({seed_block - ref_})).ok());
    auto seed = rpc_->BlockHash(seed_block);
    ASSERT_TRUE(seed.ok()) << seed.status().ToString();
    seed_ = *seed;

    auto set = chain_->OperatorsAt(ref_);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ASSERT_EQ(set->size(), 4u);
    const std::vector<consensus::WeightedOperator>& weighted = *set;
    auto order = consensus::CommitteeOrder(TaskId(), ref_, seed_, weighted, weighted.size());
    ASSERT_TRUE(order.ok()) << order.status().ToString();
    for (const Address20& a : *order) {
      for (size_t i = 1; i <= 4; ++i) {
        if (Addr(i) == a) order_.push_back(i);
      }
    }
    ASSERT_EQ(order_.size(), 4u);
    attestation_ = {TaskId(), Hash256{}, Hash256{}, ref_};
    attestation_.result_root[31] = 0x52;
    attestation_.trace_root[31] = 0x7e;
  }

  void TearDown() override {
    anvil_.reset();
    fs::remove(deployment_);
    fs::remove_all(dir_);
  }

  void Mine() { ASSERT_TRUE(rpc_->transport()->Call("evm_mine", nlohmann::json::array()).ok()); }

  CommandResult Cli(const std::string& args) {
    return testing_support::RunCommand(testing_support::CliBinary(),
                                       args + " --rpc " + anvil_->url() + " --deployment " + deployment_);
  }

  // A certificate signed by dev accounts `signers`, listed in ascending address order.
  v1::Certificate Make(std::vector<size_t> signers, bool dispute) {
    std::sort(signers.begin(), signers.end(), [](size_t x, size_t y) { return Addr(x) < Addr(y); });
    v1::Certificate c;
    c.set_task_id(ToHex(attestation_.task_id));
    c.set_result_root(ToHex(attestation_.result_root));
    c.set_trace_root(ToHex(attestation_.trace_root));
    c.set_reference_block(attestation_.reference_block);
    for (size_t i : signers) {
      c.add_signers(AddressToChecksumHex(Addr(i)));
      c.add_signatures(ToHex(*consensus::SignAttestation(Key(i), domain_, attestation_)));
    }
    if (dispute) {
      c.set_dispute(true);
    } else {
      c.set_replicas(3);
      c.set_quorum(2);
      c.set_committee_size(3);
    }
    *c.mutable_request() = Request();
    return c;
  }

  std::string WriteRequest(const std::string& name, const v1::SubmitTaskRequest& r) {
    std::string json;
    EXPECT_TRUE(google::protobuf::util::MessageToJsonString(r, &json).ok());
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << json;
    return path;
  }

  std::vector<std::vector<uint8_t>> Signatures(const v1::Certificate& c) {
    std::vector<std::vector<uint8_t>> sigs;
    for (const std::string& hex : c.signatures()) sigs.push_back(*node::ParseData("0x" + hex, "signature"));
    return sigs;
  }

  std::string Write(const std::string& name, const v1::Certificate& c) {
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    EXPECT_TRUE(google::protobuf::util::MessageToJsonString(c, &json, options).ok());
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << json;
    return path;
  }

  fs::path dir_;
  std::unique_ptr<AnvilProcess> anvil_;
  std::string deployment_rel_, deployment_;
  consensus::Eip712Domain domain_;
  std::unique_ptr<node::EthRpc> rpc_;
  std::unique_ptr<node::ChainClient> chain_;
  uint64_t ref_ = 0;
  Hash256 seed_{};             // hash of the seed block ref_ + R + 1
  std::vector<size_t> order_;  // dev account indices in the task's committee order
  consensus::Attestation attestation_;
};

TEST_F(VerifyTest, ResultCertificate) {
  const std::string file = Write("cert.json", Make({order_[0], order_[1]}, false));
  const std::string request = WriteRequest("request.json", Request());
  CommandResult ok = Cli("verify --certificate " + file + " --request " + request);
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("VERIFIED    2 valid signatures; guarantee: committee"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("task        " + ToHex(TaskId()) + " (yours)"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("request     replicas 3, quorum 2, protocol version"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("reference   block " + std::to_string(ref_)), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find(AddressToChecksumHex(Addr(order_[0])) + "  position 0  2 ETH"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("stake       4 ETH of 8 ETH (50.00%); contract threshold 66.67%, not met"), std::string::npos)
      << ok.out;

  CommandResult json = Cli("verify --certificate " + file + " --request " + request + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  auto j = nlohmann::json::parse(json.out.substr(0, json.out.rfind('}') + 1), nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  EXPECT_EQ(j["verified"], true);
  EXPECT_EQ(j["guarantee"], "committee");
  EXPECT_EQ(j["anchored"], true);
  EXPECT_EQ(j["signed_stake"], "4000000000000000000");
  EXPECT_EQ(j["total_stake"], "8000000000000000000");
  EXPECT_EQ(j["meets_threshold"], false);
  EXPECT_EQ(j["threshold_bps"], 6667);
  EXPECT_EQ(j["signers"].size(), 2u);

  // A committee certificate protects the client who asked: without the request it is a valid
  // certificate with a guarantee nobody else can rely on, and --require-stake wants more.
  CommandResult unanchored = Cli("verify --certificate " + file);
  EXPECT_EQ(unanchored.exit_code, 1) << unanchored.out;
  EXPECT_NE(unanchored.out.find("guarantee   committee"), std::string::npos) << unanchored.out;
  EXPECT_NE(unanchored.out.find("NOT VERIFIED  a committee certificate protects only the client"), std::string::npos)
      << unanchored.out;
  // The reference block is fresh: certified, not final; --require-final refuses it until the
  // chain passes ref + R + W (the deploy defaults: 256 + 300 blocks).
  EXPECT_NE(ok.out.find("finality    certified, not final: challengeable until block " + std::to_string(ref_ + 557)),
            std::string::npos)
      << ok.out;
  CommandResult not_final = Cli("verify --certificate " + file + " --request " + request + " --require-final");
  EXPECT_EQ(not_final.exit_code, 1) << not_final.out;
  EXPECT_NE(not_final.out.find("--require-final: the result is certified but its challenge window is open"),
            std::string::npos)
      << not_final.out;
  CommandResult stake = Cli("verify --certificate " + file + " --request " + request + " --require-stake");
  EXPECT_EQ(stake.exit_code, 1) << stake.out;
  EXPECT_NE(stake.out.find("--require-stake: the signers hold 4 ETH of 8 ETH (50.00%), below the contract's "
                           "threshold of 66.67%"),
            std::string::npos)
      << stake.out;

  // Tampering with the result invalidates every signature.
  v1::Certificate tampered = Make({order_[0], order_[1]}, false);
  tampered.set_result_root(std::string(63, '0') + "1");
  CommandResult bad = Cli("verify --certificate " + Write("tampered.json", tampered));
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("error: signature 0"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("does not recover to its signer"), std::string::npos) << bad.out;
  EXPECT_EQ(bad.out.find("VERIFIED"), std::string::npos) << bad.out;
  CommandResult bad_json = Cli("verify --certificate " + Write("tampered.json", tampered) + " --json");
  EXPECT_EQ(bad_json.exit_code, 1);
  EXPECT_NE(bad_json.out.find("\"verified\": false"), std::string::npos) << bad_json.out;

  // A member beyond the committee prefix may not sign.
  CommandResult outsider = Cli("verify --certificate " + Write("outsider.json", Make({order_[0], order_[3]}, false)) +
                               " --request " + request);
  EXPECT_EQ(outsider.exit_code, 1);
  EXPECT_NE(outsider.out.find("guarantee   none"), std::string::npos) << outsider.out;
  EXPECT_NE(outsider.out.find("is at position 3 of the task's committee order"), std::string::npos) << outsider.out;

  // Past ref + R + 1 + W the same certificate is final, and --require-final accepts it.
  ASSERT_TRUE(rpc_->transport()->Call("anvil_mine", nlohmann::json::array({557})).ok());
  CommandResult final_now = Cli("verify --certificate " + file + " --request " + request + " --require-final");
  EXPECT_EQ(final_now.exit_code, 0) << final_now.out;
  EXPECT_NE(
      final_now.out.find("finality    final: the challenge window closed after block " + std::to_string(ref_ + 557)),
      std::string::npos)
      << final_now.out;
}

// Issue 16, hole 1, against the real contracts: one operator signs alone and rewrites the
// unsigned fields, or makes up its own single-replica task. Whatever it does, the certificate
// does not verify for the client's task nor as a stake certificate.
TEST_F(VerifyTest, SingleOperatorForgeryIsRefused) {
  const std::string request = WriteRequest("request.json", Request());
  const size_t forger = order_[0];
  // 1. The client's task, with the replication copies rewritten.
  v1::Certificate rewritten = Make({forger}, false);
  rewritten.set_replicas(1);
  rewritten.set_quorum(1);
  rewritten.set_committee_size(4);
  for (const std::string& extra : {std::string(), " --request " + request, std::string(" --require-stake")}) {
    CommandResult r = Cli("verify --certificate " + Write("rewritten.json", rewritten) + extra);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("claims quorum 1 of 1 replicas, but its signed task asks for quorum 2 of 3"),
              std::string::npos)
        << r.out;
  }
  // 2. A task of its own with one replica, its nonce ground until it heads the committee order.
  consensus::Attestation own = attestation_;
  v1::SubmitTaskRequest own_request;
  for (uint64_t nonce = 0;; ++nonce) {
    ASSERT_LT(nonce, 1000u) << "no nonce puts the forger first";
    own_request = Request(1, 1, nonce);
    own.task_id = node::TaskIdOfRequest(own_request)->bytes();
    auto set = chain_->OperatorsAt(ref_);
    ASSERT_TRUE(set.ok());
    auto first = consensus::CommitteeOrder(own.task_id, ref_, seed_, *set, 1);
    ASSERT_TRUE(first.ok());
    if ((*first)[0] == Addr(forger)) break;
  }
  v1::Certificate forged;
  forged.set_task_id(ToHex(own.task_id));
  forged.set_result_root(ToHex(own.result_root));
  forged.set_trace_root(ToHex(own.trace_root));
  forged.set_reference_block(own.reference_block);
  forged.add_signers(AddressToChecksumHex(Addr(forger)));
  forged.add_signatures(ToHex(*consensus::SignAttestation(Key(forger), domain_, own)));
  forged.set_replicas(1);
  forged.set_quorum(1);
  forged.set_committee_size(1);
  *forged.mutable_request() = own_request;
  const std::string file = Write("forged.json", forged);
  // Valid as what it is: a committee of one for a task nobody else asked for...
  CommandResult alone = Cli("verify --certificate " + file);
  EXPECT_EQ(alone.exit_code, 1) << alone.out;
  EXPECT_NE(alone.out.find("guarantee   committee"), std::string::npos) << alone.out;
  EXPECT_NE(alone.out.find("NOT VERIFIED"), std::string::npos) << alone.out;
  // ...so not for the client's request,
  CommandResult theirs = Cli("verify --certificate " + file + " --request " + request);
  EXPECT_EQ(theirs.exit_code, 1) << theirs.out;
  EXPECT_NE(theirs.out.find("but your request (" + request + ") is task " + ToHex(TaskId())), std::string::npos)
      << theirs.out;
  // ...and not on stake.
  CommandResult stake = Cli("verify --certificate " + file + " --require-stake");
  EXPECT_EQ(stake.exit_code, 1) << stake.out;
  EXPECT_NE(stake.out.find("the signers hold 2 ETH of 8 ETH (25.00%)"), std::string::npos) << stake.out;
}

TEST_F(VerifyTest, DisputeCertificateNeedsTheThreshold) {
  // 2 of 4 equal stakes is 50% < 66.67%.
  CommandResult two = Cli("verify --certificate " + Write("two.json", Make({order_[1], order_[3]}, true)));
  EXPECT_EQ(two.exit_code, 1) << two.out;
  EXPECT_NE(
      two.out.find("dispute certificate carries 4 ETH of 8 ETH (50.00%), below the contract's threshold of 66.67%"),
      std::string::npos)
      << two.out;
  // 3 of 4 is 75%, from any members of the operator set.
  CommandResult three =
      Cli("verify --certificate " + Write("three.json", Make({order_[1], order_[2], order_[3]}, true)));
  ASSERT_EQ(three.exit_code, 0) << three.out;
  EXPECT_NE(three.out.find("dispute certificate; committee: all 4 operators"), std::string::npos) << three.out;
  EXPECT_NE(three.out.find("6 ETH of 8 ETH (75.00%); contract threshold 66.67%, met"), std::string::npos) << three.out;
  EXPECT_NE(three.out.find("VERIFIED"), std::string::npos) << three.out;
}

TEST_F(VerifyTest, ChainClientVerifyCertificate) {
  auto threshold = chain_->ThresholdBps();
  ASSERT_TRUE(threshold.ok()) << threshold.status().ToString();
  EXPECT_EQ(*threshold, 6667u);

  v1::Certificate three = Make({1, 2, 3}, true);
  auto stake = chain_->VerifyCertificate(attestation_, Signatures(three));
  ASSERT_TRUE(stake.ok()) << stake.status().ToString();
  EXPECT_EQ(Uint256ToDecimal(stake->signed_stake), "6000000000000000000");
  EXPECT_EQ(Uint256ToDecimal(stake->total_stake), "8000000000000000000");
  EXPECT_TRUE(stake->meets_threshold);

  // The contract's own checks come back as its custom errors.
  auto sigs = Signatures(three);
  std::swap(sigs[0], sigs[2]);
  auto unsorted = chain_->VerifyCertificate(attestation_, sigs);
  ASSERT_FALSE(unsorted.ok());
  EXPECT_EQ(unsorted.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(unsorted.status().message().find("SignersNotAscending("), std::string::npos) << unsorted.status().message();
  auto empty = chain_->VerifyCertificate(attestation_, {});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("EmptyCertificate()"), std::string::npos) << empty.status().message();
  consensus::Attestation future = attestation_;
  future.reference_block = *rpc_->BlockNumber() + 100;
  auto not_final = chain_->VerifyCertificate(future, Signatures(three));
  ASSERT_FALSE(not_final.ok());
  EXPECT_NE(not_final.status().message().find("ReferenceBlockNotFinal("), std::string::npos)
      << not_final.status().message();
  // Dev account 5 never registered.
  auto sig5 = consensus::SignAttestation(Key(5), domain_, attestation_);
  ASSERT_TRUE(sig5.ok());
  auto not_operator = chain_->VerifyCertificate(attestation_, {std::vector<uint8_t>(sig5->begin(), sig5->end())});
  ASSERT_FALSE(not_operator.ok());
  EXPECT_NE(
      not_operator.status().message().find("SignerNotOperatorAtReferenceBlock(" + AddressToChecksumHex(Addr(5)) + ")"),
      std::string::npos)
      << not_operator.status().message();
}

TEST_F(VerifyTest, ClearErrors) {
  const std::string file = Write("cert.json", Make({order_[0], order_[1]}, false));
  // A reference block that is not mined yet.
  attestation_.reference_block = *rpc_->BlockNumber() + 1;
  CommandResult early = Cli("verify --certificate " + Write("early.json", Make({order_[0], order_[1]}, false)));
  EXPECT_EQ(early.exit_code, 1);
  EXPECT_NE(early.out.find("is not mined yet"), std::string::npos) << early.out;
  // Not a certificate.
  std::ofstream(dir_ / "junk.json") << "{\"task_id\": 5}";
  CommandResult junk = Cli("verify --certificate " + (dir_ / "junk.json").string());
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_NE(junk.out.find("is not a consensor.v1.Certificate in JSON"), std::string::npos) << junk.out;
  // A deployment for another chain.
  auto json = nlohmann::json::parse(testing_support::ReadWholeFile(deployment_));
  json["chainId"] = 1;
  const std::string other = (dir_ / "other.json").string();
  std::ofstream(other) << json.dump();
  CommandResult wrong =
      testing_support::RunCommand(testing_support::CliBinary(), "verify --certificate " + file + " --rpc " +
                                                                    anvil_->url() + " --deployment " + other);
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.out.find("wrong chain"), std::string::npos) << wrong.out;
  // A node that is not there.
  CommandResult no_node = Cli("verify " + ToHex(TaskId()) + " --node 127.0.0.1:1");
  EXPECT_EQ(no_node.exit_code, 1);
  EXPECT_NE(no_node.out.find("error: "), std::string::npos) << no_node.out;
  // Usage.
  EXPECT_EQ(Cli("verify").exit_code, 2);
  EXPECT_EQ(Cli("verify " + ToHex(TaskId()) + " --certificate " + file).exit_code, 2);
}

TEST_F(VerifyTest, TaskFromANode) {
  // A single node (no network mode) finishes tasks without a certificate: verify says so.
  testing_support::DaemonProcess daemon((dir_ / "node").string(), {});
  ASSERT_TRUE(daemon.Start()) << daemon.Log();
  const std::string node = " --node " + daemon.address();
  CommandResult submitted = testing_support::RunCommand(
      testing_support::CliBinary(), "submit " + testing_support::SourceDir() + "/examples/mlp.cgraph --input x=" +
                                        testing_support::SourceDir() + "/examples/mlp_x.npy --wait" + node);
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out;
  const size_t at = submitted.out.find("task     ");
  ASSERT_NE(at, std::string::npos) << submitted.out;
  const std::string task_id = submitted.out.substr(at + 9, 64);
  CommandResult none = Cli("verify " + task_id + node);
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.out.find("task " + task_id + " has no certificate on node " + daemon.address()), std::string::npos)
      << none.out;
  CommandResult unknown = Cli("verify " + std::string(64, 'e') + node);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.out.find("error: fetching task " + std::string(64, 'e')), std::string::npos) << unknown.out;
}

}  // namespace
}  // namespace consensor
