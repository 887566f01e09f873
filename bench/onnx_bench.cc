// Real-model benchmark (not a test): one published ONNX model, the same input, in one run:
//   1. ONNX Runtime's steady-state CPU inference (bench/models/ort_bench.js over onnxruntime-node);
//   2. Consensor's kernels alone: the imported graph compiled once and run by the executor,
//      without and with the trace (a node task runs without it; `consensor trace` with it);
//   3. a Consensor node task: a real consensord on a loopback port, the model's blobs uploaded
//      once, then tasks with fresh nonces; the first task is cold, the rest warm. Then as many
//      tasks again, submitted together: "node busy" is their execution time when the worker
//      runs them back to back, the way ONNX Runtime's timed loop runs.
// each at every thread count, with the ratios to ONNX Runtime at the same thread count.
//
//   build/bench/onnx_bench --model FILE.onnx --shape x=1,3,48,320 [--threads 1,2] [--reps 20]
//                          [--tasks 8] [--ort-script bench/models/ort_bench.js] [--perf DIR]
//                          [--op-times TOP] [--idle-ms N]
//
// With --op-times, only the TOP slowest instructions of the fused list are printed (median time
// of each over --reps runs, at each thread count); nothing else is timed.
//
// With --idle-ms N, ONNX Runtime and the kernels sleep N ms before each timed run, as a node's
// worker idles between tasks: a run after an idle gap finds its weights and code evicted from
// the caches by whatever ran meanwhile, which back-to-back runs never see (docs/PERFORMANCE.md,
// "Where a warm node task's time goes").
//
// With --perf, each node's warm tasks run under `perf record -g`, into
// DIR/datadir-t<threads>-c<cache bytes>.data.
//
// With --pairs N, a paired measurement at the first thread count instead of the table: one ONNX
// Runtime session (ort_bench.js --serve) and one node stay up, and N rounds each time --reps ORT
// runs, --reps kernel runs and --tasks warm node tasks back to back, in an order that rotates
// from round to round. A ratio is taken within each round, so a noisy neighbour that slows the
// whole machine for a minute moves both sides of it; the summary gives the median ratio and how
// many rounds were at or below 1.0.
//
// Environment: CNSR_BENCH_KEEP=1 keeps the temporary directory (the nodes' datadirs and logs);
// CNSR_BENCH_NODE_LOG=debug runs the nodes at that log level, so each task's phases (load, run,
// store; CPU time, faults) are in its consensord.log as "task phases".
//
// The models and onnxruntime-node come from bench/models/package.json (scripts/setup.sh).
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/file_io.h"
#include "common/npy.h"
#include "executor/onnx/import.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "kernels/backend_factory.h"
#include "node/api/client.h"
#include "tests/functional/daemon_harness.h"
#include "tests/test_paths.h"

namespace consensor {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[(v.size() - 1) / 2];
}

double MillisSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  for (size_t start = 0; start <= s.size();) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    parts.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// The value of `"key": NUMBER` after `anchor` in a one-line JSON report; -1 when absent.
double JsonNumberAfter(const std::string& json, const std::string& anchor, const std::string& key) {
  size_t at = json.find(anchor);
  if (at == std::string::npos) return -1;
  at = json.find("\"" + key + "\":", at);
  if (at == std::string::npos) return -1;
  return std::atof(json.c_str() + at + key.size() + 3);
}

struct KernelTimes {
  double plain_ms = 0;     // median Run without the trace (the fused instructions)
  double unfused_ms = 0;   // the same with the canonical instructions (RunOptions::fuse = false)
  double unpacked_ms = 0;  // the fused instructions without prepared constants (weights packed per call)
  double trace_ms = 0;     // median Run with the trace (what `consensor trace` recomputes)
  Hash256 result_root{};
};

