// Functional tests of consensord: real daemon processes with their own datadirs and loopback
// ports, driven through the gRPC API (NodeClient) and the `consensor` CLI.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "common/npy.h"
#include "common/sha256.h"
#include "consensus/task.h"
#include "executor/graph.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "kernels/backend_factory.h"
#include "node/api/client.h"
#include "tests/functional/daemon_harness.h"

namespace consensor {
namespace {

namespace fs = std::filesystem;
using executor::Graph;
using executor::Value;
using node::NodeClient;
using testing_support::DaemonProcess;

Tensor RandomTensor(Shape shape, uint32_t seed) { return testing_support::RandomF32(std::move(shape), seed); }

// Waits (up to 30 s) until `results`, filled by client threads under `mu`, holds `count` entries:
// the moment the kill-under-load tests pull the plug, with more tasks still in flight.
template <typename Map>
void WaitForResults(std::mutex& mu, const Map& results, size_t count) {
  for (int i = 0; i < 3000; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (results.size() >= count) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// x[4,8] -> softmax(tanh(x @ w + b)), plus a reduction.
Graph SmallModel() {
  Graph g;
  Value x = g.input("x", DType::kF32, {4, 8});
  Value h = tanh(matmul(x, g.constant(RandomTensor({8, 6}, 1))) + g.constant(RandomTensor({6}, 2)));
  g.output("y", softmax(h, -1));
  g.output("s", reduce_sum(h, {0}));
  return g;
}

// About `repeats` matmuls of n x n: slow enough to keep a worker busy.
Graph SlowModel(int64_t n, int repeats) {
  Graph g;
  Value x = g.input("x", DType::kF32, {n, n});
  Value w = g.constant(RandomTensor({n, n}, 3));
  Value h = x;
  for (int i = 0; i < repeats; ++i) h = tanh(matmul(h, w));
  g.output("y", h);
  return g;
}

std::string ReadWholeFileForTest(const std::string& path) { return testing_support::ReadWholeFile(path); }

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// What the executor computes locally for the same graph and inputs.
executor::RunResult RunLocally(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  // Each step that fails fails the test and returns an empty result (never a read of a missing value).
  auto program = executor::CompileGraph(g, nullptr, executor::Limits());
  if (!program.ok()) {
    ADD_FAILURE() << program.status().ToString();
    return {};
  }
  auto backend = kernels::CreateBackend(kernels::BackendOptions());
  if (!backend.ok()) {
    ADD_FAILURE() << backend.status().ToString();
    return {};
  }
  auto loaded = executor::LoadedProgram::Load(*program, backend->get());
  if (!loaded.ok()) {
    ADD_FAILURE() << loaded.status().ToString();
    return {};
  }
  executor::RunOptions ro;
  ro.trace = true;
  auto result = (*loaded)->Run(inputs, ro);
  if (!result.ok()) {
    ADD_FAILURE() << result.status().ToString();
    return {};
  }
  return std::move(result).value();
}

class NodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("consensor-node-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (auto& d : daemons_) {
      if (HasFailure()) std::cerr << "---- log of " << d->datadir() << "\n" << d->Log() << "----\n";
      d->Kill(SIGKILL);
    }
    daemons_.clear();
    if (!HasFailure() && !getenv("CNSR_KEEP_TEST_DIRS")) fs::remove_all(dir_);
  }

  DaemonProcess* StartDaemon(const std::string& name, std::vector<std::string> args = {}) {
    daemons_.push_back(std::make_unique<DaemonProcess>((dir_ / name).string(), std::move(args)));
    DaemonProcess* d = daemons_.back().get();
    EXPECT_TRUE(d->Start()) << d->Log();
    return d;
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Uploads the graph and inputs; returns the request ready to submit.
  v1::SubmitTaskRequest Prepare(NodeClient& client, const Graph& g, const std::map<std::string, Tensor>& inputs,
                                uint64_t nonce = 0) {
    v1::SubmitTaskRequest request;
    // A failed upload fails the test and leaves the field empty (never a read of a missing value).
    auto graph_blob = client.PutBlob(executor::SerializeGraph(g));
    if (!graph_blob.ok()) {
      ADD_FAILURE() << "graph upload: " << graph_blob.status().ToString();
      return request;
    }
    request.set_graph_sha256(graph_blob->sha256());
    for (const auto& [name, t] : inputs) {
      auto put = client.PutBlob(EncodeNpy(t));
      if (!put.ok()) {
        ADD_FAILURE() << "input upload: " << put.status().ToString();
        return request;
      }
      (*request.mutable_inputs())[name] = put->sha256();
    }
    request.mutable_options()->set_nonce(nonce);
    return request;
  }

  fs::path dir_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
};

TEST_F(NodeTest, SubmitWatchAndFetchResult) {
  DaemonProcess* d = StartDaemon("n1");
  NodeClient client(d->address());
  Graph g = SmallModel();
  std::map<std::string, Tensor> inputs = {{"x", RandomTensor({4, 8}, 7)}};
  v1::SubmitTaskRequest request = Prepare(client, g, inputs);
  auto submitted = client.SubmitTask(request);
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  EXPECT_FALSE(submitted->already_known());
  EXPECT_EQ(submitted->task_id().size(), 64u);

  std::vector<v1::TaskState> states;
  auto task = client.WatchTask(submitted->task_id(), std::chrono::seconds(60),
                               [&](const v1::Task& t) { states.push_back(t.state()); });
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  ASSERT_EQ(task->state(), v1::TASK_STATE_SUCCEEDED) << task->error_message();
  EXPECT_EQ(states.back(), v1::TASK_STATE_SUCCEEDED);
  EXPECT_EQ(task->attempts(), 1u);

  // Same bits as the executor run locally: output hashes, result root and trace root.
  executor::RunResult local = RunLocally(g, inputs);
  const v1::TaskResult& r = task->result();
  EXPECT_EQ(r.result_root(), ToHex(local.result_root));
  // The task ran without the trace (protocol version 3): GetTrace recomputes it on request.
  EXPECT_EQ(r.trace_root(), ToHex(consensus::kDeferredTraceRoot));
  EXPECT_EQ(r.trace_ops(), 0u);
  auto trace = client.GetTrace(submitted->task_id(), 1, 2);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->result_root(), ToHex(local.result_root));
  EXPECT_EQ(trace->trace_root(), ToHex(local.trace_root));
  EXPECT_EQ(trace->trace_ops(), local.trace.size());
  ASSERT_EQ(trace->op_hashes_size(), 2);
  EXPECT_EQ(trace->first_op(), 1u);
  EXPECT_EQ(trace->op_hashes(0), ToHex(local.trace.at(1)));
  EXPECT_EQ(trace->op_hashes(1), ToHex(local.trace.at(2)));
  // Past the end: the roots and no hashes. Over the cap, unknown or malformed: clear errors.
  auto past = client.GetTrace(submitted->task_id(), 1000, 5);
  ASSERT_TRUE(past.ok()) << past.status().ToString();
  EXPECT_EQ(past->op_hashes_size(), 0);
  EXPECT_EQ(past->trace_root(), trace->trace_root());
  EXPECT_EQ(client.GetTrace(submitted->task_id(), 0, 4097).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.GetTrace(std::string(64, 'e'), 0, 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client.GetTrace("nothex", 0, 0).status().code(), StatusCode::kInvalidArgument);
  // A flood of trace requests from many clients at once: each gets the right trace or is told
  // to retry (one recomputation at a time), and the node keeps serving.
  std::vector<std::thread> flood;
  std::atomic<int> right{0}, retry{0}, wrong{0};
  for (int c = 0; c < 8; ++c) {
    flood.emplace_back([&] {
      NodeClient attacker(d->address());
      for (int i = 0; i < 5; ++i) {
        auto t = attacker.GetTrace(submitted->task_id(), 0, 4096);
        if (t.ok() && t->trace_root() == ToHex(local.trace_root)) ++right;
        else if (t.status().code() == StatusCode::kResourceExhausted) ++retry;
        else ++wrong;
      }
    });
  }
  for (auto& t : flood) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(right.load() + retry.load(), 40);
  EXPECT_GE(right.load(), 1);
  ASSERT_TRUE(client.GetNodeInfo().ok());
  ASSERT_EQ(r.outputs_size(), 2);
  for (int i = 0; i < r.outputs_size(); ++i) {
    EXPECT_EQ(r.outputs(i).name(), local.outputs[i].name);
    EXPECT_EQ(r.outputs(i).tensor_hash(), ToHex(local.outputs[i].hash));
    auto blob = client.GetBlob(r.outputs(i).blob_sha256(), 1 << 20);
    ASSERT_TRUE(blob.ok()) << blob.status().ToString();
    auto t = ParseNpy(*blob, NpyLimits());
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(ToHex(TensorHash(*t)), r.outputs(i).tensor_hash());
  }

  // GetTask agrees; resubmitting is idempotent.
  auto again = client.GetTask(submitted->task_id());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->result().result_root(), r.result_root());
  auto resubmitted = client.SubmitTask(request);
  ASSERT_TRUE(resubmitted.ok());
  EXPECT_TRUE(resubmitted->already_known());
  EXPECT_EQ(resubmitted->task_id(), submitted->task_id());
  // A different nonce is a different task with the same result.
  request.mutable_options()->set_nonce(9);
  auto other = client.SubmitTask(request);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->task_id(), submitted->task_id());
  auto other_task = client.WatchTask(other->task_id(), std::chrono::seconds(60), nullptr);
  ASSERT_TRUE(other_task.ok());
  EXPECT_EQ(other_task->result().result_root(), r.result_root());

