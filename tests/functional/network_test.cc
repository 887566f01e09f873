// Functional tests of network mode: real consensord processes joined into an operator network
// on a real anvil chain (tests/functional/network_harness.h). Tasks are submitted over gRPC and
// must finalize with certificates that verify on-chain; injected faults (corrupt output,
// equivocation, silence, a crash mid-task) must be detected and, where provable, slashed on the
// contract; a node killed with -9 must catch up after a restart; a node with a bad clock or an
// unreachable endpoint must not cause a wrong finalization; and messages signed by keys that are
// not registered must be ignored.
//
// Every result is checked against the honest result computed here with the executor. Waits are
// bounded polling loops; nothing asserts on timing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/npy.h"
#include "consensor/v1/node.grpc.pb.h"
#include "consensor/v1/peer.grpc.pb.h"
#include "consensus/commitment.h"
#include "consensus/committee.h"
#include "consensus/task.h"
#include "executor/merkle.h"
#include "node/api/task_spec.h"
#include "node/p2p/gossip.h"
#include "node/p2p/peer_request_auth.h"
#include "tests/functional/network_harness.h"
#include "tests/test_paths.h"

namespace consensor {
namespace {

using namespace std::chrono_literals;
using testing_support::IsCertified;
using testing_support::NetworkNode;
using testing_support::NodeSpec;
using testing_support::Operator;
using testing_support::TestNetwork;
using testing_support::WaitUntil;

// Generous: a task finalizes in about a second on an idle machine.
constexpr std::chrono::milliseconds kFinality = 90s;
constexpr char kDroppedUnregistered[] = "consensor_p2p_messages_dropped_total{reason=\"unregistered\"}";

// A task submitted to a node, with the result the executor computes for it here.
struct Submitted {
  std::string id;
  std::string entry;                           // the node it was submitted to
  std::string honest_root;                     // result root computed locally
  std::map<std::string, std::string> outputs;  // name -> tensor hash computed locally
  v1::SubmitTaskRequest request;
};

uint64_t NextNonce() {
  static uint64_t nonce = 1000;
  return ++nonce;
}

// Uploads `g` and `inputs` to `node` and submits the task.
StatusOr<Submitted> SubmitGraph(NetworkNode& node, const executor::Graph& g,
                                const std::map<std::string, Tensor>& inputs, uint32_t replicas, uint32_t quorum) {
  ASSIGN_OR_RETURN(executor::RunResult local, testing_support::ExecuteLocally(g, inputs));
  Submitted s;
  s.entry = node.name();
  s.honest_root = ToHex(local.result_root);
  for (const auto& out : local.outputs) s.outputs[out.name] = ToHex(TensorHash(out.tensor));
  ASSIGN_OR_RETURN(s.request, testing_support::UploadTask(node.client(), g, inputs, replicas, quorum, NextNonce()));
  ASSIGN_OR_RETURN(v1::SubmitTaskResponse response, node.client().SubmitTask(s.request));
  if (response.already_known()) return Internal("task " + response.task_id() + " was already known");
  s.id = response.task_id();
  return s;
}

// TinyModel with input x = RandomF32(seed).
StatusOr<Submitted> Submit(NetworkNode& node, uint32_t replicas, uint32_t quorum, uint32_t seed) {
  return SubmitGraph(node, testing_support::TinyModel(), {{"x", testing_support::RandomF32({4, 8}, seed)}}, replicas,
                     quorum);
}

std::string TaskIdOf(const v1::SubmitTaskRequest& r) { return node::TaskIdOfRequest(r)->Hex(); }

// Polls the node until the task is SUCCEEDED with outputs and a certificate (and `also` holds).
StatusOr<v1::Task> WaitCertified(NetworkNode& node, const std::string& id,
                                 std::chrono::milliseconds timeout = kFinality,
                                 const std::function<bool(const v1::Task&)>& also = nullptr) {
  v1::Task last;
  Status error = OkStatus();
  const bool done = WaitUntil(
      [&] {
        auto t = node.GetTask(id);
        if (!t.ok()) {
          error = t.status();
          return false;
        }
        last = *t;
        return IsCertified(last) && (!also || also(last));
      },
      timeout);
  if (done) return last;
  return DeadlineExceeded(node.name() + " did not certify " + id + ": " +
                          (last.task_id().empty() ? error.ToString() : testing_support::Describe(last)));
}

// Polls the node until `done` holds for the task.
StatusOr<v1::Task> WaitUntilTask(NetworkNode& node, const std::string& id, std::chrono::milliseconds timeout,
                                 const std::function<bool(const v1::Task&)>& done) {
  v1::Task last;
  Status error = OkStatus();
  const bool reached = WaitUntil(
      [&] {
        auto t = node.GetTask(id);
        if (!t.ok()) {
          error = t.status();
          return false;
        }
        last = *t;
        return done(last);
      },
      timeout);
  if (reached) return last;
  return DeadlineExceeded(node.name() + ": task " + id + " never got there: " +
                          (last.task_id().empty() ? error.ToString() : testing_support::Describe(last)));
}

// Polls until the chain has mined block `block`.
bool WaitForBlock(TestNetwork& net, uint64_t block) {
  return WaitUntil(
      [&] {
        auto head = net.Head();
        return head.ok() && *head >= block;
      },
      60s);
}

// Polls until the task's committee is drawn: its seed block, ref + R + 1, is mined and settled.
StatusOr<v1::Task> WaitSeated(NetworkNode& node, const std::string& id) {
  return WaitUntilTask(node, id, kFinality, [](const v1::Task& t) { return t.consensus().committee_size() > 0; });
}

// The task's record agrees with the honest result: the certified and the stored result roots,
// and every output's tensor hash.
void ExpectHonest(const v1::Task& t, const Submitted& s, const std::string& where) {
  EXPECT_EQ(t.consensus().certificate().result_root(), s.honest_root) << where << ": " << testing_support::Describe(t);
  EXPECT_EQ(t.result().result_root(), s.honest_root) << where << ": " << testing_support::Describe(t);
  std::map<std::string, std::string> got;
  for (const auto& out : t.result().outputs()) got[out.name()] = out.tensor_hash();
  EXPECT_EQ(got, s.outputs) << where;
}

bool Signed(const v1::Certificate& c, const NetworkNode& n) {
  return std::find(c.signers().begin(), c.signers().end(), n.operator_hex()) != c.signers().end();
}

std::vector<std::string> Committee(const v1::Task& t) {
  return {t.consensus().committee().begin(), t.consensus().committee().end()};
}

bool InCommittee(const v1::Task& t, const NetworkNode& n) {
  return std::find(t.consensus().committee().begin(), t.consensus().committee().end(), n.operator_hex()) !=
         t.consensus().committee().end();
}

// A slash record of `kind` against `accused` in some other running node's copy of the task
// (with a transaction hash when `need_tx`).
bool HasSlashRecord(TestNetwork& net, const std::string& id, const NetworkNode& accused, const std::string& kind,
                    bool need_tx) {
  for (size_t i = 0; i < net.size(); ++i) {
    NetworkNode& n = net.node(i);
    if (&n == &accused || !n.running()) continue;
    auto t = n.GetTask(id);
    if (!t.ok()) continue;
    for (const auto& s : t->consensus().slashes()) {
      if (s.operator_address() == accused.operator_hex() && s.kind() == kind && (!need_tx || !s.tx_hash().empty())) {
        return true;
      }
    }
  }
  return false;
}

bool SlashedOnChain(TestNetwork& net, const NetworkNode& n) {
  auto info = net.OperatorInfo(n.operator_address());
  return info.ok() && info->slashed;
}

std::string StakeOf(TestNetwork& net, const NetworkNode& n) {
  auto info = net.OperatorInfo(n.operator_address());
  return info.ok() ? Uint256ToDecimal(info->stake) : info.status().ToString();
}

constexpr char kTenEther[] = "10000000000000000000";

// `consensor verify TASK --node ADDR` against the chain, without trusting the node.
void ExpectVerifies(TestNetwork& net, NetworkNode& n, const std::string& id) {
  testing_support::CommandResult v = net.Cli("verify " + id + " --node " + n.address());
  EXPECT_EQ(v.exit_code, 0) << n.name() << ": " << v.out;
  EXPECT_NE(v.out.find("VERIFIED"), std::string::npos) << n.name() << ": " << v.out;
}

// ---------------------------------------------------------------------------------------------
// Four honest operators, shared by the tests of the suite.

class NetworkHonestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Peers on ports of their own: the tests below exercise that setup, the other suites the
    // default (one port for clients and peers).
    testing_support::NetworkOptions options;
    options.separate_peer_ports = true;
    net_ = new TestNetwork("honest", options);
    error_ = net_->Start({Operator(1), Operator(2), Operator(3), Operator(4)});
  }
  static void TearDownTestSuite() {
    delete net_;
    net_ = nullptr;
  }
  void SetUp() override { ASSERT_EQ(error_, "") << "the network did not start"; }
  void TearDown() override {
    if (HasFailure()) {
      net_->MarkFailed();
      net_->PrintLogs();
    }
  }
  static TestNetwork* net_;
  static std::string error_;
};
TestNetwork* NetworkHonestTest::net_ = nullptr;
std::string NetworkHonestTest::error_;

