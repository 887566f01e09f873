// Node benchmark (not a test): starts a real consensord with its own datadir on a loopback
// port, then
//  1. load: C client threads submit tiny tasks and wait for each result (submit -> result);
//     reports throughput and p50/p99 latency;
//  2. large matmul: end-to-end client time (upload, submit, execute, fetch the output) against
//     `consensor run` of the same graph and input in the same run; reports the ratio.
//
//   build/bench/node_bench [--tasks N] [--clients C] [--n SIZE] [--threads T] [--repeats R]
//                          [--workers W (default 2)] [--run-task 1 [--async 1]]
//                          [--network ADDR,ADDR,... --replicas K --quorum Q [--final 1]]
//
// With --network the benchmark uses running network nodes (scripts/devnet.sh up) instead of
// starting one: tasks go round-robin to the listed nodes with K replicas, and latency is time to
// the certificate (SubmitTask -> certified result). With --final 1 each client also waits until
// the task is final (its challenge window passed, consensus/finality.h) and both latencies are
// reported.
//
// With --run-task 1 each client submits and waits in one call (RunTask) instead of SubmitTask
// followed by a WatchTask stream; latency is then the call's (the submit part is not separate).
// With --async 1 as well, one client thread keeps C RunTask calls in flight on one completion
// queue instead of C threads each making one call at a time (the client's threads then take
// less of the CPU the node shares with them).
#include <grpcpp/grpcpp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/npy.h"
#include "executor/graph.h"
#include "executor/serialize.h"
#include "node/api/client.h"
#include "tests/functional/daemon_harness.h"

