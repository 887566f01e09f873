// Unit tests of the task manager (node/engine/task_manager.h) through its public interface: an
// in-memory store (tests/node/fakes/memory_store.h) stands in for RocksDB, and the real CPU
// backend and executor run the tasks, so results are compared with running the same graph
// directly. No test sleeps to synchronize: tests wait on the manager's change notification
// (WaitForChange) or on gates placed in the store, always with a generous timeout.
#include "node/engine/task_manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/npy.h"
#include "common/sha256.h"
#include "consensus/task.h"
#include "executor/graph.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "kernels/backend_factory.h"
#include "kernels/cpu/cpu_backend.h"
#include "node/api/task_spec.h"
#include "node/engine/input_cache.h"
#include "node/engine/running_journal.h"
#include "node/storage/disk_budget.h"
#include "node/telemetry/metrics.h"
#include "tests/node/engine/task_ids.h"
#include "tests/node/fakes/memory_store.h"
#include "tests/test_files.h"

namespace consensor::node {
namespace {

using test_support::Id;

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using executor::Value;
using fakes::MemoryStore;

// Generous, so that a loaded machine makes a test slow, never failed.
constexpr auto kTimeout = 120s;

std::string IdBytes(const std::string& id_hex) {
  auto h = Hash256FromHex(id_hex);
  EXPECT_TRUE(h.ok()) << id_hex;
  return h.ok() ? std::string(reinterpret_cast<const char*>(h->data()), h->size()) : std::string();
}

std::vector<uint8_t> Bytes(std::string_view text) { return {text.begin(), text.end()}; }

Tensor F32(Shape shape, const std::vector<float>& values) {
  return Tensor::FromVector(DType::kF32, std::move(shape), values);
}
Tensor I32(Shape shape, const std::vector<int32_t>& values) {
  return Tensor::FromVector(DType::kI32, std::move(shape), values);
}

// The value, or a default one after recording the error (value() of an error is undefined
// behaviour in a release build).
template <typename T>
T ValueOf(StatusOr<T> s) {
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : T();
}

bool IsFinished(const v1::Task& t) {
  return t.state() == v1::TASK_STATE_SUCCEEDED || t.state() == v1::TASK_STATE_FAILED;
}

// Weights blobs of a graph for the reference run, which needs no store.
class MapBlobSource final : public executor::BlobSource {
 public:
  explicit MapBlobSource(std::map<Hash256, std::vector<uint8_t>> blobs) : blobs_(std::move(blobs)) {}
  StatusOr<std::vector<uint8_t>> Get(const Hash256& sha256) override {
    auto it = blobs_.find(sha256);
    if (it == blobs_.end()) return NotFound("no blob " + ToHex(sha256));
    return it->second;
  }

 private:
  std::map<Hash256, std::vector<uint8_t>> blobs_;
};

// What a task's result must match: the graph compiled and run directly on the CPU, traced as
// the node runs it.
struct Reference {
  Hash256 graph_id{};
  executor::RunResult run;
};

StatusOr<Reference> RunDirectly(const executor::Graph& graph, const std::map<std::string, Tensor>& inputs,
                                std::map<Hash256, std::vector<uint8_t>> blobs) {
  MapBlobSource source(std::move(blobs));
  ASSIGN_OR_RETURN(executor::Program program, executor::CompileGraph(graph, &source, executor::Limits{}));
  ASSIGN_OR_RETURN(auto backend, kernels::CreateBackend(kernels::BackendOptions{}));
  ASSIGN_OR_RETURN(auto loaded, executor::LoadedProgram::Load(program, backend.get()));
  executor::RunOptions options;
  options.trace = true;
  ASSIGN_OR_RETURN(executor::RunResult run, loaded->Run(inputs, options));
  return Reference{program.graph_id, std::move(run)};
}

// Holds the threads that pass it until it is opened: a worker stopped at a known point. An open
// gate only counts who passed.
class Gate {
 public:
  explicit Gate(bool open) : open_(open) {}

  // Gives up after kTimeout, so a broken test fails instead of hanging.
  Status Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    ++arrived_;
    cv_.notify_all();
    if (!cv_.wait_for(lock, kTimeout, [&] { return open_; })) return DeadlineExceeded("the test never opened the gate");
    return OkStatus();
  }
  [[nodiscard]] bool WaitArrived(int count) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kTimeout, [&] { return arrived_ >= count; });
  }
  int arrived() {
    std::lock_guard<std::mutex> lock(mu_);
    return arrived_;
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_;
  int arrived_ = 0;
};

class TaskManagerTest : public ::testing::Test {
 protected:
  // One run of the daemon's task manager, with its own metrics.
  struct Node {
    MetricsRegistry registry;
    NodeMetrics metrics{&registry};
    std::unique_ptr<TaskManager> tasks;  // last member: stops before the metrics go away
  };

  void SetUp() override {
    // y = tanh(x @ w + b) and its row sums: an inline constant, a weights blob and one input.
    bias_ = F32({3}, {0.5f, -0.25f, 0.125f});
    const std::vector<uint8_t> bias_bytes(bias_.bytes().begin(), bias_.bytes().end());
    bias_hash_ = Put(bias_bytes);
    Value x = graph_.input("x", DType::kF32, {2, 4});
    const Tensor weights = F32({4, 3}, {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f, 0.9f, -1.0f, 1.1f, 1.2f});
    Value w = graph_.constant(weights, "w");
    Value b = graph_.constant_blob(bias_hash_, DType::kF32, {3}, "b");
    Value y = tanh(matmul(x, w) + b);
    graph_.output("y", y);
    graph_.output("row_sum", reduce_sum(y, {1}));
    graph_hash_ = PutGraph(graph_);
    x_ = F32({2, 4}, {1.0f, -2.0f, 0.5f, 3.0f, -1.5f, 0.25f, 2.0f, -0.75f});
    x_hash_ = PutNpy(x_);

    auto reference = RunDirectly(graph_, {{"x", x_}}, {{bias_hash_, bias_bytes}});
    ASSERT_TRUE(reference.ok()) << reference.status().ToString();
    reference_ = std::move(reference).value();
  }

  void TearDown() override {
    for (auto& gate : gates_) gate->Open();  // Shutdown joins the workers: never leave one held
    nodes_.clear();
  }

  static TaskManagerOptions Options(int workers, int queue_capacity = 64) {
    TaskManagerOptions options;
    options.workers = workers;
    options.queue_capacity = queue_capacity;
    return options;
  }
  static TaskManagerOptions NoInputCache(TaskManagerOptions options) {
    options.input_cache_bytes = 0;
    return options;
  }

  // A manager over store_ that has not recovered or started yet.
  Node& NewNode(TaskManagerOptions options) {
    nodes_.push_back(std::make_unique<Node>());
    Node& node = *nodes_.back();
    node.tasks = std::make_unique<TaskManager>(&store_, &node.metrics, std::move(options));
    return node;
  }

  // Recovered and started, as the daemon does at startup.
  Node& StartNode(TaskManagerOptions options) {
    Node& node = NewNode(std::move(options));
    Status s = node.tasks->Recover();
    EXPECT_TRUE(s.ok()) << s.ToString();
    node.tasks->Start();
    return node;
  }

  Gate& NewGate(bool open = false) {
    gates_.push_back(std::make_unique<Gate>(open));
    return *gates_.back();
  }

  // An open gate that every write of a succeeded record passes (WaitArrived(n): n results written).
  Gate& CountResultWrites() {
    Gate& results = NewGate(/*open=*/true);
    store_.SetPutTaskHook([&results](const std::string&, const std::string& record) {
      v1::Task t;
      return t.ParseFromString(record) && t.state() == v1::TASK_STATE_SUCCEEDED ? results.Pass() : OkStatus();
    });
    return results;
  }

  // Holds execution where a worker loads the input `x`. Submission reads the input with ReadBlob
  // while execution loads it with GetBlob, so this fires only in execution, after the task was
  // stored as running. The node must run without the input cache (NoInputCache): with it, the
  // worker finds the input decoded in memory and reads no blob.
  void HoldExecutionAtInput(Gate& gate) {
    const Hash256 input = x_hash_;
    store_.SetGetBlobHook([&gate, input](const Hash256& h) { return h == input ? gate.Pass() : OkStatus(); });
  }

  Hash256 Put(const std::vector<uint8_t>& bytes) {
    auto info = store_.PutBlob(bytes);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info->sha256 : Hash256{};
  }
  Hash256 PutGraph(const executor::Graph& graph) { return Put(executor::SerializeGraph(graph)); }
  Hash256 PutNpy(const Tensor& t) { return Put(EncodeNpy(t)); }

  v1::SubmitTaskRequest Request(uint64_t nonce = 0) const {
    v1::SubmitTaskRequest request;
    request.set_graph_sha256(ToHex(graph_hash_));
    (*request.mutable_inputs())["x"] = ToHex(x_hash_);
    request.mutable_options()->set_nonce(nonce);
    return request;
  }

  std::string MustSubmit(TaskManager& tasks, const v1::SubmitTaskRequest& request,
                         const v1::TaskConsensus* consensus = nullptr) {
    auto outcome = tasks.Submit(request, consensus);
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    if (!outcome.ok()) return "";
    EXPECT_FALSE(outcome->already_known);
    return outcome->task_id.Hex();
  }

  // Waits on the manager's change notification until `done` holds for the task's record.
  static StatusOr<v1::Task> WaitUntil(TaskManager& tasks, const std::string& id,
                                      const std::function<bool(const v1::Task&)>& done) {
    const auto deadline = Clock::now() + kTimeout;
    ASSIGN_OR_RETURN(v1::Task task, tasks.Get(Id(id)));
    while (!done(task)) {
      if (Clock::now() >= deadline) {
        return DeadlineExceeded("task " + id + " is still " + v1::TaskState_Name(task.state()));
      }
      ASSIGN_OR_RETURN(task, tasks.WaitForChange(Id(id), task, deadline, nullptr));
    }
    return task;
  }
  static v1::Task WaitFinished(TaskManager& tasks, const std::string& id) {
    auto task = WaitUntil(tasks, id, IsFinished);
    EXPECT_TRUE(task.ok()) << task.status().ToString();
    return task.ok() ? *task : v1::Task();
  }

  // The states the manager persisted for one task, in write order.
  std::vector<v1::TaskState> PersistedStates(const std::string& id_hex) const {
    std::vector<v1::TaskState> states;
    for (const auto& write : store_.TaskWrites()) {
      if (write.task_id != IdBytes(id_hex)) continue;
      v1::Task t;
      EXPECT_TRUE(t.ParseFromString(write.record));
      states.push_back(t.state());
    }
    return states;
  }

  void ExpectMatchesReference(const v1::TaskResult& result) const {
    EXPECT_EQ(result.graph_id(), ToHex(reference_.graph_id));
    EXPECT_EQ(result.result_root(), ToHex(reference_.run.result_root));
    EXPECT_EQ(result.trace_root(), ToHex(consensus::kDeferredTraceRoot));  // computed on request only
    EXPECT_EQ(result.trace_ops(), 0u);
    EXPECT_EQ(result.backend().rfind("cpu", 0), 0u) << result.backend();
    ASSERT_EQ(result.outputs_size(), static_cast<int>(reference_.run.outputs.size()));
    for (int i = 0; i < result.outputs_size(); ++i) {
      const v1::TaskOutput& got = result.outputs(i);
      const executor::NamedTensor& want = reference_.run.outputs[i];
      EXPECT_EQ(got.name(), want.name);
      EXPECT_EQ(got.tensor_hash(), ToHex(want.hash));
      EXPECT_EQ(got.dtype(), static_cast<v1::DType>(want.tensor.dtype()));
      EXPECT_EQ(std::vector<int64_t>(got.shape().begin(), got.shape().end()), want.tensor.shape());
    }
  }

  MemoryStore store_;
  executor::Graph graph_;
  Tensor bias_, x_;
  Hash256 bias_hash_{}, graph_hash_{}, x_hash_{};
  Reference reference_;
  std::vector<std::unique_ptr<Gate>> gates_;
  std::vector<std::unique_ptr<Node>> nodes_;  // after the gates: destroyed first
};

// ---- submission

TEST_F(TaskManagerTest, TaskIdIsTheProtocolIdOfTheSpec) {
  Node& node = StartNode(Options(0));
  consensus::TaskSpec spec;
  spec.graph_sha256 = graph_hash_;
  spec.inputs = {{"x", x_hash_}};
  spec.nonce = 7;
  auto expected = consensus::ComputeTaskId(spec);
  ASSERT_TRUE(expected.ok());

  const std::string id = MustSubmit(*node.tasks, Request(7));
  EXPECT_EQ(id, expected->Hex());
  EXPECT_EQ(ValueOf(node.tasks->IdOf(Request(7))).Hex(), id);
  EXPECT_EQ(ValueOf(node.tasks->Check(Request(7))).Hex(), id);
  EXPECT_NE(ValueOf(node.tasks->IdOf(Request(8))).Hex(), id);  // the nonce is part of the identity

  // Stored before the acknowledgement: queued, with the spec as submitted and no attempt yet.
  auto task = node.tasks->Get(Id(id));
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ(task->task_id(), id);
  EXPECT_EQ(task->state(), v1::TASK_STATE_QUEUED);
  EXPECT_EQ(task->spec().SerializeAsString(), Request(7).SerializeAsString());
  EXPECT_EQ(task->attempts(), 0u);
  EXPECT_GT(task->created_unix_ms(), 0);
  EXPECT_EQ(task->started_unix_ms(), 0);
  EXPECT_EQ(node.tasks->queue_depth(), 1);
  EXPECT_EQ(node.metrics.tasks_received->Value(), 1);
  EXPECT_EQ(node.metrics.queue_depth->Value(), 1);
}