  auto info = client.GetNodeInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->version(), "0.1.0");
  EXPECT_EQ(info->task_count(), 2u);
  EXPECT_GE(info->blob_count(), 4u);
}

TEST_F(NodeTest, BlobsRoundTripLargeAndEmpty) {
  DaemonProcess* d = StartDaemon("n1");
  NodeClient client(d->address());
  std::vector<uint8_t> big(5 * 1024 * 1024 + 123);
  std::mt19937 rng(1);
  for (auto& b : big) b = static_cast<uint8_t>(rng());
  auto put = client.PutBlob(big);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->sha256(), ToHex(Sha256Of(big)));
  EXPECT_EQ(put->size(), big.size());
  EXPECT_FALSE(put->already_present());
  auto again = client.PutBlob(big);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_present());
  auto got = client.GetBlob(put->sha256(), int64_t{1} << 30);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == big);

  auto empty = client.PutBlob(std::span<const uint8_t>());
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->size(), 0u);
  auto got_empty = client.GetBlob(empty->sha256(), 10);
  ASSERT_TRUE(got_empty.ok()) << got_empty.status().ToString();
  EXPECT_TRUE(got_empty->empty());
}

// Every class of bad request gets its status code and a message that says what is wrong.
TEST_F(NodeTest, BadRequestsGetClearErrors) {
  DaemonProcess* d = StartDaemon("n1", {"--max-blob-bytes", "100000", "--max-task-flops", "1000000"});
  NodeClient client(d->address());
  auto expect_error = [](const Status& s, StatusCode code, const std::string& fragment) {
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_NE(s.message().find(fragment), std::string::npos) << "message: " << s.message();
  };

  // Blobs: over the cap, wrong expected hash (raw stub, since NodeClient always sends the right one).
  std::vector<uint8_t> too_big(100001, 7);
  expect_error(client.PutBlob(too_big).status(), StatusCode::kResourceExhausted, "cap");
  {
    auto channel = grpc::CreateChannel(d->address(), grpc::InsecureChannelCredentials());
    auto stub = v1::Client::NewStub(channel);
    grpc::ClientContext context;
    v1::PutBlobResponse response;
    auto writer = stub->PutBlob(&context, &response);
    v1::PutBlobRequest m;
    m.set_expected_sha256(ToHex(Sha256Of(std::string_view("something else"))));
    m.set_data("hello");
    writer->Write(m);
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("mismatch"), std::string::npos) << s.error_message();
  }
  // A declared size: over the cap is refused before any byte is sent; more or fewer bytes than
  // declared are INVALID_ARGUMENT; a size in a later message is too.
  {
    auto channel = grpc::CreateChannel(d->address(), grpc::InsecureChannelCredentials());
    auto stub = v1::Client::NewStub(channel);
    auto upload = [&](const std::vector<std::pair<uint64_t, std::string>>& messages) {
      grpc::ClientContext context;
      v1::PutBlobResponse response;
      auto writer = stub->PutBlob(&context, &response);
      for (const auto& [size, data] : messages) {
        v1::PutBlobRequest m;
        m.set_size(size);
        m.set_data(data);
        if (!writer->Write(m)) break;
      }
      writer->WritesDone();
      return writer->Finish();
    };
    grpc::Status s = upload({{100001, ""}});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_NE(s.error_message().find("declared blob size"), std::string::npos) << s.error_message();
    s = upload({{4, "hello"}});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find("more than its declared size"), std::string::npos) << s.error_message();
    s = upload({{6, "hello"}});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find("short of its declared size"), std::string::npos) << s.error_message();
    s = upload({{10, "hello"}, {10, "world"}});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_TRUE(upload({{10, "hello"}, {0, "world"}}).ok());
  }
  expect_error(client.GetBlob(std::string(64, 'a'), 100).status(), StatusCode::kNotFound, "not stored");
  expect_error(client.GetBlob("xyz", 100).status(), StatusCode::kInvalidArgument, "64 hex");

  Graph g = SmallModel();
  std::map<std::string, Tensor> inputs = {{"x", RandomTensor({4, 8}, 7)}};
  v1::SubmitTaskRequest good = Prepare(client, g, inputs);

  // Unknown graph blob, malformed hash, garbage graph.
  v1::SubmitTaskRequest r = good;
  r.set_graph_sha256(std::string(64, 'b'));
  expect_error(client.SubmitTask(r).status(), StatusCode::kNotFound, "graph blob");
  r.set_graph_sha256("nothex");
  expect_error(client.SubmitTask(r).status(), StatusCode::kInvalidArgument, "graph_sha256");
  auto garbage = client.PutBlob(Bytes("this is not a graph"));
  ASSERT_TRUE(garbage.ok());
  r.set_graph_sha256(garbage->sha256());
  expect_error(client.SubmitTask(r).status(), StatusCode::kInvalidArgument, "invalid graph");

  // Inputs: missing, extra, unknown blob, not an npy file, wrong shape.
  r = good;
  r.mutable_inputs()->clear();
  expect_error(client.SubmitTask(r).status(), StatusCode::kInvalidArgument, "missing input 'x'");
  r = good;
  (*r.mutable_inputs())["extra"] = good.inputs().at("x");
  expect_error(client.SubmitTask(r).status(), StatusCode::kInvalidArgument, "no input named 'extra'");
  r = good;
  (*r.mutable_inputs())["x"] = std::string(64, 'c');
  expect_error(client.SubmitTask(r).status(), StatusCode::kNotFound, "input 'x'");
  r = good;
  (*r.mutable_inputs())["x"] = garbage->sha256();
  expect_error(client.SubmitTask(r).status(), StatusCode::kInvalidArgument, "not a valid .npy");
  auto wrong_shape = client.PutBlob(EncodeNpy(RandomTensor({8, 4}, 1)));
  ASSERT_TRUE(wrong_shape.ok());
  r = good;
  (*r.mutable_inputs())["x"] = wrong_shape->sha256();
  expect_error(client.SubmitTask(r).status(), StatusCode::kInvalidArgument, "must be f32[4, 8]");

  // Over the FLOP cap of this node.
  Graph big = SlowModel(128, 2);
  v1::SubmitTaskRequest over = Prepare(client, big, {{"x", RandomTensor({128, 128}, 1)}});
  expect_error(client.SubmitTask(over).status(), StatusCode::kResourceExhausted, "over the cap");

  // Tasks: unknown and malformed ids.
  expect_error(client.GetTask(std::string(64, 'd')).status(), StatusCode::kNotFound, "unknown task");
  expect_error(client.GetTask("").status(), StatusCode::kInvalidArgument, "task_id");
  expect_error(client.WatchTask(std::string(64, 'd'), std::chrono::seconds(5), nullptr).status(), StatusCode::kNotFound,
               "unknown task");

  // The node is still healthy and serves the good request.
  auto ok = client.SubmitTask(good);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto task = client.WatchTask(ok->task_id(), std::chrono::seconds(60), nullptr);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->state(), v1::TASK_STATE_SUCCEEDED);
}

TEST_F(NodeTest, FullQueueAnswersResourceExhausted) {
  DaemonProcess* d = StartDaemon("n1", {"--workers", "1", "--queue", "1"});
  NodeClient client(d->address());
  // About 17 GFLOP, 0.15-0.3 s per task on one core at today's GEMM speed: far longer than the
  // four back-to-back submissions take, so the one-task queue is full when they arrive.
  Graph g = SlowModel(384, 150);
  std::map<std::string, Tensor> inputs = {{"x", RandomTensor({384, 384}, 5)}};
  v1::SubmitTaskRequest base = Prepare(client, g, inputs);
  int accepted = 0, exhausted = 0;
  std::vector<std::string> ids;
  for (uint64_t nonce = 0; nonce < 4; ++nonce) {
    v1::SubmitTaskRequest r = base;
    r.mutable_options()->set_nonce(nonce);
    auto s = client.SubmitTask(r);
    if (s.ok()) {
      ++accepted;
      ids.push_back(s->task_id());
    } else {
      EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted) << s.status().ToString();
      EXPECT_NE(s.status().message().find("queue is full"), std::string::npos);
      ++exhausted;
    }
  }
  EXPECT_GE(exhausted, 1);
  EXPECT_LE(accepted, 2);
  // Accepted tasks still complete.
  for (const auto& id : ids) {
    auto t = client.WatchTask(id, std::chrono::seconds(120), nullptr);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->state(), v1::TASK_STATE_SUCCEEDED);
  }
}