// A backend that prepares no constant: the kernels pack their weights on every call, as before
// Backend::PrepareConstant. Everything else goes to the wrapped backend.
class NoPreparedConstants final : public kernels::Backend {
 public:
  explicit NoPreparedConstants(kernels::Backend* inner) : inner_(inner) {}
  std::string name() const override { return inner_->name(); }
  bool Supports(const kernels::KernelCall& call) const override { return inner_->Supports(call); }
  bool SupportsEpilogue(const kernels::KernelCall& call) const override { return inner_->SupportsEpilogue(call); }
  StatusOr<std::unique_ptr<kernels::Arena>> AllocateArena(int64_t bytes) override {
    return inner_->AllocateArena(bytes);
  }
  Status Run(const kernels::KernelCall& call) override { return inner_->Run(call); }
  Status Synchronize() override { return inner_->Synchronize(); }

 private:
  kernels::Backend* inner_;
};

void IdleBeforeRun(int idle_ms) {
  if (idle_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
}

StatusOr<KernelTimes> TimeKernels(const executor::Program& program, const std::map<std::string, Tensor>& inputs,
                                  int threads, int reps, int idle_ms) {
  kernels::BackendOptions options;
  options.threads = threads;
  ASSIGN_OR_RETURN(auto backend, kernels::CreateBackend(options));
  ASSIGN_OR_RETURN(auto loaded, executor::LoadedProgram::Load(program, backend.get()));
  NoPreparedConstants unprepared_backend(backend.get());
  ASSIGN_OR_RETURN(auto unpacked, executor::LoadedProgram::Load(program, &unprepared_backend));
  KernelTimes times;
  // Fused, unfused and unpacked runs alternate, so that all see the same machine load.
  executor::RunOptions fused, unfused;
  unfused.fuse = false;
  ASSIGN_OR_RETURN(executor::RunResult warmup, loaded->Run(inputs, fused));
  times.result_root = warmup.result_root;
  ASSIGN_OR_RETURN(executor::RunResult warmup_unfused, loaded->Run(inputs, unfused));
  if (warmup_unfused.result_root != times.result_root) return Internal("fused and unfused result roots differ");
  ASSIGN_OR_RETURN(executor::RunResult warmup_unpacked, unpacked->Run(inputs, fused));
  if (warmup_unpacked.result_root != times.result_root) return Internal("packed and unpacked result roots differ");
  std::vector<double> fused_ms, unfused_ms, unpacked_ms;
  for (int i = 0; i < reps; ++i) {
    for (int variant = 0; variant < 3; ++variant) {
      IdleBeforeRun(idle_ms);
      auto t0 = Clock::now();
      ASSIGN_OR_RETURN(executor::RunResult r,
                       (variant == 2 ? unpacked : loaded)->Run(inputs, variant == 1 ? unfused : fused));
      (variant == 0 ? fused_ms : variant == 1 ? unfused_ms : unpacked_ms).push_back(MillisSince(t0));
      if (r.result_root != times.result_root) return Internal("result root changed between runs");
    }
  }
  times.plain_ms = Median(fused_ms);
  times.unfused_ms = Median(unfused_ms);
  times.unpacked_ms = Median(unpacked_ms);
  std::printf("threads %d: constants prepared once: %.1f KiB (LoadedProgram::prepared_bytes)\n", threads,
              static_cast<double>(loaded->prepared_bytes()) / 1024.0);
  executor::RunOptions traced;
  traced.trace = true;
  ASSIGN_OR_RETURN(executor::RunResult warmup_traced, loaded->Run(inputs, traced));
  if (warmup_traced.result_root != times.result_root) return Internal("traced and fused result roots differ");
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    IdleBeforeRun(idle_ms);
    auto t0 = Clock::now();
    ASSIGN_OR_RETURN(executor::RunResult r, loaded->Run(inputs, traced));
    ms.push_back(MillisSince(t0));
    if (r.result_root != times.result_root) return Internal("result root changed between runs");
  }
  times.trace_ms = Median(ms);
  return times;
}