// A task finalizes with a certificate that verifies on-chain, and every node, committee member
// or observer, ends SUCCEEDED with the same certified result (observers fetch it).
TEST_F(NetworkHonestTest, CertificateVerifiesOnChainAndEveryNodeAgrees) {
  TestNetwork& net = *net_;
  auto s = Submit(net.node(0), 3, 2, 11);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto task = WaitCertified(net.node(0), s->id);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  ExpectHonest(*task, *s, "entry node");
  const v1::Certificate& cert = task->consensus().certificate();
  EXPECT_FALSE(cert.dispute());
  EXPECT_EQ(cert.task_id(), s->id);
  EXPECT_EQ(cert.replicas(), 3u);
  EXPECT_EQ(cert.quorum(), 2u);
  EXPECT_GE(cert.committee_size(), 3u);
  EXPECT_GE(cert.signers_size(), 2);
  EXPECT_EQ(cert.signers_size(), cert.signatures_size());
  EXPECT_EQ(task->consensus().committee_size(), 3);

  testing_support::CommandResult v = net.Cli("verify " + s->id + " --node " + net.node(0).address());
  ASSERT_EQ(v.exit_code, 0) << v.out;
  EXPECT_NE(v.out.find("VERIFIED"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find(s->id), std::string::npos) << v.out;

  int members = 0, observers = 0;
  for (size_t i = 0; i < net.size(); ++i) {
    NetworkNode& n = net.node(i);
    auto t = WaitCertified(n, s->id);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ExpectHonest(*t, *s, n.name());
    EXPECT_EQ(Committee(*t), Committee(*task)) << n.name();
    EXPECT_EQ(t->consensus().reference_block(), cert.reference_block()) << n.name();
    EXPECT_EQ(t->consensus().member(), InCommittee(*t, n)) << n.name();
    if (!t->consensus().member()) {
      ++observers;
      // The observer never executed: its outputs came from a signer, checked against the
      // certificate, and they are served like any other.
      for (const auto& out : t->result().outputs()) {
        auto blob = n.client().GetBlob(out.blob_sha256(), 1 << 20);
        ASSERT_TRUE(blob.ok()) << blob.status().ToString();
        auto tensor = ParseNpy(*blob, NpyLimits{});
        ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();
        EXPECT_EQ(ToHex(TensorHash(*tensor)), s->outputs[out.name()]) << n.name() << " output " << out.name();
      }
      ExpectVerifies(net, n, s->id);
    } else {
      ++members;
    }
  }
  EXPECT_EQ(members, 3);
  EXPECT_EQ(observers, 1);

  // RunTask on a network node answers once the task is certified: one call, with the
  // certificate and the honest result.
  const std::map<std::string, Tensor> inputs = {{"x", testing_support::RandomF32({4, 8}, 12)}};
  auto local = testing_support::ExecuteLocally(testing_support::TinyModel(), inputs);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  auto request =
      testing_support::UploadTask(net.node(1).client(), testing_support::TinyModel(), inputs, 3, 2, NextNonce());
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  auto ran = net.node(1).client().RunTask(*request, kFinality);
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  EXPECT_EQ(ran->task().task_id(), TaskIdOf(*request));
  EXPECT_TRUE(IsCertified(ran->task())) << v1::TaskState_Name(ran->task().state());
  EXPECT_EQ(ran->task().result().result_root(), ToHex(local->result_root));
}

// Issue 18: a non-member's cost per task is constant. The one operator outside a 3-of-4
// committee (and not the entry node) fetches none of the task's blobs, serves none, and records
// the certified result without its outputs; a client asking it for the outputs still gets them:
// they are fetched then from the entry node or the committee and checked against the
// certificate (and `consensor verify` against it works).
TEST_F(NetworkHonestTest, NonMemberFetchesNoBlobAndServesTheResultOnDemand) {
  TestNetwork& net = *net_;
  const auto Counters = [&](NetworkNode& n) {
    return std::vector<double>{n.Metric("consensor_blobs_fetched_total"), n.Metric("consensor_blob_sent_bytes_total"),
                               n.Metric("consensor_outputs_fetched_on_demand_total")};
  };
  std::optional<Submitted> task;
  NetworkNode* outsider = nullptr;
  std::vector<double> before;
  for (uint32_t seed = 60; seed < 66 && outsider == nullptr; ++seed) {
    std::vector<std::vector<double>> counters;
    for (size_t i = 0; i < net.size(); ++i) counters.push_back(Counters(net.node(i)));
    auto s = Submit(net.node(1), 3, 2, seed);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (size_t i = 0; i < net.size(); ++i) {
      auto t = WaitCertified(net.node(i), s->id);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      ExpectHonest(*t, *s, net.node(i).name());
      if (!InCommittee(*t, net.node(i)) && i != 1) {
        outsider = &net.node(i);
        before = counters[i];
      }
    }
    task = *s;
  }
  ASSERT_NE(outsider, nullptr) << "the entry node was the non-member of every task";
  // Nothing moved: no blob fetched by it, no GetBlob served by it, no output fetched.
  EXPECT_EQ(Counters(*outsider), before) << outsider->name();

  // A client asks it for the outputs (as `consensor result` does): fetched, checked, served.
  const double started_before = outsider->Metric("consensor_output_fetches_started_total");
  auto t = outsider->GetTask(task->id);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (const auto& out : t->result().outputs()) {
    auto blob = outsider->client().GetBlob(out.blob_sha256(), 1 << 20);
    ASSERT_TRUE(blob.ok()) << blob.status().ToString() << "\n" << outsider->LogTail(30);
    auto tensor = ParseNpy(*blob, NpyLimits{});
    ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();
    EXPECT_EQ(ToHex(TensorHash(*tensor)), task->outputs[out.name()]) << out.name();
  }
  ExpectVerifies(net, *outsider, task->id);
  EXPECT_EQ(outsider->Metric("consensor_outputs_fetched_on_demand_total") - before[2],
            static_cast<double>(task->outputs.size()));
  EXPECT_EQ(outsider->Metric("consensor_outputs_refused_total"), 0);
  // One fetch per output; each fetched output leaves the record of outputs left with the holders.
  EXPECT_EQ(outsider->Metric("consensor_output_fetches_started_total") - started_before,
            static_cast<double>(task->outputs.size()));
  EXPECT_EQ(outsider->Metric("consensor_output_fetches_in_flight"), 0);
  auto again = outsider->client().GetBlob(t->result().outputs(0).blob_sha256(), 1 << 20);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(outsider->Metric("consensor_output_fetches_started_total") - started_before,
            static_cast<double>(task->outputs.size()))
      << "a stored output is served without another fetch";
}

// Issue 16, hole 4, with real processes: a deposit of far more than all honest stake, made
// just before the reference block of a task (by a key that runs no node), counts for nothing at
// that block. The honest certificate still meets the stake threshold (--require-stake: the
// flash stake is not in the total), the operator set the nodes drew the committee from does not
// list it, and a certificate the flash key signs alone is refused by the contract.
TEST(NetworkFlashStakeTest, DepositRightBeforeTheReferenceBlockBacksNothing) {
  TestNetwork net("flash");
  ASSERT_EQ(net.Start({Operator(1), Operator(2), Operator(3)}), "") << "the network did not start";
  constexpr int kFlash = 9;
  testing_support::CommandResult flash =
      net.Cli("operator register --stake 5000ether --endpoint 127.0.0.1:1 --devnet-key " + std::to_string(kFlash));
  ASSERT_EQ(flash.exit_code, 0) << flash.out;
  const size_t at = flash.out.find("mined in block ");
  ASSERT_NE(at, std::string::npos) << flash.out;
  const uint64_t deposit_block = std::stoull(flash.out.substr(at + 15));

  auto rpc = node::EthRpc(std::move(node::NewHttpRpcTransport(net.rpc_url())).value());
  node::ChainClient chain(&rpc, net.deployed(), std::nullopt);
  // New tasks reference head - (R - 2) = head - 6: wait until that is past the deposit's block
  // (and well before the deposit activates, A = R = 8 blocks after it).
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto head = rpc.BlockNumber();
        return head.ok() && *head >= deposit_block + TestNetwork::kMaxReferenceAge - 1;
      },
      30s));
  auto s = Submit(net.node(0), 3, 3, 31);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto task = WaitCertified(net.node(0), s->id);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  // Without the activation delay the deposit would count at any ref >= its block.
  const uint64_t ref = task->consensus().certificate().reference_block();
  ASSERT_GE(ref, deposit_block);
  auto activation = chain.ActivationDelayBlocks();
  ASSERT_TRUE(activation.ok()) << activation.status().ToString();
  ASSERT_LT(ref, deposit_block + *activation) << "the task came too late to test anything";

  auto set = chain.OperatorsAt(ref);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->size(), 3u);
  for (const auto& op : *set) EXPECT_NE(op.address, testing_support::AnvilDevAddress(kFlash));

  testing_support::CommandResult v =
      net.Cli("verify " + s->id + " --node " + net.node(0).address() + " --require-stake");
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_NE(v.out.find("VERIFIED"), std::string::npos) << v.out;

  consensus::Attestation wrong{*Hash256FromHex(s->id), Hash256{}, Hash256{}, ref};
  wrong.result_root[0] = 0x66;
  auto sig = consensus::SignAttestation(testing_support::AnvilDevKey(kFlash), chain.domain(), wrong);
  ASSERT_TRUE(sig.ok());
  auto forged = chain.VerifyCertificate(wrong, {std::vector<uint8_t>(sig->begin(), sig->end())});
  ASSERT_FALSE(forged.ok());
  EXPECT_NE(forged.status().message().find("SignerNotOperatorAtReferenceBlock"), std::string::npos)
      << forged.status().message();
}

// kill -9 on one node while 20 tasks go to the others: every task finalizes without it, and
// after a restart on the same datadir it reports every task SUCCEEDED with the certificate
// (anti-entropy pulls from cursor 0 plus its own stored records).
TEST_F(NetworkHonestTest, KillNineDuringLoadThenRestartCatchesUp) {
  TestNetwork& net = *net_;
  NetworkNode& victim = net.node(3);
  std::vector<Submitted> tasks;
  for (uint32_t i = 0; i < 20; ++i) {
    if (i == 6) {
      EXPECT_EQ(victim.Kill(SIGKILL), 128 + SIGKILL);
    }
    auto s = Submit(net.node(i % 3), 3, 2, 100 + i);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    tasks.push_back(*s);
  }
  for (const Submitted& s : tasks) {
    for (size_t i = 0; i < 3; ++i) {
      auto t = WaitCertified(net.node(i), s.id);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      ExpectHonest(*t, s, net.node(i).name());
    }
  }

  ASSERT_TRUE(victim.Start()) << victim.LogTail(50);
  ASSERT_EQ(net.WaitConnected(), "");
  for (const Submitted& s : tasks) {
    auto t = WaitCertified(victim, s.id);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ExpectHonest(*t, s, "restarted " + victim.name());
    auto entry = net.node(0).GetTask(s.id);
    ASSERT_TRUE(entry.ok());
    EXPECT_EQ(Committee(*t), Committee(*entry));
    EXPECT_EQ(t->consensus().reference_block(), entry->consensus().reference_block());
  }
}

// Clients cannot silence gossip: with peers on a listener of their own (this suite's setup,
// [p2p] listen), slow uploads holding every thread of every node's client server leave the
// peer servers free, so a task submitted just before still certifies. (With one shared port the
// same uploads leave no thread for pushes, pulls or blob fetches, and nothing certifies.) The
// client servers are really full meanwhile: a new client call is refused; progress is read
// from the metrics endpoint, a server of its own.
TEST_F(NetworkHonestTest, ClientsHoldingEveryStreamDoNotSilenceGossip) {
  TestNetwork& net = *net_;
  struct SlowUpload {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::Client::Stub> stub;
    grpc::ClientContext context;
    v1::PutBlobResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::PutBlobRequest>> writer;
  };
  constexpr int kUploadsPerNode = 80;  // more than rpc.max_streams (64) threads
  std::vector<std::unique_ptr<SlowUpload>> uploads;
  const auto Starve = [&](size_t n) {
    for (int k = 0; k < kUploadsPerNode; ++k) {
      auto u = std::make_unique<SlowUpload>();
      grpc::ChannelArguments args;
      args.SetInt("consensor.test.connection", static_cast<int>(n * 1000 + k));  // one connection each
      u->channel = grpc::CreateCustomChannel(net.node(n).address(), grpc::InsecureChannelCredentials(), args);
      u->stub = v1::Client::NewStub(u->channel);
      u->context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
      u->writer = u->stub->PutBlob(&u->context, &u->response);
      v1::PutBlobRequest first;
      first.set_data("a byte, then nothing for minutes");
      u->writer->Write(first);
      uploads.push_back(std::move(u));
    }
  };
  const auto ClientCallFails = [&](NetworkNode& n) {
    auto stub = v1::Client::NewStub(grpc::CreateChannel(n.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 3s);
    v1::NodeInfo info;
    return !stub->GetNodeInfo(&context, v1::GetNodeInfoRequest(), &info).ok();
  };
  const char kCertified[] = "consensor_tasks_certified_total";
  std::vector<double> before;
  for (size_t n = 0; n < 4; ++n) before.push_back(net.node(n).Metric(kCertified));

  for (size_t n = 1; n <= 3; ++n) Starve(n);
  auto s = Submit(net.node(0), 3, 2, 77);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Starve(0);
  for (size_t n = 0; n < 4; ++n) {
    EXPECT_TRUE(WaitUntil([&] { return ClientCallFails(net.node(n)); }, 60s))
        << net.node(n).name() << "'s client server is not full";
  }
  const bool certified = WaitUntil(
      [&] {
        for (size_t n = 0; n < 4; ++n) {
          if (net.node(n).Metric(kCertified) < before[n] + 1) return false;
        }
        return true;
      },
      kFinality);
  EXPECT_TRUE(certified) << "not every node certified the task while clients held their client servers";
  EXPECT_TRUE(ClientCallFails(net.node(1))) << "the uploads were let go before the task certified";

  for (auto& u : uploads) u->context.TryCancel();
  uploads.clear();
  for (size_t n = 0; n < 4; ++n) {
    auto t = WaitCertified(net.node(n), s->id);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ExpectHonest(*t, *s, net.node(n).name());
  }
}

// Issue 18, adoption stalls: any registered operator can announce tasks and then serve their
// blobs as a staller (`trickle-blobs`: each blob's first chunk, then nothing). Honest nodes cut
// each such fetch off (deadlines sized to the bytes received) and adopt one job per announcer at
// a time, so a burst of stalled announcements holds one adoption thread per node while the
// honest client's tasks are adopted, executed and certified on every honest node meanwhile.
TEST(NetworkAttackTest, StallingAnnouncerDoesNotHoldUpOtherTasks) {
  TestNetwork net("staller");
  ASSERT_EQ(net.Start({Operator(1), Operator(2), Operator(3), Operator(4), Operator(5).Fault("trickle-blobs")}), "");
  NetworkNode& staller = net.node(4);
  for (uint32_t k = 0; k < 8; ++k) {  // more than one adoption thread's worth of stalled fetches
    auto s = Submit(staller, 3, 2, 900 + k);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
  }
  std::vector<Submitted> honest;
  for (uint32_t k = 0; k < 3; ++k) {
    auto s = Submit(net.node(k % 2), 3, 2, 950 + k);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    honest.push_back(*s);
  }
  for (const Submitted& s : honest) {
    for (size_t n = 0; n < 4; ++n) {
      auto t = WaitCertified(net.node(n), s.id);
      ASSERT_TRUE(t.ok()) << t.status().ToString() << "\n" << net.node(n).LogTail(40);
      ExpectHonest(*t, s, net.node(n).name());
    }
  }
  // The stall really happened: honest nodes cut fetches from the staller off, and named it.
  const bool cut_off = WaitUntil(
      [&] {
        for (size_t n = 0; n < 4; ++n) {
          if (net.node(n).LogTail(5000).find("came too slowly") != std::string::npos) return true;
        }
        return false;
      },
      60s);
  EXPECT_TRUE(cut_off) << "no honest node saw a stalled blob fetch: " << net.node(0).LogTail(40);
}

// Issue 18: an entry node that serves a non-member the task's outputs with a byte flipped. The
// non-member asks the entry node first, refuses the bytes (they do not hash to the certified
// blob, so nothing is stored), and takes the outputs from an honest member instead.
TEST(NetworkAttackTest, WrongOutputServedToANonMemberIsRefused) {
  TestNetwork net("wrong-output");
  ASSERT_EQ(net.Start({Operator(1).Fault("corrupt-served-outputs"), Operator(2), Operator(3), Operator(4)}), "");
  NetworkNode& liar = net.node(0);
  // Two replicas: two of the four operators are outside the committee, at least one of them honest.
  auto s = Submit(liar, 2, 2, 70);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  NetworkNode* outsider = nullptr;
  for (size_t i = 0; i < net.size(); ++i) {  // the liar first: it then holds the outputs
    auto t = WaitCertified(net.node(i), s->id);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ExpectHonest(*t, *s, net.node(i).name());
    if (i > 0 && !InCommittee(*t, net.node(i))) outsider = &net.node(i);
  }
  ASSERT_NE(outsider, nullptr);
  auto t = outsider->GetTask(s->id);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // Clients ask for every output at once, several each: concurrent requests for one output share
  // one fetch (single-flight), so the liar is dialed, and refused, once per output however many
  // ask (issue 18).
  constexpr int kClients = 6;
  std::vector<std::thread> clients;
  std::vector<std::string> failures(kClients);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      node::NodeClient client(outsider->address(), std::chrono::seconds(60));
      for (const auto& out : t->result().outputs()) {
        auto blob = client.GetBlob(out.blob_sha256(), 1 << 20);
        if (!blob.ok()) {
          failures[c] += blob.status().ToString() + "\n";
          continue;
        }
        auto tensor = ParseNpy(*blob, NpyLimits{});
        if (!tensor.ok() || ToHex(TensorHash(*tensor)) != s->outputs[out.name()]) {
          failures[c] += "wrong tensor for " + out.name() + "\n";
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "") << outsider->LogTail(30);
  const double outputs = t->result().outputs_size();
  EXPECT_EQ(outsider->Metric("consensor_outputs_refused_total"), outputs) << outsider->LogTail(40);
  EXPECT_EQ(outsider->Metric("consensor_output_fetches_started_total"), outputs);
  EXPECT_EQ(outsider->Metric("consensor_outputs_fetched_on_demand_total"), outputs);
  EXPECT_EQ(outsider->Metric("consensor_output_fetches_in_flight"), 0);
  EXPECT_EQ(outsider->Metric("consensor_remote_outputs"), 0) << "every output is stored there now";
}

// Issue 18, the flood for an output nobody serves, against real holders and across restarts:
// every holder of the task (the entry node and both members, fault `corrupt-served-outputs`)
// serves its outputs with a byte flipped, so a non-member's on-demand fetch fails on every one
// of them. Clients flood the non-member for an output: one round of dials, then the output's
// backoff refuses the rest at once. The backoff is persisted in the non-member's store: after a
// graceful restart and after SIGKILL, the same requests are refused from it (with the earlier
// failure and the retry time), the restarted node starting no fetch and the holders serving no
// GetBlob meanwhile.
TEST(NetworkAttackTest, OutputNobodyServesStaysInItsBackoffAcrossRestarts) {
  TestNetwork net("nobody-serves");
  auto liar = [](int account) { return Operator(account).Fault("corrupt-served-outputs"); };
  ASSERT_EQ(net.Start({liar(1), liar(2), liar(3), Operator(4).ExtraConfig("[outputs]\nfetch_backoff_ms = 600000\n")}),
            "");
  NetworkNode& observer = net.node(3);
  // Two replicas, entered at node 1: a task whose committee is node 1 and another liar has only
  // liars as holders, and its entry node executed it (an entry node outside the committee would
  // keep trying to fetch the outputs from the members, adding GetBlob calls to the count below).
  // Each batch finds one with probability 1 - (2/3)^6.
  std::optional<Submitted> task;
  for (uint32_t batch = 0; batch < 4 && !task; ++batch) {
    std::vector<Submitted> submitted;
    for (uint32_t i = 0; i < 6; ++i) {
      auto s = Submit(net.node(0), 2, 2, 500 + batch * 6 + i);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      submitted.push_back(*s);
    }
    for (const Submitted& s : submitted) {
      auto t = WaitCertified(observer, s.id);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      ExpectHonest(*t, s, observer.name());
      if (!task && !InCommittee(*t, observer) && InCommittee(*t, net.node(0))) task = s;
    }
  }
  ASSERT_TRUE(task.has_value()) << "no committee of node 1 and another liar";
  auto t = observer.GetTask(task->id);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_GT(t->result().outputs_size(), 0);
  const std::string output = t->result().outputs(0).blob_sha256();
  const char kStarted[] = "consensor_output_fetches_started_total";
  const char kBackoff[] = "consensor_output_fetches_refused_total{reason=\"backoff\"}";
  // How often the liars served this output (each logs every corrupted copy it serves).
  auto served_by_holders = [&] {
    size_t lines = 0;
    for (size_t i = 0; i < 3; ++i) {
      std::istringstream log(net.node(i).Log());
      for (std::string line; std::getline(log, line);) {
        lines += line.find("serving a corrupted output") != std::string::npos && line.find(output) != std::string::npos;
      }
    }
    return lines;
  };
  // kClients clients ask the observer for the output kRequests times each; every answer must be
  // an error (nobody serves it). Returns the answers that name the backoff's retry time.
  constexpr int kClients = 4, kRequests = 10;
  auto flood = [&] {
    std::atomic<int> from_backoff{0}, served{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&] {
        node::NodeClient client(observer.address(), std::chrono::seconds(60));
        for (int r = 0; r < kRequests; ++r) {
          auto blob = client.GetBlob(output, 1 << 20);
          if (blob.ok()) {
            ++served;
          } else if (blob.status().code() == StatusCode::kUnavailable &&
                     blob.status().message().find("tries again after") != std::string::npos) {
            ++from_backoff;
          }
        }
      });
    }
    for (auto& c : clients) c.join();
    EXPECT_EQ(served.load(), 0) << "a corrupted output was served";
    return from_backoff.load();
  };

  // Before any restart: one round of dials for the whole flood.
  EXPECT_EQ(served_by_holders(), 0u);
  const int first = flood();
  EXPECT_EQ(observer.Metric(kStarted), 1) << observer.LogTail(30);
  EXPECT_GE(served_by_holders(), 1u) << "the holders were never dialed";
  EXPECT_LE(served_by_holders(), 3u) << "more than one round of dials";
  EXPECT_GE(observer.Metric("consensor_outputs_refused_total"), 1) << "the flipped bytes were not refused";
  EXPECT_GE(first, kClients * kRequests - kClients) << "most requests should meet the backoff";
  EXPECT_EQ(observer.Metric("consensor_output_backoffs_persisted"), 1);
  std::cout << "before a restart: " << kClients * kRequests << " requests, " << observer.Metric(kStarted)
            << " fetch started, the holders served the output " << served_by_holders() << " times, " << first
            << " refused by the backoff\n";

  for (int signal : {SIGTERM, SIGKILL}) {
    observer.Kill(signal);
    ASSERT_TRUE(observer.Start()) << observer.LogTail(30);
    // rpc.addr comes before the engine recovers its rounds; the backoff is back once this shows it.
    ASSERT_TRUE(WaitUntil([&] { return observer.Metric("consensor_output_backoffs_persisted") == 1; }, 60s, 50ms))
        << "signal " << signal << ": the backoff was not reloaded\n"
        << observer.LogTail(30);
    const size_t served_before = served_by_holders();
    EXPECT_EQ(flood(), kClients * kRequests) << "signal " << signal << ": " << observer.LogTail(30);
    EXPECT_EQ(observer.Metric(kStarted), 0) << "signal " << signal << ": the restart forgot the backoff";
    EXPECT_EQ(observer.Metric(kBackoff), kClients * kRequests);
    EXPECT_EQ(served_by_holders(), served_before) << "signal " << signal << ": a holder was dialed";
    std::cout << "after a restart by signal " << signal << ": " << observer.Metric(kBackoff)
              << " requests refused by the reloaded backoff, " << observer.Metric(kStarted) << " fetches started\n";
  }
  EXPECT_NE(observer.Log().find("output fetch backoffs reloaded"), std::string::npos);
}