TEST_F(NodeTest, WallTimeCapFailsTheTask) {
  DaemonProcess* d = StartDaemon("n1");
  NodeClient client(d->address());
  // About 45 GFLOP: 10x or more the 50 ms cap at any GEMM speed this machine reaches (40 layers,
  // 45 ms at the 512-bit tile, once finished within the cap before its last check).
  Graph g = SlowModel(384, 400);
  v1::SubmitTaskRequest r = Prepare(client, g, {{"x", RandomTensor({384, 384}, 5)}});
  r.mutable_options()->set_max_wall_ms(50);
  auto s = client.SubmitTask(r);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto t = client.WatchTask(s->task_id(), std::chrono::seconds(60), nullptr);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->state(), v1::TASK_STATE_FAILED);
  EXPECT_EQ(t->error_code(), "DEADLINE_EXCEEDED");
  EXPECT_NE(t->error_message().find("wall-time cap"), std::string::npos) << t->error_message();
}

TEST_F(NodeTest, SecondDaemonOnSameDatadirIsRefused) {
  DaemonProcess* first = StartDaemon("shared");
  DaemonProcess second(first->datadir(), {});
  second.Spawn();
  EXPECT_EQ(second.WaitExit(), 1);
  EXPECT_NE(second.Log().find("in use"), std::string::npos) << second.Log();
  // The first one is unaffected.
  NodeClient client(first->address());
  EXPECT_TRUE(client.GetNodeInfo().ok());
}

// gRPC turns SO_REUSEPORT on by default: a second node on a busy port would start, and the
// kernel would hand it half of the first one's connections. It must refuse the port instead.
TEST_F(NodeTest, SecondDaemonOnSamePortIsRefused) {
  DaemonProcess* first = StartDaemon("first");
  DaemonProcess second(Path("second"), {"--listen", first->address()});
  second.Spawn();
  EXPECT_EQ(second.WaitExit(), 1) << second.Log();
  EXPECT_NE(second.Log().find("cannot listen for gRPC on " + first->address()), std::string::npos) << second.Log();
  // The first one is unaffected, and every call reaches it.
  for (int i = 0; i < 8; ++i) {
    NodeClient client(first->address());
    auto info = client.GetNodeInfo();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
  }
}

TEST_F(NodeTest, GracefulShutdownOnSigterm) {
  DaemonProcess* d = StartDaemon("n1");
  NodeClient client(d->address());
  Graph g = SmallModel();
  v1::SubmitTaskRequest r = Prepare(client, g, {{"x", RandomTensor({4, 8}, 7)}});
  ASSERT_TRUE(client.SubmitTask(r).ok());
  EXPECT_EQ(d->Kill(SIGTERM), 0);
  std::string log = d->Log();
  EXPECT_NE(log.find("consensord stopped"), std::string::npos) << log;
  // Restart on the same datadir: the lock was released and the data is there.
  DaemonProcess again(d->datadir(), {});
  ASSERT_TRUE(again.Start()) << again.Log();
  NodeClient client2(again.address());
  auto info = client2.GetNodeInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->task_count(), 1u);
  EXPECT_EQ(again.Kill(SIGINT), 0);
}

// kill -9 while tasks are queued and running: after a restart every acknowledged task
// completes, with the same hashes as a local run.
TEST_F(NodeTest, KillNineDuringLoadThenRestartCompletesEveryAcknowledgedTask) {
  const std::string datadir = Path("crash");
  auto d = std::make_unique<DaemonProcess>(datadir, std::vector<std::string>{"--workers", "1", "--queue", "100"});
  ASSERT_TRUE(d->Start()) << d->Log();
  NodeClient client(d->address());
  // Slow enough (tens of ms a task) that the one worker falls behind the submitter: at the kill
  // some acknowledged tasks are still queued. With 256x256 (about 10 ms) a worker that does not
  // wait for its results' syncs kept up, and sometimes nothing was left to recover.
  Graph g = SlowModel(384, 20);  // about 2.3 GFLOP, 20-40 ms a task at today's GEMM speed
  std::map<std::string, Tensor> inputs = {{"x", RandomTensor({384, 384}, 11)}};
  const std::string expected_root = ToHex(RunLocally(g, inputs).result_root);
  v1::SubmitTaskRequest base = Prepare(client, g, inputs);
  // A long task first (600 layers, 0.6 s or more), killed while it runs: the journal's mark
  // (docs/NODE.md, "Recovery") must count that attempt after the restart.
  Graph long_graph = SlowModel(384, 600);
  const std::string long_root = ToHex(RunLocally(long_graph, inputs).result_root);
  auto long_task = client.SubmitTask(Prepare(client, long_graph, inputs));
  ASSERT_TRUE(long_task.ok()) << long_task.status().ToString();
  auto long_running = client.WatchTask(long_task->task_id(), std::chrono::seconds(60), nullptr,
                                       [](const v1::Task& t) { return t.state() != v1::TASK_STATE_QUEUED; });
  ASSERT_TRUE(long_running.ok()) << long_running.status().ToString();
  ASSERT_EQ(long_running->state(), v1::TASK_STATE_RUNNING);
  ASSERT_EQ(long_running->attempts(), 1u);

  // Submit from a thread while the main thread kills the daemon mid-stream.
  std::vector<std::string> acknowledged;
  std::mutex mu;
  std::thread submitter([&] {
    for (uint64_t nonce = 0; nonce < 200; ++nonce) {
      v1::SubmitTaskRequest r = base;
      r.mutable_options()->set_nonce(nonce);
      auto s = client.SubmitTask(r);
      if (!s.ok()) break;  // the daemon is gone
      std::lock_guard<std::mutex> lock(mu);
      acknowledged.push_back(s->task_id());
    }
  });
  // Let a few tasks be acknowledged and at least one start running.
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (acknowledged.size() >= 5) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(d->Kill(SIGKILL), 128 + SIGKILL);
  submitter.join();
  ASSERT_GE(acknowledged.size(), 5u);

  DaemonProcess restarted(datadir, {"--workers", "1", "--queue", "100"});
  ASSERT_TRUE(restarted.Start()) << restarted.Log();
  daemons_.push_back(std::make_unique<DaemonProcess>(datadir, std::vector<std::string>{}));  // for the log on failure
  NodeClient client2(restarted.address());
  auto long_done = client2.WatchTask(long_task->task_id(), std::chrono::seconds(120), nullptr);
  ASSERT_TRUE(long_done.ok()) << long_done.status().ToString();
  ASSERT_EQ(long_done->state(), v1::TASK_STATE_SUCCEEDED) << long_done->error_message();
  EXPECT_EQ(long_done->result().result_root(), long_root);
  EXPECT_EQ(long_done->attempts(), 2u);  // the one the kill cut short, and this one
  for (const auto& id : acknowledged) {
    auto t = client2.WatchTask(id, std::chrono::seconds(120), nullptr);
    ASSERT_TRUE(t.ok()) << id << ": " << t.status().ToString();
    ASSERT_EQ(t->state(), v1::TASK_STATE_SUCCEEDED) << t->error_message();
    EXPECT_EQ(t->result().result_root(), expected_root);
    EXPECT_EQ(t->attempts(), 1u) << id;  // queued behind the long task at the kill
  }
  std::string log = restarted.Log();
  EXPECT_NE(log.find("recovered unfinished tasks"), std::string::npos) << log;
  EXPECT_EQ(restarted.Kill(SIGTERM), 0);
}