double ThreadCpuMillis() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// --op-times: the median time of each instruction of the fused list at one thread count, printed
// slowest first. Timestamps come from RunOptions::check_continue, which runs before every
// instruction; the last instruction's time includes reading and hashing the outputs.
Status PrintOpTimes(const executor::Program& program, const std::map<std::string, Tensor>& inputs, int threads,
                    int reps, int top) {
  kernels::BackendOptions options;
  options.threads = threads;
  ASSIGN_OR_RETURN(auto backend, kernels::CreateBackend(options));
  ASSIGN_OR_RETURN(auto loaded, executor::LoadedProgram::Load(program, backend.get()));
  const auto& list = program.fused_instructions.empty() ? program.instructions : program.fused_instructions;
  std::vector<std::vector<double>> times(list.size());
  size_t next = 0;
  Clock::time_point last;
  executor::RunOptions run;
  run.check_continue = [&]() {
    const auto now = Clock::now();
    if (next > 0) times[next - 1].push_back(std::chrono::duration<double, std::milli>(now - last).count());
    ++next;
    last = now;
    return OkStatus();
  };
  std::vector<double> whole, cpu;
  for (int i = 0; i <= reps; ++i) {
    next = 0;
    const double c0 = ThreadCpuMillis();
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(loaded->Run(inputs, run).status());
    whole.push_back(MillisSince(t0));
    cpu.push_back(ThreadCpuMillis() - c0);
    times[next - 1].push_back(MillisSince(last));
    if (i == 0) {
      for (auto& t : times) t.clear();  // the first run warms the caches
    }
  }
  std::vector<std::pair<double, size_t>> order;
  double total = 0, total_mean = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    order.emplace_back(Median(times[i]), i);
    total += order.back().first;
    for (double t : times[i]) total_mean += t / times[i].size();
  }
  if (std::getenv("CNSR_OP_MEAN")) {
    for (auto& [t, i] : order) {
      t = 0;
      for (double x : times[i]) t += x / times[i].size();
    }
  }
  std::sort(order.rbegin(), order.rend());
  std::printf(
      "\nper instruction, %d thread(s), median of %d runs, sum %.3f ms (of means %.3f ms); whole run: median %.3f ms, min %.3f "
      "ms, calling thread's CPU time median %.3f ms\n",
      threads, reps, total, total_mean, Median(whole), *std::min_element(whole.begin(), whole.end()), Median(cpu));
  for (int r = 0; r < top && r < static_cast<int>(order.size()); ++r) {
    const executor::Instruction& ins = list[order[r].second];
    std::string in_shapes;
    for (const Shape& s : ins.input_view_shapes) in_shapes += ShapeToString(s);
    std::printf("  %3zu %8.4f ms %5.1f%%  %-12s +%zu epilogue  %s -> %s  %.2f MFLOP\n", order[r].second, order[r].first,
                100 * order[r].first / total, ins.op_name.c_str(), ins.epilogue.size(), in_shapes.c_str(),
                ShapeToString(ins.output_view_shape).c_str(), ins.flops / 1e6);
  }
  return OkStatus();
}

// `perf record -g` on a running process until Stop: a profile of the node's warm tasks alone.
class PerfRecording {
 public:
  PerfRecording(pid_t target, const std::string& output) {
    std::fflush(stdout);
    pid_ = fork();
    if (pid_ == 0) {
      if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
      const std::string target_pid = std::to_string(target);
      execlp("perf", "perf", "record", "-g", "-F", "999", "-o", output.c_str(), "-p", target_pid.c_str(),
             static_cast<char*>(nullptr));
      _exit(127);
    }
    // perf needs a moment to attach; what it misses is the start of the first warm task.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ~PerfRecording() {
    if (pid_ <= 0) return;
    kill(pid_, SIGINT);
    int status = 0;
    waitpid(pid_, &status, 0);
  }

 private:
  pid_t pid_ = -1;
};

struct NodeTimes {
  double cold_exec_ms = 0;  // execution_seconds of the first task on a fresh node
  double warm_exec_ms = 0;  // median execution_seconds of the following tasks
  double warm_task_ms = 0;  // median SubmitTask -> final WatchTask update, as a client sees it
  double busy_exec_ms = 0;  // median execution_seconds of tasks submitted together, run back to back
  std::string result_root;
};