// The id covers replication and the protocol version (issue 16): a client's own computation
// (node/api/task_spec.h) and the node's agree, and a task of another version is refused before
// anything is stored, so this node never attests to bits it may compute differently.
TEST_F(TaskManagerTest, IdCoversReplicationAndRefusesOtherProtocolVersions) {
  Node& node = StartNode(Options(0));
  v1::SubmitTaskRequest asked = Request(3);
  asked.mutable_options()->set_replicas(3);
  asked.mutable_options()->set_quorum(2);
  const std::string id = ValueOf(node.tasks->IdOf(asked)).Hex();
  EXPECT_EQ(ValueOf(TaskIdOfRequest(asked)).Hex(), id);
  // Version 0 means "the node's": the same id as naming this build's version.
  v1::SubmitTaskRequest named = asked;
  named.mutable_options()->set_protocol_version(consensus::kProtocolVersion);
  EXPECT_EQ(ValueOf(node.tasks->IdOf(named)).Hex(), id);
  // A downgraded request is another task.
  v1::SubmitTaskRequest downgraded = asked;
  downgraded.mutable_options()->set_replicas(1);
  downgraded.mutable_options()->set_quorum(1);
  EXPECT_NE(ValueOf(node.tasks->IdOf(downgraded)).Hex(), id);

  v1::SubmitTaskRequest other = asked;
  other.mutable_options()->set_protocol_version(consensus::kProtocolVersion + 1);
  auto refused = node.tasks->Submit(other);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("protocol version"), std::string::npos) << refused.status().ToString();
  EXPECT_EQ(node.tasks->queue_depth(), 0);
  // Nothing was stored under the id either version would have.
  EXPECT_EQ(node.tasks->Get(Id(id)).status().code(), StatusCode::kNotFound);
}

TEST_F(TaskManagerTest, IdOfReadsNoBlobsAndCheckStoresNothing) {
  Node& node = StartNode(Options(0));
  v1::SubmitTaskRequest absent;
  absent.set_graph_sha256(ToHex(Sha256Of("never uploaded graph")));
  (*absent.mutable_inputs())["x"] = ToHex(Sha256Of("never uploaded input"));
  EXPECT_TRUE(node.tasks->IdOf(absent).ok());
  EXPECT_EQ(node.tasks->Check(absent).status().code(), StatusCode::kNotFound);

  EXPECT_TRUE(node.tasks->Check(Request()).ok());
  EXPECT_EQ(store_.GetStats().task_count, 0);
  EXPECT_EQ(node.tasks->queue_depth(), 0);
  EXPECT_EQ(node.metrics.tasks_received->Value(), 0);
}

TEST_F(TaskManagerTest, SubmitRejectsInvalidRequestsWithTheirCodesAndStoresNothing) {
  // A graph that parses but does not validate: [2,4] @ [3,3].
  executor::Graph mismatched;
  mismatched.output("y", matmul(mismatched.input("x", DType::kF32, {2, 4}), mismatched.constant(F32({3, 3}, {}))));
  // A graph whose weights were never uploaded.
  executor::Graph needs_weights;
  needs_weights.output("y", needs_weights.input("x", DType::kF32, {2, 4}) +
                                needs_weights.constant_blob(Sha256Of("never uploaded weights"), DType::kF32, {4}));
  const std::string garbage_graph = ToHex(Put(Bytes("this is not a serialized graph")));
  const std::string mismatched_graph = ToHex(PutGraph(mismatched));
  const std::string weightless_graph = ToHex(PutGraph(needs_weights));
  const std::string wrong_shape = ToHex(PutNpy(F32({4, 2}, {})));
  const std::string wrong_dtype = ToHex(PutNpy(I32({2, 4}, {})));
  const std::string not_npy = ToHex(Put(Bytes("not an npy file")));
  const std::string absent = ToHex(Sha256Of("never uploaded"));

  struct Case {
    std::string name;
    std::function<void(v1::SubmitTaskRequest*)> edit;
    std::function<void(TaskManagerOptions*)> configure;
    StatusCode code;
    std::string message;  // part of the error message
  };
  using R = v1::SubmitTaskRequest;
  using O = TaskManagerOptions;
  auto no_options = [](O*) {};
  auto keep = [](R*) {};
  const std::vector<Case> cases = {
      {"no graph hash", [](R* r) { r->clear_graph_sha256(); }, no_options, StatusCode::kInvalidArgument,
       "graph_sha256 is missing"},
      {"short graph hash", [](R* r) { r->set_graph_sha256("abcd"); }, no_options, StatusCode::kInvalidArgument,
       "64 hex digits"},
      {"graph hash not hex", [](R* r) { r->set_graph_sha256(std::string(64, 'z')); }, no_options,
       StatusCode::kInvalidArgument, "graph_sha256"},
      {"graph not uploaded", [&](R* r) { r->set_graph_sha256(absent); }, no_options, StatusCode::kNotFound,
       "graph blob"},
      {"graph blob is not a graph", [&](R* r) { r->set_graph_sha256(garbage_graph); }, no_options,
       StatusCode::kInvalidArgument, "invalid graph"},
      {"graph does not validate", [&](R* r) { r->set_graph_sha256(mismatched_graph); }, no_options,
       StatusCode::kInvalidArgument, "invalid graph"},
      {"weights not uploaded", [&](R* r) { r->set_graph_sha256(weightless_graph); }, no_options, StatusCode::kNotFound,
       "weights blob"},
      {"input not uploaded", [&](R* r) { (*r->mutable_inputs())["x"] = absent; }, no_options, StatusCode::kNotFound,
       "input 'x'"},
      {"input missing", [](R* r) { r->clear_inputs(); }, no_options, StatusCode::kInvalidArgument, "missing input 'x'"},
      {"unknown input name", [](R* r) { (*r->mutable_inputs())["extra"] = std::string(r->inputs().at("x")); },
       no_options, StatusCode::kInvalidArgument, "no input named 'extra'"},
      {"empty input name", [](R* r) { (*r->mutable_inputs())[""] = std::string(r->inputs().at("x")); }, no_options,
       StatusCode::kInvalidArgument, "empty placeholder name"},
      {"input hash malformed", [](R* r) { (*r->mutable_inputs())["x"] = "xyz"; }, no_options,
       StatusCode::kInvalidArgument, "input 'x'"},
      {"input of the wrong shape", [&](R* r) { (*r->mutable_inputs())["x"] = wrong_shape; }, no_options,
       StatusCode::kInvalidArgument, "input 'x' must be"},
      {"input of the wrong dtype", [&](R* r) { (*r->mutable_inputs())["x"] = wrong_dtype; }, no_options,
       StatusCode::kInvalidArgument, "input 'x' must be"},
      {"input is not an npy file", [&](R* r) { (*r->mutable_inputs())["x"] = not_npy; }, no_options,
       StatusCode::kInvalidArgument, "not a valid .npy file"},
      {"over the input cap", keep, [](O* o) { o->max_inputs = 0; }, StatusCode::kResourceExhausted,
       "inputs, over the cap"},
      {"over the op cap", keep, [](O* o) { o->limits.max_ops = 1; }, StatusCode::kResourceExhausted,
       "nodes, over the cap"},
      {"over the element cap", keep, [](O* o) { o->limits.max_elements_per_tensor = 4; },
       StatusCode::kResourceExhausted, "elements, over the cap"},
      {"over the FLOP cap", keep, [](O* o) { o->limits.max_flops = 1; }, StatusCode::kResourceExhausted,
       "operations, over the cap"},
      {"graph file over its cap", keep, [](O* o) { o->limits.max_graph_file_bytes = 16; },
       StatusCode::kResourceExhausted, "over the cap of 16"},
      {"over the memory cap", keep, [](O* o) { o->limits.max_total_bytes = 16; }, StatusCode::kResourceExhausted,
       "over the cap of 16"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TaskManagerOptions options = Options(0);
    c.configure(&options);
    Node& node = StartNode(options);
    v1::SubmitTaskRequest request = Request();
    c.edit(&request);
    auto submitted = node.tasks->Submit(request);
    ASSERT_FALSE(submitted.ok());
    EXPECT_EQ(submitted.status().code(), c.code) << submitted.status().ToString();
    EXPECT_NE(submitted.status().message().find(c.message), std::string::npos) << submitted.status().ToString();
    // Check promises the same checks as Submit.
    EXPECT_EQ(node.tasks->Check(request).status().code(), c.code);
    EXPECT_EQ(node.tasks->queue_depth(), 0);
    EXPECT_EQ(node.metrics.tasks_received->Value(), 0);
  }
  EXPECT_EQ(store_.GetStats().task_count, 0);
  EXPECT_TRUE(store_.TaskWrites().empty());
}

TEST_F(TaskManagerTest, SubmitIsUnavailableBeforeStartAndAfterShutdown) {
  Node& node = NewNode(Options(1));
  ASSERT_TRUE(node.tasks->Recover().ok());
  EXPECT_FALSE(node.tasks->accepting());
  EXPECT_EQ(node.tasks->Submit(Request()).status().code(), StatusCode::kUnavailable);
  node.tasks->Start();
  EXPECT_TRUE(node.tasks->accepting());
  const std::string id = MustSubmit(*node.tasks, Request());
  EXPECT_EQ(WaitFinished(*node.tasks, id).state(), v1::TASK_STATE_SUCCEEDED);
  node.tasks->Shutdown();
  node.tasks->Shutdown();  // idempotent
  EXPECT_FALSE(node.tasks->accepting());
  EXPECT_EQ(node.tasks->Submit(Request(1)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store_.GetStats().task_count, 1);
}

TEST_F(TaskManagerTest, ResubmissionIsIdempotentWhileQueuedAndAfterCompletion) {
  Node& first = StartNode(Options(0));
  const std::string id = MustSubmit(*first.tasks, Request());
  auto again = first.tasks->Submit(Request());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->already_known);
  EXPECT_EQ(again->task_id.Hex(), id);
  EXPECT_EQ(first.tasks->queue_depth(), 1);
  EXPECT_EQ(first.metrics.tasks_received->Value(), 1);
  first.tasks.reset();

  Node& second = StartNode(Options(1));
  EXPECT_EQ(WaitFinished(*second.tasks, id).state(), v1::TASK_STATE_SUCCEEDED);
  const size_t writes = store_.TaskWrites().size();
  auto after = second.tasks->Submit(Request());
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_TRUE(after->already_known);
  EXPECT_EQ(after->task_id.Hex(), id);
  second.tasks->Shutdown();
  EXPECT_EQ(store_.TaskWrites().size(), writes);  // not queued or run again
  EXPECT_EQ(ValueOf(second.tasks->Get(Id(id))).attempts(), 1u);
  EXPECT_EQ(second.metrics.tasks_received->Value(), 0);
  EXPECT_EQ(store_.GetStats().task_count, 1);
}

TEST_F(TaskManagerTest, ConcurrentSubmissionsOfOneTaskStoreAndRunItOnce) {
  Node& node = StartNode(Options(2));
  constexpr int kClients = 8;
  std::latch start(kClients);
  std::vector<StatusOr<SubmitOutcome>> outcomes(kClients, StatusOr<SubmitOutcome>(Internal("not run")));
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      start.arrive_and_wait();
      outcomes[i] = node.tasks->Submit(Request());
    });
  }
  for (auto& t : clients) t.join();
  int new_tasks = 0;
  for (const auto& o : outcomes) {
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(o->task_id, outcomes[0]->task_id);
    new_tasks += o->already_known ? 0 : 1;
  }
  EXPECT_EQ(new_tasks, 1);
  const std::string id = outcomes[0]->task_id.Hex();
  EXPECT_EQ(WaitFinished(*node.tasks, id).state(), v1::TASK_STATE_SUCCEEDED);
  node.tasks->Shutdown();
  EXPECT_EQ(ValueOf(node.tasks->Get(Id(id))).attempts(), 1u);
  EXPECT_EQ(PersistedStates(id),
            (std::vector<v1::TaskState>{v1::TASK_STATE_QUEUED, v1::TASK_STATE_RUNNING, v1::TASK_STATE_SUCCEEDED}));
  EXPECT_EQ(node.metrics.tasks_received->Value(), 1);
}

// A new task's Submit reads its record once (the existence check before the graph and inputs
// are checked); the write itself is the store's create, which refuses a record another path
// stored between that read and the write (as an adoption, or a Submit after the first one's
// task left the queue, may): the submission is then already known, the other record stays as
// it was, and nothing is queued.
TEST_F(TaskManagerTest, NewSubmissionReadsItsRecordOnceAndNeverOverwritesOneStoredMeanwhile) {
  Node& node = StartNode(Options(0));  // no worker: nothing else reads
  uint64_t reads = store_.TaskReads();
  const std::string first = MustSubmit(*node.tasks, Request(1));
  EXPECT_EQ(store_.TaskReads() - reads, 1u);
  EXPECT_EQ(node.tasks->queue_depth(), 1);

  // Another path stores the task just before Submit's write (the hook runs at the write).
  const consensus::TaskId id = ValueOf(node.tasks->IdOf(Request(2)));
  v1::Task other;
  other.set_task_id(id.Hex());
  other.set_state(v1::TASK_STATE_CERTIFYING);
  const std::string other_record = other.SerializeAsString();
  std::atomic<bool> stored_meanwhile{false};
  store_.SetPutTaskHook([&](const std::string& key, const std::string&) -> Status {
    if (key != id.Key() || stored_meanwhile.exchange(true)) return OkStatus();
    return store_.PutTask(key, other_record);
  });
  reads = store_.TaskReads();
  auto raced = node.tasks->Submit(Request(2));
  ASSERT_TRUE(raced.ok()) << raced.status().ToString();
  EXPECT_TRUE(stored_meanwhile.load());
  EXPECT_TRUE(raced->already_known);
  EXPECT_EQ(store_.TaskReads() - reads, 1u);
  EXPECT_EQ(*store_.GetTask(id.Key()).value(), other_record);  // not overwritten
  EXPECT_EQ(node.tasks->queue_depth(), 1);                     // and not queued
  EXPECT_EQ(node.metrics.tasks_received->Value(), 1);
  // The same for RunTask's submission, which writes its record without a sync.
  const consensus::TaskId deferred_id = ValueOf(node.tasks->IdOf(Request(3)));
  stored_meanwhile = false;
  store_.SetPutTaskHook([&](const std::string& key, const std::string&) -> Status {
    if (key != deferred_id.Key() || stored_meanwhile.exchange(true)) return OkStatus();
    return store_.PutTask(key, other_record);
  });
  auto deferred = node.tasks->Submit(Request(3), nullptr, true, Durability::kDeferred);
  ASSERT_TRUE(deferred.ok()) << deferred.status().ToString();
  EXPECT_TRUE(deferred->already_known);
  EXPECT_EQ(*store_.GetTask(deferred_id.Key()).value(), other_record);
  EXPECT_FALSE(node.tasks->MayWaitForSync(deferred_id));  // nothing of its own left counted
  EXPECT_EQ(node.tasks->queue_depth(), 1);
  store_.SetPutTaskHook(nullptr);
  EXPECT_EQ(ValueOf(node.tasks->Get(Id(first))).state(), v1::TASK_STATE_QUEUED);
}