// kill -9 under a load of tiny tasks from several clients, while syncs are shared between
// tasks (group commit): every task whose submission was acknowledged is there after a restart,
// and every task a client saw succeed is still succeeded, without running again, with the same
// result root and an output blob that can be read back.
TEST_F(NodeTest, KillNineDuringTinyTaskLoadKeepsEveryAcknowledgedTaskAndResult) {
  const std::string datadir = Path("crash-tiny");
  const std::vector<std::string> args = {"--workers", "2", "--queue", "100000", "--log-level", "info"};
  auto d = std::make_unique<DaemonProcess>(datadir, args);
  ASSERT_TRUE(d->Start()) << d->Log();
  Graph g = SmallModel();
  std::map<std::string, Tensor> inputs = {{"x", RandomTensor({4, 8}, 5)}};
  const executor::RunResult local = RunLocally(g, inputs);
  const std::string expected_root = ToHex(local.result_root);
  v1::SubmitTaskRequest base;
  {
    NodeClient client(d->address());
    base = Prepare(client, g, inputs);
  }

  struct Seen {
    std::string result_root;
    std::map<std::string, std::string> output_blobs;  // name -> sha256
  };
  std::mutex mu;
  std::vector<std::string> acknowledged;  // SubmitTask returned OK
  std::map<std::string, Seen> succeeded;  // WatchTask reported SUCCEEDED
  std::atomic<uint64_t> next_nonce{1};
  std::atomic<bool> node_gone{false};
  constexpr int kClients = 6;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      NodeClient client(d->address());
      while (!node_gone) {
        v1::SubmitTaskRequest r = base;
        r.mutable_options()->set_nonce(next_nonce.fetch_add(1));
        auto s = client.SubmitTask(r);
        if (!s.ok()) break;
        {
          std::lock_guard<std::mutex> lock(mu);
          acknowledged.push_back(s->task_id());
        }
        auto t = client.WatchTask(s->task_id(), std::chrono::seconds(30), nullptr);
        if (!t.ok() || t->state() != v1::TASK_STATE_SUCCEEDED) break;
        Seen seen{t->result().result_root(), {}};
        for (const auto& o : t->result().outputs()) seen.output_blobs[o.name()] = o.blob_sha256();
        std::lock_guard<std::mutex> lock(mu);
        succeeded[s->task_id()] = std::move(seen);
      }
    });
  }
  // Kill once a good number of results were acknowledged, with more tasks in flight.
  WaitForResults(mu, succeeded, 150);
  EXPECT_EQ(d->Kill(SIGKILL), 128 + SIGKILL);
  node_gone = true;
  for (auto& t : clients) t.join();
  ASSERT_GE(succeeded.size(), 150u);
  ASSERT_GE(acknowledged.size(), succeeded.size());

  DaemonProcess restarted(datadir, args);
  ASSERT_TRUE(restarted.Start()) << restarted.Log();
  NodeClient client2(restarted.address());
  // Results first, before recovery could re-run anything: they must be there as they were seen.
  for (const auto& [id, seen] : succeeded) {
    auto t = client2.GetTask(id);
    ASSERT_TRUE(t.ok()) << id << ": " << t.status().ToString();
    ASSERT_EQ(t->state(), v1::TASK_STATE_SUCCEEDED) << id;
    EXPECT_EQ(t->attempts(), 1u) << id;
    EXPECT_EQ(t->result().result_root(), seen.result_root);
    EXPECT_EQ(seen.result_root, expected_root);
    ASSERT_EQ(t->result().outputs_size(), static_cast<int>(seen.output_blobs.size()));
    for (const auto& o : t->result().outputs()) {
      EXPECT_EQ(o.blob_sha256(), seen.output_blobs.at(o.name()));
      auto bytes = client2.GetBlob(o.blob_sha256(), int64_t{1} << 20);
      ASSERT_TRUE(bytes.ok()) << o.name() << ": " << bytes.status().ToString();
      EXPECT_EQ(ToHex(Sha256Of(*bytes)), o.blob_sha256());
    }
  }
  // Every acknowledged submission completes, with the same result.
  for (const auto& id : acknowledged) {
    auto t = client2.WatchTask(id, std::chrono::seconds(60), nullptr);
    ASSERT_TRUE(t.ok()) << id << ": " << t.status().ToString();
    ASSERT_EQ(t->state(), v1::TASK_STATE_SUCCEEDED) << id << ": " << t->error_message();
    EXPECT_EQ(t->result().result_root(), expected_root);
  }
  EXPECT_EQ(restarted.Kill(SIGTERM), 0);
}

// RunTask stores its task without a sync of its own (docs/NODE.md, "Client API"), answering only
// after the result's sync. The node is stopped just before that record write with its disk as
// a power failure after the write would leave it (fault crash-before-unsynced-record): the call
// fails, the restarted node has no trace of the task, and the same call again (the same task id)
// runs it to the right result. The first, warm, RunTask on gRPC's thread and the next one from
// a call worker (cold: another graph) both stop there.
TEST_F(NodeTest, RunTaskNodeStoppedBeforeItsUnsyncedRecordThenTheSameCallCompletes) {
  const std::string datadir = Path("crash-runtask");
  {
    std::ofstream config(Path("fault.toml"));
    config << "[fault]\nmode = \"crash-before-unsynced-record\"\n";
  }
  for (int round = 0; round < 2; ++round) {
    // Round 0 warm (admitted on gRPC's thread); round 1 a graph the node never compiled.
    const Graph g = round == 0 ? SmallModel() : SlowModel(16, 2);
    const std::map<std::string, Tensor> inputs = {
        {"x", round == 0 ? RandomTensor({4, 8}, 21) : RandomTensor({16, 16}, 22)}};
    const std::string expected_root = ToHex(RunLocally(g, inputs).result_root);
    DaemonProcess faulty(datadir, {"--config", Path("fault.toml")});
    ASSERT_TRUE(faulty.Start()) << faulty.Log();
    NodeClient client(faulty.address());
    const v1::SubmitTaskRequest request = Prepare(client, g, inputs, /*nonce=*/round);
    if (round == 0) {
      // Warm: a SubmitTask of the same graph and input (synced, no fault) compiles and decodes.
      v1::SubmitTaskRequest warm = request;
      warm.mutable_options()->set_nonce(100);
      ASSERT_TRUE(client.SubmitTask(warm).ok());
    }
    auto ran = client.RunTask(request, std::chrono::seconds(60));
    EXPECT_FALSE(ran.ok()) << "the node answered a RunTask it should have crashed in";
    EXPECT_EQ(faulty.WaitExit(), 88) << faulty.Log();
    EXPECT_NE(faulty.Log().find("crashing before an unsynced record write"), std::string::npos);

    DaemonProcess restarted(datadir, {});
    ASSERT_TRUE(restarted.Start()) << restarted.Log();
    NodeClient client2(restarted.address());
    auto again = client2.RunTask(request, std::chrono::seconds(60));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_FALSE(again->already_known()) << "the record written after the fault point survived";
    EXPECT_EQ(again->task().state(), v1::TASK_STATE_SUCCEEDED) << again->task().error_message();
    EXPECT_EQ(again->task().attempts(), 1u);
    EXPECT_EQ(again->task().result().result_root(), expected_root);
    // What the call answered is durable: read again after a kill -9.
    const std::string id = again->task().task_id();
    EXPECT_EQ(restarted.Kill(SIGKILL), 128 + SIGKILL);
    DaemonProcess third(datadir, {});
    ASSERT_TRUE(third.Start()) << third.Log();
    NodeClient client3(third.address());
    auto kept = client3.GetTask(id);
    ASSERT_TRUE(kept.ok()) << kept.status().ToString();
    EXPECT_EQ(kept->state(), v1::TASK_STATE_SUCCEEDED);
    EXPECT_EQ(kept->result().result_root(), expected_root);
    EXPECT_EQ(third.Kill(SIGTERM), 0);
  }
}

// kill -9 under a load of RunTask calls, whose tasks are stored without a sync of their own:
// every call the node answered SUCCEEDED is still succeeded after a restart, without running
// again, with the same result; every call the kill cut short, made again (the same task id),
// completes with the same result, whether or not its record had survived.
TEST_F(NodeTest, KillNineDuringRunTaskLoadKeepsEveryAnsweredResult) {
  const std::string datadir = Path("crash-runtask-load");
  const std::vector<std::string> args = {"--workers", "2", "--queue", "100000"};
  auto d = std::make_unique<DaemonProcess>(datadir, args);
  ASSERT_TRUE(d->Start()) << d->Log();
  Graph g = SmallModel();
  std::map<std::string, Tensor> inputs = {{"x", RandomTensor({4, 8}, 23)}};
  const std::string expected_root = ToHex(RunLocally(g, inputs).result_root);
  v1::SubmitTaskRequest base;
  {
    NodeClient client(d->address());
    base = Prepare(client, g, inputs);
  }
  std::mutex mu;
  std::map<std::string, std::string> answered;   // task id -> result root, answered SUCCEEDED
  std::vector<v1::SubmitTaskRequest> cut_short;  // calls that failed when the node died
  std::atomic<uint64_t> next_nonce{1};
  std::atomic<bool> node_gone{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&] {
      NodeClient client(d->address());
      while (!node_gone) {
        v1::SubmitTaskRequest r = base;
        r.mutable_options()->set_nonce(next_nonce.fetch_add(1));
        auto ran = client.RunTask(r, std::chrono::seconds(30));
        std::lock_guard<std::mutex> lock(mu);
        if (!ran.ok() || ran->task().state() != v1::TASK_STATE_SUCCEEDED) {
          cut_short.push_back(r);
          return;
        }
        answered[ran->task().task_id()] = ran->task().result().result_root();
      }
    });
  }
  WaitForResults(mu, answered, 150);
  EXPECT_EQ(d->Kill(SIGKILL), 128 + SIGKILL);
  node_gone = true;
  for (auto& t : clients) t.join();
  ASSERT_GE(answered.size(), 150u);

  DaemonProcess restarted(datadir, args);
  ASSERT_TRUE(restarted.Start()) << restarted.Log();
  NodeClient client2(restarted.address());
  for (const auto& [id, root] : answered) {
    auto t = client2.GetTask(id);
    ASSERT_TRUE(t.ok()) << id << ": " << t.status().ToString();
    ASSERT_EQ(t->state(), v1::TASK_STATE_SUCCEEDED) << id;
    EXPECT_EQ(t->attempts(), 1u) << id;
    EXPECT_EQ(t->result().result_root(), root);
    EXPECT_EQ(root, expected_root);
  }
  for (const auto& r : cut_short) {
    auto again = client2.RunTask(r, std::chrono::seconds(60));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->task().state(), v1::TASK_STATE_SUCCEEDED) << again->task().error_message();
    EXPECT_EQ(again->task().result().result_root(), expected_root);
  }
  EXPECT_EQ(restarted.Kill(SIGTERM), 0);
}

}  // namespace
}  // namespace consensor

