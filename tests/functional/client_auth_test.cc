// Client identities and per-client budgets against real consensord processes (docs/NODE.md,
// "Clients"): keys from `consensor client-key new`, UNAUTHENTICATED without a valid key, each
// budget refusing one client while another keeps submitting, the disk charges across a restart
// and after retention, and keys files that stop the node at startup.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <string>
#include <thread>

#include "common/npy.h"
#include "executor/graph.h"
#include "executor/program.h"
#include "executor/serialize.h"
#include "node/api/client.h"
#include "tests/functional/daemon_harness.h"

namespace consensor {
namespace {

namespace fs = std::filesystem;
using executor::Graph;
using executor::Value;
using node::NodeClient;
using testing_support::DaemonProcess;

Graph TinyModel() {
  Graph g;
  Value x = g.input("x", DType::kF32, {2, 4});
  g.output("y", tanh(matmul(x, g.constant(testing_support::RandomF32({4, 3}, 7)))));
  return g;
}

// Far more matmuls than its wall-time cap allows (set per task below): it runs, and a watch on it
// stays open, for the cap's length whatever the machine's speed, then fails. (At n = 256 a fast
// machine finishes it in under 2 s; n = 512 is 8 times the work.)
Graph SlowModel(int64_t n = 256) {
  Graph g;
  Value x = g.input("x", DType::kF32, {n, n});
  Value w = g.constant(testing_support::RandomF32({n, n}, 3));
  Value h = x;
  for (int i = 0; i < 3000; ++i) h = tanh(matmul(h, w));
  g.output("y", h);
  return g;
}

int64_t CountedFlops(const Graph& g) {
  auto program = executor::CompileGraph(g, nullptr, executor::Limits());
  if (!program.ok()) {
    ADD_FAILURE() << program.status().ToString();
    return 0;
  }
  return program->total_flops;
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

class ClientAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("consensor-clients-" + std::to_string(getpid()) + "-" +
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

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // `consensor client-key new --name NAME --out FILE`: returns the [[client]] entry it printed,
  // with `budgets` appended; the key stays in FILE.
  std::string NewClientKey(const std::string& name, const std::string& budgets = "") {
    auto r = testing_support::RunCommand(testing_support::CliBinary(),
                                         "client-key new --name " + name + " --out " + Path(name + ".key"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    const size_t entry = r.out.find("[[client]]");
    EXPECT_NE(entry, std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(Key(name)), std::string::npos) << "the key itself must not be printed with --out";
    struct stat st {};
    EXPECT_EQ(stat(Path(name + ".key").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    return r.out.substr(entry) + budgets;
  }
  std::string Key(const std::string& name) const {
    std::string k = testing_support::ReadWholeFile(Path(name + ".key"));
    while (!k.empty() && (k.back() == '\n' || k.back() == ' ')) k.pop_back();
    return k;
  }
  std::string WriteKeysFile(const std::string& text, mode_t mode = 0600) {
    const std::string path = Path("clients.toml");
    std::ofstream(path, std::ios::trunc) << text;
    chmod(path.c_str(), mode);
    return path;
  }
  DaemonProcess* StartDaemon(const std::string& name, std::vector<std::string> args) {
    daemons_.push_back(std::make_unique<DaemonProcess>(Path(name), std::move(args)));
    DaemonProcess* d = daemons_.back().get();
    EXPECT_TRUE(d->Start()) << d->Log();
    return d;
  }
  NodeClient ClientOf(DaemonProcess* d, const std::string& name) {
    NodeClient c(d->address());
    if (!name.empty()) c.SetApiKey(Key(name));
    return c;
  }
  static v1::SubmitTaskRequest Prepare(NodeClient& client, const Graph& g, Shape shape, uint64_t nonce) {
    v1::SubmitTaskRequest request;
    // A failed upload fails the test and leaves the field empty (never a read of a missing value).
    auto graph = client.PutBlob(executor::SerializeGraph(g));
    if (!graph.ok()) {
      ADD_FAILURE() << "graph upload: " << graph.status().ToString();
      return request;
    }
    request.set_graph_sha256(graph->sha256());
    auto x = client.PutBlob(EncodeNpy(testing_support::RandomF32(std::move(shape), 11)));
    if (!x.ok()) {
      ADD_FAILURE() << "input upload: " << x.status().ToString();
      return request;
    }
    (*request.mutable_inputs())["x"] = x->sha256();
    request.mutable_options()->set_nonce(nonce);
    return request;
  }
  static std::string Metrics(DaemonProcess* d) {
    const std::string addr = testing_support::ReadWholeFile(d->datadir() + "/metrics.addr");
    return testing_support::HttpGet(addr.substr(0, addr.size() - 1), "/metrics").second;
  }
  static bool Contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  }

  fs::path dir_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
};

// grpc.health.v1.Health/Check for the whole server, without generated stubs: the request is
// empty, and SERVING is the response bytes 08 01.
grpc::Status HealthCheck(const std::string& address, std::string* response_bytes) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice empty(std::string(""));
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(s); });
  grpc::Status status = done.get_future().get();
  std::vector<grpc::Slice> slices;
  if (status.ok() && response.Dump(&slices).ok()) {
    for (const auto& s : slices) response_bytes->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return status;
}

TEST_F(ClientAuthTest, KeysAreRequiredWhileHealthStaysOpen) {
  const std::string keys = WriteKeysFile(NewClientKey("alice"));
  DaemonProcess* d =
      StartDaemon("node", {"--client-auth", "keys", "--client-keys-file", keys, "--metrics", "127.0.0.1:0"});

  // No key, a wrong key, a malformed header: UNAUTHENTICATED on every call, with the reason.
  auto stub = v1::Client::NewStub(grpc::CreateChannel(d->address(), grpc::InsecureChannelCredentials()));
  for (const std::string& header : {std::string(), std::string("Bearer cnsr_wrong"), Key("alice")}) {
    grpc::ClientContext context;
    if (!header.empty()) context.AddMetadata("authorization", header);
    v1::NodeInfo info;
    grpc::Status s = stub->GetNodeInfo(&context, v1::GetNodeInfoRequest(), &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << header;
    EXPECT_FALSE(s.error_message().empty());
  }
  {
    grpc::ClientContext context;
    v1::PutBlobResponse response;
    auto writer = stub->PutBlob(&context, &response);
    v1::PutBlobRequest chunk;
    chunk.set_data("abc");
    writer->Write(chunk);
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_TRUE(Contains(s.error_message(), "requires an API key")) << s.error_message();
  }
  std::string health;
  ASSERT_TRUE(HealthCheck(d->address(), &health).ok());
  EXPECT_EQ(health, std::string("\x08\x01", 2));

  // With the key the node serves as before.
  NodeClient alice = ClientOf(d, "alice");
  auto submitted = alice.SubmitTask(Prepare(alice, TinyModel(), {2, 4}, 1));
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  auto done = alice.WatchTask(submitted->task_id(), std::chrono::seconds(60), [](const v1::Task&) {});
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->state(), v1::TASK_STATE_SUCCEEDED);

  // The CLI: refused without a key; the key from a file or from the environment.
  const std::string node = " --node " + d->address();
  auto refused = testing_support::RunCommand(testing_support::CliBinary(), "node info" + node);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(Contains(refused.out, "unauthenticated")) << refused.out;
  auto from_file =
      testing_support::RunCommand(testing_support::CliBinary(), "node info --api-key-file " + Path("alice.key") + node);
  EXPECT_EQ(from_file.exit_code, 0) << from_file.out;
  auto from_env = testing_support::RunCommand("CONSENSOR_API_KEY=" + Key("alice") + " " + testing_support::CliBinary(),
                                              "status " + submitted->task_id() + node);
  EXPECT_EQ(from_env.exit_code, 0) << from_env.out;

  const std::string metrics = Metrics(d);
  EXPECT_TRUE(Contains(metrics, "consensor_client_tasks_accepted_total{client=\"alice\"} 1")) << metrics;
  EXPECT_TRUE(Contains(metrics, "consensor_client_unauthenticated_total 5")) << metrics;
}

TEST_F(ClientAuthTest, ClientOverItsBudgetsIsRefusedWhileAnotherCompletes) {
  const int64_t tiny_flops = CountedFlops(TinyModel());
  const std::string keys =
      WriteKeysFile(NewClientKey("alice", "submissions_per_second = 0.01\nsubmission_burst = 2\nmax_watches = 1\n") +
                    NewClientKey("carol", "flops_per_minute = " + std::to_string(tiny_flops * 3 / 2) + "\n") +
                    NewClientKey("dave", "max_disk_bytes = 6000\n") + NewClientKey("bob"));
  DaemonProcess* d = StartDaemon(
      "node", {"--client-auth", "keys", "--client-keys-file", keys, "--metrics", "127.0.0.1:0", "--workers", "2"});
  NodeClient alice = ClientOf(d, "alice");
  NodeClient bob = ClientOf(d, "bob");
  NodeClient carol = ClientOf(d, "carol");
  NodeClient dave = ClientOf(d, "dave");

  // Submission rate: two in a burst, then refused, naming the budget.
  v1::SubmitTaskRequest slow = Prepare(alice, SlowModel(), {256, 256}, 1);
  slow.mutable_options()->set_max_wall_ms(6000);
  auto slow_task = alice.SubmitTask(slow);
  ASSERT_TRUE(slow_task.ok()) << slow_task.status().ToString();
  ASSERT_TRUE(alice.SubmitTask(Prepare(alice, TinyModel(), {2, 4}, 2)).ok());
  auto over_rate = alice.SubmitTask(Prepare(alice, TinyModel(), {2, 4}, 3));
  EXPECT_EQ(over_rate.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(over_rate.status().message(), "submissions_per_second")) << over_rate.status().ToString();

  // Watch streams: alice's one stream is open on the slow task, her second is refused.
  std::thread watcher(
      [&] { (void)alice.WatchTask(slow_task->task_id(), std::chrono::seconds(120), [](const v1::Task&) {}); });
  bool open = false;
  for (int i = 0; i < 200 && !open; ++i) {
    open = Contains(Metrics(d), "consensor_client_watches{client=\"alice\"} 1");
    if (!open) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(open);
  auto second_watch = alice.WatchTask(slow_task->task_id(), std::chrono::seconds(10), [](const v1::Task&) {});
  EXPECT_EQ(second_watch.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(second_watch.status().message(), "max_watches")) << second_watch.status().ToString();

  // FLOPs per minute: one tiny task fits carol's budget, a second within the minute does not.
  ASSERT_TRUE(carol.SubmitTask(Prepare(carol, TinyModel(), {2, 4}, 10)).ok());
  auto over_flops = carol.SubmitTask(Prepare(carol, TinyModel(), {2, 4}, 11));
  EXPECT_EQ(over_flops.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(over_flops.status().message(), "flops_per_minute")) << over_flops.status().ToString();

  // Disk: dave's 4000-byte blob fits his 6000 bytes, a second one does not; bob's does.
  ASSERT_TRUE(dave.PutBlob(Bytes(std::string(4000, 'd'))).ok());
  auto over_disk = dave.PutBlob(Bytes(std::string(4000, 'e')));
  EXPECT_EQ(over_disk.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(over_disk.status().message(), "client 'dave' is over its disk budget"))
      << over_disk.status().ToString();
  ASSERT_TRUE(bob.PutBlob(Bytes(std::string(4000, 'e'))).ok());

  // Bob, meanwhile, submits as often as he likes and his tasks complete.
  for (uint64_t nonce = 20; nonce < 24; ++nonce) {
    auto t = bob.SubmitTask(Prepare(bob, TinyModel(), {2, 4}, nonce));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    auto done = bob.WatchTask(t->task_id(), std::chrono::seconds(120), [](const v1::Task&) {});
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    EXPECT_EQ(done->state(), v1::TASK_STATE_SUCCEEDED);
  }
  watcher.join();

  const std::string metrics = Metrics(d);
  EXPECT_TRUE(
      Contains(metrics, "consensor_client_refusals_total{client=\"alice\",budget=\"submissions_per_second\"} 1"))
      << metrics;
  EXPECT_TRUE(Contains(metrics, "consensor_client_refusals_total{client=\"alice\",budget=\"max_watches\"} 1"));
  EXPECT_TRUE(Contains(metrics, "consensor_client_refusals_total{client=\"carol\",budget=\"flops_per_minute\"} 1"));
  EXPECT_TRUE(Contains(metrics, "consensor_client_refusals_total{client=\"dave\",budget=\"max_disk_bytes\"} 1"));
  EXPECT_TRUE(Contains(metrics, "consensor_client_disk_bytes{client=\"dave\"} 4000")) << metrics;
}

// RunTask submits and waits in one call (docs/NODE.md, "Submitting and waiting in one call"):
// a finished task comes back with its result, a failed one FAILED, a wait shorter than the task
// answers with the unfinished task, a cancelled call ends only the wait (its watch slot comes
// back, the task runs on), and a client at max_watches or over its FLOPs is refused before
// anything is stored.
TEST_F(ClientAuthTest, RunTaskSubmitsAndWaitsInOneCall) {
  const int64_t tiny_flops = CountedFlops(TinyModel());
  const std::string keys =
      WriteKeysFile(NewClientKey("erin", "max_watches = 1\n") +
                    NewClientKey("carol", "flops_per_minute = " + std::to_string(tiny_flops * 3 / 2) + "\n"));
  DaemonProcess* d = StartDaemon(
      "node", {"--client-auth", "keys", "--client-keys-file", keys, "--metrics", "127.0.0.1:0", "--workers", "2"});
  NodeClient erin = ClientOf(d, "erin");
  NodeClient carol = ClientOf(d, "carol");
  auto task_count = [&] {
    auto info = erin.GetNodeInfo();
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info->task_count() : 0;
  };
  auto watches_are = [&](int n) {
    const std::string want = "consensor_client_watches{client=\"erin\"} " + std::to_string(n);
    for (int i = 0; i < 200; ++i) {
      if (Contains(Metrics(d), want)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };

  // One call: the task, final, with the result GetTask reports; again: already known.
  const v1::SubmitTaskRequest tiny = Prepare(erin, TinyModel(), {2, 4}, 1);
  auto ran = erin.RunTask(tiny, std::chrono::seconds(60));
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  EXPECT_FALSE(ran->already_known());
  ASSERT_EQ(ran->task().state(), v1::TASK_STATE_SUCCEEDED) << ran->task().error_message();
  EXPECT_EQ(ran->task().result().result_root().size(), 64u);
  EXPECT_EQ(ran->task().result().outputs_size(), 1);
  auto stored = erin.GetTask(ran->task().task_id());
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->result().result_root(), ran->task().result().result_root());
  auto again = erin.RunTask(tiny, std::chrono::seconds(60));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->already_known());
  EXPECT_EQ(again->task().task_id(), ran->task().task_id());
  EXPECT_EQ(again->task().state(), v1::TASK_STATE_SUCCEEDED);

  // A task that fails (over its wall-time cap) comes back FAILED, with why.
  v1::SubmitTaskRequest failing = Prepare(erin, SlowModel(), {256, 256}, 2);
  failing.mutable_options()->set_max_wall_ms(200);
  auto failed = erin.RunTask(failing, std::chrono::seconds(60));
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_EQ(failed->task().state(), v1::TASK_STATE_FAILED);
  EXPECT_EQ(failed->task().error_code(), "DEADLINE_EXCEEDED") << failed->task().error_message();

  // A wait shorter than the task: the node answers with the task as it is, unfinished.
  v1::SubmitTaskRequest slow = Prepare(erin, SlowModel(512), {512, 512}, 3);
  slow.mutable_options()->set_max_wall_ms(5000);
  auto unfinished = erin.RunTask(slow, std::chrono::milliseconds(300));
  ASSERT_TRUE(unfinished.ok()) << unfinished.status().ToString();
  EXPECT_TRUE(unfinished->task().state() == v1::TASK_STATE_QUEUED ||
              unfinished->task().state() == v1::TASK_STATE_RUNNING)
      << v1::TaskState_Name(unfinished->task().state());
  const std::string slow_id = unfinished->task().task_id();

  // A call whose deadline passes ends; the node gives its watch slot back.
  auto cut = erin.RunTask(slow, std::chrono::seconds(60), std::chrono::milliseconds(300));
  EXPECT_EQ(cut.status().code(), StatusCode::kDeadlineExceeded) << cut.status().ToString();
  EXPECT_TRUE(watches_are(0));

  // Erin's one slot held by a RunTask on the slow task: a second RunTask is refused, naming the
  // budget, and stores nothing.
  std::future<StatusOr<v1::RunTaskResponse>> holder =
      std::async(std::launch::async, [&] { return erin.RunTask(slow, std::chrono::seconds(60)); });
  EXPECT_TRUE(watches_are(1));
  const uint64_t tasks_before = task_count();
  auto refused = erin.RunTask(Prepare(erin, TinyModel(), {2, 4}, 4), std::chrono::seconds(60));
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
  EXPECT_TRUE(Contains(refused.status().message(), "max_watches")) << refused.status().ToString();
  EXPECT_EQ(task_count(), tasks_before);
  // The slow task ran on through the cut call and ends at its wall-time cap.
  auto held = holder.get();
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(held->task().task_id(), slow_id);
  EXPECT_TRUE(held->already_known());
  EXPECT_EQ(held->task().state(), v1::TASK_STATE_FAILED);
  EXPECT_EQ(held->task().error_code(), "DEADLINE_EXCEEDED");

  // FLOPs per minute apply as to SubmitTask.
  auto first = carol.RunTask(Prepare(carol, TinyModel(), {2, 4}, 10), std::chrono::seconds(60));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->task().state(), v1::TASK_STATE_SUCCEEDED);
  auto over_flops = carol.RunTask(Prepare(carol, TinyModel(), {2, 4}, 11), std::chrono::seconds(60));
  EXPECT_EQ(over_flops.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(over_flops.status().message(), "flops_per_minute")) << over_flops.status().ToString();

  // Bad input: the same clear error as SubmitTask's.
  v1::SubmitTaskRequest bad = tiny;
  bad.set_graph_sha256("not-a-hash");
  auto bad_run = erin.RunTask(bad, std::chrono::seconds(60));
  EXPECT_EQ(bad_run.status().code(), StatusCode::kInvalidArgument) << bad_run.status().ToString();

  const std::string metrics = Metrics(d);
  EXPECT_TRUE(Contains(metrics, "consensor_client_refusals_total{client=\"erin\",budget=\"max_watches\"} 1"))
      << metrics;
  EXPECT_TRUE(Contains(metrics, "consensor_rpc_requests_total{method=\"RunTask\",code=\"OK\"} 6")) << metrics;
}

// RunTask waits hold no server thread (docs/NODE.md, "Submitting and waiting in one call"):
// with rpc.max_streams = 16 (18 server threads; 256 open callback calls), 200 calls wait on one
// task at once and every one is answered, while
// a synchronous call and the callback API's SubmitTask and GetTask are still served; a client that cancels its call
// ends only its own wait; and SIGTERM with calls waiting answers each UNAVAILABLE, the daemon exiting cleanly.
TEST_F(ClientAuthTest, RunTaskWaitsHoldNoServerThread) {
  const std::string keys = WriteKeysFile(NewClientKey("erin", "max_watches = 1000\n"));
  const std::string config = Path("node.toml");
  std::ofstream(config) << "[rpc]\nmax_streams = 16\n";
  DaemonProcess* d = StartDaemon("node", {"--config", config, "--client-auth", "keys", "--client-keys-file", keys,
                                          "--metrics", "127.0.0.1:0", "--workers", "1"});
  NodeClient erin = ClientOf(d, "erin");
  auto watches_are = [&](int n, int polls = 400) {  // 50 ms each
    const std::string want = "consensor_client_watches{client=\"erin\"} " + std::to_string(n);
    for (int i = 0; i < polls; ++i) {
      if (Contains(Metrics(d), want)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  // Runs until its wall-time cap, whatever the machine's speed, then fails.
  auto slow_task = [&](uint64_t nonce, int64_t wall_ms) {
    v1::SubmitTaskRequest slow = Prepare(erin, SlowModel(512), {512, 512}, nonce);
    slow.mutable_options()->set_max_wall_ms(wall_ms);
    return slow;
  };

  // 200 waits on one task, 11 times the server's threads.
  constexpr int kWaits = 200;
  const v1::SubmitTaskRequest slow = slow_task(1, 4000);
  std::vector<std::future<StatusOr<v1::RunTaskResponse>>> waits;
  for (int i = 0; i < kWaits; ++i) {
    waits.push_back(std::async(std::launch::async, [&] {
      NodeClient own = ClientOf(d, "erin");
      return own.RunTask(slow, std::chrono::seconds(120));
    }));
  }
  EXPECT_TRUE(watches_are(kWaits));
  auto info = erin.GetNodeInfo();  // a synchronous call meanwhile
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  // The callback API answers meanwhile too, on the flooded task itself (a SubmitTask that finds
  // it known and waits for its record's sync, the same record lock the flood's admissions take,
  // then its GetTask) and on a new task.
  auto known = erin.SubmitTask(slow);
  EXPECT_TRUE(known.ok()) << known.status().ToString();
  if (known.ok()) {
    EXPECT_TRUE(known->already_known());
    auto seen = erin.GetTask(known->task_id());
    EXPECT_TRUE(seen.ok()) << seen.status().ToString();
    if (seen.ok()) {
      EXPECT_TRUE(seen->state() == v1::TASK_STATE_QUEUED || seen->state() == v1::TASK_STATE_RUNNING)
          << v1::TaskState_Name(seen->state());
    }
  }
  auto fresh = erin.SubmitTask(Prepare(erin, TinyModel(), {2, 4}, 5));
  EXPECT_TRUE(fresh.ok()) << fresh.status().ToString();
  if (fresh.ok()) EXPECT_FALSE(fresh->already_known());
  int failed_at_cap = 0;
  for (auto& w : waits) {
    auto r = w.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (r->task().state() == v1::TASK_STATE_FAILED && r->task().error_code() == "DEADLINE_EXCEEDED") ++failed_at_cap;
  }
  EXPECT_EQ(failed_at_cap, kWaits);
  EXPECT_TRUE(watches_are(0));

  // A client cancels its waiting call: it gets CANCELLED, and at once (long before the task's
  // 10 s cap would end the wait) its watch slot comes back and the node counts it cancelled.
  {
    auto stub = v1::Client::NewStub(grpc::CreateChannel(d->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + Key("erin"));
    v1::RunTaskRequest request;
    *request.mutable_task() = slow_task(2, 10000);
    v1::RunTaskResponse response;
    std::future<grpc::Status> call =
        std::async(std::launch::async, [&] { return stub->RunTask(&context, request, &response); });
    EXPECT_TRUE(watches_are(1));
    context.TryCancel();
    EXPECT_EQ(call.get().error_code(), grpc::StatusCode::CANCELLED);
    EXPECT_TRUE(watches_are(0, 60));
    bool counted = false;
    for (int i = 0; i < 20 && !counted; ++i) {
      counted = Contains(Metrics(d), "consensor_rpc_requests_total{method=\"RunTask\",code=\"CANCELLED\"} 1");
      if (!counted) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(counted) << Metrics(d);
  }

  // SIGTERM with 20 calls waiting: each is answered UNAVAILABLE (no hang), the daemon exits 0.
  const v1::SubmitTaskRequest last = slow_task(3, 3000);
  std::vector<std::future<StatusOr<v1::RunTaskResponse>>> pending;
  for (int i = 0; i < 20; ++i) {
    pending.push_back(std::async(std::launch::async, [&] {
      NodeClient own = ClientOf(d, "erin");
      return own.RunTask(last, std::chrono::seconds(120));
    }));
  }
  EXPECT_TRUE(watches_are(20));
  EXPECT_EQ(d->Kill(SIGTERM), 0) << d->Log();
  for (auto& p : pending) {
    ASSERT_EQ(p.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    auto r = p.get();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
    EXPECT_TRUE(Contains(r.status().message(), "shutting down")) << r.status().ToString();
  }
}

TEST_F(ClientAuthTest, DiskChargesSurviveARestartAndRetentionReleasesThem) {
  const std::string keys = WriteKeysFile(NewClientKey("dave", "max_disk_bytes = 6000\n"));
  const std::vector<std::string> args = {"--client-auth", "keys",       "--client-keys-file", keys,
                                         "--metrics",     "127.0.0.1:0"};
  DaemonProcess* d = StartDaemon("node", args);
  {
    NodeClient dave = ClientOf(d, "dave");
    ASSERT_TRUE(dave.PutBlob(Bytes(std::string(4000, 'd'))).ok());
  }
  ASSERT_EQ(d->Kill(SIGKILL), 128 + SIGKILL);  // no clean shutdown: the charge must be on disk

  // Restarted: the 4000 bytes still count, so another 4000 are refused.
  DaemonProcess* again = StartDaemon("node", args);
  {
    NodeClient dave = ClientOf(again, "dave");
    auto refused = dave.PutBlob(Bytes(std::string(4000, 'e')));
    EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
    EXPECT_TRUE(Contains(Metrics(again), "consensor_client_disk_bytes{client=\"dave\"} 4000"));
  }
  ASSERT_EQ(again->Kill(SIGTERM), 0);

  // Retention deletes the unreferenced blob after a sweep of grace: dave's bytes come back.
  std::vector<std::string> sweeping = args;
  sweeping.insert(sweeping.end(), {"--sweep-interval-ms", "100"});
  DaemonProcess* swept = StartDaemon("node", sweeping);
  bool released = false;
  for (int i = 0; i < 200 && !released; ++i) {
    released = Contains(Metrics(swept), "consensor_client_disk_bytes{client=\"dave\"} 0");
    if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(released) << Metrics(swept);
  NodeClient dave = ClientOf(swept, "dave");
  auto stored = dave.PutBlob(Bytes(std::string(4000, 'e')));
  EXPECT_TRUE(stored.ok()) << stored.status().ToString();
}

TEST_F(ClientAuthTest, BadKeysFilesStopTheNodeWithAClearError) {
  struct Case {
    std::string text;
    mode_t mode;
    std::string expected;
  };
  const std::string good = "[[client]]\nname = \"alice\"\nkey_sha256 = \"" + std::string(64, 'a') + "\"\n";
  const std::vector<Case> cases = {
      {good, 0644, "must not be readable or writable by other users"},
      {"[[client]]\nname = \"alice\"\nkey_sha256 = \"xyz\"\n", 0600, "key_sha256 must be 64 hex digits"},
      {"[[client\n", 0600, "clients.toml:"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string keys = WriteKeysFile(cases[i].text, cases[i].mode);
    DaemonProcess d(Path("bad" + std::to_string(i)), {"--client-auth", "keys", "--client-keys-file", keys});
    d.Spawn();
    EXPECT_FALSE(d.WaitReady(std::chrono::seconds(30)));
    EXPECT_EQ(d.WaitExit(), 1) << d.Log();
    EXPECT_TRUE(Contains(d.Log(), cases[i].expected)) << d.Log();
  }
  // keys mode without a keys file is a config error.
  DaemonProcess no_file(Path("nofile"), {"--client-auth", "keys"});
  no_file.Spawn();
  EXPECT_NE(no_file.WaitExit(), 0);
  EXPECT_TRUE(Contains(no_file.Log(), "needs clients.keys_file")) << no_file.Log();
}

}  // namespace
}  // namespace consensor