namespace consensor {
namespace {

using Clock = std::chrono::steady_clock;
using executor::Graph;
using executor::Value;

Tensor RandomTensor(Shape shape, uint32_t seed) { return testing_support::RandomF32(std::move(shape), seed); }

Graph TinyGraph() {
  Graph g;
  Value x = g.input("x", DType::kF32, {4, 8});
  g.output("y", softmax(tanh(matmul(x, g.constant(RandomTensor({8, 8}, 1))) + g.constant(RandomTensor({8}, 2))), -1));
  return g;
}

Graph MatmulGraph(int64_t n) {
  Graph g;
  Value a = g.input("a", DType::kF32, {n, n});
  Value b = g.input("b", DType::kF32, {n, n});
  g.output("c", matmul(a, b));
  return g;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int RunProcess(const std::vector<std::string>& args) {
  std::fflush(stdout);  // or the child's freopen would flush our buffer a second time
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int Main(int argc, char** argv) {
  int tasks = 2000, clients = 8, n = 2048, threads = 1, repeats = 3, replicas = 0, quorum = 0, wait_final = 0,
      node_workers = 2, run_task = 0, async_client = 0;
  std::vector<std::string> network;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (k == "--network") {
      std::string list = argv[i + 1];
      for (size_t start = 0; start < list.size();) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        network.push_back(list.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (k == "--replicas") replicas = v;
    else if (k == "--quorum") quorum = v;
    else if (k == "--final") wait_final = v;
    else if (k == "--tasks") tasks = v;
    else if (k == "--clients") clients = v;
    else if (k == "--n") n = v;
    else if (k == "--threads") threads = v;
    else if (k == "--workers") node_workers = v;
    else if (k == "--repeats") repeats = v;
    else if (k == "--run-task") run_task = v;
    else if (k == "--async") async_client = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("consensor-node-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  testing_support::DaemonProcess daemon((dir / "datadir").string(),
                                        {"--workers", std::to_string(node_workers), "--queue", "100000", "--threads",
                                         std::to_string(threads), "--log-level", "warn"});
  if (async_client && !run_task) {
    std::fprintf(stderr, "--async needs --run-task 1\n");
    return 2;
  }
  if (network.empty()) {
    if (!daemon.Start()) {
      std::fprintf(stderr, "consensord did not start:\n%s\n", daemon.Log().c_str());
      return 1;
    }
    network.push_back(daemon.address());
    std::printf("consensord at %s, datadir %s (sync writes on)\n", daemon.address().c_str(), daemon.datadir().c_str());
  } else {
    std::printf("network of %zu nodes, %d replicas, quorum %d (0: node default)\n", network.size(), replicas, quorum);
  }
  auto set_consensus = [&](v1::SubmitTaskRequest* r) {
    if (replicas) r->mutable_options()->set_replicas(static_cast<uint32_t>(replicas));
    if (quorum) r->mutable_options()->set_quorum(static_cast<uint32_t>(quorum));
  };
  const std::string entry = network[0];

  // ---- 1. load of tiny tasks
  {
    Graph g = TinyGraph();
    StatusOr<v1::PutBlobResponse> graph_blob = Unavailable("not uploaded"), x_blob = Unavailable("not uploaded");
    for (const std::string& address : network) {  // every entry node needs the task's blobs
      node::NodeClient client(address);
      graph_blob = client.PutBlob(executor::SerializeGraph(g));
      x_blob = client.PutBlob(EncodeNpy(RandomTensor({4, 8}, 3)));
      if (!graph_blob.ok() || !x_blob.ok()) {
        std::fprintf(stderr, "upload failed\n");
        return 1;
      }
    }
    // Fresh task ids on every run against a long-lived network.
    const uint64_t salt = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) << 20;
    std::vector<double> latencies, submit_latencies, final_latencies;
    std::mutex mu;
    std::atomic<int> next{0}, failures{0};
    std::string first_failure;  // guarded by mu: why the first failed task failed
    auto note_failure = [&](const std::string& why) {
      failures++;
      std::lock_guard<std::mutex> lock(mu);
      if (first_failure.empty()) first_failure = why;
    };
    auto make_request = [&](int i) {
      v1::SubmitTaskRequest r;
      r.set_graph_sha256(graph_blob->sha256());
      (*r.mutable_inputs())["x"] = x_blob->sha256();
      r.mutable_options()->set_nonce(static_cast<uint64_t>(i) + 1000000 + salt);
      set_consensus(&r);
      return r;
    };
    auto start = Clock::now();
    std::vector<std::thread> workers;
    if (async_client) {
      // One thread, one completion queue per entry node's channel, `clients` calls in flight.
      struct Call {
        grpc::ClientContext context;
        v1::RunTaskRequest request;
        v1::RunTaskResponse response;
        grpc::Status status;
        std::unique_ptr<grpc::ClientAsyncResponseReader<v1::RunTaskResponse>> reader;
        Clock::time_point t0;
      };
      std::vector<std::unique_ptr<v1::Client::Stub>> stubs;
      for (const std::string& address : network) {
        stubs.push_back(v1::Client::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())));
      }
      grpc::CompletionQueue cq;
      int launched = 0, in_flight = 0;
      auto launch = [&] {
        auto call = std::make_unique<Call>();
        call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
        *call->request.mutable_task() = make_request(launched);
        call->request.set_max_wait_ms(600000);
        call->t0 = Clock::now();
        call->reader =
            stubs[static_cast<size_t>(launched) % stubs.size()]->AsyncRunTask(&call->context, call->request, &cq);
        Call* raw = call.release();
        raw->reader->Finish(&raw->response, &raw->status, raw);
        ++launched;
        ++in_flight;
      };
      while (launched < tasks && in_flight < clients) launch();
      void* tag = nullptr;
      bool ok = false;
      while (in_flight > 0 && cq.Next(&tag, &ok)) {
        std::unique_ptr<Call> call(static_cast<Call*>(tag));
        --in_flight;
        if (!call->status.ok()) {
          note_failure("RunTask: " + call->status.error_message());
        } else if (call->response.task().state() != v1::TASK_STATE_SUCCEEDED) {
          note_failure("task ended " + v1::TaskState_Name(call->response.task().state()) + " " +
                       call->response.task().error_message());
        } else {
          latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - call->t0).count());
        }
        if (launched < tasks) launch();
      }
      cq.Shutdown();
      while (cq.Next(&tag, &ok)) {
      }
    }
    for (int c = 0; c < clients && !async_client; ++c) {
      workers.emplace_back([&, c] {
        node::NodeClient own(network[static_cast<size_t>(c) % network.size()]);
        while (true) {
          int i = next.fetch_add(1);
          if (i >= tasks) return;
          v1::SubmitTaskRequest r = make_request(i);
          auto t0 = Clock::now();
          if (run_task) {
            auto ran = own.RunTask(r, std::chrono::seconds(600));
            if (!ran.ok() || ran->task().state() != v1::TASK_STATE_SUCCEEDED) {
              note_failure(!ran.ok() ? "RunTask: " + ran.status().ToString()
                                     : "task ended " + v1::TaskState_Name(ran->task().state()) + " " +
                                           ran->task().error_message());
              continue;
            }
            const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
            std::lock_guard<std::mutex> lock(mu);
            latencies.push_back(ms);
            continue;
          }
          auto s = own.SubmitTask(r);
          const double submit_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          if (!s.ok()) {
            note_failure("SubmitTask: " + s.status().ToString());
            continue;
          }
          // The certificate arrives first (SUCCEEDED); finality only after the window.
          std::optional<Clock::time_point> certified_at;
          auto on_update = [&](const v1::Task& t) {
            if (!certified_at && t.state() == v1::TASK_STATE_SUCCEEDED) certified_at = Clock::now();
          };
          auto until = [&](const v1::Task& t) {
            return t.state() == v1::TASK_STATE_FAILED ||
                   (t.state() == v1::TASK_STATE_SUCCEEDED && (!wait_final || t.consensus().final()));
          };
          auto done = own.WatchTask(s->task_id(), std::chrono::seconds(600), on_update, until);
          const auto end = Clock::now();
          if (!done.ok() || done->state() != v1::TASK_STATE_SUCCEEDED || (wait_final && !done->consensus().final())) {
            note_failure(!done.ok() ? "WatchTask: " + done.status().ToString()
                                    : "task ended " + v1::TaskState_Name(done->state()) + " " + done->error_message());
            continue;
          }
          const double ms = std::chrono::duration<double, std::milli>(certified_at.value_or(end) - t0).count();
          std::lock_guard<std::mutex> lock(mu);
          latencies.push_back(ms);
          submit_latencies.push_back(submit_ms);
          if (wait_final) final_latencies.push_back(std::chrono::duration<double, std::milli>(end - t0).count());
        }
      });
    }
    for (auto& w : workers) w.join();
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("\nload: %d tiny tasks (matmul 4x8x8, add, tanh, softmax), %d clients, %d workers, %s\n", tasks,
                clients, node_workers,
                async_client ? "RunTask from one async client thread (clients = calls in flight)"
                : run_task   ? "RunTask (one call per task), a thread per client"
                             : "SubmitTask + WatchTask, a thread per client");
    std::printf("  completed %zu, failed %d, %.2f s\n", latencies.size(), failures.load(), seconds);
    if (!first_failure.empty()) std::printf("  first failure: %s\n", first_failure.c_str());
    if (!latencies.empty()) {
      std::printf("  throughput %.1f tasks/s\n", latencies.size() / seconds);
      std::printf("  submit->result latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", Percentile(latencies, 0.5),
                  Percentile(latencies, 0.99), Percentile(latencies, 1.0));
      if (!submit_latencies.empty()) {
        std::printf("    of which SubmitTask (acknowledged: the task is stored) p50 %.2f ms, p99 %.2f ms\n",
                    Percentile(submit_latencies, 0.5), Percentile(submit_latencies, 0.99));
      }
    }
    if (!final_latencies.empty()) {
      std::printf("  submit->final latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", Percentile(final_latencies, 0.5),
                  Percentile(final_latencies, 0.99), Percentile(final_latencies, 1.0));
    }
  }