namespace consensor {
namespace {

using CliResult = testing_support::CommandResult;
CliResult RunCliCommand(const std::string& args) {
  return testing_support::RunCommand(testing_support::CliBinary(), args);
}

using testing_support::HttpGet;

// The CLI against a daemon: submit --wait --out, status, result, node info; and the same
// hashes as `consensor run`.
TEST_F(NodeTest, CliSubmitStatusResultAndNodeInfo) {
  DaemonProcess* d = StartDaemon("n1");
  Graph g = SmallModel();
  ASSERT_TRUE(executor::SaveGraphFile(Path("model.pbtxt"), g).ok());
  ASSERT_TRUE(WriteNpyFile(Path("x.npy"), RandomTensor({4, 8}, 7)).ok());
  const std::string node = " --node " + d->address();

  CliResult local = RunCliCommand("run " + Path("model.pbtxt") + " --input x=" + Path("x.npy"));
  ASSERT_EQ(local.exit_code, 0) << local.out;
  CliResult submitted = RunCliCommand("submit " + Path("model.pbtxt") + " --input x=" + Path("x.npy") + node +
                                      " --wait --out " + Path("out"));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out;
  // Every "output ..." and "result ..." line of the local run appears in the node's answer.
  std::istringstream lines(local.out);
  std::string line;
  int compared = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("output", 0) == 0 || line.rfind("result", 0) == 0) {
      EXPECT_NE(submitted.out.find(line), std::string::npos) << line << "\n" << submitted.out;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 3);
  EXPECT_NE(submitted.out.find("succeeded"), std::string::npos);
  EXPECT_TRUE(fs::exists(Path("out/y.npy")));
  EXPECT_TRUE(fs::exists(Path("out/s.npy")));

  const std::string id = submitted.out.substr(submitted.out.find("task     ") + 9, 64);
  CliResult status = RunCliCommand("status " + id + node);
  EXPECT_EQ(status.exit_code, 0) << status.out;
  EXPECT_NE(status.out.find("state    succeeded"), std::string::npos) << status.out;
  CliResult json = RunCliCommand("status " + id + node + " --json");
  EXPECT_NE(json.out.find("\"TASK_STATE_SUCCEEDED\""), std::string::npos) << json.out;
  CliResult result = RunCliCommand("result " + id + node + " --out " + Path("out2"));
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_EQ(ReadWholeFileForTest(Path("out/y.npy")), ReadWholeFileForTest(Path("out2/y.npy")));
  // `consensor trace` recomputes the trace the task ran without: the same root as `run --trace`.
  CliResult traced_locally = RunCliCommand("run " + Path("model.pbtxt") + " --input x=" + Path("x.npy") + " --trace");
  ASSERT_EQ(traced_locally.exit_code, 0) << traced_locally.out;
  const size_t at = traced_locally.out.find("trace    ");
  ASSERT_NE(at, std::string::npos) << traced_locally.out;
  const std::string trace_line = traced_locally.out.substr(at, traced_locally.out.find('\n', at) - at);
  EXPECT_NE(status.out.find("trace    not computed"), std::string::npos) << status.out;
  CliResult traced = RunCliCommand("trace " + id + node + " --count 3");
  EXPECT_EQ(traced.exit_code, 0) << traced.out;
  EXPECT_NE(traced.out.find(trace_line), std::string::npos) << trace_line << "\n" << traced.out;
  EXPECT_NE(traced.out.find("\nop 2\t"), std::string::npos) << traced.out;
  CliResult trace_json = RunCliCommand("trace " + id + node + " --json");
  EXPECT_NE(trace_json.out.find("\"trace_root\""), std::string::npos) << trace_json.out;
  CliResult trace_unknown = RunCliCommand("trace " + std::string(64, 'e') + node);
  EXPECT_EQ(trace_unknown.exit_code, 1) << trace_unknown.out;
  CliResult trace_usage = RunCliCommand("trace " + id + node + " --count 5000");
  EXPECT_EQ(trace_usage.exit_code, 2) << trace_usage.out;

  CliResult info = RunCliCommand("node info" + node);
  EXPECT_EQ(info.exit_code, 0) << info.out;
  EXPECT_NE(info.out.find("version    0.1.0"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("\ndevice     cpu-"), std::string::npos) << info.out;

  // Errors: unknown task, malformed id, unreachable node, missing input file.
  CliResult unknown = RunCliCommand("status " + std::string(64, 'e') + node);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.out.find("unknown task"), std::string::npos) << unknown.out;
  CliResult malformed = RunCliCommand("result nothex --out " + Path("o3") + node);
  EXPECT_EQ(malformed.exit_code, 1);
  EXPECT_NE(malformed.out.find("64 hex digits"), std::string::npos) << malformed.out;
  CliResult down = RunCliCommand("node info --node 127.0.0.1:1");
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_NE(down.out.find("unavailable"), std::string::npos) << down.out;
  CliResult missing = RunCliCommand("submit " + Path("model.pbtxt") + node);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("missing input 'x'"), std::string::npos) << missing.out;
  CliResult usage = RunCliCommand("submit" + node);
  EXPECT_EQ(usage.exit_code, 2) << usage.out;

  // submit --wait submits and waits in one RunTask: a task over its wall cap ends failed (exit
  // 1, with why); a task longer than --timeout ends the wait with an error, not a hang.
  ASSERT_TRUE(executor::SaveGraphFile(Path("slow.pbtxt"), SlowModel(512, 400)).ok());
  ASSERT_TRUE(WriteNpyFile(Path("xs.npy"), RandomTensor({512, 512}, 8)).ok());
  CliResult over_cap = RunCliCommand("submit " + Path("slow.pbtxt") + " --input x=" + Path("xs.npy") + node +
                                     " --wait --max-wall-ms 50");
  EXPECT_EQ(over_cap.exit_code, 1) << over_cap.out;
  EXPECT_NE(over_cap.out.find("state    failed"), std::string::npos) << over_cap.out;
  EXPECT_NE(over_cap.out.find("error    DEADLINE_EXCEEDED"), std::string::npos) << over_cap.out;
  // 2,000 layers of a 512 x 512 matmul are 0.54 TFLOP: over 1 s on any CPU this runs on at one
  // thread (about 4 s at AVX-512 speed), and the wall cap ends it at 3 s wherever it runs.
  ASSERT_TRUE(executor::SaveGraphFile(Path("slower.pbtxt"), SlowModel(512, 2000)).ok());
  CliResult too_long = RunCliCommand("submit " + Path("slower.pbtxt") + " --input x=" + Path("xs.npy") + node +
                                     " --nonce 2 --wait --max-wall-ms 3000 --timeout 1");
  EXPECT_EQ(too_long.exit_code, 1) << too_long.out;
  EXPECT_NE(too_long.out.find("waiting for task"), std::string::npos) << too_long.out;
}