// ---- the bounded queue
// ---- the bounded queue

TEST_F(TaskManagerTest, FullQueueRefusesNewTasksWithResourceExhaustedAndStoresNothing) {
  // A task that finished in an earlier run.
  Node& earlier = StartNode(Options(1));
  const std::string finished = MustSubmit(*earlier.tasks, Request(0));
  ASSERT_EQ(WaitFinished(*earlier.tasks, finished).state(), v1::TASK_STATE_SUCCEEDED);
  earlier.tasks.reset();

  Gate& gate = NewGate();
  HoldExecutionAtInput(gate);
  Node& node = StartNode(NoInputCache(Options(/*workers=*/1, /*queue_capacity=*/1)));
  const std::string running = MustSubmit(*node.tasks, Request(1));
  ASSERT_TRUE(gate.WaitArrived(1));  // taken by the worker: the queue is empty again
  const std::string queued = MustSubmit(*node.tasks, Request(2));
  EXPECT_EQ(node.tasks->queue_depth(), 1);

  const size_t writes = store_.TaskWrites().size();
  auto refused = node.tasks->Submit(Request(3));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("queue is full"), std::string::npos);
  EXPECT_EQ(store_.TaskWrites().size(), writes);
  EXPECT_EQ(store_.GetStats().task_count, 3);
  EXPECT_EQ(node.tasks->Get(Id(ValueOf(node.tasks->IdOf(Request(3))))).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(node.metrics.tasks_received->Value(), 2);

  // Tasks the node already has, waiting, running or finished, are acknowledged, not refused.
  for (uint64_t nonce : {0, 1, 2}) {
    auto known = node.tasks->Submit(Request(nonce));
    ASSERT_TRUE(known.ok()) << nonce << ": " << known.status().ToString();
    EXPECT_TRUE(known->already_known);
  }

  gate.Open();
  EXPECT_EQ(WaitFinished(*node.tasks, running).state(), v1::TASK_STATE_SUCCEEDED);
  EXPECT_EQ(WaitFinished(*node.tasks, queued).state(), v1::TASK_STATE_SUCCEEDED);
  // With room again, the refused task is accepted.
  const std::string later = MustSubmit(*node.tasks, Request(3));
  EXPECT_EQ(WaitFinished(*node.tasks, later).state(), v1::TASK_STATE_SUCCEEDED);
}

// ---- execution

TEST_F(TaskManagerTest, TaskGoesQueuedRunningSucceededWithTheExecutorsResult) {
  Gate& gate = NewGate();
  HoldExecutionAtInput(gate);
  Node& node = StartNode(NoInputCache(Options(1)));
  const std::string id = MustSubmit(*node.tasks, Request());
  ASSERT_TRUE(gate.WaitArrived(1));

  // Held mid-execution: the record says running, first attempt, no result yet.
  auto running = node.tasks->Get(Id(id));
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(running->attempts(), 1u);
  EXPECT_GT(running->started_unix_ms(), 0);
  EXPECT_FALSE(running->has_result());
  EXPECT_EQ(node.tasks->running(), 1);
  EXPECT_EQ(node.tasks->queue_depth(), 0);
  EXPECT_EQ(node.metrics.tasks_running->Value(), 1);

  gate.Open();
  const v1::Task done = WaitFinished(*node.tasks, id);
  EXPECT_EQ(done.state(), v1::TASK_STATE_SUCCEEDED) << done.error_message();
  EXPECT_TRUE(done.error_code().empty());
  EXPECT_GE(done.finished_unix_ms(), done.started_unix_ms());
  EXPECT_GE(done.result().execution_seconds(), 0.0);
  ExpectMatchesReference(done.result());
  EXPECT_EQ(PersistedStates(id),
            (std::vector<v1::TaskState>{v1::TASK_STATE_QUEUED, v1::TASK_STATE_RUNNING, v1::TASK_STATE_SUCCEEDED}));
  // What a client is told is synced: the accepted task (a synced write) and the result (written
  // unsynced, then covered by a sync before anyone is told). "Running" is not (a power loss puts
  // the task back in the queue, where recovery would put it anyway).
  std::vector<Durability> durability;
  for (const auto& write : store_.TaskWrites()) durability.push_back(write.durability);
  EXPECT_EQ(durability, (std::vector<Durability>{Durability::kSynced, Durability::kDeferred, Durability::kDeferred}));
  EXPECT_TRUE(store_.TaskWrites().back().with_result);
  EXPECT_EQ(store_.TaskWritesCoveredBySync(), store_.TaskWrites().size());

  // Each output is stored as an .npy blob of exactly the executor's tensor.
  for (int i = 0; i < done.result().outputs_size(); ++i) {
    const v1::TaskOutput& out = done.result().outputs(i);
    auto hash = Hash256FromHex(out.blob_sha256());
    ASSERT_TRUE(hash.ok());
    auto blob = store_.GetBlob(*hash, int64_t{1} << 20);
    ASSERT_TRUE(blob.ok()) << blob.status().ToString();
    EXPECT_EQ(*blob, EncodeNpy(reference_.run.outputs[i].tensor));
    EXPECT_EQ(out.blob_size(), blob->size());
  }

  node.tasks->Shutdown();  // joins the worker, so the counters below are final
  EXPECT_EQ(node.metrics.tasks_completed->Value(), 1);
  EXPECT_EQ(node.metrics.tasks_failed->Value(), 0);
  EXPECT_EQ(node.metrics.execution_seconds->Read().count, 1u);
  EXPECT_EQ(node.metrics.tasks_running->Value(), 0);
  EXPECT_EQ(node.metrics.queue_depth->Value(), 0);
}

// A worker writes a result without waiting for its sync and runs the next task; nobody hears of
// the result before a sync covers it: a reader waits for that sync, and the task counts as
// completed (metrics, on_executed) only after it.
TEST_F(TaskManagerTest, ResultIsReportedOnlyAfterASyncCoversItWhileTheWorkerMovesOn) {
  Gate& sync = NewGate();
  store_.SetWaitDurableHook([&sync] { return sync.Pass(); });
  Gate& results = CountResultWrites();
  std::atomic<int> executed{0};
  TaskManagerOptions options = Options(1);
  options.on_executed = [&executed](const consensus::TaskId&, const v1::TaskResult&) { executed++; };
  Node& node = StartNode(options);

  const std::string first = MustSubmit(*node.tasks, Request(1));
  ASSERT_TRUE(results.WaitArrived(1));
  ASSERT_TRUE(sync.WaitArrived(1));  // the finisher, held at the sync that covers the result
  // The result awaits its sync: a listener (a waiting RunTask) registered now hears of the task
  // again once that sync is done, from the finisher, and not before.
  EXPECT_TRUE(node.tasks->ResultAwaitsSync(Id(first)));
  std::atomic<int> announced{0};
  node.tasks->ListenForChange(Id(first), [&announced](bool) { announced++; });
  // The one worker is free: a second task runs to its result while that sync is held.
  const std::string second = MustSubmit(*node.tasks, Request(2));
  ASSERT_TRUE(results.WaitArrived(2));

  // Both results are in the store, but a reader asks for a sync first and waits with it.
  std::atomic<bool> read_done{false};
  std::thread reader([&] {
    auto t = node.tasks->Get(Id(first));
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (t.ok()) {
      EXPECT_EQ(t->state(), v1::TASK_STATE_SUCCEEDED);
    }
    read_done = true;
  });
  EXPECT_TRUE(sync.WaitArrived(2));  // not ASSERT: the reader must be joined
  EXPECT_FALSE(read_done.load());
  EXPECT_EQ(executed.load(), 0);
  EXPECT_EQ(node.metrics.tasks_completed->Value(), 0);
  EXPECT_EQ(announced.load(), 0);

  sync.Open();
  reader.join();
  EXPECT_TRUE(read_done.load());
  for (int i = 0; i < 500 && announced.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(announced.load(), 1);
  EXPECT_FALSE(node.tasks->ResultAwaitsSync(Id(first)));
  EXPECT_EQ(WaitFinished(*node.tasks, second).state(), v1::TASK_STATE_SUCCEEDED);
  node.tasks->Shutdown();  // the finisher completes everything written before it returns
  EXPECT_EQ(executed.load(), 2);
  EXPECT_EQ(node.metrics.tasks_completed->Value(), 2);
  EXPECT_EQ(store_.TaskWritesCoveredBySync(), store_.TaskWrites().size());
}

// A waiting RunTask hears of its result from the finisher, after the sync, and Peeks on that
// thread: it gets the record the worker wrote, result included, without reading it back, and
// it is the record the store holds (as Get returns it). Elsewhere Peek reads the store.
TEST_F(TaskManagerTest, FinishersAnnouncementIsPeekedWithoutAReadAndIsTheStoredRecord) {
  Gate& sync = NewGate();
  store_.SetWaitDurableHook([&sync] { return sync.Pass(); });
  Gate& results = CountResultWrites();
  Node& node = StartNode(Options(1));
  const std::string id = MustSubmit(*node.tasks, Request(1));
  ASSERT_TRUE(results.WaitArrived(1));
  ASSERT_TRUE(sync.WaitArrived(1));  // the finisher, held at the sync that covers the result
  ASSERT_TRUE(node.tasks->ResultAwaitsSync(Id(id)));

  std::mutex mu;
  std::condition_variable cv;
  bool called = false;
  uint64_t reads_in_peek = 0;
  StatusOr<v1::Task> peeked = Internal("not called");
  node.tasks->ListenForChange(Id(id), [&](bool stopping) {
    const uint64_t before = store_.TaskReads();
    auto seen = node.tasks->Peek(Id(id));
    std::lock_guard<std::mutex> lock(mu);
    reads_in_peek = store_.TaskReads() - before;
    peeked = std::move(seen);
    called = true;
    cv.notify_all();
  });
  sync.Open();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kTimeout, [&] { return called; }));
  }
  ASSERT_TRUE(peeked.ok()) << peeked.status().ToString();
  EXPECT_EQ(reads_in_peek, 0u);
  EXPECT_EQ(peeked->state(), v1::TASK_STATE_SUCCEEDED);
  ExpectMatchesReference(peeked->result());
  const v1::Task stored = ValueOf(node.tasks->Get(Id(id)));
  EXPECT_EQ(peeked->SerializeAsString(), stored.SerializeAsString());
  // The same Peek on another thread reads the record and its result.
  const uint64_t before = store_.TaskReads();
  EXPECT_EQ(ValueOf(node.tasks->Peek(Id(id))).SerializeAsString(), stored.SerializeAsString());
  EXPECT_EQ(store_.TaskReads() - before, 2u);
}

// RunTask's submission (kDeferred): the new record is written without a sync of its own and
// Submit returns without waiting for one; but nobody is told of the task before a sync covers
// it: GetTask's read and a SubmitTask of the same task (an acknowledgement) each wait for a sync.
TEST_F(TaskManagerTest, DeferredSubmissionIsReportedOnlyAfterASync) {
  Gate& sync = NewGate();
  store_.SetWaitDurableHook([&sync] { return sync.Pass(); });
  Node& node = StartNode(Options(0));  // no worker: nothing else syncs
  auto outcome = node.tasks->Submit(Request(1), nullptr, true, Durability::kDeferred);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_FALSE(outcome->already_known);
  const consensus::TaskId id = outcome->task_id;
  ASSERT_FALSE(store_.TaskWrites().empty());
  EXPECT_EQ(store_.TaskWrites().back().durability, Durability::kDeferred);
  EXPECT_EQ(sync.arrived(), 0);  // Submit did not wait for a sync
  // The record is there (the worker and RunTask's own wait read it) but counts as syncing.
  EXPECT_EQ(ValueOf(node.tasks->Peek(id)).state(), v1::TASK_STATE_QUEUED);
  EXPECT_TRUE(node.tasks->MayWaitForSync(id));
  // A second RunTask of the same task acknowledges nothing either: it does not wait.
  auto again = node.tasks->Submit(Request(1), nullptr, true, Durability::kDeferred);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->already_known);
  EXPECT_EQ(sync.arrived(), 0);

  std::atomic<bool> read_done{false}, resubmitted{false};
  std::thread reader([&] {
    auto t = node.tasks->Get(id);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    read_done = true;
  });
  std::thread submitter([&] {
    auto known = node.tasks->Submit(Request(1));  // SubmitTask: acknowledges a durable task
    EXPECT_TRUE(known.ok()) << known.status().ToString();
    if (known.ok()) EXPECT_TRUE(known->already_known);
    resubmitted = true;
  });
  EXPECT_TRUE(sync.WaitArrived(2));  // not ASSERT: the threads must be joined
  EXPECT_FALSE(read_done.load());
  EXPECT_FALSE(resubmitted.load());
  sync.Open();
  reader.join();
  submitter.join();
  EXPECT_TRUE(read_done.load());
  EXPECT_TRUE(resubmitted.load());
  EXPECT_EQ(store_.TaskWritesCoveredBySync(), store_.TaskWrites().size());
}