// The model's blobs uploaded to `client`'s node, and a request for a task over them.
StatusOr<v1::SubmitTaskRequest> UploadModel(node::NodeClient& client, const fs::path& graph_path,
                                            const fs::path& weights_path, const fs::path& input_path,
                                            const std::string& input_name) {
  v1::SubmitTaskRequest request;
  ASSIGN_OR_RETURN(auto graph_blob, client.PutBlobFile(graph_path.string(), int64_t{1} << 30));
  if (!weights_path.empty()) RETURN_IF_ERROR(client.PutBlobFile(weights_path.string(), int64_t{1} << 30).status());
  ASSIGN_OR_RETURN(auto input_blob, client.PutBlobFile(input_path.string(), int64_t{1} << 30));
  request.set_graph_sha256(graph_blob.sha256());
  (*request.mutable_inputs())[input_name] = input_blob.sha256();
  return request;
}

std::vector<std::string> NodeArgs(int threads, int64_t program_cache_bytes) {
  return {"--workers", "1", "--threads", std::to_string(threads), "--log-level",
          // CNSR_BENCH_NODE_LOG=debug logs each task's phases ("task phases") in the node's log
          // (kept with CNSR_BENCH_KEEP=1).
          std::getenv("CNSR_BENCH_NODE_LOG") != nullptr ? std::getenv("CNSR_BENCH_NODE_LOG") : "warn",
          "--program-cache-bytes", std::to_string(program_cache_bytes)};
}

StatusOr<NodeTimes> TimeNodeTasks(const fs::path& dir, int threads, int tasks, const fs::path& graph_path,
                                  const fs::path& weights_path, const fs::path& input_path,
                                  const std::string& input_name, int64_t program_cache_bytes,
                                  const std::string& perf_dir) {
  const std::string name = "datadir-t" + std::to_string(threads) + "-c" + std::to_string(program_cache_bytes);
  testing_support::DaemonProcess daemon((dir / name).string(), NodeArgs(threads, program_cache_bytes));
  if (!daemon.Start()) return Unavailable("consensord did not start:\n" + daemon.Log());
  node::NodeClient client(daemon.address());
  ASSIGN_OR_RETURN(v1::SubmitTaskRequest request,
                   UploadModel(client, graph_path, weights_path, input_path, input_name));
  NodeTimes times;
  // Waits for a task, which must succeed with the first task's result root (the first sets it).
  auto wait_succeeded = [&](const std::string& task_id, bool first) -> StatusOr<v1::TaskResult> {
    ASSIGN_OR_RETURN(v1::Task done, client.WatchTask(task_id, std::chrono::seconds(600), nullptr));
    if (done.state() != v1::TASK_STATE_SUCCEEDED) {
      return Internal("node task failed: " + done.error_code() + " " + done.error_message());
    }
    if (first) times.result_root = done.result().result_root();
    if (done.result().result_root() != times.result_root) return Internal("node result root changed between tasks");
    return done.result();
  };
  std::vector<double> warm_exec, warm_task;
  std::unique_ptr<PerfRecording> perf;
  for (int i = 0; i < tasks; ++i) {
    if (i == 1 && !perf_dir.empty())
      perf = std::make_unique<PerfRecording>(daemon.pid(), perf_dir + "/" + name + ".data");
    request.mutable_options()->set_nonce(static_cast<uint64_t>(i) + 1);
    auto t0 = Clock::now();
    ASSIGN_OR_RETURN(auto submitted, client.SubmitTask(request));
    ASSIGN_OR_RETURN(v1::TaskResult done, wait_succeeded(submitted.task_id(), i == 0));
    const double task_ms = MillisSince(t0);
    const double exec_ms = done.execution_seconds() * 1000;
    if (i == 0) {
      times.cold_exec_ms = exec_ms;
    } else {
      warm_exec.push_back(exec_ms);
      warm_task.push_back(task_ms);
    }
  }
  perf.reset();
  times.warm_exec_ms = Median(warm_exec);
  times.warm_task_ms = Median(warm_task);
  // A busy node: every task is queued before the worker finishes the one before, so the worker
  // runs them back to back as ONNX Runtime's timed loop does, with no idle gap between them
  // (the first of each batch of 16 starts after an idle gap and is left out).
  // Batches of 16 stay well inside the node's queue capacity (64).
  std::vector<double> busy_exec;
  for (int first = 0; first < tasks; first += 16) {
    std::vector<std::string> queued;
    for (int i = first; i < std::min(tasks, first + 16); ++i) {
      request.mutable_options()->set_nonce(static_cast<uint64_t>(tasks + i) + 1);
      ASSIGN_OR_RETURN(auto submitted, client.SubmitTask(request));
      queued.push_back(submitted.task_id());
    }
    for (size_t i = 0; i < queued.size(); ++i) {
      ASSIGN_OR_RETURN(v1::TaskResult done, wait_succeeded(queued[i], false));
      if (i > 0) busy_exec.push_back(done.execution_seconds() * 1000);
    }
  }
  times.busy_exec_ms = busy_exec.empty() ? 0 : Median(busy_exec);
  daemon.Kill(SIGTERM);
  return times;
}