TEST_F(NodeTest, MetricsAndEigenHealthEndpoints) {
  DaemonProcess* d = StartDaemon("n1", {"--metrics", "127.0.0.1:0", "--program-cache-bytes", "1000000"});
  const std::string metrics = testing_support::ReadWholeFile(d->datadir() + "/metrics.addr");
  ASSERT_FALSE(metrics.empty());
  const std::string addr = metrics.substr(0, metrics.size() - 1);
  // rpc.addr is written just before the node reports healthy: "starting" (206) may come first.
  int health = HttpGet(addr, "/eigen/node/health").first;
  for (int i = 0; i < 200 && health == 206; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    health = HttpGet(addr, "/eigen/node/health").first;
  }
  EXPECT_EQ(health, 200);
  EXPECT_EQ(HttpGet(addr, "/eigen/node/services/client-api/health").first, 200);
  auto version = HttpGet(addr, "/eigen/node/version");
  EXPECT_EQ(version.first, 200);
  EXPECT_NE(version.second.find("0.1.0"), std::string::npos);
  EXPECT_EQ(HttpGet(addr, "/nope").first, 404);

  NodeClient client(d->address());
  v1::SubmitTaskRequest r = Prepare(client, SmallModel(), {{"x", RandomTensor({4, 8}, 7)}});
  auto s = client.SubmitTask(r);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(client.WatchTask(s->task_id(), std::chrono::seconds(60), nullptr).ok());
  r.mutable_inputs()->clear();
  EXPECT_FALSE(client.SubmitTask(r).ok());

  // The worker counts a completion just after storing it, so WatchTask can return first: wait
  // for the counter (bounded) before reading the rest.
  auto text = HttpGet(addr, "/metrics");
  for (int i = 0; i < 200 && text.second.find("consensor_tasks_completed_total 1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text = HttpGet(addr, "/metrics");
  }
  EXPECT_EQ(text.first, 200);
  for (const char* expected :
       {"consensor_tasks_received_total 1", "consensor_tasks_completed_total 1", "consensor_tasks_failed_total 0",
        "consensor_tasks_rejected_total 1", "consensor_task_execution_seconds_count 1", "consensor_queue_depth 0",
        "consensor_blobs_received_total 2", "consensor_up 1",
        // The warm path: the first SubmitTask compiled the model; the execution and the refused
        // second submission found it cached.
        "consensor_program_cache_misses_total 1", "consensor_program_cache_hits_total 2",
        "consensor_program_cache_entries 1",
        // SubmitTask decoded the small input (a miss) and the worker ran from that copy (a hit);
        // the refused submission names no input.
        "consensor_input_cache_misses_total 1", "consensor_input_cache_hits_total 1",
        "consensor_input_cache_entries 1"}) {
    EXPECT_NE(text.second.find(expected), std::string::npos) << expected << "\n" << text.second;
  }
}

// A client floods the decoded-input cache with distinct inputs and lies about one input's shape:
// memory stays within the budget, the lie is refused every time, and inputs
// evicted and read again from the store give the same bits as a local run.
TEST_F(NodeTest, InputFloodStaysWithinTheCacheBudgetAndEvictedInputsGiveTheSameBits) {
  constexpr int64_t kBudget = 4096;  // room for about ten [4, 8] f32 inputs (128 bytes + 256 each)
  DaemonProcess* d = StartDaemon("n1", {"--metrics", "127.0.0.1:0", "--input-cache-bytes", std::to_string(kBudget)});
  const std::string metrics = testing_support::ReadWholeFile(d->datadir() + "/metrics.addr");
  ASSERT_FALSE(metrics.empty());
  const std::string addr = metrics.substr(0, metrics.size() - 1);
  NodeClient client(d->address());
  const Graph g = SmallModel();

  auto run = [&](const std::map<std::string, Tensor>& inputs, uint64_t nonce) {
    auto submitted = client.SubmitTask(Prepare(client, g, inputs, nonce));
    ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
    auto task = client.WatchTask(submitted->task_id(), std::chrono::seconds(60), nullptr);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    ASSERT_EQ(task->state(), v1::TASK_STATE_SUCCEEDED) << task->error_message();
    EXPECT_EQ(task->result().result_root(), ToHex(RunLocally(g, inputs).result_root)) << "nonce " << nonce;
  };
  const int kInputs = 40;
  for (int i = 0; i < kInputs; ++i) {
    run({{"x", RandomTensor({4, 8}, 100 + i)}}, i);
    if (i % 10 == 0) {
      // The lie: an input of the wrong shape, refused at SubmitTask, and again next time.
      for (int attempt = 0; attempt < 2; ++attempt) {
        auto refused = client.SubmitTask(Prepare(client, g, {{"x", RandomTensor({4, 9}, 7)}}, 1000 + i));
        ASSERT_FALSE(refused.ok());
        EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
      }
    }
  }
  // The first inputs were evicted long ago: read from the store again, same bits.
  for (int i = 0; i < 3; ++i) run({{"x", RandomTensor({4, 8}, 100 + i)}}, 2000 + i);

  auto value = [](const std::string& text, const std::string& name) -> int64_t {
    const size_t at = text.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stoll(text.substr(at + name.size() + 2));
  };
  const auto text = HttpGet(addr, "/metrics");
  ASSERT_EQ(text.first, 200);
  const int64_t bytes = value(text.second, "consensor_input_cache_bytes");
  EXPECT_GT(bytes, 0) << text.second;
  EXPECT_LE(bytes, kBudget) << text.second;
  EXPECT_LE(value(text.second, "consensor_input_cache_entries"), kBudget / 256) << text.second;
  EXPECT_GE(value(text.second, "consensor_input_cache_evictions_total"), kInputs - kBudget / 384) << text.second;
}

TEST_F(NodeTest, ConfigFileOperatorKeyAndBadConfig) {
  // An operator key made with the CLI, its password in a file.
  std::ofstream(Path("password")) << "correct horse\n";
  fs::permissions(Path("password"), fs::perms::owner_read | fs::perms::owner_write);  // a secret: 0600
  CliResult key =
      RunCliCommand("keys new --keystore " + Path("keys") + " --password-file " + Path("password") + " --light-kdf");
  ASSERT_EQ(key.exit_code, 0) << key.out;
  std::string keyfile;
  for (const auto& e : fs::directory_iterator(Path("keys"))) keyfile = e.path().string();
  ASSERT_FALSE(keyfile.empty());
  std::ofstream(Path("node.toml")) << "[executor]\nworkers = 3\nqueue_capacity = 7\n\n[operator]\nkeystore = \""
                                   << keyfile << "\"\npassword_file = \"" << Path("password") << "\"\n";
  // A cache budget of 0 (the warm path off) is a valid setting, unlike a queue of 0.
  DaemonProcess* d = StartDaemon(
      "n1", {"--config", Path("node.toml"), "--queue", "9", "--program-cache-bytes", "0", "--input-cache-bytes", "0"});
  NodeClient client(d->address());
  auto info = client.GetNodeInfo();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->workers(), 3u);
  EXPECT_EQ(info->queue_capacity(), 9u);  // the flag overrides the file
  ASSERT_EQ(info->operator_address().size(), 42u);
  std::string lower = info->operator_address();
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_NE(keyfile.find(lower.substr(2)), std::string::npos) << keyfile << " vs " << lower;

  // Bad configs are refused at startup with a message naming the problem.
  std::ofstream(Path("bad.toml")) << "[executor]\nwokers = 3\n";
  DaemonProcess bad(Path("bad"), {"--config", Path("bad.toml")});
  bad.Spawn();
  EXPECT_EQ(bad.WaitExit(), 1);
  EXPECT_NE(bad.Log().find("unknown key 'executor.wokers'"), std::string::npos) << bad.Log();
  std::ofstream(Path("wrongpw")) << "wrong\n";
  DaemonProcess locked(Path("locked"), {"--keystore", keyfile, "--password-file", Path("wrongpw")});
  locked.Spawn();
  EXPECT_EQ(locked.WaitExit(), 1);
  EXPECT_NE(locked.Log().find("operator keystore"), std::string::npos) << locked.Log();
  DaemonProcess usage(Path("usage"), {"--no-such-flag"});
  usage.Spawn();
  EXPECT_EQ(usage.WaitExit(), 2);
  DaemonProcess negative(Path("negative"), {"--program-cache-bytes", "-1"});
  negative.Spawn();
  EXPECT_EQ(negative.WaitExit(), 2);
  EXPECT_NE(negative.Log().find("--program-cache-bytes must be an integer between 0"), std::string::npos)
      << negative.Log();
}

}  // namespace
}  // namespace consensor

namespace consensor {
namespace {

// The executor backend comes from the node's config: the emulated CUDA kernels pass the
// startup self-test (logged and exported) and give the CPU's bits; executor.selftest = false
// and --no-selftest skip the self-test; a GPU backend that cannot run here stops startup
// unless fallback_cpu is set.
TEST_F(NodeTest, BackendFromConfigSelfTestAndCpuFallback) {
  Graph g = SmallModel();
  std::map<std::string, Tensor> inputs = {{"x", RandomTensor({4, 8}, 7)}};
  const std::string expected = ToHex(RunLocally(g, inputs).result_root);

  DaemonProcess* emu = StartDaemon("emu", {"--backend", "cuda-emu", "--metrics", "127.0.0.1:0"});
  const std::string log = emu->Log();
  EXPECT_NE(log.find("msg=\"backend self-test started\" backend=cuda-emu set=quick"), std::string::npos) << log;
  EXPECT_NE(log.find("msg=\"backend self-test passed\" backend=cuda-emu reference=\"cpu-portable x1\""),
            std::string::npos)
      << log;
  EXPECT_LT(log.find("backend self-test passed"), log.find("consensord started")) << log;
  EXPECT_NE(
      log.find("msg=\"executor backend\" backend=\"cuda-emu (the CUDA kernels under the SIMT emulation, on the CPU)\""),
      std::string::npos)
      << log;
  const std::string metrics_addr = testing_support::ReadWholeFile(emu->datadir() + "/metrics.addr");
  auto metrics = HttpGet(metrics_addr.substr(0, metrics_addr.size() - 1), "/metrics");
  EXPECT_NE(metrics.second.find("consensor_backend_selftest_ok{backend=\"cuda-emu\"} 1"), std::string::npos)
      << metrics.second;
  EXPECT_NE(metrics.second.find("consensor_backend_selftest_seconds{backend=\"cuda-emu\"} "), std::string::npos);
  EXPECT_NE(metrics.second.find("consensor_backend_info{backend=\"cuda-emu\",device=\"cuda-emu (the CUDA kernels under "
                                "the SIMT emulation, on the CPU)\"} 1"),
            std::string::npos)
      << metrics.second;
  NodeClient client(emu->address());
  auto s = client.SubmitTask(Prepare(client, g, inputs));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto t = client.WatchTask(s->task_id(), std::chrono::seconds(120), nullptr);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->state(), v1::TASK_STATE_SUCCEEDED) << t->error_message();
  EXPECT_EQ(t->result().result_root(), expected);
  EXPECT_NE(t->result().backend().find("emu"), std::string::npos) << t->result().backend();

