// Functional tests of consensord: real daemon processes with their own datadirs and loopback
// ports, driven through the gRPC API (NodeClient) and the `consensor` CLI.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "common/npy.h"
#include "common/sha256.h"
#include "executor/graph.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "kernels/backend_factory.h"
#include "node/client.h"
#include "tests/functional/daemon_harness.h"

namespace consensor {
namespace {

namespace fs = std::filesystem;
using executor::Graph;
using executor::Value;
using node::NodeClient;
using testing_support::DaemonProcess;

Tensor RandomTensor(Shape shape, uint32_t seed) {
  Tensor t(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data_as<float>()[i] = d(rng);
  return t;
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

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// What the executor computes locally for the same graph and inputs.
executor::RunResult RunLocally(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  auto program = executor::CompileGraph(g, nullptr, executor::Limits());
  EXPECT_TRUE(program.ok()) << program.status().ToString();
  auto backend = kernels::CreateBackend(kernels::BackendOptions());
  EXPECT_TRUE(backend.ok());
  auto loaded = executor::LoadedProgram::Load(*program, backend->get());
  EXPECT_TRUE(loaded.ok());
  executor::RunOptions ro;
  ro.trace = true;
  auto result = (*loaded)->Run(inputs, ro);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
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
    auto graph_blob = client.PutBlob(executor::SerializeGraph(g));
    EXPECT_TRUE(graph_blob.ok()) << graph_blob.status().ToString();
    request.set_graph_sha256(graph_blob->sha256());
    for (const auto& [name, t] : inputs) {
      auto put = client.PutBlob(EncodeNpy(t));
      EXPECT_TRUE(put.ok()) << put.status().ToString();
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
  EXPECT_EQ(r.trace_root(), ToHex(local.trace_root));
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
  Graph g = SlowModel(384, 12);  // ~0.5-1 s per task on one core
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
  Graph g = SlowModel(384, 40);
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
  Graph g = SlowModel(256, 6);
  std::map<std::string, Tensor> inputs = {{"x", RandomTensor({256, 256}, 11)}};
  const std::string expected_root = ToHex(RunLocally(g, inputs).result_root);
  v1::SubmitTaskRequest base = Prepare(client, g, inputs);

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
  for (const auto& id : acknowledged) {
    auto t = client2.WatchTask(id, std::chrono::seconds(120), nullptr);
    ASSERT_TRUE(t.ok()) << id << ": " << t.status().ToString();
    ASSERT_EQ(t->state(), v1::TASK_STATE_SUCCEEDED) << t->error_message();
    EXPECT_EQ(t->result().result_root(), expected_root);
  }
  std::string log = restarted.Log();
  EXPECT_NE(log.find("recovered unfinished tasks"), std::string::npos) << log;
  EXPECT_EQ(restarted.Kill(SIGTERM), 0);
}

}  // namespace
}  // namespace consensor