// ort_bench.js --serve in a child process: one session, timed on demand.
class OrtServer {
 public:
  ~OrtServer() {
    if (to_ != nullptr) std::fclose(to_);  // end of input: the script releases its session and exits
    if (from_ != nullptr) std::fclose(from_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  Status Start(const std::string& command) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return Internal("pipe failed");
    pid_ = fork();
    if (pid_ < 0) return Internal("fork failed");
    if (pid_ == 0) {
      dup2(in[0], STDIN_FILENO);
      dup2(out[1], STDOUT_FILENO);
      close(in[0]), close(in[1]), close(out[0]), close(out[1]);
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in[0]), close(out[1]);
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
    ASSIGN_OR_RETURN(std::string ready, ReadLine());
    if (ready.find("\"ready\"") == std::string::npos) return Internal("ort_bench.js --serve said: " + ready);
    return OkStatus();
  }
  // Median of `reps` timed inferences, ms.
  StatusOr<double> Time(int reps) {
    std::fprintf(to_, "%d\n", reps);
    std::fflush(to_);
    ASSIGN_OR_RETURN(std::string line, ReadLine());
    const double ms = JsonNumberAfter(line, "{", "median_ms");
    if (ms <= 0) return Internal("ort_bench.js --serve said: " + line);
    return ms;
  }

 private:
  StatusOr<std::string> ReadLine() {
    char buf[4096];
    if (std::fgets(buf, sizeof buf, from_) == nullptr) return Internal("ort_bench.js --serve ended (see its stderr)");
    return std::string(buf);
  }
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

// --pairs: ORT, the kernels and warm node tasks timed in the same rounds (see the top).
Status PairedRounds(const executor::Program& program, const std::map<std::string, Tensor>& inputs,
                    const std::string& ort_command, const fs::path& dir, int threads, int pairs, int reps, int tasks,
                    const fs::path& graph_path, const fs::path& weights_path, const fs::path& input_path,
                    const std::string& input_name) {
  OrtServer ort;
  RETURN_IF_ERROR(ort.Start(ort_command));
  kernels::BackendOptions options;
  options.threads = threads;
  ASSIGN_OR_RETURN(auto backend, kernels::CreateBackend(options));
  ASSIGN_OR_RETURN(auto loaded, executor::LoadedProgram::Load(program, backend.get()));
  ASSIGN_OR_RETURN(executor::RunResult first_run, loaded->Run(inputs, executor::RunOptions{}));
  testing_support::DaemonProcess daemon((dir / ("paired-t" + std::to_string(threads))).string(),
                                        NodeArgs(threads, int64_t{1} << 30));
  if (!daemon.Start()) return Unavailable("consensord did not start:\n" + daemon.Log());
  node::NodeClient client(daemon.address());
  ASSIGN_OR_RETURN(v1::SubmitTaskRequest request,
                   UploadModel(client, graph_path, weights_path, input_path, input_name));
  uint64_t nonce = 0;
  // One task, run to its end: its execution_seconds in ms. Every task must give the kernels' root.
  auto node_task = [&]() -> StatusOr<double> {
    request.mutable_options()->set_nonce(++nonce);
    ASSIGN_OR_RETURN(auto submitted, client.SubmitTask(request));
    ASSIGN_OR_RETURN(v1::Task done, client.WatchTask(submitted.task_id(), std::chrono::seconds(600), nullptr));
    if (done.state() != v1::TASK_STATE_SUCCEEDED) {
      return Internal("node task failed: " + done.error_code() + " " + done.error_message());
    }
    if (done.result().result_root() != ToHex(first_run.result_root)) return Internal("node and kernel roots differ");
    return done.result().execution_seconds() * 1000;
  };
  RETURN_IF_ERROR(node_task().status());  // the cold task
  std::printf("\npaired rounds at %d thread(s): --reps %d ORT and kernel runs, --tasks %d warm node tasks a round\n",
              threads, reps, tasks);
  std::printf("%-6s %10s %12s %12s %10s %10s\n", "round", "ORT ms", "kernels ms", "node warm", "kernels/ORT",
              "warm/ORT");
  std::vector<double> kernel_ratios, warm_ratios;
  for (int round = 0; round < pairs; ++round) {
    double ort_ms = 0, kernel_ms = 0, warm_ms = 0;
    for (int step = 0; step < 3; ++step) {
      switch ((round + step) % 3) {
        case 0: {
          ASSIGN_OR_RETURN(ort_ms, ort.Time(reps));
          break;
        }
        case 1: {
          std::vector<double> ms;
          for (int i = 0; i < reps; ++i) {
            const auto t0 = Clock::now();
            ASSIGN_OR_RETURN(executor::RunResult r, loaded->Run(inputs, executor::RunOptions{}));
            ms.push_back(MillisSince(t0));
            if (r.result_root != first_run.result_root) return Internal("result root changed between runs");
          }
          kernel_ms = Median(ms);
          break;
        }
        default: {
          std::vector<double> ms;
          for (int i = 0; i < tasks; ++i) {
            ASSIGN_OR_RETURN(double exec_ms, node_task());
            ms.push_back(exec_ms);
          }
          warm_ms = Median(ms);
        }
      }
    }
    kernel_ratios.push_back(kernel_ms / ort_ms);
    warm_ratios.push_back(warm_ms / ort_ms);
    std::printf("%-6d %10.3f %12.3f %12.3f %10.2fx %9.2fx\n", round + 1, ort_ms, kernel_ms, warm_ms,
                kernel_ratios.back(), warm_ratios.back());
    std::fflush(stdout);
  }
  auto at_most_one = [](const std::vector<double>& v) {
    return std::count_if(v.begin(), v.end(), [](double r) { return r <= 1.0; });
  };
  std::printf("kernels / ORT: median %.2fx (p10 %.2fx, p90 %.2fx), %ld of %d rounds <= 1.0x\n", Median(kernel_ratios),
              Percentile(kernel_ratios, 0.1), Percentile(kernel_ratios, 0.9), at_most_one(kernel_ratios), pairs);
  std::printf("node warm / ORT: median %.2fx (p10 %.2fx, p90 %.2fx), %ld of %d rounds <= 1.0x\n", Median(warm_ratios),
              Percentile(warm_ratios, 0.1), Percentile(warm_ratios, 0.9), at_most_one(warm_ratios), pairs);
  daemon.Kill(SIGTERM);
  return OkStatus();
}

int Main(int argc, char** argv) {
  std::string model_path, shape_arg, threads_arg = "1,2", perf_dir;
  std::string ort_script = testing_support::SourceDir() + "/bench/models/ort_bench.js";
  int reps = 20, tasks = 8, op_times = 0, idle_ms = 0, pairs = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") model_path = v;
    else if (k == "--shape") shape_arg = v;
    else if (k == "--threads") threads_arg = v;
    else if (k == "--reps") reps = std::max(1, std::atoi(v.c_str()));
    else if (k == "--tasks") tasks = std::max(2, std::atoi(v.c_str()));
    else if (k == "--ort-script") ort_script = v;
    else if (k == "--perf") perf_dir = v;
    else if (k == "--op-times") op_times = std::atoi(v.c_str());
    else if (k == "--idle-ms") idle_ms = std::max(0, std::atoi(v.c_str()));
    else if (k == "--pairs") pairs = std::max(0, std::atoi(v.c_str()));
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const size_t eq = shape_arg.find('=');
  if (model_path.empty() || eq == std::string::npos) {
    std::fprintf(stderr,
                 "usage: onnx_bench --model FILE.onnx --shape NAME=D0,D1,... [--threads 1,2] [--reps N] "
                 "[--tasks N] [--ort-script FILE] [--perf DIR] [--op-times TOP] [--idle-ms N] [--pairs N]\n");
    return 2;
  }
  const std::string input_name = shape_arg.substr(0, eq);
  Shape shape;
  for (const std::string& d : Split(shape_arg.substr(eq + 1), ',')) shape.push_back(std::atoll(d.c_str()));
  std::vector<int> thread_counts;
  for (const std::string& t : Split(threads_arg, ',')) thread_counts.push_back(std::max(1, std::atoi(t.c_str())));

  fs::path dir = fs::temp_directory_path() / ("consensor-onnx-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  // Removed however the run ends (--op-times and --pairs return early), unless CNSR_BENCH_KEEP.
  struct RemoveAtExit {
    fs::path dir;
    ~RemoveAtExit() {
      std::error_code ignored;
      if (!std::getenv("CNSR_BENCH_KEEP")) fs::remove_all(dir, ignored);
    }
  } remove_at_exit{dir};
  const fs::path input_path = dir / "input.npy";
  const Tensor input = testing_support::RandomF32(shape, 7);
  if (!WriteNpyFile(input_path.string(), input).ok()) {
    std::fprintf(stderr, "cannot write %s\n", input_path.c_str());
    return 1;
  }

  // 1. ONNX Runtime, in a child process (node.js), on the same input file.
  std::string ort_cmd = "node";
  std::string ort_args = "'" + ort_script + "' --model '" + model_path + "' --input " + input_name + "=" +
                         input_path.string() + " --threads " + threads_arg + " --reps " + std::to_string(reps) +
                         " --idle-ms " + std::to_string(idle_ms);
  auto ort = pairs > 0 ? testing_support::CommandResult{0, ""} : testing_support::RunCommand(ort_cmd, ort_args);
  if (ort.exit_code != 0) {
    std::fprintf(stderr, "ONNX Runtime failed (is bench/models installed? scripts/setup.sh):\n%s\n", ort.out.c_str());
    return 1;
  }

  // 2. Import and compile once, as `consensor import` does.
  executor::OnnxImportOptions import_options;
  import_options.input_shapes[input_name] = shape;
  auto t0 = Clock::now();
  auto imported = executor::ImportOnnxFile(model_path, import_options);
  if (!imported.ok()) {
    std::fprintf(stderr, "import failed: %s\n", imported.status().ToString().c_str());
    return 1;
  }
  const double import_ms = MillisSince(t0);
  executor::MemoryBlobSource weights;
  fs::path weights_path;
  if (!imported->weights.empty()) {
    weights_path = dir / ToHex(imported->weights_sha256);
    if (!WriteFileAtomic(weights_path.string(), imported->weights).ok()) return 1;
    weights.Add(imported->weights);
  }
  const fs::path graph_path = dir / "graph.pb";
  if (!executor::SaveGraphFile(graph_path.string(), imported->graph).ok()) return 1;
  t0 = Clock::now();
  auto program = executor::CompileGraph(imported->graph, &weights, executor::Limits{});
  if (!program.ok()) {
    std::fprintf(stderr, "compile failed: %s\n", program.status().ToString().c_str());
    return 1;
  }
  const double compile_ms = MillisSince(t0);
  std::printf("model %s\n  input %s%s, %zu instructions, %.1f MFLOP, arena %.1f MiB, weights %.1f MiB\n",
              model_path.c_str(), input_name.c_str(), ShapeToString(shape).c_str(), program->instructions.size(),
              program->total_flops / 1e6, program->arena_bytes / 1048576.0, imported->weights.size() / 1048576.0);
  int64_t traced_bytes = 0;  // what the trace hashes per run
  for (const executor::Instruction& ins : program->instructions) traced_bytes += program->buffers[ins.output].bytes;
  std::printf("  import %.1f ms, compile %.1f ms (once); the trace hashes %.1f MiB per run\n", import_ms, compile_ms,
              traced_bytes / 1048576.0);
  std::printf("  %zu instructions after fusion (docs/DETERMINISM.md 3.1)\n",
              program->fused_instructions.empty() ? program->instructions.size() : program->fused_instructions.size());
  if (!ort.out.empty()) std::printf("  %s\n", ort.out.substr(0, ort.out.find('\n')).c_str());
  std::map<std::string, Tensor> inputs{{input_name, input}};
  if (pairs > 0) {
    Status s = PairedRounds(*program, inputs, ort_cmd + " " + ort_args + " --serve 1", dir, thread_counts.front(),
                            pairs, reps, tasks, graph_path, weights_path, input_path, input_name);
    if (!s.ok()) {
      std::fprintf(stderr, "paired rounds failed: %s\n", s.ToString().c_str());
      return 1;
    }
    return 0;
  }
  if (op_times > 0) {
    for (int threads : thread_counts) {
      Status s = PrintOpTimes(*program, inputs, threads, reps, op_times);
      if (!s.ok()) {
        std::fprintf(stderr, "executor failed: %s\n", s.ToString().c_str());
        return 1;
      }
    }
    return 0;
  }

  std::printf("\n%-8s %10s %12s %12s %12s %12s %12s %12s %12s %12s %12s\n", "threads", "ORT ms", "kernels ms",
              "unfused ms", "unpacked ms", "+trace ms", "node cold", "node warm", "node busy", "no cache",
              "client warm");
  for (int threads : thread_counts) {
    const double ort_ms = JsonNumberAfter(ort.out, "\"" + std::to_string(threads) + "\":", "median_ms");
    auto kernels_times = TimeKernels(*program, inputs, threads, reps, idle_ms);
    if (!kernels_times.ok()) {
      std::fprintf(stderr, "executor failed: %s\n", kernels_times.status().ToString().c_str());
      return 1;
    }
    auto node_times = TimeNodeTasks(dir, threads, tasks, graph_path, weights_path, input_path, input_name,
                                    int64_t{1} << 30, perf_dir);
    // The same node without the warm path: every task reads, verifies and compiles its model.
    auto uncached_times =
        TimeNodeTasks(dir, threads, tasks, graph_path, weights_path, input_path, input_name, 0, perf_dir);
    if (!node_times.ok() || !uncached_times.ok()) {
      std::fprintf(stderr, "node failed: %s\n",
                   (node_times.ok() ? uncached_times.status() : node_times.status()).ToString().c_str());
      return 1;
    }
    const bool same_root = node_times->result_root == ToHex(kernels_times->result_root) &&
                           uncached_times->result_root == node_times->result_root;
    std::printf("%-8d %10.2f %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f%s\n", threads, ort_ms,
                kernels_times->plain_ms, kernels_times->unfused_ms, kernels_times->unpacked_ms, kernels_times->trace_ms,
                node_times->cold_exec_ms, node_times->warm_exec_ms, node_times->busy_exec_ms,
                uncached_times->warm_exec_ms, node_times->warm_task_ms, same_root ? "" : "  RESULT ROOTS DIFFER");
    std::printf("%-8s %10s %11.2fx %11.2fx %11.2fx %11.2fx %11.2fx %11.2fx %11.2fx %11.2fx %11.2fx\n", "  / ORT", "",
                kernels_times->plain_ms / ort_ms, kernels_times->unfused_ms / ort_ms,
                kernels_times->unpacked_ms / ort_ms, kernels_times->trace_ms / ort_ms,
                node_times->cold_exec_ms / ort_ms, node_times->warm_exec_ms / ort_ms, node_times->busy_exec_ms / ort_ms,
                uncached_times->warm_exec_ms / ort_ms, node_times->warm_task_ms / ort_ms);
    if (!same_root) return 1;
  }
  std::printf(
      "\nms, medians. kernels / unfused / unpacked: the fused and the canonical instructions, and the fused ones "
      "on a backend that prepares no constant (weights packed on every call), runs alternating. node cold / warm: execution_seconds (load, run without the trace, store) of the first task "
      "on a fresh node / of the next %d, each submitted when the one before finished; node busy: the same for %d "
      "tasks submitted together, which the worker runs back to back; no cache: node warm with --program-cache-bytes "
      "0; client warm: SubmitTask -> result as a client sees it\n",
      tasks - 1, tasks - 1);
  return 0;
}

}  // namespace
}  // namespace consensor

int main(int argc, char** argv) { return consensor::Main(argc, argv); }