  std::ofstream(Path("unchecked.toml")) << "[executor]\nbackend = \"cuda-emu\"\nselftest = false\n";
  for (const auto& [name, args] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"unchecked", {"--config", Path("unchecked.toml"), "--metrics", "127.0.0.1:0"}},
           {"flagged", {"--backend", "cuda-emu", "--no-selftest", "--metrics", "127.0.0.1:0"}}}) {
    DaemonProcess* d = StartDaemon(name, args);
    EXPECT_NE(d->Log().find("level=warn msg=\"backend self-test skipped (executor.selftest = false)"),
              std::string::npos)
        << d->Log();
    EXPECT_EQ(d->Log().find("self-test started"), std::string::npos) << d->Log();
    const std::string addr = testing_support::ReadWholeFile(d->datadir() + "/metrics.addr");
    auto text = HttpGet(addr.substr(0, addr.size() - 1), "/metrics");
    EXPECT_NE(text.second.find("consensor_up 1"), std::string::npos) << text.second;
    EXPECT_EQ(text.second.find("consensor_backend_selftest_ok"), std::string::npos) << text.second;
    d->Kill(SIGTERM);
  }

  // A CUDA backend on a machine without a usable GPU.
  auto probe = kernels::CreateBackend(kernels::BackendOptions{"cuda", 1, "auto", 0});
  if (probe.ok()) GTEST_SKIP() << "this machine has a GPU; the no-GPU paths are not reachable";
  DaemonProcess strict(Path("strict"), {"--backend", "cuda"});
  strict.Spawn();
  EXPECT_EQ(strict.WaitExit(), 1);
  EXPECT_NE(strict.Log().find("fallback_cpu"), std::string::npos) << strict.Log();

  DaemonProcess* fallback = StartDaemon("fallback", {"--backend", "cuda", "--fallback-cpu"});
  NodeClient client2(fallback->address());
  auto s2 = client2.SubmitTask(Prepare(client2, g, inputs));
  ASSERT_TRUE(s2.ok()) << s2.status().ToString();
  auto t2 = client2.WatchTask(s2->task_id(), std::chrono::seconds(120), nullptr);
  ASSERT_TRUE(t2.ok());
  ASSERT_EQ(t2->state(), v1::TASK_STATE_SUCCEEDED) << t2->error_message();
  EXPECT_EQ(t2->result().result_root(), expected);
  EXPECT_EQ(t2->result().backend().rfind("cpu", 0), 0u) << t2->result().backend();
  auto info2 = client2.GetNodeInfo();
  ASSERT_TRUE(info2.ok()) << info2.status().ToString();
  EXPECT_EQ(info2->backend_device().rfind("unavailable (", 0), 0u) << info2->backend_device();
  EXPECT_NE(info2->backend_device().find("); tasks run on the CPU"), std::string::npos) << info2->backend_device();
}