// Issue 18, orphan votes: a registered operator floods a node with validly signed commitments for
// task ids nobody will announce, over many connections (a per-connection rate limit does not
// stop it). Its author's rate limit and its share of the orphan pool bound what the node takes;
// the rest is dropped as "rate_limited" or "no_room" (neither remembered as seen, so a genuine
// copy is taken later), and an honest task submitted right after the flood certifies with the
// honest result on every node.
TEST(NetworkAttackTest, OrphanVoteFloodStaysWithinTheFloodersShare) {
  TestNetwork net("orphan-flood");
  ASSERT_EQ(net.Start({Operator(1), Operator(2), Operator(3), Operator(4), Operator(5)}), "");
  NetworkNode& target = net.node(0);
  const Secp256k1Secret flooder = testing_support::AnvilDevKey(5);  // operator 5 turned hostile
  const Address20 flooder_address = testing_support::AnvilDevAddress(5);
  const consensus::Eip712Domain domain{net.deployed().chain_id, net.deployed().manager};
  constexpr int kConnections = 16, kBatches = 4, kPerBatch = 250;  // 16,000 orphans, ~4x the share
  const char kNoRoom[] = "consensor_p2p_messages_dropped_total{reason=\"no_room\"}";
  const char kRateLimited[] = "consensor_p2p_messages_dropped_total{reason=\"rate_limited\"}";
  const double no_room_before = target.Metric(kNoRoom);
  const double rate_limited_before = target.Metric(kRateLimited);

  uint32_t accepted = 0;
  uint64_t counter = 0;
  for (int c = 0; c < kConnections; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("consensor.test.connection", 7000 + c);  // a connection of its own
    auto stub =
        v1::Peer::NewStub(grpc::CreateCustomChannel(target.endpoint(), grpc::InsecureChannelCredentials(), args));
    for (int b = 0; b < kBatches; ++b) {
      v1::GossipRequest request;
      for (int k = 0; k < kPerBatch; ++k) {
        consensus::SignedAttestation vote;
        ++counter;
        for (int i = 0; i < 8; ++i) vote.attestation.task_id[i] = static_cast<uint8_t>(counter >> (8 * i));
        vote.attestation.task_id[31] = 0xF1;
        vote.attestation.reference_block = 1;
        auto commitment =
            consensus::SignCommitment(flooder, domain, vote, flooder_address, consensus::VotePhase::kCommittee);
        ASSERT_TRUE(commitment.ok()) << commitment.status().ToString();
        v1::GossipMessage message;
        v1::ResultCommitment* p = message.mutable_commitment();
        p->set_task_id(ToHex(commitment->task_id));
        p->set_reference_block(commitment->reference_block);
        p->set_phase(0);
        p->set_commitment(ToHex(commitment->commitment));
        p->set_signature(ToHex(commitment->signature));
        auto envelope = node::GossipNetwork::Sign(flooder, domain.chain_id, domain.verifying_contract, message);
        ASSERT_TRUE(envelope.ok()) << envelope.status().ToString();
        *request.add_messages() = *envelope;
      }
      v1::GossipResponse response;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + 30s);
      grpc::Status status = stub->Gossip(&context, request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      accepted += response.accepted();
    }
  }
  // The flood reached the pool, and what the node took stayed within the flooder's bounds.
  const double no_room = target.Metric(kNoRoom) - no_room_before;
  const double rate_limited = target.Metric(kRateLimited) - rate_limited_before;
  std::cout << "orphan flood: " << accepted << " of " << kConnections * kBatches * kPerBatch << " accepted, "
            << target.Metric("consensor_orphan_vote_bytes") << " orphan bytes, " << rate_limited
            << " over the author's rate, " << no_room << " over its pool share\n";
  EXPECT_GT(accepted, 0u);
  EXPECT_LT(accepted, static_cast<uint32_t>(kConnections * kBatches * kPerBatch));
  EXPECT_GT(no_room + rate_limited, 0);
  const double share = 2.0 * 1024 * 1024;  // OrphanPoolLimits::max_bytes_per_signer
  EXPECT_LE(target.Metric("consensor_orphan_vote_bytes"), share + 64 * 1024);

  // Honest work goes on, on the flooded node and everywhere else.
  auto s = Submit(target, 3, 2, 960);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (size_t n = 0; n < net.size(); ++n) {
    auto t = WaitCertified(net.node(n), s->id);
    ASSERT_TRUE(t.ok()) << t.status().ToString() << "\n" << net.node(n).LogTail(40);
    ExpectHonest(*t, *s, net.node(n).name());
  }
}