// The finisher's sync of a result also covers the records RunTask stored before it without a
// sync: once the task is reported, it no longer counts as syncing (its readers wait no more).
// The same task is warm for RunTask's check once its program and input are in memory.
TEST_F(TaskManagerTest, DeferredSubmissionIsCoveredByTheResultsSync) {
  Node& node = StartNode(Options(1));
  EXPECT_FALSE(node.tasks->IsWarm(Request(1)));  // nothing compiled or decoded yet
  auto outcome = node.tasks->Submit(Request(1), nullptr, true, Durability::kDeferred);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_TRUE(node.tasks->IsWarm(Request(2)));  // Submit compiled the graph and decoded x
  const v1::Task done = WaitFinished(*node.tasks, outcome->task_id.Hex());
  EXPECT_EQ(done.state(), v1::TASK_STATE_SUCCEEDED);
  EXPECT_EQ(done.result().result_root(), ToHex(reference_.run.result_root));
  // Released by the finisher right after its sync (a reader may have synced itself first).
  for (int i = 0; i < 500 && node.tasks->MayWaitForSync(outcome->task_id); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(node.tasks->MayWaitForSync(outcome->task_id));
  EXPECT_EQ(store_.TaskWritesCoveredBySync(), store_.TaskWrites().size());
  // A network task keeps the synced write: it is announced to peers once stored.
  v1::TaskConsensus plan;
  plan.set_member(true);
  auto refused = node.tasks->Submit(Request(3), &plan, true, Durability::kDeferred);
  EXPECT_EQ(refused.status().code(), StatusCode::kInternal);
}

// A listener that waits past the start (RunTask's, which answers only a final state) is not
// called when a worker marks the task running in the journal, only at the task's next change;
// any other listener is called at the start.
TEST_F(TaskManagerTest, ListenerAfterStartIsNotCalledForTheRunningMark) {
  Gate& gate = NewGate();
  HoldExecutionAtInput(gate);
  TaskManagerOptions options = NoInputCache(Options(1));
  options.running_journal_path = testing_support::MakeTempDir("tm_after_start") + "/running-tasks";
  Node& node = StartNode(options);
  const consensus::TaskId id = ValueOf(node.tasks->IdOf(Request(1)));
  std::atomic<int> any{0}, after_start{0};
  node.tasks->ListenForChange(id, [&any](bool) { any++; });
  node.tasks->ListenForChange(
      id, [&after_start](bool) { after_start++; }, /*after_start=*/true);
  MustSubmit(*node.tasks, Request(1));
  ASSERT_TRUE(gate.WaitArrived(1));  // marked running, held before it reads its input
  EXPECT_EQ(any.load(), 1);
  EXPECT_EQ(after_start.load(), 0);
  gate.Open();
  EXPECT_EQ(WaitFinished(*node.tasks, id.Hex()).state(), v1::TASK_STATE_SUCCEEDED);
  // Listeners are called just after the watchers are woken, so a reader can see the final
  // state a moment before the call.
  for (int i = 0; i < 500 && after_start.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(after_start.load(), 1);  // at the result's write, before the sync the read waited for
  EXPECT_EQ(any.load(), 1);          // called once
}

// Network mode: on_executed (which signs the vote, writes the commitment record and gossips the
// commitment) runs once the result is written, before any sync of its own. The result still
// counts as syncing until a sync covers it, whatever on_executed did; that sync is the
// finisher's, so the worker runs the next task meanwhile.
TEST_F(TaskManagerTest, NetworkModeCallsOnExecutedBeforeTheResultsOwnSync) {
  Gate& sync = NewGate();
  store_.SetWaitDurableHook([&sync] { return sync.Pass(); });
  TaskManagerOptions options = Options(1);
  options.network_mode = true;
  std::atomic<int> syncs_started_before_callback{-1};
  std::atomic<int> executed{0};
  options.on_executed = [&](const consensus::TaskId&, const v1::TaskResult&) {
    syncs_started_before_callback = sync.arrived();
    executed++;
  };
  Node& node = StartNode(options);
  v1::TaskConsensus member;
  member.set_member(true);
  const std::string id = MustSubmit(*node.tasks, Request(), &member);
  ASSERT_TRUE(sync.WaitArrived(1));  // the finisher's sync, after on_executed
  EXPECT_EQ(executed.load(), 1);
  EXPECT_EQ(syncs_started_before_callback.load(), 0);
  EXPECT_LT(store_.TaskWritesCoveredBySync(), store_.TaskWrites().size());  // the result is not synced yet
  // The one worker is free: the next task executes while that sync is held.
  const std::string next = MustSubmit(*node.tasks, Request(2), &member);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (executed.load() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(executed.load(), 2);
  EXPECT_EQ(sync.arrived(), 1);
  sync.Open();
  auto certifying =
      WaitUntil(*node.tasks, id, [](const v1::Task& t) { return t.state() == v1::TASK_STATE_CERTIFYING; });
  EXPECT_TRUE(certifying.ok()) << certifying.status().ToString();
  auto next_certifying =
      WaitUntil(*node.tasks, next, [](const v1::Task& t) { return t.state() == v1::TASK_STATE_CERTIFYING; });
  EXPECT_TRUE(next_certifying.ok()) << next_certifying.status().ToString();
  node.tasks->Shutdown();
  EXPECT_EQ(store_.TaskWritesCoveredBySync(), store_.TaskWrites().size());
}

// Tasks run without the trace; RecomputeTrace executes a finished task again with it, one at a
// time, and gets the executor's trace exactly.
TEST_F(TaskManagerTest, TraceIsRecomputedOnRequestOneAtATime) {
  Node& node = StartNode(NoInputCache(Options(1)));
  const std::string id = MustSubmit(*node.tasks, Request());
  ASSERT_EQ(WaitFinished(*node.tasks, id).state(), v1::TASK_STATE_SUCCEEDED);

  // Held while it reads the input: a second request is refused meanwhile, not queued.
  Gate& gate = NewGate();
  HoldExecutionAtInput(gate);
  StatusOr<v1::TraceResponse> trace = Internal("not run");
  std::thread first([&] { trace = node.tasks->RecomputeTrace(Id(id), 1, 2); });
  ASSERT_TRUE(gate.WaitArrived(1));
  auto second = node.tasks->RecomputeTrace(Id(id), 0, 0);
  EXPECT_EQ(second.status().code(), StatusCode::kResourceExhausted) << second.status().ToString();
  gate.Open();
  first.join();
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->result_root(), ToHex(reference_.run.result_root));
  EXPECT_EQ(trace->trace_root(), ToHex(reference_.run.trace_root));
  EXPECT_EQ(trace->trace_ops(), reference_.run.trace.size());
  ASSERT_EQ(trace->op_hashes_size(), 2);
  EXPECT_EQ(trace->op_hashes(0), ToHex(reference_.run.trace.at(1)));
  EXPECT_EQ(trace->op_hashes(1), ToHex(reference_.run.trace.at(2)));

  // A task still running has nothing to trace yet; an unknown one is NOT_FOUND.
  Gate& hold = NewGate();
  HoldExecutionAtInput(hold);
  const std::string running = MustSubmit(*node.tasks, Request(7));
  ASSERT_TRUE(hold.WaitArrived(1));
  EXPECT_EQ(node.tasks->RecomputeTrace(Id(running), 0, 0).status().code(), StatusCode::kFailedPrecondition);
  hold.Open();
  EXPECT_EQ(node.tasks->RecomputeTrace(Id(std::string(64, 'a')), 0, 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(node.tasks->RecomputeTrace(Id(id), 0, 4097).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(TaskManagerTest, TasksOnSeveralWorkersAllMatchTheReference) {
  Node& node = StartNode(Options(2));
  std::vector<std::string> ids;
  for (uint64_t nonce = 1; nonce <= 6; ++nonce) ids.push_back(MustSubmit(*node.tasks, Request(nonce)));
  for (const std::string& id : ids) {
    SCOPED_TRACE(id);
    const v1::Task done = WaitFinished(*node.tasks, id);
    EXPECT_EQ(done.state(), v1::TASK_STATE_SUCCEEDED) << done.error_message();
    ExpectMatchesReference(done.result());
  }
  node.tasks->Shutdown();
  EXPECT_EQ(node.metrics.tasks_completed->Value(), 6);
  EXPECT_EQ(node.metrics.execution_seconds->Read().count, 6u);
  EXPECT_EQ(node.tasks->running(), 0);
}

// ---- the warm path (program_cache.h)

TEST_F(TaskManagerTest, WarmTasksReuseTheCompiledProgramWithoutReadingItsBlobsAgain) {
  std::map<Hash256, int> reads;
  std::mutex reads_mu;
  store_.SetGetBlobHook([&](const Hash256& h) {
    std::lock_guard<std::mutex> lock(reads_mu);
    ++reads[h];
    return OkStatus();
  });
  Node& node = StartNode(Options(1));
  for (uint64_t nonce = 1; nonce <= 3; ++nonce) {
    SCOPED_TRACE(nonce);
    const v1::Task done = WaitFinished(*node.tasks, MustSubmit(*node.tasks, Request(nonce)));
    EXPECT_EQ(done.state(), v1::TASK_STATE_SUCCEEDED) << done.error_message();
    ExpectMatchesReference(done.result());
  }
  node.tasks->Shutdown();
  std::lock_guard<std::mutex> lock(reads_mu);
  // The first submission read and verified the graph and its weights; nothing read them again.
  EXPECT_EQ(reads[graph_hash_], 1);
  EXPECT_EQ(reads[bias_hash_], 1);
  // Each submission found its input in the input cache (the first decoded it with ReadBlob), so
  // no worker read it again.
  EXPECT_EQ(reads[x_hash_], 0);
  EXPECT_EQ(node.metrics.input_cache_misses->Value(), 1);
  EXPECT_EQ(node.metrics.input_cache_hits->Value(), 5);
  EXPECT_EQ(node.metrics.input_cache_entries->Value(), 1);
  // Submit and execution each prepare the task: one miss, then five hits.
  EXPECT_EQ(node.metrics.program_cache_misses->Value(), 1);
  EXPECT_EQ(node.metrics.program_cache_hits->Value(), 5);
  EXPECT_EQ(node.metrics.program_cache_entries->Value(), 1);
  EXPECT_GT(node.metrics.program_cache_bytes->Value(), 0);
}

TEST_F(TaskManagerTest, RepeatedOutputsReferenceTheirStoredBlobUnlessItWasDeleted) {
  Node& node = StartNode(Options(1));
  const v1::Task first = WaitFinished(*node.tasks, MustSubmit(*node.tasks, Request(1)));
  ASSERT_EQ(first.state(), v1::TASK_STATE_SUCCEEDED) << first.error_message();
  const uint64_t writers = store_.BlobWritersCreated();
  // The same model on the same input, another nonce: the outputs are the stored ones.
  const v1::Task second = WaitFinished(*node.tasks, MustSubmit(*node.tasks, Request(2)));
  ASSERT_EQ(second.state(), v1::TASK_STATE_SUCCEEDED) << second.error_message();
  ExpectMatchesReference(second.result());
  EXPECT_EQ(store_.BlobWritersCreated(), writers) << "a repeated output was encoded and stored again";
  ASSERT_EQ(second.result().outputs_size(), first.result().outputs_size());
  for (int i = 0; i < second.result().outputs_size(); ++i) {
    EXPECT_EQ(second.result().outputs(i).blob_sha256(), first.result().outputs(i).blob_sha256());
    EXPECT_EQ(second.result().outputs(i).blob_size(), first.result().outputs(i).blob_size());
  }
  // An output blob deleted since (as retention may) is stored again, not referenced dangling.
  const v1::TaskOutput& y = first.result().outputs(0);
  const Hash256 y_blob = ValueOf(Hash256FromHex(y.blob_sha256()));
  ASSERT_TRUE(store_.DeleteBlob(y_blob).ok());
  const v1::Task third = WaitFinished(*node.tasks, MustSubmit(*node.tasks, Request(3)));
  ASSERT_EQ(third.state(), v1::TASK_STATE_SUCCEEDED) << third.error_message();
  ExpectMatchesReference(third.result());
  EXPECT_EQ(store_.BlobWritersCreated(), writers + 1);  // only the deleted one
  auto blob = store_.GetBlob(y_blob, int64_t{1} << 20);
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  EXPECT_EQ(*blob, EncodeNpy(reference_.run.outputs[0].tensor));
  EXPECT_EQ(third.result().outputs(0).blob_sha256(), y.blob_sha256());
}

TEST_F(TaskManagerTest, WarmWorkerRunsNewInputsOnItsArenaWithTheSameBitsAsAFreshRun) {
  // One worker alternates between two inputs on the arena it keeps: each result must be the
  // one a fresh run of that input gives.
  const Tensor other_x = F32({2, 4}, {-3.0f, 0.75f, 1.5f, -0.125f, 2.5f, -1.0f, 0.0f, 4.0f});
  const Hash256 other_x_hash = PutNpy(other_x);
  const std::vector<uint8_t> bias_bytes(bias_.bytes().begin(), bias_.bytes().end());
  auto other_reference = RunDirectly(graph_, {{"x", other_x}}, {{bias_hash_, bias_bytes}});
  ASSERT_TRUE(other_reference.ok()) << other_reference.status().ToString();
  Node& node = StartNode(Options(1));
  for (uint64_t nonce = 1; nonce <= 4; ++nonce) {
    SCOPED_TRACE(nonce);
    v1::SubmitTaskRequest request = Request(nonce);
    const bool other = nonce % 2 == 0;
    if (other) (*request.mutable_inputs())["x"] = ToHex(other_x_hash);
    const v1::Task done = WaitFinished(*node.tasks, MustSubmit(*node.tasks, request));
    ASSERT_EQ(done.state(), v1::TASK_STATE_SUCCEEDED) << done.error_message();
    // Each output is stored from the arena the next task reuses: its blob must be that input's
    // value, encoded.
    const executor::RunResult& want = other ? other_reference->run : reference_.run;
    ASSERT_EQ(done.result().outputs_size(), static_cast<int>(want.outputs.size()));
    for (int k = 0; k < done.result().outputs_size(); ++k) {
      auto sha = Hash256FromHex(done.result().outputs(k).blob_sha256());
      ASSERT_TRUE(sha.ok());
      auto blob = store_.GetBlob(*sha, int64_t{1} << 30);
      ASSERT_TRUE(blob.ok()) << blob.status().ToString();
      EXPECT_EQ(*blob, EncodeNpy(want.outputs[static_cast<size_t>(k)].tensor))
          << want.outputs[static_cast<size_t>(k)].name;
    }
    if (!other) {
      ExpectMatchesReference(done.result());
      continue;
    }
    EXPECT_EQ(done.result().result_root(), ToHex(other_reference->run.result_root));
    EXPECT_EQ(done.result().trace_root(), ToHex(consensus::kDeferredTraceRoot));
    auto trace = node.tasks->RecomputeTrace(Id(done.task_id()), 0, 0);
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    EXPECT_EQ(trace->trace_root(), ToHex(other_reference->run.trace_root));
  }
}

TEST_F(TaskManagerTest, PackedWeightsCountAgainstTheCacheBudget) {
  if (!kernels::cpu::CpuHasAvx2Fma()) GTEST_SKIP() << "only the AVX2 GEMM packs weights when loading";
  const std::vector<uint8_t> bias_bytes(bias_.bytes().begin(), bias_.bytes().end());
  MapBlobSource source({{bias_hash_, bias_bytes}});
  auto program = executor::CompileGraph(graph_, &source, executor::Limits{});
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const int64_t cost = ProgramCache::CostOf(*program);
  const int64_t packed = 4 * 16 * int64_t{sizeof(float)};  // w [4, 3] as one 16-column panel
  for (bool fits : {true, false}) {
    SCOPED_TRACE(fits ? "budget fits the packed weights" : "one byte short");
    TaskManagerOptions options = Options(1);
    options.program_cache_bytes = cost + packed - (fits ? 0 : 1);
    Node& node = StartNode(options);
    const uint64_t first_nonce = fits ? 1 : 11;  // both nodes share the store: new tasks each
    for (uint64_t nonce = first_nonce; nonce < first_nonce + 2; ++nonce) {
      const v1::Task done = WaitFinished(*node.tasks, MustSubmit(*node.tasks, Request(nonce)));
      EXPECT_EQ(done.state(), v1::TASK_STATE_SUCCEEDED) << done.error_message();
      ExpectMatchesReference(done.result());
    }
    node.tasks->Shutdown();
    if (fits) {
      EXPECT_EQ(node.metrics.program_cache_bytes->Value(), cost + packed);
      EXPECT_EQ(node.metrics.program_cache_entries->Value(), 1);
      EXPECT_EQ(node.metrics.program_cache_misses->Value(), 1);
      EXPECT_EQ(node.metrics.program_cache_evictions->Value(), 0);
    } else {
      // Cached at submission (weights and arena fit), dropped at each execution once the packed
      // weights are counted: every submission compiles again.
      EXPECT_EQ(node.metrics.program_cache_bytes->Value(), 0);
      EXPECT_EQ(node.metrics.program_cache_entries->Value(), 0);
      EXPECT_EQ(node.metrics.program_cache_misses->Value(), 2);
      EXPECT_EQ(node.metrics.program_cache_evictions->Value(), 2);
    }
  }
}

TEST_F(TaskManagerTest, ZeroCacheBudgetReadsTheBlobsForEveryTaskWithTheSameResult) {
  int graph_reads = 0;
  const Hash256 graph = graph_hash_;
  store_.SetGetBlobHook([&](const Hash256& h) {
    if (h == graph) ++graph_reads;  // the worker is the only reader once Submit returned
    return OkStatus();
  });
  TaskManagerOptions options = Options(1);
  options.program_cache_bytes = 0;
  Node& node = StartNode(options);
  for (uint64_t nonce = 1; nonce <= 2; ++nonce) {
    const v1::Task done = WaitFinished(*node.tasks, MustSubmit(*node.tasks, Request(nonce)));
    EXPECT_EQ(done.state(), v1::TASK_STATE_SUCCEEDED) << done.error_message();
    ExpectMatchesReference(done.result());
  }
  node.tasks->Shutdown();
  EXPECT_EQ(graph_reads, 4);  // submit and execute, twice
  EXPECT_EQ(node.metrics.program_cache_hits->Value(), 0);
  EXPECT_EQ(node.metrics.program_cache_entries->Value(), 0);
}

TEST_F(TaskManagerTest, TaskWhoseExecutionFailsEndsFailedWithTheError) {
  // The indices are data, so only running the graph finds index 7 out of range.
  executor::Graph gather_graph;
  gather_graph.output("picked", gather(gather_graph.constant(F32({3}, {1.0f, 2.0f, 3.0f}), "table"),
                                       gather_graph.input("index", DType::kI32, {2})));
  const Tensor index = I32({2}, {0, 7});
  auto direct = RunDirectly(gather_graph, {{"index", index}}, {});
  ASSERT_FALSE(direct.ok());
  ASSERT_EQ(direct.status().code(), StatusCode::kOutOfRange) << direct.status().ToString();

  Node& node = StartNode(Options(1));
  v1::SubmitTaskRequest request;
  request.set_graph_sha256(ToHex(PutGraph(gather_graph)));
  (*request.mutable_inputs())["index"] = ToHex(PutNpy(index));
  const std::string id = MustSubmit(*node.tasks, request);

  const v1::Task done = WaitFinished(*node.tasks, id);
  EXPECT_EQ(done.state(), v1::TASK_STATE_FAILED);
  EXPECT_EQ(done.error_code(), "OUT_OF_RANGE");
  EXPECT_EQ(done.error_message(), direct.status().message());
  EXPECT_GT(done.finished_unix_ms(), 0);
  EXPECT_FALSE(done.has_result());
  EXPECT_FALSE(ValueOf(store_.GetResult(IdBytes(id))).has_value());
  EXPECT_EQ(PersistedStates(id),
            (std::vector<v1::TaskState>{v1::TASK_STATE_QUEUED, v1::TASK_STATE_RUNNING, v1::TASK_STATE_FAILED}));
  node.tasks->Shutdown();
  EXPECT_EQ(node.metrics.tasks_failed->Value(), 1);
  EXPECT_EQ(node.metrics.tasks_completed->Value(), 0);
  EXPECT_EQ(node.metrics.execution_seconds->Read().count, 1u);
}

TEST_F(TaskManagerTest, InputLostBeforeExecutionFailsTheTaskWithDataLoss) {
  const Hash256 input = x_hash_;
  store_.SetGetBlobHook([input](const Hash256& h) {
    return h == input ? DataLoss("stored bytes no longer match the hash") : OkStatus();
  });
  // Without the input cache, the worker reads the input cold (InputCache tests below: with it).
  Node& node = StartNode(NoInputCache(Options(1)));
  const std::string id = MustSubmit(*node.tasks, Request());
  const v1::Task done = WaitFinished(*node.tasks, id);
  EXPECT_EQ(done.state(), v1::TASK_STATE_FAILED);
  EXPECT_EQ(done.error_code(), "DATA_LOSS");
  EXPECT_NE(done.error_message().find("no longer match"), std::string::npos) << done.error_message();
}

// ---- the decoded-input cache

// SubmitTask reads a small input whole, verifies and decodes it, and the worker runs the task
// from that copy; a task that repeats the input reads nothing. An input damaged at rest after it
// was verified is still caught on the next cold read: at SubmitTask on a node that has not
// decoded it (or by a worker that reads it, InputLostBeforeExecutionFailsTheTaskWithDataLoss).
TEST_F(TaskManagerTest, InputsDecodedAtSubmitServeTheWorkerAndADamagedBlobIsCaughtWhenReadCold) {
  int get_reads = 0;
  const Hash256 input = x_hash_;
  store_.SetGetBlobHook([&get_reads, input](const Hash256& h) {
    if (h == input) ++get_reads;  // only the test thread submits; the worker alone would count here
    return OkStatus();
  });
  Node& node = StartNode(Options(1));
  const v1::Task first = WaitFinished(*node.tasks, MustSubmit(*node.tasks, Request(1)));
  ASSERT_EQ(first.state(), v1::TASK_STATE_SUCCEEDED) << first.error_message();
  ExpectMatchesReference(first.result());
  EXPECT_EQ(get_reads, 0) << "the worker read the input the submission had decoded";
  EXPECT_EQ(node.metrics.input_cache_entries->Value(), 1);

  // Damaged at rest: every read of the blob now fails its hash check, as RocksDbStore's would.
  auto damaged = [input](const Hash256& h) {
    return h == input ? DataLoss("stored bytes no longer match the hash") : OkStatus();
  };
  store_.SetGetBlobHook(damaged);
  store_.SetReadBlobHook(damaged);
  // The copy in memory was verified when it was read: a task on it still gives the right bits.
  const v1::Task second = WaitFinished(*node.tasks, MustSubmit(*node.tasks, Request(2)));
  ASSERT_EQ(second.state(), v1::TASK_STATE_SUCCEEDED) << second.error_message();
  ExpectMatchesReference(second.result());
  node.tasks->Shutdown();

  // A restarted node starts with an empty cache: its first read of the blob finds the damage,
  // and the task is refused before it is stored.
  Node& restarted = StartNode(Options(1));
  auto refused = restarted.tasks->Submit(Request(3));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kDataLoss) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("input 'x'"), std::string::npos) << refused.status().ToString();
  EXPECT_EQ(restarted.metrics.input_cache_entries->Value(), 0);
  EXPECT_EQ(restarted.metrics.tasks_received->Value(), 0);
}

TEST_F(TaskManagerTest, InputCacheHoldsOnlyInputsThatFitTheirPlaceholderAndStaysWithinItsBudget) {
  TaskManagerOptions options = Options(1);
  // SubmitTask decodes an input whose .npy blob fits an entry (up to a quarter of the budget);
  // a decoded copy costs less than its blob, so a few more than four fit.
  const int64_t entry = InputCache::CostOf(x_.byte_size());
  options.input_cache_bytes = 4 * InputCache::CostOf(static_cast<int64_t>(EncodeNpy(x_).size()));
  const int64_t fits = options.input_cache_bytes / entry;
  ASSERT_LT(fits, 6);
  Node& node = StartNode(options);
  // An input of the wrong shape is refused and not kept.
  v1::SubmitTaskRequest wrong = Request(1);
  (*wrong.mutable_inputs())["x"] = ToHex(PutNpy(F32({1, 4}, {1, 2, 3, 4})));
  EXPECT_EQ(node.tasks->Submit(wrong).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(node.metrics.input_cache_entries->Value(), 0);
  // Six distinct inputs: the oldest are dropped, the bytes stay within the budget, and every
  // task gives the result of a fresh run of its own input.
  const std::vector<uint8_t> bias_bytes(bias_.bytes().begin(), bias_.bytes().end());
  for (int k = 0; k < 6; ++k) {
    SCOPED_TRACE(k);
    const Tensor x = F32({2, 4}, {float(k), -2.0f, 0.5f, 3.0f, -1.5f, 0.25f, 2.0f, float(-k)});
    v1::SubmitTaskRequest request = Request(10 + k);
    (*request.mutable_inputs())["x"] = ToHex(PutNpy(x));
    const v1::Task done = WaitFinished(*node.tasks, MustSubmit(*node.tasks, request));
    ASSERT_EQ(done.state(), v1::TASK_STATE_SUCCEEDED) << done.error_message();
    auto reference = RunDirectly(graph_, {{"x", x}}, {{bias_hash_, bias_bytes}});
    ASSERT_TRUE(reference.ok()) << reference.status().ToString();
    EXPECT_EQ(done.result().result_root(), ToHex(reference->run.result_root));
    EXPECT_LE(node.metrics.input_cache_bytes->Value(), options.input_cache_bytes);
  }
  EXPECT_EQ(node.metrics.input_cache_entries->Value(), fits);
  EXPECT_EQ(node.metrics.input_cache_evictions->Value(), 6 - fits);
}

// Outputs the store already holds write nothing new, so they cost no free-space probe (a
// statfs); new outputs are still checked against the disk budget before they are written.
TEST_F(TaskManagerTest, OnlyNewOutputsAreCheckedAgainstTheDiskBudget) {
  class CountingDisk final : public FreeSpaceProbe {
   public:
    explicit CountingDisk(std::atomic<int>* probes) : probes_(probes) {}
    StatusOr<int64_t> FreeBytes() override {
      ++*probes_;
      return int64_t{1} << 40;
    }

   private:
    std::atomic<int>* probes_;
  };
  std::atomic<int> probes{0};
  DiskBudget budget(
      {/*max_bytes=*/0, /*min_free_bytes=*/1000}, [] { return int64_t{0}; }, std::make_unique<CountingDisk>(&probes),
      nullptr);
  TaskManagerOptions options = Options(1);
  options.budget = &budget;
  Node& node = StartNode(options);
  const v1::Task first = WaitFinished(*node.tasks, MustSubmit(*node.tasks, Request(1)));
  ASSERT_EQ(first.state(), v1::TASK_STATE_SUCCEEDED) << first.error_message();
  EXPECT_EQ(probes.load(), 2);  // the task record, then its new outputs
  const v1::Task second = WaitFinished(*node.tasks, MustSubmit(*node.tasks, Request(2)));
  ASSERT_EQ(second.state(), v1::TASK_STATE_SUCCEEDED) << second.error_message();
  ExpectMatchesReference(second.result());
  EXPECT_EQ(probes.load(), 3);  // the task record only: both outputs were stored already
}

TEST_F(TaskManagerTest, TaskOverItsWallTimeCapFailsWithDeadlineExceeded) {
  // The wall-time clock starts before the input is loaded; holding the load for longer than the
  // task's 1 ms cap makes the executor's first check find the deadline passed. Time passing is
  // what is under test here, not a way to synchronize.
  const Hash256 input = x_hash_;
  store_.SetGetBlobHook([input](const Hash256& h) {
    if (h == input) std::this_thread::sleep_for(20ms);
    return OkStatus();
  });
  // Without the input cache, so that the worker reads the input (and waits there).
  Node& node = StartNode(NoInputCache(Options(1)));
  v1::SubmitTaskRequest request = Request();
  request.mutable_options()->set_max_wall_ms(1);
  const std::string id = MustSubmit(*node.tasks, request);
  const v1::Task done = WaitFinished(*node.tasks, id);
  EXPECT_EQ(done.state(), v1::TASK_STATE_FAILED);
  EXPECT_EQ(done.error_code(), "DEADLINE_EXCEEDED");
  EXPECT_NE(done.error_message().find("wall-time cap of 1 ms"), std::string::npos) << done.error_message();
}

// ---- durability and recovery

TEST_F(TaskManagerTest, RestartRequeuesQueuedAndRunningTasksAndCompletesThem) {
  // A first run with no workers accepts tasks; then the records are set as a crash would leave
  // them: `b` mid-execution (running, first attempt), `done` failed, `watched` an observer's.
  Node& first = StartNode(Options(0));
  const std::string a = MustSubmit(*first.tasks, Request(1));
  const std::string b = MustSubmit(*first.tasks, Request(2));
  const std::string c = MustSubmit(*first.tasks, Request(3));
  const std::string done = MustSubmit(*first.tasks, Request(4));
  v1::TaskConsensus observer;
  observer.set_member(false);
  const std::string watched = MustSubmit(*first.tasks, Request(5), &observer);
  // Distinct creation times fix the recovery order: b, c, a.
  auto created_at = [](int64_t ms) {
    return [ms](v1::Task* t) {
      t->set_created_unix_ms(ms);
      return OkStatus();
    };
  };
  ASSERT_TRUE(first.tasks->Mutate(Id(a), created_at(3000)).ok());
  ASSERT_TRUE(first.tasks->Mutate(Id(c), created_at(2000)).ok());
  ASSERT_TRUE(first.tasks
                  ->Mutate(Id(b),
                           [](v1::Task* t) {
                             t->set_created_unix_ms(1000);
                             t->set_state(v1::TASK_STATE_RUNNING);
                             t->set_attempts(1);
                             return OkStatus();
                           })
                  .ok());
  ASSERT_TRUE(first.tasks
                  ->Mutate(Id(done),
                           [](v1::Task* t) {
                             t->set_state(v1::TASK_STATE_FAILED);
                             t->set_error_code("INTERNAL");
                             return OkStatus();
                           })
                  .ok());
  first.tasks.reset();
  const size_t writes_before_restart = store_.TaskWrites().size();

  Node& second = NewNode(Options(/*workers=*/1, /*queue_capacity=*/1));
  ASSERT_TRUE(second.tasks->Recover().ok());
  // Acknowledged tasks are never dropped, even past the queue capacity.
  ASSERT_EQ(second.tasks->queue_depth(), 3);
  EXPECT_EQ(second.metrics.tasks_recovered->Value(), 3);
  EXPECT_EQ(second.metrics.queue_depth->Value(), 3);
  // The interrupted task is durably queued again before anything runs.
  ASSERT_EQ(ValueOf(second.tasks->Get(Id(b))).state(), v1::TASK_STATE_QUEUED);

  second.tasks->Start();
  for (const std::string& id : {a, b, c}) {
    SCOPED_TRACE(id);
    const v1::Task t = WaitFinished(*second.tasks, id);
    EXPECT_EQ(t.state(), v1::TASK_STATE_SUCCEEDED) << t.error_message();
    ExpectMatchesReference(t.result());
    EXPECT_EQ(t.attempts(), id == b ? 2u : 1u);  // the interrupted attempt counts
  }
  second.tasks->Shutdown();

  // Oldest first, with the single worker.
  std::vector<std::string> started;
  const auto writes = store_.TaskWrites();
  for (size_t i = writes_before_restart; i < writes.size(); ++i) {
    v1::Task t;
    ASSERT_TRUE(t.ParseFromString(writes[i].record));
    if (t.state() == v1::TASK_STATE_RUNNING) started.push_back(t.task_id());
  }
  EXPECT_EQ(started, (std::vector<std::string>{b, c, a}));
  // Final and certifying tasks are left alone.
  EXPECT_EQ(ValueOf(second.tasks->Get(Id(done))).state(), v1::TASK_STATE_FAILED);
  EXPECT_EQ(ValueOf(second.tasks->Get(Id(watched))).state(), v1::TASK_STATE_CERTIFYING);
  EXPECT_EQ(ValueOf(second.tasks->Get(Id(watched))).attempts(), 0u);
  EXPECT_EQ(second.metrics.tasks_completed->Value(), 3);
}

TEST_F(TaskManagerTest, SubmissionThatCannotBeStoredIsNotAcknowledged) {
  store_.SetPutTaskHook([](const std::string&, const std::string&) { return Unavailable("disk full"); });
  Node& node = StartNode(Options(1));
  auto refused = node.tasks->Submit(Request());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("storing task"), std::string::npos) << refused.status().ToString();
  EXPECT_EQ(store_.GetStats().task_count, 0);
  EXPECT_EQ(node.tasks->queue_depth(), 0);
  EXPECT_EQ(node.metrics.tasks_received->Value(), 0);

  // Nothing was left reserved: the retry is a new task and runs.
  store_.SetPutTaskHook(nullptr);
  const std::string id = MustSubmit(*node.tasks, Request());
  EXPECT_EQ(WaitFinished(*node.tasks, id).state(), v1::TASK_STATE_SUCCEEDED);
}

// With the running-task journal (the daemon's setting), a task's record is not written before
// it runs: the worker marks it in the journal, the manager shows it running, and the record's
// next write (here a consensus-style update while it runs, then the result) carries running.
TEST_F(TaskManagerTest, JournalMarksTheRunningTaskInsteadOfAStoreWrite) {
  const std::string journal_path = testing_support::MakeTempDir("tm_journal") + "/running-tasks";
  Gate& gate = NewGate();
  HoldExecutionAtInput(gate);
  TaskManagerOptions options = NoInputCache(Options(1));
  options.running_journal_path = journal_path;
  Node& node = StartNode(options);
  const std::string id = MustSubmit(*node.tasks, Request());
  ASSERT_TRUE(gate.WaitArrived(1));

  const v1::Task running = ValueOf(node.tasks->Get(Id(id)));
  EXPECT_EQ(running.state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(running.attempts(), 1u);
  EXPECT_GT(running.started_unix_ms(), 0);
  EXPECT_EQ(PersistedStates(id), (std::vector<v1::TaskState>{v1::TASK_STATE_QUEUED}));  // no write before the run
  {
    auto journal = RunningJournal::Open(journal_path, 1);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    auto marks = (*journal)->Marks();
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_EQ(ToHex(marks[0].task_id), id);
    EXPECT_EQ(marks[0].attempts, 1u);
    EXPECT_EQ(static_cast<int64_t>(marks[0].started_unix_ms), running.started_unix_ms());
  }
  // Another writer of the record while it runs (the consensus engine adds votes) writes it running.
  ASSERT_TRUE(node.tasks->Mutate(Id(id), [](v1::Task*) { return OkStatus(); }).ok());
  EXPECT_EQ(PersistedStates(id), (std::vector<v1::TaskState>{v1::TASK_STATE_QUEUED, v1::TASK_STATE_RUNNING}));
  EXPECT_EQ(ValueOf(node.tasks->Get(Id(id))).attempts(), 1u);

  gate.Open();
  const v1::Task done = WaitFinished(*node.tasks, id);
  EXPECT_EQ(done.state(), v1::TASK_STATE_SUCCEEDED) << done.error_message();
  EXPECT_EQ(done.attempts(), 1u);
  EXPECT_EQ(done.started_unix_ms(), running.started_unix_ms());
  ExpectMatchesReference(done.result());
  node.tasks->Shutdown();
  auto journal = RunningJournal::Open(journal_path, 1);
  ASSERT_TRUE(journal.ok());
  EXPECT_TRUE((*journal)->Marks().empty());  // cleared once the result was written

  // A task that runs without any other write in between: queued, then its result.
  Node& next = StartNode(NoInputCache(options));
  const std::string second = MustSubmit(*next.tasks, Request(1));
  EXPECT_EQ(WaitFinished(*next.tasks, second).attempts(), 1u);
  EXPECT_EQ(PersistedStates(second), (std::vector<v1::TaskState>{v1::TASK_STATE_QUEUED, v1::TASK_STATE_SUCCEEDED}));
}

// What a node that ended mid-task (kill -9, a crash inside the task) leaves: the record queued
// and the journal's mark. Recovery counts that attempt in the record before anything runs, then
// clears the journal; marks of tasks that finished, or that the record already counts, change
// nothing. (tests/functional/node_test.cc kills a real daemon mid-task.)
TEST_F(TaskManagerTest, RecoveryCountsTheAttemptsTheJournalMarked) {
  const std::string journal_path = testing_support::MakeTempDir("tm_journal") + "/running-tasks";
  Node& first = StartNode(Options(0));
  const std::string interrupted = MustSubmit(*first.tasks, Request(1));
  const std::string counted = MustSubmit(*first.tasks, Request(2));
  const std::string finished = MustSubmit(*first.tasks, Request(3));
  ASSERT_TRUE(first.tasks
                  ->Mutate(Id(counted),
                           [](v1::Task* t) {
                             t->set_attempts(3);
                             return OkStatus();
                           })
                  .ok());
  ASSERT_TRUE(first.tasks
                  ->Mutate(Id(finished),
                           [](v1::Task* t) {
                             t->set_state(v1::TASK_STATE_FAILED);
                             t->set_error_code("INTERNAL");
                             return OkStatus();
                           })
                  .ok());
  first.tasks.reset();
  {
    auto journal = RunningJournal::Open(journal_path, 3);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    auto mark = [](const std::string& hex, uint32_t attempts) {
      RunningJournal::Mark m;
      m.task_id = ValueOf(Hash256FromHex(hex));
      m.attempts = attempts;
      m.started_unix_ms = 12345;
      return m;
    };
    (*journal)->Set(0, mark(interrupted, 1));
    (*journal)->Set(1, mark(counted, 2));  // an older attempt than the record's 3
    (*journal)->Set(2, mark(finished, 1));
  }

  TaskManagerOptions options = Options(1);
  options.running_journal_path = journal_path;
  Node& second = NewNode(options);
  ASSERT_TRUE(second.tasks->Recover().ok());
  // Durably counted before anything runs.
  const v1::Task recovered = ValueOf(second.tasks->Get(Id(interrupted)));
  EXPECT_EQ(recovered.state(), v1::TASK_STATE_QUEUED);
  EXPECT_EQ(recovered.attempts(), 1u);
  EXPECT_EQ(recovered.started_unix_ms(), 12345);
  EXPECT_EQ(store_.TaskWrites().back().durability, Durability::kSynced);
  EXPECT_EQ(ValueOf(second.tasks->Get(Id(counted))).attempts(), 3u);
  EXPECT_EQ(ValueOf(second.tasks->Get(Id(finished))).state(), v1::TASK_STATE_FAILED);
  {
    auto journal = RunningJournal::Open(journal_path, 1);
    ASSERT_TRUE(journal.ok());
    EXPECT_TRUE((*journal)->Marks().empty());
  }

  second.tasks->Start();
  const v1::Task done = WaitFinished(*second.tasks, interrupted);
  EXPECT_EQ(done.state(), v1::TASK_STATE_SUCCEEDED) << done.error_message();
  EXPECT_EQ(done.attempts(), 2u);  // the interrupted attempt, then this one
  ExpectMatchesReference(done.result());
  EXPECT_EQ(WaitFinished(*second.tasks, counted).attempts(), 4u);
}

// A journal file the node cannot use stops startup with the reason, instead of losing counts.
TEST_F(TaskManagerTest, UnusableJournalFailsRecoveryWithTheReason) {
  const std::string dir = testing_support::MakeTempDir("tm_journal");
  testing_support::WriteFile(dir + "/running-tasks", "not a journal");
  TaskManagerOptions options = Options(1);
  options.running_journal_path = dir + "/running-tasks";
  Node& node = NewNode(options);
  Status s = node.tasks->Recover();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("running-task journal"), std::string::npos) << s.ToString();
}

TEST_F(TaskManagerTest, ResultThatCannotBeStoredIsExecutedAgainAfterRestart) {
  Gate& refused_writes = NewGate(/*open=*/true);  // counts them
  store_.SetPutTaskHook([&refused_writes](const std::string&, const std::string& record) -> Status {
    v1::Task t;
    if (!t.ParseFromString(record) || t.state() != v1::TASK_STATE_SUCCEEDED) return OkStatus();
    refused_writes.Pass().IgnoreError();
    return Unavailable("disk full");
  });
  Node& first = StartNode(Options(1));
  const std::string id = MustSubmit(*first.tasks, Request());
  ASSERT_TRUE(refused_writes.WaitArrived(1));
  first.tasks->Shutdown();  // waits until the worker is done with the task
  auto stranded = first.tasks->Get(Id(id));
  ASSERT_TRUE(stranded.ok());
  EXPECT_EQ(stranded->state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(stranded->attempts(), 1u);
  EXPECT_FALSE(ValueOf(store_.GetResult(IdBytes(id))).has_value());
  EXPECT_EQ(first.metrics.tasks_completed->Value(), 0);
  EXPECT_EQ(first.metrics.tasks_failed->Value(), 0);

  store_.SetPutTaskHook(nullptr);
  Node& second = StartNode(Options(1));
  ASSERT_EQ(second.metrics.tasks_recovered->Value(), 1);  // set by Recover, before Start
  const v1::Task t = WaitFinished(*second.tasks, id);
  EXPECT_EQ(t.state(), v1::TASK_STATE_SUCCEEDED) << t.error_message();
  EXPECT_EQ(t.attempts(), 2u);
  ExpectMatchesReference(t.result());
}

TEST_F(TaskManagerTest, ShutdownLetsTheRunningTaskFinishAndLeavesQueuedTasksQueued) {
  Gate& gate = NewGate();
  HoldExecutionAtInput(gate);
  Node& node = StartNode(NoInputCache(Options(1)));
  const std::string running = MustSubmit(*node.tasks, Request(1));
  ASSERT_TRUE(gate.WaitArrived(1));
  const std::string queued = MustSubmit(*node.tasks, Request(2));
  const v1::Task seen = ValueOf(node.tasks->Get(Id(running)));

  std::thread stopper([&] { node.tasks->Shutdown(); });
  // Shutdown wakes every watcher with UNAVAILABLE once it has closed admission.
  auto woken = node.tasks->WaitForChange(Id(running), seen, Clock::now() + kTimeout, nullptr);
  EXPECT_EQ(woken.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(node.tasks->accepting());
  EXPECT_EQ(node.tasks->Submit(Request(3)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(node.tasks->Requeue(Id(queued)).code(), StatusCode::kUnavailable);
  gate.Open();
  stopper.join();

  EXPECT_EQ(ValueOf(node.tasks->Get(Id(running))).state(), v1::TASK_STATE_SUCCEEDED);
  EXPECT_EQ(ValueOf(node.tasks->Get(Id(queued))).state(), v1::TASK_STATE_QUEUED);
  EXPECT_EQ(ValueOf(node.tasks->Get(Id(queued))).attempts(), 0u);
  EXPECT_EQ(node.tasks->running(), 0);

  Node& next = StartNode(Options(1));
  EXPECT_EQ(WaitFinished(*next.tasks, queued).state(), v1::TASK_STATE_SUCCEEDED);
}

TEST_F(TaskManagerTest, UnreadableRecordsAreReportedByGetAndSkippedByForEachAndRecover) {
  Node& first = StartNode(Options(0));
  const std::string a = MustSubmit(*first.tasks, Request(1));
  const std::string b = MustSubmit(*first.tasks, Request(2));
  first.tasks.reset();
  const std::string corrupt = ToHex(Sha256Of("corrupt record"));
  ASSERT_TRUE(store_.PutTask(IdBytes(corrupt), std::string("\x07 not a task record")).ok());
  const std::string no_result = ToHex(Sha256Of("succeeded without a result"));
  v1::Task lost;
  lost.set_task_id(no_result);
  lost.set_state(v1::TASK_STATE_SUCCEEDED);
  ASSERT_TRUE(store_.PutTask(IdBytes(no_result), lost.SerializeAsString()).ok());

  Node& node = NewNode(Options(0));
  ASSERT_TRUE(node.tasks->Recover().ok());
  EXPECT_EQ(node.tasks->queue_depth(), 2);
  node.tasks->Start();

  EXPECT_EQ(node.tasks->Get(Id(corrupt)).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(node.tasks->Get(Id(no_result)).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(node.tasks->Get(Id(ToHex(Sha256Of("unknown")))).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(consensus::TaskId::FromHex("not-a-task-id").status().code(), StatusCode::kInvalidArgument);

  // Key order, unreadable records skipped.
  std::vector<std::string> visited;
  ASSERT_TRUE(node.tasks
                  ->ForEach([&](const v1::Task& t) {
                    visited.push_back(t.task_id());
                    return OkStatus();
                  })
                  .ok());
  std::vector<std::string> expected = {a, b};
  std::sort(expected.begin(), expected.end(),
            [](const std::string& l, const std::string& r) { return IdBytes(l) < IdBytes(r); });
  EXPECT_EQ(visited, expected);
  // The visitor's error stops the walk and is returned.
  int visits = 0;
  Status stopped = node.tasks->ForEach([&](const v1::Task&) {
    ++visits;
    return Cancelled("enough");
  });
  EXPECT_EQ(stopped.code(), StatusCode::kCancelled);
  EXPECT_EQ(visits, 1);
}

// ---- Mutate, Requeue and the lifecycle

TEST_F(TaskManagerTest, MutateAppliesChangesAndRefusesForbiddenTransitions) {
  Node& node = StartNode(Options(0));
  const std::string id = MustSubmit(*node.tasks, Request());
  const size_t writes = store_.TaskWrites().size();

  // A refused transition stores nothing, not even the other fields of the same change.
  Status refused = node.tasks->Mutate(Id(id), [](v1::Task* t) {
    t->set_state(v1::TASK_STATE_SUCCEEDED);
    t->set_error_message("must not be stored");
    return OkStatus();
  });
  EXPECT_EQ(refused.code(), StatusCode::kInternal);
  EXPECT_NE(refused.message().find("from queued to succeeded is not allowed"), std::string::npos) << refused.ToString();
  EXPECT_EQ(ValueOf(node.tasks->Get(Id(id))).state(), v1::TASK_STATE_QUEUED);
  EXPECT_TRUE(ValueOf(node.tasks->Get(Id(id))).error_message().empty());
  // So does a change that fails by itself; its error is returned.
  EXPECT_EQ(node.tasks->Mutate(Id(id), [](v1::Task*) { return FailedPrecondition("not now"); }).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.TaskWrites().size(), writes);

  // Allowed: queued -> running -> succeeded, the result written in the same batch.
  ASSERT_TRUE(node.tasks
                  ->Mutate(Id(id),
                           [](v1::Task* t) {
                             t->set_state(v1::TASK_STATE_RUNNING);
                             return OkStatus();
                           })
                  .ok());
  v1::TaskResult result;
  result.set_result_root(std::string(64, 'a'));
  ASSERT_TRUE(node.tasks
                  ->Mutate(
                      Id(id),
                      [](v1::Task* t) {
                        t->set_state(v1::TASK_STATE_SUCCEEDED);
                        return OkStatus();
                      },
                      &result)
                  .ok());
  EXPECT_TRUE(store_.TaskWrites().back().with_result);
  EXPECT_EQ(ValueOf(node.tasks->Get(Id(id))).result().result_root(), result.result_root());

  // A change that keeps the state needs no transition, and the result keeps its own record.
  ASSERT_TRUE(node.tasks
                  ->Mutate(Id(id),
                           [](v1::Task* t) {
                             t->mutable_consensus()->set_disputed(true);
                             return OkStatus();
                           })
                  .ok());
  v1::Task raw;
  ASSERT_TRUE(raw.ParseFromString(ValueOf(store_.GetTask(IdBytes(id))).value_or("")));
  EXPECT_FALSE(raw.has_result());
  EXPECT_TRUE(raw.consensus().disputed());
  EXPECT_EQ(ValueOf(node.tasks->Get(Id(id))).result().result_root(), result.result_root());

  // Final states never change.
  EXPECT_EQ(node.tasks
                ->Mutate(Id(id),
                         [](v1::Task* t) {
                           t->set_state(v1::TASK_STATE_QUEUED);
                           return OkStatus();
                         })
                .code(),
            StatusCode::kInternal);
  EXPECT_EQ(ValueOf(node.tasks->Get(Id(id))).state(), v1::TASK_STATE_SUCCEEDED);

  auto noop = [](v1::Task*) { return OkStatus(); };
  EXPECT_EQ(node.tasks->Mutate(Id(ToHex(Sha256Of("unknown"))), noop).code(), StatusCode::kNotFound);
  // A malformed id is refused where it is parsed, before the task manager.
  EXPECT_EQ(consensus::TaskId::FromHex("12ab").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(TaskManagerTest, MutateFollowsTheProtocolLifecycleForEveryPairOfStates) {
  Node& node = StartNode(Options(0));
  const v1::TaskState states[] = {v1::TASK_STATE_QUEUED, v1::TASK_STATE_RUNNING,    v1::TASK_STATE_SUCCEEDED,
                                  v1::TASK_STATE_FAILED, v1::TASK_STATE_CERTIFYING, v1::TASK_STATE_UNSPECIFIED};
  v1::TaskResult result;
  result.set_result_root(std::string(64, 'b'));
  int allowed = 0, refused = 0;
  for (v1::TaskState from : states) {
    if (from == v1::TASK_STATE_UNSPECIFIED) continue;  // never stored
    for (v1::TaskState to : states) {
      SCOPED_TRACE(v1::TaskState_Name(from) + " -> " + v1::TaskState_Name(to));
      // A record stored directly in `from`; a succeeded one comes with its result.
      const std::string id = ToHex(Sha256Of(v1::TaskState_Name(from) + "->" + v1::TaskState_Name(to)));
      v1::Task record;
      record.set_task_id(id);
      record.set_state(from);
      *record.mutable_spec() = Request();
      std::optional<std::string> result_record;
      if (from == v1::TASK_STATE_SUCCEEDED) result_record = result.SerializeAsString();
      ASSERT_TRUE(store_.PutTask(IdBytes(id), record.SerializeAsString(), result_record).ok());

      // Whoever marks a task succeeded stores its result with it, as the worker and the
      // consensus engine do: a succeeded record without one reads as DATA_LOSS.
      Status s = node.tasks->Mutate(
          Id(id),
          [to](v1::Task* t) {
            t->set_state(to);
            return OkStatus();
          },
          to == v1::TASK_STATE_SUCCEEDED ? &result : nullptr);
      // succeeded -> queued (a dispute's re-execution) also needs an open challenge window: these
      // records have no certificate, so it is refused here (the certified case is tested below).
      const bool reopen = from == v1::TASK_STATE_SUCCEEDED && to == v1::TASK_STATE_QUEUED;
      const bool expect_allowed =
          from == to || (!reopen && consensus::IsAllowedTransition(static_cast<consensus::TaskState>(from),
                                                                   static_cast<consensus::TaskState>(to)));
      auto after = node.tasks->Get(Id(id));
      ASSERT_TRUE(after.ok()) << after.status().ToString();
      if (expect_allowed) {
        ++allowed;
        EXPECT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(after->state(), to);
      } else {
        ++refused;
        EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
        EXPECT_EQ(after->state(), from);
      }
    }
  }
  EXPECT_GT(allowed, 0);
  EXPECT_GT(refused, 0);
}

// Issue 16, hole 2: a dispute must be able to re-execute a task this node already marked
// certified (it may hold outputs fetched from the signers the dispute overrules); once the
// challenge window closed, never.
TEST_F(TaskManagerTest, CertifiedTaskIsRequeuedForADisputeUntilItIsFinal) {
  TaskManagerOptions options = Options(0);
  options.network_mode = true;
  Node& node = StartNode(options);
  v1::TaskResult result;
  result.set_result_root(std::string(64, 'c'));
  auto store_certified = [&](const std::string& name, bool final) {
    const std::string id = ToHex(Sha256Of(name));
    v1::Task record;
    record.set_task_id(id);
    record.set_state(v1::TASK_STATE_SUCCEEDED);
    *record.mutable_spec() = Request();
    record.mutable_consensus()->mutable_certificate()->set_result_root(std::string(64, 'c'));
    record.mutable_consensus()->set_final(final);
    EXPECT_TRUE(store_.PutTask(IdBytes(id), record.SerializeAsString(), result.SerializeAsString()).ok());
    return id;
  };
  const std::string open = store_certified("window open", false);
  ASSERT_TRUE(node.tasks->Requeue(Id(open)).ok());
  EXPECT_EQ(ValueOf(node.tasks->Get(Id(open))).state(), v1::TASK_STATE_QUEUED);
  const std::string closed = store_certified("window closed", true);
  EXPECT_FALSE(node.tasks->Requeue(Id(closed)).ok());
  EXPECT_EQ(ValueOf(node.tasks->Get(Id(closed))).state(), v1::TASK_STATE_SUCCEEDED);
}

// The consensus engine queues a seated member's task without a sync of its own (a power failure
// that takes the write back leaves the task to recovery, which queues it again); the task manager
// honours that only for such a task, judged on the record it rewrites.
TEST_F(TaskManagerTest, RequeueDefersItsWriteOnlyForATaskRecoveryQueuesAgain) {
  TaskManagerOptions options = Options(0);
  options.network_mode = true;
  Node& node = StartNode(options);
  v1::TaskResult result;
  result.set_result_root(std::string(64, 'c'));
  auto store = [&](const std::string& name, v1::TaskState state, bool member, bool with_result) {
    const std::string id = ToHex(Sha256Of(name));
    v1::Task record;
    record.set_task_id(id);
    record.set_state(state);
    *record.mutable_spec() = Request();
    record.mutable_consensus()->add_committee("0x00000000000000000000000000000000000000aa");
    record.mutable_consensus()->set_member(member);
    if (state == v1::TASK_STATE_SUCCEEDED) {
      record.mutable_consensus()->mutable_certificate()->set_result_root(std::string(64, 'c'));
    }
    std::optional<std::string> result_record;
    if (with_result) result_record = result.SerializeAsString();
    EXPECT_TRUE(store_.PutTask(IdBytes(id), record.SerializeAsString(), result_record).ok());
    return id;
  };
  auto requeue_write = [&](const std::string& id, Durability asked) {
    EXPECT_TRUE(node.tasks->Requeue(Id(id), "test", asked).ok());
    EXPECT_EQ(ValueOf(node.tasks->Get(Id(id))).state(), v1::TASK_STATE_QUEUED);
    const std::vector<MemoryStore::TaskWrite> writes = store_.TaskWrites();
    EXPECT_FALSE(writes.empty());
    EXPECT_EQ(writes.back().task_id, IdBytes(id));
    return writes.empty() ? Durability::kSynced : writes.back().durability;
  };
  const std::string seated = store("seated member", v1::TASK_STATE_CERTIFYING, true, false);
  ASSERT_TRUE(RecoveryReexecutes(ValueOf(node.tasks->Get(Id(seated)))));
  EXPECT_EQ(requeue_write(seated, Durability::kDeferred), Durability::kDeferred);
  // Recovery would not queue these again: their requeue is synced whatever is asked.
  EXPECT_EQ(requeue_write(store("observer joins", v1::TASK_STATE_CERTIFYING, false, false), Durability::kDeferred),
            Durability::kSynced);
  EXPECT_EQ(requeue_write(store("executed member", v1::TASK_STATE_CERTIFYING, true, true), Durability::kDeferred),
            Durability::kSynced);
  EXPECT_EQ(requeue_write(store("dispute", v1::TASK_STATE_SUCCEEDED, true, true), Durability::kDeferred),
            Durability::kSynced);
  EXPECT_EQ(requeue_write(store("asked synced", v1::TASK_STATE_CERTIFYING, true, false), Durability::kSynced),
            Durability::kSynced);
}

TEST_F(TaskManagerTest, ObserverTaskIsStoredCertifyingAndRunsOnlyWhenRequeued) {
  TaskManagerOptions options = NoInputCache(Options(1, /*queue_capacity=*/1));
  options.network_mode = true;
  std::mutex mu;
  std::vector<std::pair<std::string, v1::TaskResult>> executed;
  options.on_executed = [&](const consensus::TaskId& task_id, const v1::TaskResult& result) {
    const std::string id = task_id.Hex();
    std::lock_guard<std::mutex> lock(mu);
    executed.emplace_back(id, result);
  };
  Gate& gate = NewGate();
  HoldExecutionAtInput(gate);
  Node& node = StartNode(options);
  // A member's task fills the queue; an observer's is stored anyway, since it never waits there.
  v1::TaskConsensus member;
  member.set_member(true);
  const std::string busy = MustSubmit(*node.tasks, Request(1), &member);
  ASSERT_TRUE(gate.WaitArrived(1));
  const std::string filler = MustSubmit(*node.tasks, Request(2), &member);
  EXPECT_EQ(node.tasks->Submit(Request(3), &member).status().code(), StatusCode::kResourceExhausted);
  v1::TaskConsensus observer;
  observer.set_member(false);
  observer.add_committee("0x00000000000000000000000000000000000000aa");
  const std::string id = MustSubmit(*node.tasks, Request(4), &observer);
  EXPECT_EQ(node.tasks->queue_depth(), 1);

  auto stored = node.tasks->Get(Id(id));
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->state(), v1::TASK_STATE_CERTIFYING);
  EXPECT_EQ(stored->attempts(), 0u);
  EXPECT_FALSE(stored->has_result());
  EXPECT_EQ(stored->consensus().committee_size(), 1);
  EXPECT_FALSE(stored->consensus().member());
  gate.Open();
  ASSERT_TRUE(WaitUntil(*node.tasks, filler, [](const v1::Task& t) {
                return t.attempts() > 0 && t.state() == v1::TASK_STATE_CERTIFYING;
              }).ok());

  // A task that is not certifying cannot be requeued; unknown and malformed ids are told apart.
  ASSERT_TRUE(node.tasks
                  ->Mutate(Id(busy),
                           [](v1::Task* t) {
                             t->set_state(v1::TASK_STATE_SUCCEEDED);
                             return OkStatus();
                           })
                  .ok());
  EXPECT_EQ(node.tasks->Requeue(Id(busy)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(node.tasks->Requeue(Id(ToHex(Sha256Of("unknown")))).code(), StatusCode::kNotFound);
  EXPECT_EQ(consensus::TaskId::FromHex("xyz").status().code(), StatusCode::kInvalidArgument);

  // Became a member (a replacement or a dispute): certifying -> queued -> running -> certifying.
  ASSERT_TRUE(node.tasks->Requeue(Id(id)).ok());
  auto ran = WaitUntil(*node.tasks, id,
                       [](const v1::Task& t) { return t.attempts() > 0 && t.state() != v1::TASK_STATE_RUNNING; });
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  EXPECT_EQ(ran->state(), v1::TASK_STATE_CERTIFYING) << ran->error_message();
  EXPECT_EQ(ran->attempts(), 1u);
  ExpectMatchesReference(ran->result());
  EXPECT_EQ(PersistedStates(id), (std::vector<v1::TaskState>{v1::TASK_STATE_CERTIFYING, v1::TASK_STATE_QUEUED,
                                                             v1::TASK_STATE_RUNNING, v1::TASK_STATE_CERTIFYING}));
  // Certified by the consensus engine.
  ASSERT_TRUE(node.tasks
                  ->Mutate(Id(id),
                           [](v1::Task* t) {
                             t->set_state(v1::TASK_STATE_SUCCEEDED);
                             return OkStatus();
                           })
                  .ok());

  node.tasks->Shutdown();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(executed.size(), 3u);  // busy, filler and the requeued observer task
  EXPECT_EQ(executed.back().first, id);
  EXPECT_EQ(executed.back().second.SerializeAsString(), ran->result().SerializeAsString());
}

TEST_F(TaskManagerTest, RequeueOfATaskAlreadyInTheQueueChangesNothing) {
  Node& node = StartNode(Options(0));
  const std::string id = MustSubmit(*node.tasks, Request());
  const size_t writes = store_.TaskWrites().size();
  EXPECT_TRUE(node.tasks->Requeue(Id(id)).ok());
  EXPECT_EQ(node.tasks->queue_depth(), 1);
  EXPECT_EQ(store_.TaskWrites().size(), writes);
}

TEST_F(TaskManagerTest, NetworkModeEndsInCertifyingAndCallsOnExecutedAfterStoringTheResult) {
  TaskManagerOptions options = Options(1);
  options.network_mode = true;
  std::atomic<TaskManager*> self{nullptr};
  std::mutex mu;
  std::vector<std::string> ids;
  std::optional<v1::Task> seen_in_callback;
  std::optional<v1::TaskResult> reported;
  options.on_executed = [&](const consensus::TaskId& task_id, const v1::TaskResult& result) {
    const std::string id = task_id.Hex();
    auto stored = self.load()->Get(Id(id));
    std::lock_guard<std::mutex> lock(mu);
    ids.push_back(id);
    if (stored.ok()) seen_in_callback = *stored;
    reported = result;
  };
  Node& node = StartNode(options);
  self = node.tasks.get();
  v1::TaskConsensus member;
  member.set_member(true);
  member.set_replicas(3);
  member.set_quorum(2);
  const std::string id = MustSubmit(*node.tasks, Request(), &member);
  auto executed = WaitUntil(*node.tasks, id, [](const v1::Task& t) { return t.state() == v1::TASK_STATE_CERTIFYING; });
  ASSERT_TRUE(executed.ok()) << executed.status().ToString();
  ExpectMatchesReference(executed->result());
  EXPECT_EQ(executed->consensus().quorum(), 2u);
  node.tasks->Shutdown();  // the callback has run once Shutdown returns

  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(ids, std::vector<std::string>{id});
  ASSERT_TRUE(seen_in_callback.has_value());
  EXPECT_EQ(seen_in_callback->state(), v1::TASK_STATE_CERTIFYING);
  EXPECT_EQ(seen_in_callback->result().SerializeAsString(), executed->result().SerializeAsString());
  ASSERT_TRUE(reported.has_value());
  EXPECT_EQ(reported->SerializeAsString(), executed->result().SerializeAsString());
  EXPECT_EQ(node.metrics.tasks_completed->Value(), 1);
}

// ---- watching

TEST_F(TaskManagerTest, WaitForChangeReturnsOnChangeDeadlineStopOrShutdown) {
  Node& node = StartNode(Options(0));
  const std::string id = MustSubmit(*node.tasks, Request());
  const v1::Task queued = ValueOf(node.tasks->Get(Id(id)));

  // Already different from what the caller saw: returns at once.
  v1::Task stale = queued;
  stale.set_attempts(5);
  auto now = node.tasks->WaitForChange(Id(id), stale, Clock::now() + kTimeout, nullptr);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->state(), v1::TASK_STATE_QUEUED);

  // Nothing changes: the current record at the deadline.
  auto unchanged = node.tasks->WaitForChange(Id(id), queued, Clock::now() + 50ms, nullptr);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(unchanged->state(), v1::TASK_STATE_QUEUED);

  // A change by another thread wakes the watcher (before or during its wait).
  std::thread writer([&] {
    EXPECT_TRUE(node.tasks
                    ->Mutate(Id(id),
                             [](v1::Task* t) {
                               t->set_state(v1::TASK_STATE_RUNNING);
                               return OkStatus();
                             })
                    .ok());
  });
  auto changed = node.tasks->WaitForChange(Id(id), queued, Clock::now() + kTimeout, nullptr);
  writer.join();
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->state(), v1::TASK_STATE_RUNNING);

  // A cancelled client ends the wait long before the deadline.
  auto stopped = node.tasks->WaitForChange(Id(id), *changed, Clock::now() + kTimeout, [] { return true; });
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->state(), v1::TASK_STATE_RUNNING);

  EXPECT_EQ(node.tasks->WaitForChange(Id(ToHex(Sha256Of("unknown"))), queued, Clock::now() + kTimeout, nullptr)
                .status()
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(consensus::TaskId::FromHex("nope").status().code(), StatusCode::kInvalidArgument);

  // Shutdown ends every wait, whether it comes before or during the wait.
  std::thread stopper([&] { node.tasks->Shutdown(); });
  auto ended = node.tasks->WaitForChange(Id(id), *changed, Clock::now() + kTimeout, nullptr);
  stopper.join();
  EXPECT_EQ(ended.status().code(), StatusCode::kUnavailable);
}

// The thread-free wait RunTask uses: a listener is called once, at the next change, on the
// changing thread; a cancelled one never; shutdown calls the rest with stopping, and a listener
// registered after shutdown at once.
TEST_F(TaskManagerTest, ChangeListenersAreCalledOnceOnChangeOrShutdown) {
  Node& node = StartNode(Options(0));
  const std::string id = MustSubmit(*node.tasks, Request());
  std::atomic<int> changes{0}, stops{0}, cancelled_calls{0};
  auto count = [&](bool stopping) { (stopping ? stops : changes).fetch_add(1); };
  node.tasks->ListenForChange(Id(id), count);
  const uint64_t dropped = node.tasks->ListenForChange(Id(id), [&](bool) { cancelled_calls.fetch_add(1); });
  EXPECT_TRUE(node.tasks->CancelListen(Id(id), dropped));
  EXPECT_FALSE(node.tasks->CancelListen(Id(id), dropped));
  auto set_attempts = [&](uint32_t n) {
    ASSERT_TRUE(node.tasks
                    ->Mutate(Id(id),
                             [n](v1::Task* t) {
                               t->set_attempts(n);
                               return OkStatus();
                             })
                    .ok());
  };
  set_attempts(1);
  set_attempts(2);  // the listener was used up by the first change
  EXPECT_EQ(changes.load(), 1);
  EXPECT_EQ(cancelled_calls.load(), 0);

  node.tasks->ListenForChange(Id(id), count);
  node.tasks->ListenForChange(Id(ToHex(Sha256Of("another"))), count);
  node.tasks->Shutdown();
  EXPECT_EQ(stops.load(), 2);
  EXPECT_EQ(node.tasks->ListenForChange(Id(id), count), 0u);
  EXPECT_EQ(stops.load(), 3);
  EXPECT_EQ(changes.load(), 1);
}

TEST(TaskManagerChangedTest, ReportsWhatWatchTaskShows) {
  v1::Task before;
  before.set_state(v1::TASK_STATE_CERTIFYING);
  before.mutable_consensus()->mutable_certificate()->set_quorum(2);
  auto changed = [&](const std::function<void(v1::Task*)>& edit) {
    v1::Task after = before;
    edit(&after);
    return TaskManager::Changed(before, after);
  };
  EXPECT_FALSE(changed([](v1::Task*) {}));
  EXPECT_TRUE(changed([](v1::Task* t) { t->set_state(v1::TASK_STATE_SUCCEEDED); }));
  EXPECT_TRUE(changed([](v1::Task* t) { t->set_attempts(2); }));
  EXPECT_TRUE(changed([](v1::Task* t) { t->mutable_consensus()->add_attestations(); }));
  EXPECT_TRUE(changed([](v1::Task* t) { t->mutable_consensus()->clear_certificate(); }));
  EXPECT_TRUE(changed([](v1::Task* t) { t->mutable_consensus()->mutable_certificate()->set_dispute(true); }));
  EXPECT_TRUE(changed([](v1::Task* t) { t->mutable_consensus()->add_committee("0x01"); }));
  EXPECT_TRUE(changed([](v1::Task* t) { t->mutable_consensus()->set_disputed(true); }));
  EXPECT_TRUE(changed([](v1::Task* t) { t->mutable_consensus()->add_slashes(); }));
  // Bookkeeping that a watcher does not need to be woken for.
  EXPECT_FALSE(changed([](v1::Task* t) { t->set_started_unix_ms(123); }));
  EXPECT_FALSE(changed([](v1::Task* t) { t->set_error_message("detail"); }));
  EXPECT_FALSE(changed([](v1::Task* t) { t->mutable_consensus()->set_announced_unix_ms(5); }));
}

}  // namespace
}  // namespace consensor::node