// A node whose datadir is on a small filesystem the test mounts (tmpfs, 256 MiB): uploads and
// submissions are refused with RESOURCE_EXHAUSTED before anything is written once the free-space
// reserve is reached; reads keep working; the store reopens after kill -9 on the full disk; uploads
// resume when space returns; and over a quota the retention sweep deletes unreferenced blobs (not
// the blobs of the stored task) until uploads fit again.
// The warm store path names an output blob it remembers storing without reading the blob's
// record while no blob has been deleted since (docs/NODE.md, "The warm path"). Here retention
// deletes the first task, and its output blob with it, between two identical tasks: the second
// must store the output again, not name the deleted blob.
TEST_F(NodeTest, RetentionDeletingAStoredOutputBetweenTwoIdenticalTasksStoresItAgain) {
  constexpr int64_t kQuota = 4 << 20;
  DaemonProcess* d = StartDaemon("n1", {"--storage-max-bytes", std::to_string(kQuota), "--min-free-bytes", "0",
                                        "--sweep-interval-ms", "300", "--log-level", "info"});
  NodeClient client(d->address());
  // A 256 KiB output, so that the first task is what the quota sweep deletes for room.
  Graph g;
  g.output("y", tanh(g.input("x", DType::kF32, {256, 256})));
  const std::map<std::string, Tensor> inputs = {{"x", RandomTensor({256, 256}, 11)}};
  auto run_once = [&](uint64_t nonce) -> StatusOr<v1::Task> {
    v1::SubmitTaskRequest request = Prepare(client, g, inputs, nonce);
    ASSIGN_OR_RETURN(v1::SubmitTaskResponse submitted, client.SubmitTask(request));
    ASSIGN_OR_RETURN(v1::Task done, client.WatchTask(submitted.task_id(), std::chrono::seconds(60), nullptr));
    if (done.state() != v1::TASK_STATE_SUCCEEDED) return Internal("task did not succeed: " + done.error_message());
    return done;
  };
  auto first = run_once(1);
  ASSERT_TRUE(first.ok()) << first.status().ToString() << "\n" << d->Log();
  ASSERT_EQ(first->result().outputs_size(), 1);
  const v1::TaskOutput output = first->result().outputs(0);
  ASSERT_TRUE(client.GetBlob(output.blob_sha256(), 1 << 20).ok());

  // An unreferenced upload takes the store over 90% of the quota: the next sweep deletes the
  // oldest finished task (the first one) and the blobs only it referenced, its output among them.
  // An upload that straddles the start of a sweep gets only the next sweep's grace; should the
  // filler go first (unreferenced, past its grace) and leave the task, it is uploaded again.
  const std::string filler(static_cast<size_t>(kQuota) * 4 / 5, 'f');
  const std::string filler_sha = ToHex(Sha256Of(filler));
  bool deleted = false;
  for (int i = 0; i < 300 && !deleted; ++i) {
    if (client.GetBlob(filler_sha, 1).status().code() == StatusCode::kNotFound) {
      auto put = client.PutBlob(Bytes(filler));
      ASSERT_TRUE(put.ok()) << put.status().ToString();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    deleted = client.GetBlob(output.blob_sha256(), 1 << 20).status().code() == StatusCode::kNotFound;
  }
  ASSERT_TRUE(deleted) << "retention never deleted the first task's output\n" << d->Log();
  EXPECT_EQ(client.GetTask(first->task_id()).status().code(), StatusCode::kNotFound);
  // The filler goes on a later sweep (past its grace), leaving room for the second task.
  bool emptied = false;
  for (int i = 0; i < 300 && !emptied; ++i) {
    auto info = client.GetNodeInfo();
    emptied = info.ok() && info->blob_bytes() < (1u << 20);
    if (!emptied) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(emptied) << d->Log();

  // The same graph and inputs (uploaded again) under another nonce: the same output tensor, which
  // the node remembers having stored. It must be stored again and readable.
  auto second = run_once(2);
  ASSERT_TRUE(second.ok()) << second.status().ToString() << "\n" << d->Log();
  ASSERT_EQ(second->result().outputs_size(), 1);
  EXPECT_NE(second->task_id(), first->task_id());
  EXPECT_EQ(second->result().result_root(), first->result().result_root());
  EXPECT_EQ(second->result().outputs(0).tensor_hash(), output.tensor_hash());
  EXPECT_EQ(second->result().outputs(0).blob_sha256(), output.blob_sha256());
  auto bytes = client.GetBlob(second->result().outputs(0).blob_sha256(), 1 << 20);
  ASSERT_TRUE(bytes.ok()) << "the second task names a blob the node does not have: " << bytes.status().ToString();
  EXPECT_EQ(static_cast<uint64_t>(bytes->size()), output.blob_size());
  EXPECT_EQ(ToHex(Sha256Of(*bytes)), output.blob_sha256());
}

TEST_F(NodeTest, FullDiskRefusesWritesKeepsReadsReopensAndRecovers) {
  const fs::path small = dir_ / "small";
  fs::create_directories(small);
  if (mount("tmpfs", small.c_str(), "tmpfs", 0, "size=256m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs at " << small << " (" << std::strerror(errno)
                 << "): this test needs root or CAP_SYS_ADMIN";
  }
  struct Unmount {
    std::vector<std::unique_ptr<DaemonProcess>>* daemons;
    fs::path path;
    ~Unmount() {
      for (auto& d : *daemons) d->Kill(SIGKILL);  // nothing may hold the mount
      umount2(path.c_str(), MNT_DETACH);
    }
  } unmount{&daemons_, small};
  auto free_bytes = [&] {
    struct statvfs st {};
    statvfs(small.c_str(), &st);
    return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
  };

  const std::string datadir = (small / "node").string();
  // The reserve is above RocksDB's 64 MiB write buffer, so a memtable flush always has room.
  // No sweep runs until the quota phase (the default interval is 10 minutes): until then every
  // acknowledged blob must stay, referenced or not.
  const std::vector<std::string> args = {
      "--min-free-bytes", std::to_string(72 << 20), "--metrics", "127.0.0.1:0", "--log-level", "info"};
  daemons_.push_back(std::make_unique<DaemonProcess>(datadir, args));
  DaemonProcess* d = daemons_.back().get();
  ASSERT_TRUE(d->Start()) << d->Log();
  NodeClient client(d->address());
  // Another process fills the disk up to 30 MiB above the reserve (measured after the node
  // started: RocksDB preallocates its WAL); the test gives this room back later.
  const std::string filler = (small / "filler").string();
  const int64_t filler_bytes = free_bytes() - (102 << 20);
  ASSERT_GT(filler_bytes, 0);
  std::ofstream(filler, std::ios::binary) << std::string(static_cast<size_t>(filler_bytes), 'f');

  // A task before the disk fills: its result must stay readable.
  v1::SubmitTaskRequest request = Prepare(client, SmallModel(), {{"x", RandomTensor({4, 8}, 7)}});
  auto submitted = client.SubmitTask(request);
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  auto done = client.WatchTask(submitted->task_id(), std::chrono::seconds(60), nullptr);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  ASSERT_EQ(done->state(), v1::TASK_STATE_SUCCEEDED) << done->error_message();
  const std::string output_blob = done->result().outputs(0).blob_sha256();

  // Fill with distinct blobs until the node refuses, then with smaller ones into what is left,
  // down to less room than a task record needs.
  std::map<std::string, std::string> acknowledged;  // sha256 -> bytes
  int uploads = 0;
  auto fill = [&](NodeClient& c, size_t size) {
    Status refused = OkStatus();
    for (int i = 0; i < 200 && refused.ok(); ++i) {
      std::string bytes(size, 'b');
      std::memcpy(bytes.data(), &++uploads, sizeof(uploads));
      auto put = c.PutBlob(Bytes(bytes));
      if (put.ok()) {
        acknowledged[put->sha256()] = std::move(bytes);
      } else {
        refused = put.status();
      }
    }
    return refused;
  };
  Status refused = fill(client, 4 << 20);
  ASSERT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  for (size_t size : {64 << 10, 1 << 10, 300}) {
    Status smaller = fill(client, size);
    ASSERT_EQ(smaller.code(), StatusCode::kResourceExhausted) << size << ": " << smaller.ToString();
  }
  EXPECT_NE(refused.message().find("storage.min_free_bytes"), std::string::npos) << refused.message();
  ASSERT_GE(acknowledged.size(), 2u);
  // Refused before anything was written: no blob appeared and the disk did not shrink by the upload.
  auto info = client.GetNodeInfo();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const uint64_t blobs_when_full = info->blob_count();
  const int64_t free_before = free_bytes();
  std::string more(4 << 20, 'm');
  EXPECT_EQ(client.PutBlob(Bytes(more)).status().code(), StatusCode::kResourceExhausted);
  EXPECT_GT(free_bytes(), free_before - (1 << 20));
  EXPECT_EQ(client.GetNodeInfo()->blob_count(), blobs_when_full);
  // A new task is refused too, through gRPC and through the CLI (clear message, exit 1).
  v1::SubmitTaskRequest other = request;
  other.mutable_options()->set_nonce(99);
  EXPECT_EQ(client.SubmitTask(other).status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(executor::SaveGraphFile(Path("model.pbtxt"), SmallModel()).ok());
  ASSERT_TRUE(WriteNpyFile(Path("x.npy"), RandomTensor({4, 8}, 8)).ok());
  CliResult cli =
      RunCliCommand("submit " + Path("model.pbtxt") + " --input x=" + Path("x.npy") + " --node " + d->address());
  EXPECT_EQ(cli.exit_code, 1) << cli.out;
  EXPECT_NE(cli.out.find("the disk is full"), std::string::npos) << cli.out;

  // Reads keep working.
  auto task = client.GetTask(submitted->task_id());
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ(task->state(), v1::TASK_STATE_SUCCEEDED);
  EXPECT_TRUE(client.WatchTask(submitted->task_id(), std::chrono::seconds(10), nullptr).ok());
  EXPECT_TRUE(client.GetBlob(output_blob, 1 << 20).ok());
  const std::string metrics_addr = ReadWholeFileForTest(datadir + "/metrics.addr");
  auto metrics = HttpGet(metrics_addr.substr(0, metrics_addr.size() - 1), "/metrics");
  EXPECT_NE(metrics.second.find("consensor_storage_refusals_total{write=\"blob upload\",limit=\"min_free_bytes\"}"),
            std::string::npos)
      << metrics.second;
  EXPECT_NE(metrics.second.find("consensor_storage_bytes{category=\"blobs\"}"), std::string::npos);

  // kill -9 on the full disk; the store reopens and every acknowledged blob reads back whole.
  EXPECT_EQ(d->Kill(SIGKILL), 128 + SIGKILL);
  ASSERT_TRUE(d->Start()) << d->Log();
  NodeClient reopened(d->address());
  for (const auto& [sha, bytes] : acknowledged) {
    auto back = reopened.GetBlob(sha, 8 << 20);
    ASSERT_TRUE(back.ok()) << sha << ": " << back.status().ToString();
    EXPECT_TRUE(std::equal(back->begin(), back->end(), bytes.begin(), bytes.end())) << sha;
  }
  // Reopening may give back preallocated WAL space; fill again until refused.
  ASSERT_EQ(fill(reopened, 4 << 20).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(reopened.PutBlob(Bytes(more)).status().code(), StatusCode::kResourceExhausted);
  // Space returns: uploads are accepted again.
  fs::remove(filler);
  auto after_free = reopened.PutBlob(Bytes(more));
  ASSERT_TRUE(after_free.ok()) << after_free.status().ToString();
  acknowledged[after_free->sha256()] = more;

  // A quota below what is stored: refused; then the sweep deletes the blobs no task references
  // (all stored before the node started), and uploads fit again. The task's blobs stay.
  auto stored = reopened.GetNodeInfo();
  ASSERT_TRUE(stored.ok());
  const int64_t quota = static_cast<int64_t>(stored->blob_bytes()) - (2 << 20);
  d->Kill(SIGTERM);
  // This phase is about the quota: no free-space reserve (deleted data is only returned to the
  // filesystem as RocksDB compacts).
  std::vector<std::string> quota_args = {"--metrics",           "127.0.0.1:0",         "--min-free-bytes",    "0",
                                         "--storage-max-bytes", std::to_string(quota), "--sweep-interval-ms", "60000"};
  daemons_.push_back(std::make_unique<DaemonProcess>(datadir, quota_args));
  d = daemons_.back().get();
  ASSERT_TRUE(d->Start()) << d->Log();
  NodeClient quota_client(d->address());
  auto over = quota_client.PutBlob(Bytes(std::string(1 << 20, 'q')));
  ASSERT_EQ(over.status().code(), StatusCode::kResourceExhausted) << over.status().ToString();
  EXPECT_NE(over.status().message().find("storage.max_bytes"), std::string::npos) << over.status().ToString();
  // The first sweep runs after the interval; restart with a short one to get it now.
  d->Kill(SIGTERM);
  quota_args.back() = "200";
  daemons_.push_back(std::make_unique<DaemonProcess>(datadir, quota_args));
  d = daemons_.back().get();
  ASSERT_TRUE(d->Start()) << d->Log();
  NodeClient swept(d->address());
  StatusOr<v1::PutBlobResponse> fits = Unavailable("not tried");
  for (int i = 0; i < 100; ++i) {
    fits = swept.PutBlob(Bytes(std::string(1 << 20, 's')));
    if (fits.ok()) break;
    EXPECT_EQ(fits.status().code(), StatusCode::kResourceExhausted) << fits.status().ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(fits.ok()) << fits.status().ToString() << "\n" << d->Log();
  auto after_sweep = swept.GetNodeInfo();
  ASSERT_TRUE(after_sweep.ok());
  EXPECT_LE(static_cast<int64_t>(after_sweep->blob_bytes()), quota);
  EXPECT_NE(d->Log().find("retention sweep"), std::string::npos);
  // The task (finished, within retain_results_hours) and every blob it names are intact.
  auto kept = swept.GetTask(submitted->task_id());
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_TRUE(swept.GetBlob(request.graph_sha256(), 64 << 20).ok());
  EXPECT_TRUE(swept.GetBlob(request.inputs().at("x"), 1 << 20).ok());
  for (const auto& o : kept->result().outputs()) EXPECT_TRUE(swept.GetBlob(o.blob_sha256(), 1 << 20).ok());
  // And a new task is accepted and runs.
  auto again = swept.SubmitTask(other);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto ran = swept.WatchTask(again->task_id(), std::chrono::seconds(60), nullptr);
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ(ran->state(), v1::TASK_STATE_SUCCEEDED) << ran->error_message();
}

}  // namespace
}  // namespace consensor