// A node whose key is not registered refuses tasks (peers would drop its announcements); a raw
// envelope signed by an unregistered key is dropped by a registered node (reason
// "unregistered"), while the same message signed by an operator is accepted.
TEST_F(NetworkHonestTest, MessagesFromUnregisteredKeysAreIgnored) {
  TestNetwork& net = *net_;
  const size_t registered = net.size();
  // Restart anything a previous test left down.
  for (size_t i = 0; i < registered; ++i) {
    if (!net.node(i).running()) {
      ASSERT_TRUE(net.node(i).Start());
    }
  }
  auto extra = net.AddNode(Operator(6).Unregistered().BootstrapAll());
  ASSERT_TRUE(extra.ok()) << extra.status().ToString();
  NetworkNode& outsider = **extra;
  ASSERT_EQ(net.WaitConnected(), "");
  auto info = outsider.client().GetNodeInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->consensus().registered());

  // It refuses tasks, with the reason: peers would drop its announcement, so the task could never
  // be certified (through gRPC and through the CLI: a clear message, exit 1).
  auto s = Submit(outsider, 3, 2, 500);
  ASSERT_FALSE(s.ok()) << "an unregistered node accepted task " << s->id;
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition) << s.status().ToString();
  EXPECT_NE(s.status().message().find("is not an active operator"), std::string::npos) << s.status().ToString();
  testing_support::CommandResult cli = testing_support::RunCommand(
      testing_support::CliBinary(), "submit " + testing_support::SourceDir() +
                                        "/examples/mlp.cgraph --input x=" + testing_support::SourceDir() +
                                        "/examples/mlp_x.npy --node " + outsider.address());
  EXPECT_EQ(cli.exit_code, 1) << cli.out;
  EXPECT_NE(cli.out.find("submit to another node"), std::string::npos) << cli.out;
  net.Retire(outsider);

  // A raw envelope pushed straight to node1's Peer service: an announcement of a task whose
  // blobs node1 has, signed by dev account 7 (never registered), then by operator 2.
  NetworkNode& target = net.node(0);
  auto request = testing_support::UploadTask(target.client(), testing_support::TinyModel(),
                                             {{"x", testing_support::RandomF32({4, 8}, 502)}}, 3, 2, NextNonce());
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  auto node_info = target.client().GetNodeInfo();
  ASSERT_TRUE(node_info.ok());
  v1::GossipMessage message;
  *message.mutable_announcement()->mutable_spec() = *request;
  message.mutable_announcement()->set_reference_block(node_info->consensus().chain_head() - 1);
  auto stub = v1::Peer::NewStub(grpc::CreateChannel(target.endpoint(), grpc::InsecureChannelCredentials()));
  auto push = [&](int account) -> StatusOr<uint32_t> {
    ASSIGN_OR_RETURN(v1::Envelope envelope,
                     node::GossipNetwork::Sign(testing_support::AnvilDevKey(account), net.deployed().chain_id,
                                               net.deployed().manager, message));
    v1::GossipRequest req;
    *req.add_messages() = envelope;
    v1::GossipResponse resp;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    grpc::Status status = stub->Gossip(&context, req, &resp);
    if (!status.ok()) return Unavailable(status.error_message());
    return resp.accepted();
  };
  const double dropped = target.Metric(kDroppedUnregistered);
  auto refused = push(7);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(*refused, 0u);
  EXPECT_EQ(target.Metric(kDroppedUnregistered), dropped + 1);
  // The same message from a registered operator is accepted and the task runs.
  auto accepted = push(2);
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  EXPECT_EQ(*accepted, 1u);
  auto t = WaitCertified(target, TaskIdOf(*request));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->consensus().announcer(), net.node(1).operator_hex()) << testing_support::Describe(*t);

  // An announcement signed with node1's own key that node1 never made (a second node running
  // with its key): node1 tells its operator, with a warning and a counter.
  auto cloned = testing_support::UploadTask(target.client(), testing_support::TinyModel(),
                                            {{"x", testing_support::RandomF32({4, 8}, 503)}}, 3, 2, NextNonce());
  ASSERT_TRUE(cloned.ok()) << cloned.status().ToString();
  *message.mutable_announcement()->mutable_spec() = *cloned;
  const double own_key = target.Metric("consensor_own_key_announcements_total");
  EXPECT_EQ(own_key, 0) << "node1 saw its own key in an announcement it made";
  auto from_clone = push(1);
  ASSERT_TRUE(from_clone.ok()) << from_clone.status().ToString();
  EXPECT_EQ(*from_clone, 1u);
  EXPECT_TRUE(WaitUntil([&] { return target.Metric("consensor_own_key_announcements_total") == own_key + 1; }, 10s))
      << target.LogTail(30);
  EXPECT_NE(target.LogTail(200).find("is another node running with the same key?"), std::string::npos);

  // Pull (the gossip log's catch-up read) by an attacker that tries it unsigned, with a forged
  // or stale signature, as an outsider, and as a flood: each is refused with its own status
  // before the log is read, a registered operator's signed Pull is served, and the network still
  // certifies afterwards.
  auto pull = [&](const v1::PullRequest& request, v1::PullResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    return stub->Pull(&context, request, response);
  };
  auto signed_by = [&](int account, uint64_t sent_unix_ms = 0) {
    v1::PullRequest request;
    request.set_sent_unix_ms(sent_unix_ms);
    EXPECT_TRUE(node::GossipNetwork::SignPull(testing_support::AnvilDevKey(account), net.deployed().chain_id,
                                              net.deployed().manager, &request)
                    .ok());
    return request;
  };
  v1::PullResponse pulled;

  // Unsigned.
  grpc::Status status = pull(v1::PullRequest(), &pulled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  // Signed by account 7 (never registered) but naming operator 2 as the requester.
  v1::PullRequest forged = signed_by(7);
  forged.set_requester(signed_by(2).requester());
  status = pull(forged, &pulled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  // Operator 2's genuine signature, replayed two minutes later (and one made for another chain).
  status = pull(signed_by(2, UnixMillisNow() - 120'000), &pulled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  v1::PullRequest other_chain;
  ASSERT_TRUE(node::GossipNetwork::SignPull(testing_support::AnvilDevKey(2), net.deployed().chain_id + 1,
                                            net.deployed().manager, &other_chain)
                  .ok());
  status = pull(other_chain, &pulled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  // A well-signed outsider.
  status = pull(signed_by(7), &pulled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_EQ(pulled.messages_size(), 0);

  // Peer links have no TLS: an on-path observer resends operator 2's captured requests while
  // they are still valid, to spend operator 2's budgets here. Each signed request is served
  // once; the copy is UNAUTHENTICATED (Pull on the gossip service, GetTask and GetNodeInfo on
  // the peer-facing client service), and operator 2's next request is served.
  const v1::PullRequest captured = signed_by(2);
  status = pull(captured, &pulled);
  EXPECT_TRUE(status.ok()) << status.error_message();
  status = pull(captured, &pulled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_NE(status.error_message().find("served once"), std::string::npos) << status.error_message();
  status = pull(signed_by(2), &pulled);
  EXPECT_TRUE(status.ok()) << status.error_message();
  {
    const node::PeerRequestDomain request_domain{net.deployed().chain_id, net.deployed().manager};
    auto peer_client = v1::Client::NewStub(grpc::CreateChannel(target.endpoint(), grpc::InsecureChannelCredentials()));
    v1::GetTaskRequest task_request;
    task_request.set_task_id(TaskIdOf(*request));
    ASSERT_TRUE(node::SignGetTask(testing_support::AnvilDevKey(2), request_domain, &task_request).ok());
    v1::GetNodeInfoRequest info_request;
    ASSERT_TRUE(node::SignGetNodeInfo(testing_support::AnvilDevKey(2), request_domain, &info_request).ok());
    for (int copy = 0; copy < 2; ++copy) {
      grpc::ClientContext task_context;
      v1::Task record;
      grpc::Status got = peer_client->GetTask(&task_context, task_request, &record);
      grpc::ClientContext info_context;
      v1::NodeInfo info;
      grpc::Status got_info = peer_client->GetNodeInfo(&info_context, info_request, &info);
      if (copy == 0) {
        EXPECT_TRUE(got.ok()) << got.error_message();
        EXPECT_TRUE(got_info.ok()) << got_info.error_message();
      } else {
        EXPECT_EQ(got.error_code(), grpc::StatusCode::UNAUTHENTICATED) << got.error_message();
        EXPECT_EQ(got_info.error_code(), grpc::StatusCode::UNAUTHENTICATED) << got_info.error_message();
      }
    }
  }

  // A flood of unsigned Pulls is refused before any signature work. A flood of operator 2's
  // signed Pulls from this host (every operator here is 127.0.0.1) is refused past operator 2's
  // own rate (p2p.max_pull_requests_per_second_per_operator, 25/s, burst 2x); the host's bound
  // (100/s) is charged only by what that rate let through, so the other operators' pulls from
  // this host are never refused for it.
  for (int i = 0; i < 100; ++i) {
    v1::PullResponse ignored;
    status = pull(v1::PullRequest(), &ignored);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  }
  int pulls_refused = 0;
  for (int i = 0; i < 300; ++i) {
    v1::PullResponse ignored;
    status = pull(signed_by(2), &ignored);
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++pulls_refused;
      EXPECT_NE(status.error_message().find("p2p.max_pull_requests_per_second_per_operator"), std::string::npos)
          << status.error_message();
    }
  }
  EXPECT_GT(pulls_refused, 0);
  EXPECT_GT(target.Metric(R"(consensor_p2p_calls_refused_total{call="Pull",budget="operator"})"), 0);
  EXPECT_EQ(target.Metric(R"(consensor_p2p_calls_refused_total{call="Pull",budget="host"})"), 0);
  // The node still serves its peers afterwards (the host's bucket refills): a task certifies on
  // every node.
  auto after_flood = Submit(target, 3, 2, 702);
  ASSERT_TRUE(after_flood.ok()) << after_flood.status().ToString();
  for (size_t i = 0; i < net.size(); ++i) {
    auto done = WaitCertified(net.node(i), after_flood->id);
    ASSERT_TRUE(done.ok()) << net.node(i).name() << ": " << done.status().ToString();
  }
  // And a registered operator's signed Pull is served that task's messages.
  status = pull(signed_by(2), &pulled);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(pulled.messages_size(), 0);
  // The node's chain reads are metered by method (an operator's view of its RPC bill).
  EXPECT_GT(target.Metric(R"(consensor_chain_rpc_requests_total{client="view",method="eth_blockNumber"})"), 0);
  EXPECT_GT(target.Metric(R"(consensor_chain_rpc_requests_total{client="view",method="eth_call"})"), 0);
}

// The entry node is killed right after it acknowledged a task, before its announcement reached
// anyone (the other nodes are frozen with SIGSTOP, so the pushes cannot land, and the gossip log
// is in memory only). The task was acknowledged, so it must not be lost: after a restart on the
// same datadir the node announces it again and the network finalizes it.
TEST_F(NetworkHonestTest, TaskAcknowledgedJustBeforeEntryNodeCrashStillFinalizes) {
  TestNetwork& net = *net_;
  for (size_t i = 0; i < net.size(); ++i) {
    if (!net.node(i).running()) {
      ASSERT_TRUE(net.node(i).Start());
    }
  }
  ASSERT_EQ(net.WaitConnected(), "");
  NetworkNode& entry = net.node(0);
  struct Thaw {
    TestNetwork& net;
    ~Thaw() {
      for (size_t i = 1; i < net.size(); ++i) net.node(i).Signal(SIGCONT);
    }
  } thaw{net};
  // The chain stands still while the entry node is down: its peers must adopt the task again
  // inside the acceptance window (until the seed block), which a slow restart (ASan, a loaded
  // machine) could otherwise overrun, making them observers by rule, not by a fault.
  struct ResumeMining {
    TestNetwork& net;
    ~ResumeMining() { net.SetBlockInterval(1); }
  } resume{net};
  for (size_t i = 1; i < net.size(); ++i) net.node(i).Signal(SIGSTOP);
  auto s = Submit(entry, 3, 2, 600);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(net.SetBlockInterval(0), "");
  EXPECT_EQ(entry.Kill(SIGKILL), 128 + SIGKILL);
  for (size_t i = 1; i < net.size(); ++i) net.node(i).Signal(SIGCONT);

  ASSERT_TRUE(entry.Start()) << entry.LogTail(50);
  // Every peer holds the task again before the chain moves on.
  for (size_t i = 1; i < net.size(); ++i) {
    bool adopted = false;
    for (int k = 0; k < 600 && !adopted; ++k) {
      adopted = net.node(i).GetTask(s->id).ok();
      if (!adopted) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(adopted) << net.node(i).name() << " never adopted the task";
  }
  ASSERT_EQ(net.SetBlockInterval(1), "");
  for (size_t i = 0; i < net.size(); ++i) {
    if (!net.node(i).running()) continue;
    auto t = WaitCertified(net.node(i), s->id);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ExpectHonest(*t, *s, net.node(i).name());
  }
}

// ---------------------------------------------------------------------------------------------
// Faults, each in a network of its own (a slashed operator leaves the set).

// One operator signs a corrupted result root. With replicas 4 and quorum 3 it is always in the
// committee: the honest members certify, the conflict starts a dispute round whose certificate
// (75% of the stake) proves the fault, and the operator is slashed on-chain.
TEST(NetworkFaultTest, CorruptOutputIsDisputedAndSlashed) {
  TestNetwork net("corrupt");
  ASSERT_EQ(net.Start({Operator(1), Operator(2), Operator(3), Operator(4).Fault("corrupt-output")}), "");
  NetworkNode& bad = net.node(3);
  auto s = Submit(net.node(0), 4, 3, 21);
  ASSERT_TRUE(s.ok()) << s.status().ToString();

  for (size_t i = 0; i < 3; ++i) {
    auto t = WaitCertified(net.node(i), s->id, kFinality, [](const v1::Task& t) { return t.consensus().disputed(); });
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ExpectHonest(*t, *s, net.node(i).name());
    EXPECT_EQ(t->consensus().dispute_committee_size(), 4) << testing_support::Describe(*t);
    EXPECT_FALSE(Signed(t->consensus().certificate(), bad));
    // The corrupted vote was received and kept as evidence.
    bool saw_bad_vote = false;
    for (const auto& a : t->consensus().attestations()) {
      if (a.signer() == bad.operator_hex()) {
        saw_bad_vote = true;
        EXPECT_NE(a.result_root(), s->honest_root);
      }
    }
    EXPECT_TRUE(saw_bad_vote) << net.node(i).name() << ": " << testing_support::Describe(*t);
  }
  EXPECT_TRUE(WaitUntil([&] { return HasSlashRecord(net, s->id, bad, "dispute", /*need_tx=*/true); }, kFinality))
      << "no honest node sent dispute evidence";
  EXPECT_TRUE(WaitUntil([&] { return SlashedOnChain(net, bad); }, kFinality)) << "not slashed on-chain";
  auto events = net.SlashEvents();
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kind, "dispute");
  EXPECT_EQ((*events)[0].operator_address, bad.operator_address());
  EXPECT_EQ(ToHex((*events)[0].task_id), s->id);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(SlashedOnChain(net, net.node(i))) << net.node(i).name();
    EXPECT_EQ(StakeOf(net, net.node(i)), kTenEther) << net.node(i).name();
  }
  // What a client gets is the honest result, and its certificate verifies on-chain.
  ExpectVerifies(net, net.node(0), s->id);
}

// Issue 16, hole 7: a member signs the right result with a made-up trace root. That is not a
// conflict: no dispute round (which would make every operator re-execute for free), nobody is
// slashed, and the three honest members certify; the odd vote is simply not in the certificate.
TEST(NetworkFaultTest, TraceOnlyConflictStartsNoDisputeAndSlashesNobody) {
  TestNetwork net("trace");
  ASSERT_EQ(net.Start({Operator(1), Operator(2), Operator(3), Operator(4).Fault("wrong-trace-root")}), "");
  NetworkNode& odd = net.node(3);
  auto s = Submit(net.node(0), 4, 3, 41);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (size_t i = 0; i < net.size(); ++i) {
    // Wait until the odd vote has reached this node too, so the absence of a dispute means
    // something: counted (its commitment was among the first three) or, committed after the
    // window closed, refused as a late vote that agrees with the certified result.
    NetworkNode& n = net.node(i);
    auto t = WaitCertified(n, s->id, kFinality, [&](const v1::Task& t) {
      for (const auto& a : t.consensus().attestations()) {
        if (a.signer() == odd.operator_hex()) return true;
      }
      const std::string log = n.LogTail(2000);
      return log.find("msg=\"vote not counted\" task=" + s->id + " signer=" + odd.operator_hex()) != std::string::npos;
    });
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ExpectHonest(*t, *s, net.node(i).name());
    EXPECT_FALSE(t->consensus().disputed()) << testing_support::Describe(*t);
    EXPECT_EQ(t->consensus().slashes_size(), 0) << testing_support::Describe(*t);
    EXPECT_FALSE(Signed(t->consensus().certificate(), odd));
  }
  for (size_t i = 0; i < net.size(); ++i) EXPECT_FALSE(SlashedOnChain(net, net.node(i))) << net.node(i).name();
  auto events = net.SlashEvents();
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  EXPECT_TRUE(events->empty());
}

// Issue 16, hole 5: a lazy member signs whatever result it sees revealed first, without
// executing. All four operators are the committee, three matching votes certify; two honest
// members are fast, one is slow. Without commit-reveal the lazy copy of a fast member's vote
// would make the third signature before the slow member finishes: a certificate resting on two
// executions. With it, nobody reveals before three commitments are in, the lazy node has
// nothing to copy until then, and its late commitment is never admitted: its vote counts on no
// node, and the certificate is the three honest executions.
TEST(NetworkCommitRevealTest, CopiedRevealDoesNotCount) {
  TestNetwork net("lazy");
  ASSERT_EQ(net.Start({Operator(1), Operator(2), Operator(3).Fault("slow").FaultDelayMs(3000),
                       Operator(4).Fault("lazy-copy")}),
            "");
  NetworkNode& lazy = net.node(3);
  auto s = Submit(net.node(0), 4, 3, 61);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (size_t i = 0; i < 3; ++i) {
    auto t = WaitCertified(net.node(i), s->id);
    ASSERT_TRUE(t.ok()) << net.node(i).name() << ": " << t.status().ToString();
    ExpectHonest(*t, *s, net.node(i).name());
    const v1::Certificate& cert = t->consensus().certificate();
    EXPECT_EQ(cert.signers_size(), 3) << testing_support::Describe(*t);
    EXPECT_FALSE(Signed(cert, lazy)) << net.node(i).name() << ": " << testing_support::Describe(*t);
    EXPECT_TRUE(Signed(cert, net.node(2))) << "the slow member's execution is in the certificate";
    EXPECT_FALSE(t->consensus().disputed());
    EXPECT_EQ(t->consensus().closed_commit_windows(), 1u);
    EXPECT_EQ(t->consensus().commitments_size(), 3) << testing_support::Describe(*t);
  }
  // The lazy node did copy, and every honest node refused to count the copy.
  ASSERT_TRUE(WaitUntil([&] { return lazy.Metric("consensor_attestations_signed_total") >= 1; }, kFinality))
      << "the lazy node never copied a vote";
  for (size_t i = 0; i < 3; ++i) {
    NetworkNode& n = net.node(i);
    EXPECT_TRUE(WaitUntil([&] { return n.Metric("consensor_reveals_not_counted_total") >= 1; }, kFinality))
        << n.name() << " never saw the copied vote";
    auto t = n.GetTask(s->id);
    ASSERT_TRUE(t.ok());
    for (const auto& a : t->consensus().attestations()) {
      EXPECT_NE(a.signer(), lazy.operator_hex()) << n.name() << " stored the copied vote";
    }
  }
}

// A member that commits and then withholds its reveal costs liveness, never safety. With a
// spare member (4 members, 3 matching votes) the honest three certify without it. When every
// member is needed (4 of 4, the whole operator set, so the committee cannot be extended) the
// round fails after exhausted_grace_ms on every honest node, with the reason; nobody is slashed.
TEST(NetworkCommitRevealTest, WithheldRevealCostsLivenessOnly) {
  TestNetwork net("withhold");
  auto fast = [](int account) { return Operator(account).MemberTimeoutMs(1500).ExhaustedGraceMs(4000); };
  ASSERT_EQ(net.Start({fast(1), fast(2), fast(3), fast(4).Fault("withhold-reveal")}), "");
  NetworkNode& withholder = net.node(3);
  auto spare = Submit(net.node(0), 4, 3, 71);
  ASSERT_TRUE(spare.ok()) << spare.status().ToString();
  auto unanimous = Submit(net.node(0), 4, 4, 72);
  ASSERT_TRUE(unanimous.ok()) << unanimous.status().ToString();
  for (size_t i = 0; i < 3; ++i) {
    NetworkNode& n = net.node(i);
    auto t = WaitCertified(n, spare->id);
    ASSERT_TRUE(t.ok()) << n.name() << ": " << t.status().ToString();
    ExpectHonest(*t, *spare, n.name());
    EXPECT_FALSE(Signed(t->consensus().certificate(), withholder)) << testing_support::Describe(*t);
    EXPECT_FALSE(t->consensus().disputed());

    auto failed = WaitUntilTask(n, unanimous->id, kFinality,
                                [](const v1::Task& t) { return t.state() == v1::TASK_STATE_FAILED; });
    ASSERT_TRUE(failed.ok()) << n.name() << ": " << failed.status().ToString();
    EXPECT_NE(failed->error_message().find("a member withheld its reveal"), std::string::npos)
        << testing_support::Describe(*failed);
    EXPECT_FALSE(failed->consensus().has_certificate());
    EXPECT_TRUE(failed->consensus().slashes().empty());
    // The withholder did commit: its commitment is among the admitted ones.
    EXPECT_EQ(failed->consensus().commitments_size(), 4) << testing_support::Describe(*failed);
  }
  EXPECT_GE(withholder.Metric("consensor_attestations_signed_total"), 2);
  for (size_t i = 0; i < net.size(); ++i) EXPECT_FALSE(SlashedOnChain(net, net.node(i))) << net.node(i).name();
}

// Issue 16, hole 3: a malicious entry node announces a client's task with replicas = quorum = 1.
// The id covers replication, so the downgraded task is another task: `consensor submit` refuses
// the node's answer, and that task's certificate does not verify against the client's request.
TEST(NetworkFaultTest, DowngradedAnnouncementIsRefused) {
  TestNetwork net("downgrade");
  ASSERT_EQ(net.Start({Operator(1).Fault("downgrade-replicas"), Operator(2), Operator(3)}), "");
  NetworkNode& entry = net.node(0);
  const std::string examples = testing_support::SourceDir() + "/examples/";
  const std::string request = entry.dir() + "/request.json";
  testing_support::CommandResult submitted = testing_support::RunCommand(
      testing_support::CliBinary(), "submit " + examples + "mlp.cgraph --input x=" + examples +
                                        "mlp_x.npy --replicas 3 --quorum 2 --nonce 9" + " --request-out " + request +
                                        " --node " + entry.address());
  EXPECT_EQ(submitted.exit_code, 1) << submitted.out;
  const std::string marker = "answered with task id ";
  const size_t at = submitted.out.find(marker);
  ASSERT_NE(at, std::string::npos) << submitted.out;
  EXPECT_NE(submitted.out.find("the node changed what was asked for"), std::string::npos) << submitted.out;
  const std::string downgraded = submitted.out.substr(at + marker.size(), 64);

  // The downgraded task runs with one replica and is certified by one signature...
  auto t = WaitCertified(net.node(1), downgraded);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->consensus().replicas(), 1u);
  EXPECT_EQ(t->consensus().certificate().request().options().replicas(), 1u);
  // ...which says nothing about the client's task.
  testing_support::CommandResult v =
      net.Cli("verify " + downgraded + " --node " + net.node(1).address() + " --request " + request);
  EXPECT_EQ(v.exit_code, 1) << v.out;
  EXPECT_NE(v.out.find("it certifies something you did not ask for"), std::string::npos) << v.out;
  EXPECT_EQ(v.out.find("VERIFIED    "), std::string::npos) << v.out;
}

// ---------------------------------------------------------------------------------------------
// The committee seed (docs/SECURITY.md, section 6): drawn from the hash of block ref + R + 1,
// which is not mined when honest nodes accept the task.

// Every node draws the same committee, and it is the one this test draws from the chain itself:
// the operator set at the reference block and the hash of the seed block.
TEST(NetworkSeedTest, CommitteeIsDrawnFromTheSeedBlockHash) {
  TestNetwork net("seed");
  ASSERT_EQ(net.Start({Operator(1), Operator(2), Operator(3), Operator(4)}), "");
  const int64_t submitted_at = UnixMillisNow() / 1000;
  auto s = Submit(net.node(0), 3, 2, 700);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto entry = WaitCertified(net.node(0), s->id);
  ASSERT_TRUE(entry.ok()) << entry.status().ToString();
  ExpectHonest(*entry, *s, "entry");
  const v1::TaskConsensus& c = entry->consensus();
  EXPECT_EQ(c.seed_block(), c.reference_block() + TestNetwork::kMaxReferenceAge + 1);
  auto seed = net.BlockHash(c.seed_block());
  ASSERT_TRUE(seed.ok()) << seed.status().ToString();
  EXPECT_EQ(c.seed_block_hash(), ToHex(*seed));
  auto registered = net.OperatorsAt(c.reference_block());
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();
  auto order = consensus::CommitteeOrder(*Hash256FromHex(s->id), c.reference_block(), *seed, *registered, 3);
  ASSERT_TRUE(order.ok()) << order.status().ToString();
  std::vector<std::string> expected;
  for (const Address20& a : *order) expected.push_back("0x" + ToHex(a));
  for (size_t i = 0; i < net.size(); ++i) {
    auto t = WaitCertified(net.node(i), s->id);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    std::vector<std::string> committee(t->consensus().committee().begin(), t->consensus().committee().begin() + 3);
    EXPECT_EQ(committee, expected) << net.node(i).name();
    EXPECT_FALSE(t->consensus().observer_only()) << net.node(i).name();
  }
  // The certificate verifies, committee guarantee included, against the seed read from chain,
  // and its seed block came after the submission.
  const std::string verify = "verify " + s->id + " --node " + net.node(1).address();
  testing_support::CommandResult v = net.Cli(verify + " --submitted-at " + std::to_string(submitted_at));
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_NE(v.out.find("guarantee   committee"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("seed        block " + std::to_string(c.seed_block()) + "; the head was block "),
            std::string::npos)
      << v.out;
  // A client that submitted after the seed block was mined: whoever chose the reference block
  // knew the committee, so the committee guarantee does not hold for it.
  testing_support::CommandResult late = net.Cli(verify + " --submitted-at " + std::to_string(submitted_at + 3600));
  EXPECT_EQ(late.exit_code, 1) << late.out;
  EXPECT_NE(late.out.find("was mined before you submitted"), std::string::npos) << late.out;
  EXPECT_NE(late.out.find("NOT VERIFIED"), std::string::npos) << late.out;
  // One whose task was held back until many seeds had been seen: more draws than allowed. A
  // client that submitted 12 s (12 one-second blocks) earlier sees that. Not the real submission
  // time: the node's head may lag the chain by a poll, so its seed can be 1 block after the
  // client's head, which no --max-seed-delay (at least 1) can refuse.
  testing_support::CommandResult held =
      net.Cli(verify + " --submitted-at " + std::to_string(submitted_at - 12) + " --max-seed-delay 3");
  EXPECT_EQ(held.exit_code, 1) << held.out;
  EXPECT_NE(held.out.find("more than --max-seed-delay 3"), std::string::npos) << held.out;
  testing_support::CommandResult bad = net.Cli(verify + " --submitted-at yesterday");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  testing_support::CommandResult alone = net.Cli(verify + " --max-seed-delay 3");
  EXPECT_EQ(alone.exit_code, 2) << alone.out;
  EXPECT_NE(alone.out.find("--max-seed-delay needs --submitted-at"), std::string::npos) << alone.out;
}

// A malicious entry node announces with a reference block whose seed block is already mined:
// it knows the committee before it commits, the grinding of hole 3. Honest nodes adopt the task
// as observers only, so no honest operator executes or signs it and it is never certified, even
// when the entry node itself heads the committee.
TEST(NetworkSeedTest, StaleReferenceGetsNoHonestSignature) {
  TestNetwork net("stale-reference");
  ASSERT_EQ(net.Start({Operator(1).Fault("stale-reference"), Operator(2), Operator(3), Operator(4)}), "");
  // The stale reference is head - R - 2; Start waited for every registration at head - R.
  auto started = net.Head();
  ASSERT_TRUE(started.ok());
  ASSERT_TRUE(WaitForBlock(net, *started + 3));
  auto s = Submit(net.node(0), 3, 2, 701);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::set<std::string> honest;
  for (size_t i = 1; i < net.size(); ++i) honest.insert(net.node(i).operator_hex());
  for (size_t i = 1; i < net.size(); ++i) {
    auto t = WaitUntilTask(net.node(i), s->id, kFinality,
                           [](const v1::Task& t) { return t.consensus().committee_size() > 0; });
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_TRUE(t->consensus().observer_only()) << net.node(i).name();
    EXPECT_FALSE(t->consensus().member()) << net.node(i).name();
  }
  // Long enough for an honest member to have executed and signed (a task takes about a second).
  auto head = net.Head();
  ASSERT_TRUE(head.ok());
  ASSERT_TRUE(WaitForBlock(net, *head + 8));
  for (size_t i = 0; i < net.size(); ++i) {
    auto t = net.node(i).GetTask(s->id);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_FALSE(t->consensus().has_certificate()) << net.node(i).name() << ": " << testing_support::Describe(*t);
    for (const auto& a : t->consensus().attestations()) {
      EXPECT_EQ(honest.count(a.signer()), 0u) << net.node(i).name() << ": an honest operator signed " << a.signer();
    }
    if (i > 0) {
      EXPECT_FALSE(t->has_result()) << net.node(i).name() << " executed a task it only observes";
    }
  }
}

// Issue 16, holes 1c and 4: an announcement older than the deployment's evidence deadline E is
// refused outright. A node that was down while a task ran comes back E blocks later and pulls
// the announcement from its peers' logs: it neither adopts nor observes the task (evidence about
// it could no longer be used, and its operator set may have left), and says why in its metrics.
TEST(NetworkSeedTest, AnnouncementPastTheEvidenceDeadlineIsRefused) {
  TestNetwork net("evidence-deadline");
  auto fast = [](int account) { return Operator(account).MemberTimeoutMs(1500); };
  ASSERT_EQ(net.Start({fast(1), fast(2), fast(3), fast(4)}), "");
  NetworkNode& away = net.node(3);
  away.Kill(SIGKILL);
  auto s = Submit(net.node(0), 3, 2, 711);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (size_t i = 0; i < 3; ++i) {
    auto t = WaitCertified(net.node(i), s->id);
    ASSERT_TRUE(t.ok()) << net.node(i).name() << ": " << t.status().ToString();
  }
  auto task = net.node(0).GetTask(s->id);
  ASSERT_TRUE(task.ok());
  const uint64_t ref = task->consensus().reference_block();
  auto head = net.Head();
  ASSERT_TRUE(head.ok());
  const uint64_t deadline = ref + testing_support::TestNetwork::kEvidenceDeadline;
  if (*head <= deadline) {
    ASSERT_EQ(net.Mine(deadline + 2 - *head), "");
  }

  ASSERT_TRUE(away.Start()) << away.LogTail(50);
  EXPECT_TRUE(WaitUntil([&] { return away.Metric("consensor_announcements_refused_total") >= 1; }, kFinality))
      << away.LogTail(80);
  auto missing = away.GetTask(s->id);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound)
      << (missing.ok() ? testing_support::Describe(*missing) : "");
  EXPECT_NE(away.LogTail(400).find("past the evidence deadline"), std::string::npos);
}

// Issue 16: a network-wide minimum of replicas, from the deployment. A client asking for fewer
// is refused with the reason, and so is an entry node that announces a task with fewer (the
// downgrading fault): no node executes it.
TEST(NetworkFaultTest, DeploymentMinimumOfReplicasIsEnforced) {
  testing_support::NetworkOptions options;
  options.deploy_env = "MIN_REPLICAS=2";
  TestNetwork net("minreplicas", options);
  ASSERT_EQ(net.Start({Operator(1).Fault("downgrade-replicas"), Operator(2), Operator(3)}), "");
  auto refused = Submit(net.node(1), 1, 1, 51);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("replicas must be at least 2, the deployment's minReplicas"),
            std::string::npos)
      << refused.status().ToString();
  // The downgrading entry node cannot even plan its one-replica task...
  auto downgraded = Submit(net.node(0), 3, 2, 52);
  ASSERT_FALSE(downgraded.ok());
  EXPECT_NE(downgraded.status().message().find("at least 2"), std::string::npos) << downgraded.status().ToString();
  // ...and an honest request at the minimum goes through.
  auto s = Submit(net.node(1), 2, 2, 53);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto t = WaitCertified(net.node(1), s->id);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ExpectHonest(*t, *s, net.node(1).name());
}

// One operator signs two different results for the same task: the two signatures are the
// evidence, and the operator is slashed for equivocation. Its worst case: the third honest member
// is slow (it commits after the 2 s commit grace), so every window closes on exactly a quorum of
// commitments, the equivocator's among them. Once it is disqualified the other two cannot certify;
// the windows reopen, the slow member's vote counts, and every honest node ends with a
// certificate of the three honest members (seen in CI before that rule: a node stuck below its
// quorum).
TEST(NetworkFaultTest, EquivocationIsSlashed) {
  TestNetwork net("equivocate");
  ASSERT_EQ(net.Start({Operator(1), Operator(2), Operator(3).Fault("slow").FaultDelayMs(5000),
                       Operator(4).Fault("equivocate")}),
            "");
  NetworkNode& bad = net.node(3);
  auto s = Submit(net.node(0), 4, 3, 31);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (size_t i = 0; i < 3; ++i) {
    auto t = WaitCertified(net.node(i), s->id, kFinality,
                           [&](const v1::Task& task) { return !Signed(task.consensus().certificate(), bad); });
    ASSERT_TRUE(t.ok()) << net.node(i).name() << ": " << t.status().ToString();
    ExpectHonest(*t, *s, net.node(i).name());
    for (size_t j = 0; j < 3; ++j) EXPECT_TRUE(Signed(t->consensus().certificate(), net.node(j))) << i << " " << j;
  }
  EXPECT_TRUE(WaitUntil([&] { return HasSlashRecord(net, s->id, bad, "equivocation", /*need_tx=*/false); }, kFinality))
      << "no honest node found the equivocation";
  EXPECT_TRUE(WaitUntil([&] { return SlashedOnChain(net, bad); }, kFinality)) << "not slashed on-chain";
  auto events = net.SlashEvents();
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kind, "equivocation");
  EXPECT_EQ((*events)[0].operator_address, bad.operator_address());
  // The sender records its transaction once the receipt is in.
  EXPECT_TRUE(WaitUntil([&] { return HasSlashRecord(net, s->id, bad, "equivocation", /*need_tx=*/true); }, kFinality));
  for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(SlashedOnChain(net, net.node(i))) << net.node(i).name();
  ExpectVerifies(net, net.node(0), s->id);
}

// Issue 18, against a real consensord's peer port (`target`): `hostile` (a registered operator, the test
// signing with its key) opens GetBlob streams of `blob` (far larger than gRPC's flow-control
// windows) and never reads them, up to and past p2p.max_blob_streams_per_operator (16). The
// node holds exactly 16 (its gauge), refuses the next with RESOURCE_EXHAUSTED counted under the
// operator budget, and still serves `honest` (another operator on the same host, 127.0.0.1) the
// whole blob; a forged signature is UNAUTHENTICATED and a key that is no operator
// PERMISSION_DENIED, neither taking a slot; and a task submitted to the node meanwhile still
// certifies on every running node (its members fetch the blobs from it).
void ExpectBlobStreamBudgetsHold(TestNetwork& net, NetworkNode& target, const std::string& blob,
                                 const NetworkNode& hostile, NetworkNode& honest) {
  const node::PeerRequestDomain domain{net.deployed().chain_id, net.deployed().manager};
  // The hostile streams and everyone else get connections of their own (a channel with a local
  // subchannel pool), so the test's own never-read streams cannot stall its other calls. The
  // attacker keeps its receive windows small, as a real one would: with gRPC's BDP probing on,
  // a window can grow until a never-read stream takes in a whole 32 MiB blob and ends on the
  // server (seen: 14 of 16 held after 2 s).
  auto new_stub = [&](bool hostile) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    if (hostile) args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    return v1::Client::NewStub(grpc::CreateCustomChannel(target.endpoint(), grpc::InsecureChannelCredentials(), args));
  };
  auto hostile_stub = new_stub(true);
  auto other_stub = new_stub(false);
  struct Held {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::BlobChunk>> reader;
  };
  const Secp256k1Secret hostile_key = testing_support::AnvilDevKey(hostile.spec().account);
  enum class Sign { kAsIs, kForged };
  // `sent` (optional) receives the request as sent, for a replay of it.
  auto open = [&](const Secp256k1Secret& key, Sign how = Sign::kAsIs, v1::GetBlobRequest* sent = nullptr) {
    auto s = std::make_unique<Held>();
    s->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
    v1::GetBlobRequest request;
    request.set_sha256(blob);
    EXPECT_TRUE(node::SignGetBlob(key, domain, &request).ok());
    if (how == Sign::kForged) request.set_sent_unix_ms(request.sent_unix_ms() + 1);
    if (sent != nullptr) *sent = request;
    v1::Client::Stub* stub = key == hostile_key ? hostile_stub.get() : other_stub.get();
    s->reader = stub->GetBlob(&s->context, request);
    return s;
  };
  auto refusal = [](Held& s) {
    v1::BlobChunk chunk;
    while (s.reader->Read(&chunk)) {
    }
    return s.reader->Finish();
  };
  const char kOpen[] = "consensor_p2p_blob_streams";
  const char kOverOperator[] = "consensor_p2p_streams_refused_total{budget=\"operator\"}";
  const char kOverHost[] = "consensor_p2p_streams_refused_total{budget=\"host\"}";
  ASSERT_TRUE(WaitUntil([&] { return target.Metric(kOpen) == 0; }, 30s, 100ms)) << "streams still open before the test";
  const double refused_before = std::max(0.0, target.Metric(kOverOperator));
  const double host_refused_before = std::max(0.0, target.Metric(kOverHost));
  constexpr int kOperatorBudget = 16;  // p2p.max_blob_streams_per_operator's default
  std::vector<std::unique_ptr<Held>> held;
  for (int i = 0; i < kOperatorBudget; ++i) {
    held.push_back(open(hostile_key));
    v1::BlobChunk chunk;
    ASSERT_TRUE(held.back()->reader->Read(&chunk)) << "stream " << i << " was not served";
  }
  // Held on the server, not finished into buffers: the node counts them open for a while.
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(target.Metric(kOpen), kOperatorBudget) << "the streams were not held by the server";

  auto over = open(hostile_key);
  grpc::Status status = refusal(*over);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("p2p.max_blob_streams_per_operator"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(target.Metric(kOverOperator) - refused_before, 1);

  auto forged = open(testing_support::AnvilDevKey(honest.spec().account), Sign::kForged);
  status = refusal(*forged);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  Secp256k1Secret outsider{};
  outsider[31] = 0x77;  // a valid key that never registered
  auto stranger = open(outsider);
  status = refusal(*stranger);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_EQ(target.Metric(kOpen), kOperatorBudget) << "a refused request took a slot";

  // Another operator on the same host reads the whole blob meanwhile.
  v1::GetBlobRequest captured;
  auto served = open(testing_support::AnvilDevKey(honest.spec().account), Sign::kAsIs, &captured);
  std::string bytes;
  v1::BlobChunk chunk;
  while (served->reader->Read(&chunk)) bytes += chunk.data();
  status = served->reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(ToHex(Sha256Of(bytes)), blob);
  // An on-path observer resends that signed request while it is still valid (peer links have
  // no TLS), to spend the honest operator's stream budget: served once, the copy refused.
  {
    grpc::ClientContext context;
    auto copy = other_stub->GetBlob(&context, captured);
    v1::BlobChunk ignored;
    EXPECT_FALSE(copy->Read(&ignored)) << "a replayed GetBlob was served";
    status = copy->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
    EXPECT_NE(status.error_message().find("served once"), std::string::npos) << status.error_message();
  }

  // A task entered at this node certifies everywhere: its members fetch the blobs from it.
  auto s = Submit(target, 3, 2, 7);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (size_t i = 0; i < net.size(); ++i) {
    NetworkNode& n = net.node(i);
    if (!n.running()) continue;
    auto t = WaitCertified(n, s->id);
    ASSERT_TRUE(t.ok()) << n.name() << ": " << t.status().ToString();
    ExpectHonest(*t, *s, n.name());
  }
  EXPECT_EQ(target.Metric(kOverHost), host_refused_before);
  EXPECT_EQ(target.Metric(kOpen), kOperatorBudget) << "the hostile streams ended early";
  std::cout << target.name() << ": " << target.Metric(kOpen) << " never-read GetBlob streams held by the server, "
            << target.Metric(kOverOperator) - refused_before << " refused over the operator budget\n";
  for (auto& h : held) h->context.TryCancel();
  for (auto& h : held) h->reader->Finish().error_code();
  EXPECT_TRUE(WaitUntil([&] { return target.Metric(kOpen) == 0; }, 30s, 100ms)) << "cancelled streams kept their slots";
}

// A member that executes but never attests: with replicas 3 and quorum 3 the task cannot
// finalize without it, so after the member timeout the committee is extended to the next
// operator and the task finalizes. Silence proves nothing: nobody is slashed.
//
// The silent member is the hostile peer of issue 18 (fault `refuse-everywhere`): besides
// withholding every commitment and vote, it serves every blob with a byte flipped, refuses
// peers' GetTask and Pull, and floods every peer's peer port with signed GetBlob streams it
// never reads, GetTask calls for tasks that do not exist, and signed Pull and GetNodeInfo
// requests far over their rates. Its streams count against its own operator budget
// (p2p.max_blob_streams_per_operator) and its calls against its own rates
// (p2p.max_pull_requests_per_second_per_operator, p2p.max_lookups_per_second_per_operator), not
// the host's that every operator here shares (127.0.0.1), so the honest members still pull,
// fetch, certify and finalize. Its blobs are small, so its streams end at once on the server; at
// the end the test itself plays this operator with a 32 MiB blob whose never-read streams really
// hold the peer port's threads (ExpectBlobStreamBudgetsHold).
TEST(NetworkFaultTest, SilentMemberIsReplacedAndNotSlashed) {
  testing_support::NetworkOptions options;
  options.separate_peer_ports = true;  // where the GetBlob stream budgets are
  TestNetwork net("silent", options);
  auto fast = [](int account) { return Operator(account).MemberTimeoutMs(1500).ExhaustedGraceMs(4000); };
  // The honest nodes allow each operator 10 lookups (GetTask and GetNodeInfo) per second, not
  // the default 100: under sanitizers the flooder's lookups stayed below 100 a second (no
  // refusal in a CI run), and its flood must go over its own rate to show them. Honest lookups
  // here are at most one per second per unstored task.
  auto honest = [&](int account) { return fast(account).P2pConfig("max_lookups_per_second_per_operator = 10\n"); };
  ASSERT_EQ(net.Start({honest(1), honest(2), honest(3), fast(4).Fault("refuse-everywhere")}), "");
  NetworkNode& silent = net.node(3);
  // Submit until the silent node is in the committee (each task: 3 of 4 operators). With a
  // unanimous quorum (3 of 3) its silence blocks the committee: it is replaced, and because the
  // quorum grows with the committee (4 of 4, never a lower fraction: issue 16), the committee
  // cannot certify without it either. The order is then exhausted and the task fails on every
  // honest node, after waiting for votes; nobody is slashed for silence. With a majority quorum
  // (2 of 3) the two honest members certify alone.
  std::vector<Submitted> all;
  std::optional<Submitted> unanimous, majority;
  for (uint32_t seed = 40; seed < 80 && !(unanimous && majority); ++seed) {
    const bool want_unanimous = !unanimous;
    auto s = Submit(net.node(0), 3, want_unanimous ? 3 : 2, seed);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto t = WaitSeated(net.node(0), s->id);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_EQ(t->consensus().committee_size(), 3);
    if (!InCommittee(*t, silent)) {
      all.push_back(*s);
    } else if (want_unanimous) {
      unanimous = *s;
    } else {
      majority = *s;
      all.push_back(*s);
    }
  }
  ASSERT_TRUE(unanimous.has_value() && majority.has_value()) << "the silent node was in too few committees";

  for (size_t i = 0; i < 3; ++i) {
    auto failed = WaitUntilTask(net.node(i), unanimous->id, kFinality,
                                [](const v1::Task& t) { return t.state() == v1::TASK_STATE_FAILED; });
    ASSERT_TRUE(failed.ok()) << net.node(i).name() << ": " << failed.status().ToString();
    EXPECT_NE(failed->error_message().find("the committee order is exhausted"), std::string::npos)
        << testing_support::Describe(*failed);
    EXPECT_EQ(failed->consensus().committee_size(), 4) << testing_support::Describe(*failed);
    EXPECT_FALSE(failed->consensus().has_certificate());
    EXPECT_TRUE(failed->consensus().slashes().empty());
  }
  EXPECT_GE(net.node(0).Metric("consensor_committee_extensions_total"), 1);

  auto t = WaitCertified(net.node(0), majority->id);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ExpectHonest(*t, *majority, "entry node");
  EXPECT_EQ(t->consensus().certificate().signers_size(), 2);
  EXPECT_FALSE(Signed(t->consensus().certificate(), silent));
  EXPECT_FALSE(t->consensus().disputed());
  // Every other task finalizes everywhere (a barrier before looking for slashing).
  for (const Submitted& s : all) {
    for (size_t i = 0; i < 3; ++i) {
      auto r = WaitCertified(net.node(i), s.id);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ExpectHonest(*r, s, net.node(i).name());
      EXPECT_TRUE(r->consensus().slashes().empty()) << testing_support::Describe(*r);
    }
  }
  EXPECT_FALSE(SlashedOnChain(net, silent));
  EXPECT_EQ(StakeOf(net, silent), kTenEther);
  auto events = net.SlashEvents();
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  EXPECT_TRUE(events->empty());
  ExpectVerifies(net, net.node(0), majority->id);

  // The flood reached every honest node and stayed within the refuser's own budget there.
  const char kTaskCalls[] = "consensor_rpc_requests_total{method=\"GetTask\",code=\"NOT_FOUND\"}";
  const char kOverOperator[] = "consensor_p2p_streams_refused_total{budget=\"operator\"}";
  const char kOverHost[] = "consensor_p2p_streams_refused_total{budget=\"host\"}";
  const char kPullsOverOperator[] = "consensor_p2p_calls_refused_total{call=\"Pull\",budget=\"operator\"}";
  const char kPullsOverHost[] = "consensor_p2p_calls_refused_total{call=\"Pull\",budget=\"host\"}";
  const char kInfoOverOperator[] = "consensor_p2p_calls_refused_total{call=\"GetNodeInfo\",budget=\"operator\"}";
  const char kTasksOverOperator[] = "consensor_p2p_calls_refused_total{call=\"GetTask\",budget=\"operator\"}";
  const char kLookupsOverHost[] = "consensor_p2p_calls_refused_total{call=\"GetNodeInfo\",budget=\"host\"}";
  const char kGossipChecksRefused[] = "consensor_p2p_signature_checks_refused_total{call=\"Gossip\",budget=\"host\"}";
  for (size_t i = 0; i < 3; ++i) {
    NetworkNode& n = net.node(i);
    std::cout << n.name() << ": flood GetTask " << n.Metric(kTaskCalls) << ", GetBlob streams refused over the "
              << "operator budget " << n.Metric(kOverOperator) << ", over the host budget " << n.Metric(kOverHost)
              << ", open " << n.Metric("consensor_p2p_blob_streams") << "; Pulls refused over the operator's rate "
              << n.Metric(kPullsOverOperator) << ", over the host's " << n.Metric(kPullsOverHost)
              << "; GetNodeInfo / GetTask refused over the operator's rate " << n.Metric(kInfoOverOperator) << " / "
              << n.Metric(kTasksOverOperator) << ", GetNodeInfo over the host's " << n.Metric(kLookupsOverHost)
              << "; gossip signature checks refused " << n.Metric(kGossipChecksRefused) << "\n";
    EXPECT_GT(n.Metric(kTaskCalls), 0) << n.name();
    EXPECT_LE(n.Metric("consensor_p2p_blob_streams"), 32) << n.name();
    // The flooder's Pulls and GetNodeInfo calls were refused at its own rates, and the host's
    // bounds, which the honest operators on 127.0.0.1 share with it, refused nothing.
    EXPECT_GT(n.Metric(kPullsOverOperator), 0) << n.name();
    EXPECT_EQ(n.Metric(kPullsOverHost), 0) << n.name();
    EXPECT_GT(n.Metric(kInfoOverOperator), 0) << n.name();
    EXPECT_EQ(n.Metric(kLookupsOverHost), 0) << n.name();
    // Honest gossip stayed within the host's signature checks, flood and all.
    EXPECT_EQ(n.Metric(kGossipChecksRefused), 0) << n.name();
  }
  EXPECT_NE(silent.LogTail(4000).find("fault injection: flooding peers"), std::string::npos);

  // The flooder's streams above are for blobs of a few hundred bytes, which the server sends at
  // once. Now the test plays the same operator (its real key) with a blob much larger than
  // gRPC's flow-control windows, so each stream it opens and never reads really holds a server
  // thread of the honest node's peer port. The flooding process is stopped first, so that only
  // the test's streams count against that operator's budget.
  silent.Kill(SIGKILL);
  NetworkNode& holder = net.node(1);
  std::vector<uint8_t> big(size_t{32} << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  auto put = holder.client().PutBlob(big);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  ExpectBlobStreamBudgetsHold(net, holder, put->sha256(), silent, net.node(0));
}

// Issue 18: members fetch the task's blobs once seated. A member that cannot get them in time
// looks silent: with a unanimous quorum (3 of 3) the committee is extended at the member
// deadline, the replacement fetches the blobs and executes (its vote is counted), and since the
// quorum grows with the committee the task then fails like one with a silent member; nobody is
// slashed.
TEST(NetworkFaultTest, MemberThatCannotFetchIsReplaced) {
  TestNetwork net("cannot-fetch");
  auto fast = [](int account) { return Operator(account).MemberTimeoutMs(1500).ExhaustedGraceMs(4000); };
  ASSERT_EQ(net.Start({fast(1), fast(2), fast(3), fast(4).Fault("cannot-fetch")}), "");
  NetworkNode& blind = net.node(3);
  std::optional<Submitted> task;
  std::vector<std::string> committee;
  for (uint32_t seed = 80; seed < 90 && !task; ++seed) {
    auto s = Submit(net.node(0), 3, 3, seed);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto t = WaitSeated(net.node(0), s->id);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    if (InCommittee(*t, blind)) {
      task = *s;
      committee = Committee(*t);
    }
  }
  ASSERT_TRUE(task.has_value()) << "the node that cannot fetch was in no committee";
  auto failed = WaitUntilTask(net.node(0), task->id, kFinality,
                              [](const v1::Task& t) { return t.state() == v1::TASK_STATE_FAILED; });
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_EQ(failed->consensus().committee_size(), 4) << testing_support::Describe(*failed);
  EXPECT_FALSE(failed->consensus().has_certificate());
  EXPECT_TRUE(failed->consensus().slashes().empty());
  // The replacement, outside the first committee, fetched, executed and committed to its vote
  // (the votes themselves are never revealed: the commit window cannot close on 4 of 4).
  std::set<std::string> voters;
  for (const auto& c : failed->consensus().commitments()) voters.insert(c.signer());
  EXPECT_EQ(voters.size(), 3u) << testing_support::Describe(*failed);
  EXPECT_FALSE(voters.count(blind.operator_hex()));
  bool replacement_voted = false;
  for (const std::string& v : voters) {
    replacement_voted |= std::find(committee.begin(), committee.end(), v) == committee.end();
  }
  EXPECT_TRUE(replacement_voted) << testing_support::Describe(*failed);
  EXPECT_GE(blind.Metric("consensor_member_fetch_failures_total"), 1);
  EXPECT_GE(net.node(0).Metric("consensor_committee_extensions_total"), 1);
  EXPECT_FALSE(SlashedOnChain(net, blind));
}

// The storage refusals a node counted because its disk was below the free-space reserve.
double FullDiskRefusals(NetworkNode& n) {
  std::istringstream lines(n.MetricsText());
  double sum = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("consensor_storage_refusals_total{", 0) != 0 || line.find("min_free_bytes") == std::string::npos)
      continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// A member whose disk is full: its datadir is a 160 MiB tmpfs the test mounts, filled by another
// file to below the node's 32 MiB reserve. It adopts and signs nothing, so the other members
// certify without it; it is not slashed and keeps answering. Once the file is deleted it
// executes and signs again, with no restart.
TEST(NetworkFaultTest, MemberWithAFullDiskSignsNothingAndSignsAgainWhenSpaceReturns) {
  TestNetwork net("full-disk");
  if (!testing_support::CanMountTmpfs(net.dir())) GTEST_SKIP() << "mounting a tmpfs needs root or CAP_SYS_ADMIN";
  auto fast = [](int account) { return Operator(account).MemberTimeoutMs(1500).ExhaustedGraceMs(4000); };
  ASSERT_EQ(net.Start({fast(1), fast(2), fast(3), fast(4).SmallDisk(160, int64_t{32} << 20)}), "");
  NetworkNode& full = net.node(3);
  struct statvfs st {};
  ASSERT_EQ(statvfs(full.datadir().c_str(), &st), 0);
  const int64_t free_bytes = static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
  ASSERT_GT(free_bytes, int64_t{48} << 20);
  const std::string filler = full.datadir() + "/filler";
  std::ofstream(filler, std::ios::binary) << std::string(static_cast<size_t>(free_bytes - (int64_t{16} << 20)), 'f');

  // Tasks from another node until one seats the full node (each committee: 3 of 4 operators).
  // With 2 of 3 the other two members certify.
  auto submit_until_member = [&](uint32_t quorum, uint32_t first_seed) -> std::optional<Submitted> {
    for (uint32_t seed = first_seed; seed < first_seed + 12; ++seed) {
      auto s = Submit(net.node(0), 3, quorum, seed);
      if (!s.ok()) {
        ADD_FAILURE() << s.status().ToString();
        return std::nullopt;
      }
      auto t = WaitSeated(net.node(0), s->id);
      if (!t.ok()) {
        ADD_FAILURE() << t.status().ToString();
        return std::nullopt;
      }
      if (InCommittee(*t, full)) return *s;
    }
    return std::nullopt;
  };
  std::optional<Submitted> while_full = submit_until_member(2, 300);
  ASSERT_TRUE(while_full.has_value()) << "the full node was in no committee";
  auto t = WaitCertified(net.node(0), while_full->id);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ExpectHonest(*t, *while_full, "entry node");
  EXPECT_FALSE(Signed(t->consensus().certificate(), full));
  EXPECT_GE(FullDiskRefusals(full), 1) << full.MetricsText();
  auto info = full.client().GetNodeInfo();  // reads still work
  EXPECT_TRUE(info.ok()) << info.status().ToString();

  // Space returns: with 3 of 3, the certificate needs the once-full node's signature.
  std::filesystem::remove(filler);
  std::optional<Submitted> after = submit_until_member(3, 400);
  ASSERT_TRUE(after.has_value()) << "the node was in no committee after space returned";
  auto r = WaitCertified(full, after->id);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectHonest(*r, *after, full.name());
  EXPECT_TRUE(Signed(r->consensus().certificate(), full)) << testing_support::Describe(*r);
  EXPECT_FALSE(SlashedOnChain(net, full));
  EXPECT_EQ(StakeOf(net, full), kTenEther);
}

// Three members killed at the worst moments of their records, each restarted on the same datadir.
// Four operators, four replicas, quorum 3: the certificate needs two of the three.
// node3 dies when it executes (exit code 86, after its result's write and before attesting).
// node2 dies just before the first record write it makes without a sync of its own, its task's
// `queued` write as a seated member (exit code 88): its disk is as a power failure after that
// write would leave it, seated with no result, which recovery must queue again. node4 sends its
// commitment after an unsynced write of it, and that write is lost (exit code 89, the
// commitment out, its record never written: a power failure after the send); restarted, it must
// commit to the same bytes again, or node1, which admitted the first one, would not count its
// reveal. Restarted, node2 and node4 make the quorum with node1 and sign only the honest result;
// restarted, node3 recovers its stored result and certifies too. Nobody is slashed.
TEST(NetworkFaultTest, CrashMidTaskStillFinalizes) {
  TestNetwork net("crash");
  ASSERT_EQ(net.Start({Operator(1), Operator(2).Fault("crash-before-unsynced-record"),
                       Operator(3).Fault("crash-mid-task"), Operator(4).Fault("lose-own-commitment")}),
            "");
  NetworkNode& unsynced = net.node(1);
  NetworkNode& crashing = net.node(2);
  NetworkNode& forgetful = net.node(3);
  auto s = Submit(net.node(0), 4, 3, 51);  // four replicas of four operators: all are members
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(crashing.WaitExit(kFinality), 86) << crashing.LogTail(30);
  EXPECT_EQ(unsynced.WaitExit(kFinality), 88) << unsynced.LogTail(30);
  EXPECT_EQ(forgetful.WaitExit(kFinality), 89) << forgetful.LogTail(30);
  for (NetworkNode* n : {&unsynced, &forgetful}) {
    net.SetFault(*n, "");
    ASSERT_TRUE(n->Start()) << n->LogTail(30);
  }
  for (size_t i : {0, 1, 3}) {
    auto t = WaitCertified(net.node(i), s->id);
    ASSERT_TRUE(t.ok()) << net.node(i).name() << ": " << t.status().ToString();
    ExpectHonest(*t, *s, net.node(i).name());
    EXPECT_TRUE(Signed(t->consensus().certificate(), unsynced)) << testing_support::Describe(*t);
    EXPECT_TRUE(Signed(t->consensus().certificate(), forgetful)) << testing_support::Describe(*t);
    EXPECT_FALSE(Signed(t->consensus().certificate(), crashing));
    EXPECT_FALSE(t->consensus().disputed()) << testing_support::Describe(*t);
  }
  ExpectVerifies(net, net.node(1), s->id);
  for (NetworkNode* n : {&crashing, &unsynced, &forgetful}) EXPECT_FALSE(SlashedOnChain(net, *n)) << n->name();

  // Restarted on the same datadir, the node recovers its stored result (it does not execute
  // again), attests late, and ends with the certified result too.
  ASSERT_TRUE(crashing.Start()) << crashing.LogTail(30);
  auto t = WaitCertified(crashing, s->id);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ExpectHonest(*t, *s, "restarted " + crashing.name());
  EXPECT_EQ(t->attempts(), 1u) << testing_support::Describe(*t);
  EXPECT_TRUE(crashing.running());
}

// ---------------------------------------------------------------------------------------------
// Colluders (issue 16, holes 2 and 6). Six operators; the deployment's dispute threshold is 60%
// of the stake, so the four honest ones (67%) can finalize a dispute on their own (with the
// default 66.67% they would need five of seven). Every node starts honest but `slow` (it attests
// a while after executing, like members of a long task); once a task's committee is known, two
// nodes are restarted as colluders that sign one and the same wrong result root at once
// (`corrupt-output`, no delay). Picking them after the committee is drawn makes the committee
// the test needs certain instead of likely.

struct ColludingNetwork {
  std::unique_ptr<TestNetwork> net;
  std::optional<Submitted> task;
  std::vector<NetworkNode*> colluders, honest;
};

// Starts the network, submits one task to node1 (honest) and turns two nodes into colluders:
// two committee members when `colluders_in_committee`, else two operators outside it.
void StartColluding(const std::string& name, bool colluders_in_committee, int64_t member_timeout_ms,
                    int64_t honest_delay_ms, uint32_t seed, ColludingNetwork* out) {
  testing_support::NetworkOptions options;
  options.deploy_env = "THRESHOLD_BPS=6000";
  out->net = std::make_unique<TestNetwork>(name, options);
  TestNetwork& net = *out->net;
  std::vector<NodeSpec> specs;
  for (int account = 1; account <= 6; ++account) {
    specs.push_back(Operator(account)
                        .Fault("slow")
                        .FaultDelayMs(honest_delay_ms)
                        .MemberTimeoutMs(member_timeout_ms)
                        .ExhaustedGraceMs(90000));
  }
  ASSERT_EQ(net.Start(specs), "");
  auto s = Submit(net.node(0), 3, 2, seed);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  out->task = *s;
  auto t = WaitSeated(net.node(0), s->id);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->consensus().committee_size(), 3) << testing_support::Describe(*t);
  for (size_t i = 1; i < net.size() && out->colluders.size() < 2; ++i) {
    if (InCommittee(*t, net.node(i)) == colluders_in_committee) out->colluders.push_back(&net.node(i));
  }
  ASSERT_EQ(out->colluders.size(), 2u) << testing_support::Describe(*t);
  for (size_t i = 0; i < net.size(); ++i) {
    if (std::find(out->colluders.begin(), out->colluders.end(), &net.node(i)) == out->colluders.end())
      out->honest.push_back(&net.node(i));
  }
  for (NetworkNode* c : out->colluders) {
    // It must hold the task before it restarts: it learns tasks from announcements.
    ASSERT_TRUE(WaitUntil([&] { return c->GetTask(s->id).ok(); }, kFinality)) << c->name() << " never adopted it";
    c->Kill(SIGKILL);
    net.SetFault(*c, "corrupt-output");
    ASSERT_TRUE(c->Start()) << c->LogTail(30);
  }
}

// The colluders are slashed on-chain by dispute evidence and nobody else is.
void ExpectOnlyColludersSlashed(ColludingNetwork& cn) {
  TestNetwork& net = *cn.net;
  for (NetworkNode* c : cn.colluders) {
    EXPECT_TRUE(WaitUntil([&] { return SlashedOnChain(net, *c); }, kFinality)) << c->name() << " not slashed";
  }
  for (NetworkNode* h : cn.honest) {
    EXPECT_FALSE(SlashedOnChain(net, *h)) << h->name();
    EXPECT_EQ(StakeOf(net, *h), kTenEther) << h->name();
  }
  auto events = net.SlashEvents();
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  std::set<std::string> slashed;
  for (const auto& e : *events) {
    EXPECT_EQ(e.kind, "dispute");
    slashed.insert(testing_support::AddressText(e.operator_address));
  }
  std::set<std::string> want;
  for (NetworkNode* c : cn.colluders) want.insert(c->operator_hex());
  EXPECT_EQ(slashed, want);
}

// Issue 16, hole 2: two colluders deep in the committee order sign a wrong result at once while
// the honest members are still busy. Member timeouts extend the committee to the colluders, but
// the quorum grows with it (4 of 6), so their two votes never certify. The honest result is
// certified, the conflict opens a dispute, the colluders are slashed, and every node ends with
// the honest outputs. Before the fix, the committee grew to 6 with a quorum of 2 and the two
// colluders certified their result on every node.
TEST(NetworkColluderTest, ColludersDeepInTheOrderNeverCertifyAWrongResultOnALongTask) {
  ColludingNetwork cn;
  StartColluding("colluders-deep", /*colluders_in_committee=*/false, /*member_timeout_ms=*/1500,
                 /*honest_delay_ms=*/12000, 81, &cn);
  if (HasFatalFailure()) return;
  TestNetwork& net = *cn.net;
  const Submitted& s = *cn.task;
  // Watch every node until every one holds the honest certified result and the dispute has
  // been decided; a certificate for anything else, anywhere, at any poll, is the attack working.
  std::vector<std::string> wrong;
  const bool settled = WaitUntil(
      [&] {
        bool all = true;
        for (size_t i = 0; i < net.size(); ++i) {
          auto t = net.node(i).GetTask(s.id);
          if (!t.ok()) {
            all = false;
            continue;
          }
          if (t->consensus().has_certificate() && t->consensus().certificate().result_root() != s.honest_root) {
            wrong.push_back(net.node(i).name() + ": " + testing_support::Describe(*t));
          }
          all = all && IsCertified(*t) && t->result().result_root() == s.honest_root && t->consensus().disputed();
        }
        return all || !wrong.empty();
      },
      kFinality);
  EXPECT_TRUE(wrong.empty()) << "a wrong result was certified: " << wrong.front();
  ASSERT_TRUE(settled) << "the network did not settle on the honest result";
  for (size_t i = 0; i < net.size(); ++i) {
    auto t = net.node(i).GetTask(s.id);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ExpectHonest(*t, s, net.node(i).name());
    // The committee was extended to the colluders, and still they did not decide.
    EXPECT_GE(t->consensus().committee_size(), 4) << testing_support::Describe(*t);
    for (NetworkNode* c : cn.colluders) {
      EXPECT_FALSE(Signed(t->consensus().certificate(), *c)) << net.node(i).name();
    }
  }
  EXPECT_GE(net.node(0).Metric("consensor_committee_extensions_total"), 1);
  ExpectOnlyColludersSlashed(cn);
  ExpectVerifies(net, net.node(0), s.id);
}

// Issue 16, holes 2 and 6: two colluders are two of the three committee members, so they
// certify their wrong result first. The honest member's vote conflicts with it, the dispute
// round (the whole set) re-executes, even on nodes that hold the committee's certificate, and
// its certificate supersedes the wrong one. Afterwards every node, the colluders' included,
// serves outputs that make up the certified result root, which is the honest one.
TEST(NetworkColluderTest, DisputeThatSupersedesLeavesEveryNodeWithTheCertifiedOutputs) {
  ColludingNetwork cn;
  StartColluding("colluders-committee", /*colluders_in_committee=*/true, /*member_timeout_ms=*/30000,
                 /*honest_delay_ms=*/10000, 82, &cn);
  if (HasFatalFailure()) return;
  TestNetwork& net = *cn.net;
  const Submitted& s = *cn.task;
  bool wrong_certificate_seen = false;
  const bool settled = WaitUntil(
      [&] {
        bool all = true;
        for (size_t i = 0; i < net.size(); ++i) {
          auto t = net.node(i).GetTask(s.id);
          if (!t.ok()) {
            all = false;
            continue;
          }
          const v1::Certificate& c = t->consensus().certificate();
          if (t->consensus().has_certificate() && c.result_root() != s.honest_root) wrong_certificate_seen = true;
          all = all && IsCertified(*t) && c.dispute() && c.result_root() == s.honest_root;
        }
        return all;
      },
      kFinality);
  ASSERT_TRUE(settled) << "the dispute certificate did not reach every node";
  // The attack this test is about did happen: the committee certified the colluders' root.
  EXPECT_TRUE(wrong_certificate_seen) << "the colluders never certified; the test did not exercise a supersede";
  for (size_t i = 0; i < net.size(); ++i) {
    auto t = net.node(i).GetTask(s.id);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    // What a client gets: outputs whose hashes make up the certificate's root, the honest ones.
    std::vector<std::pair<std::string, Hash256>> named;
    for (const auto& out : t->result().outputs()) {
      auto h = Hash256FromHex(out.tensor_hash());
      ASSERT_TRUE(h.ok()) << out.tensor_hash();
      named.emplace_back(out.name(), *h);
    }
    EXPECT_EQ(ToHex(executor::ResultRoot(named)), t->consensus().certificate().result_root())
        << net.node(i).name() << ": " << testing_support::Describe(*t);
    ExpectHonest(*t, s, net.node(i).name());
    EXPECT_EQ(t->consensus().dispute_committee_size(), 6);
  }
  ExpectOnlyColludersSlashed(cn);
  ExpectVerifies(net, net.node(0), s.id);
}

// ---------------------------------------------------------------------------------------------
// A node with a bad clock (member timeout 100 ms: it believes time passes 200 times faster and
// extends committees almost at once) and a partitioned node (its registered endpoint is a port
// nothing listens on, no bootstrap list: nobody can reach it, though it can reach the others)
// next to three honest ones. No node, these two included, ends with a certificate for anything
// but the honest result.
TEST(NetworkAdversarialTest, BadClockAndPartitionedPeerCauseNoWrongFinalization) {
  // Tasks that run for about a second, so that rounds stay open well past the bad clock's
  // timeout (the work is calibrated here, on this machine's executor).
  constexpr int64_t kN = 512;
  int repeats = 16;
  double seconds = 0;
  for (;;) {
    const auto start = std::chrono::steady_clock::now();
    auto r = testing_support::ExecuteLocally(testing_support::SlowModel(kN, repeats),
                                             {{"x", testing_support::RandomF32({kN, kN}, 1)}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds >= 0.8 || repeats >= 4096) break;
    repeats *= 2;
  }
  std::cerr << "slow task: " << repeats << " matmuls of " << kN << "x" << kN << ", " << seconds << " s here\n";
  const executor::Graph slow = testing_support::SlowModel(kN, repeats);

  TestNetwork net("adversarial");
  ASSERT_EQ(
      net.Start({Operator(1), Operator(2), Operator(3), Operator(4).MemberTimeoutMs(100), Operator(5).Unreachable()}),
      "");
  NetworkNode& bad_clock = net.node(3);
  NetworkNode& partitioned = net.node(4);
  EXPECT_EQ(net.node(0).Peers(), 3);  // node5 is unreachable
  EXPECT_EQ(partitioned.Peers(), 4);  // but it reaches everyone
  std::vector<Submitted> tasks;
  for (uint32_t i = 0; i < 3; ++i) {
    auto s = SubmitGraph(net.node(i), slow, {{"x", testing_support::RandomF32({kN, kN}, 60 + i)}}, 3, 2);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    tasks.push_back(*s);
  }
  // Tiny tasks too, several at once.
  for (uint32_t i = 0; i < 6; ++i) {
    auto s = Submit(net.node(i % 3), 3, 2, 70 + i);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    tasks.push_back(*s);
  }
  for (const Submitted& s : tasks) {
    for (size_t i = 0; i < net.size(); ++i) {
      auto t = WaitCertified(net.node(i), s.id);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      ExpectHonest(*t, s, net.node(i).name());
      EXPECT_FALSE(t->consensus().certificate().dispute());
    }
    ExpectVerifies(net, net.node(0), s.id);
    ExpectVerifies(net, bad_clock, s.id);  // the bad clock's own certificate
    ExpectVerifies(net, partitioned, s.id);
  }
  // The faults were exercised: the bad clock replaced members that were merely slower than it
  // thinks, and the partitioned node stayed unreachable.
  EXPECT_GE(bad_clock.Metric("consensor_committee_extensions_total"), 1);
  EXPECT_EQ(net.node(0).Peers(), 3);
  auto events = net.SlashEvents();
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  EXPECT_TRUE(events->empty());
}

}  // namespace
}  // namespace consensor