  // ---- 2. large matmul, node end to end vs consensor run
  {
    Graph g = MatmulGraph(n);
    const std::string graph_path = (dir / "matmul.cgraph").string();
    const std::string a_path = (dir / "a.npy").string(), b_path = (dir / "b.npy").string();
    if (!executor::SaveGraphFile(graph_path, g).ok() || !WriteNpyFile(a_path, RandomTensor({n, n}, 4)).ok() ||
        !WriteNpyFile(b_path, RandomTensor({n, n}, 5)).ok()) {
      std::fprintf(stderr, "cannot write inputs\n");
      return 1;
    }
    // The task's blobs go up once; "task" times SubmitTask -> final WatchTask update.
    node::NodeClient client(entry);
    v1::SubmitTaskRequest request;
    set_consensus(&request);
    auto graph_blob = client.PutBlobFile(graph_path, int64_t{1} << 30);
    auto a_blob = client.PutBlobFile(a_path, int64_t{1} << 30);
    auto b_blob = client.PutBlobFile(b_path, int64_t{1} << 30);
    if (!graph_blob.ok() || !a_blob.ok() || !b_blob.ok()) {
      std::fprintf(stderr, "upload failed\n");
      return 1;
    }
    request.set_graph_sha256(graph_blob->sha256());
    (*request.mutable_inputs())["a"] = a_blob->sha256();
    (*request.mutable_inputs())["b"] = b_blob->sha256();

    std::vector<double> run_s, task_s, exec_s, client_s;
    for (int r = 0; r < repeats; ++r) {
      auto t0 = Clock::now();
      int rc = RunProcess({testing_support::CliBinary(), "run", graph_path, "--input", "a=" + a_path, "--input",
                           "b=" + b_path, "--threads", std::to_string(threads), "--out", (dir / "run_out").string()});
      run_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      if (rc != 0) {
        std::fprintf(stderr, "consensor run failed (%d)\n", rc);
        return 1;
      }
      const uint64_t salt = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
      request.mutable_options()->set_nonce(salt + static_cast<uint64_t>(r));
      t0 = Clock::now();
      auto submitted = client.SubmitTask(request);
      auto done = submitted.ok() ? client.WatchTask(submitted->task_id(), std::chrono::seconds(600), nullptr)
                                 : StatusOr<v1::Task>(submitted.status());
      task_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      if (!done.ok() || done->state() != v1::TASK_STATE_SUCCEEDED) {
        std::fprintf(stderr, "node task failed\n");
        return 1;
      }
      exec_s.push_back(done->result().execution_seconds());
      // The whole client flow: upload (already present, still hashed and sent), submit, wait,
      // download and write the output.
      t0 = Clock::now();
      rc = RunProcess({testing_support::CliBinary(), "submit", graph_path, "--input", "a=" + a_path, "--input",
                       "b=" + b_path, "--node", entry, "--nonce", std::to_string(salt + 1000 + r), "--wait", "--out",
                       (dir / "node_out").string()});
      client_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      if (rc != 0) {
        std::fprintf(stderr, "consensor submit failed (%d)\n", rc);
        return 1;
      }
    }
    auto best = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    std::printf("\nlarge matmul %dx%dx%d f32, %d thread(s), best of %d\n", n, n, n, threads, repeats);
    std::printf("  consensor run (process: read .npy, compile, run, write output)   %.3f s\n", best(run_s));
    std::printf("  node task: SubmitTask -> result (blobs on the node)              %.3f s   ratio %.3f\n",
                best(task_s), best(task_s) / best(run_s));
    std::printf("    of which execution on the node (load, run, store)              %.3f s\n", best(exec_s));
    std::printf("  consensor submit --wait --out (process: upload, wait, download)  %.3f s   ratio %.3f\n",
                best(client_s), best(client_s) / best(run_s));
  }
  if (daemon.pid() > 0) daemon.Kill(SIGTERM);
  if (!std::getenv("CNSR_BENCH_KEEP")) fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace consensor

int main(int argc, char** argv) { return consensor::Main(argc, argv); }
