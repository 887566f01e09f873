#include "node/cli/cli.h"

#include "common/file_io.h"
#include "node/cli/cli_args.h"
#include "node/cli/client_commands.h"
#include "node/cli/client_key_command.h"
#include "node/cli/keys_command.h"
#include "node/cli/model_file.h"
#include "node/cli/onnx_command.h"
#include "node/cli/operator_command.h"
#include "node/cli/selftest_command.h"
#include "node/cli/verify_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iomanip>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <string_view>

#include "common/npy.h"
#include "common/sha256.h"
#include "common/version.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/validate.h"
#include "kernels/backend_factory.h"

namespace consensor::node {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr char kUsage[] = R"(usage: consensor <command> [options]

commands:
  run GRAPH [--input NAME=FILE.npy]... [--out DIR] [--backend cpu|cuda|cuda-emu]
            [--threads N] [--isa auto|avx2|portable] [--device N] [--fallback-cpu]
            [--blobs DIR] [--trace] [--shape NAME=D0,D1,...] [--bind NAME=FILE.npy]
      Executes a graph deterministically and prints each output's name, dtype, shape and
      SHA-256 tensor hash, then the result root. Every backend gives the same bits.
      GRAPH is a Consensor graph (.pb, .pbtxt) or an ONNX model (.onnx), imported on the
      fly; an ONNX input with symbolic dimensions takes its shape from its --input file.
      --bind fixes an ONNX input to a value at import (it becomes a constant of the graph,
      so an If on it, such as a sample rate, is folded); bound inputs take no --input.
      --out writes outputs as NAME.npy. --fallback-cpu reruns on the CPU when the GPU
      backend is unavailable or fails (out of memory, launch error); without it, it does not.
  inspect GRAPH [--blobs DIR] [--shape NAME=D0,D1,...]
      Prints the graph id, inputs, outputs, every op in canonical order with its output
      type and estimated FLOPs, and the planned peak memory.
  import MODEL.onnx --out DIR [--input NAME=FILE.npy | --shape NAME=D0,D1,...]...
      Imports an ONNX model: writes DIR/graph.pb and its weights as a safetensors blob in
      DIR (see `consensor import --help`).
  onnx-test DIR... [--expect FILE] [--filter TEXT] [--report FILE.json]
      Runs ONNX backend test cases (e.g. /usr/share/libonnx-testdata/data/node) and counts
      passed, failed and unsupported tests (see `consensor onnx-test --help`).
  submit GRAPH [--input NAME=FILE.npy]... [--node ADDR] [--blobs DIR] [--nonce N]
               [--max-wall-ms N] [--replicas N --quorum N] [--request-out FILE]
               [--wait [--final] [--out DIR] [--timeout SECONDS]]
      Uploads the graph, its weight blobs and the inputs to a node and submits the task.
      An ONNX model is imported first and its weights uploaded as one safetensors blob.
      Prints the task id; with --wait, shows progress, then the result hashes, and writes
      the outputs to --out DIR. On a network node --wait ends when the task is certified;
      --replicas and --quorum choose its committee size and matching signatures (else the
      node's defaults). Both are part of the task id, and submit refuses a node that answers
      with another id. --request-out FILE saves the request, for `consensor verify --request`.
      A certified task is final once its challenge window closes; --final waits for that.
  status TASK_ID [--node ADDR] [--json]
      Shows a task's state, and its result hashes once it has finished.
  result TASK_ID --out DIR [--node ADDR]
      Downloads a finished task's outputs as NAME.npy files and verifies their hashes.
  trace TASK_ID [--node ADDR] [--from N] [--count N] [--timeout SECONDS] [--json]
      Has the node execute a finished task again with the execution trace (tasks run
      without it) and prints the trace root, the number of ops and, with --count, the
      tensor hash of ops N, N+1, ... (at most 4096). The node checks the recomputed result
      root against the one it stored; this command checks it against the certificate.
  node info [--node ADDR] [--json]
      Shows the node's version, backend, queue, limits and store.
  client-key new --name NAME [--out FILE]
      Makes a client API key: prints the key (or writes it to FILE, mode 0600) and the
      [[client]] entry, with only the key's SHA-256, for the node's clients.keys_file.
  keys new|import|list ...
      Manages Ethereum v3 keystores (see `consensor keys --help`).
  operator register|rotate-signer|status|deregister|withdraw|set ...
  evidence submit FILE
      Registers and stakes on the AVS contracts, reads the operator set at a block, and
      submits slashing evidence (see `consensor operator --help`).
  verify TASK_ID [--node ADDR] [--rpc URL] [--rpc-ca-file FILE] [--deployment FILE] [--json]
  verify --certificate FILE [--rpc URL] [--rpc-ca-file FILE] [--deployment FILE] [--json]
      Checks a task's quorum certificate against the chain without trusting the node:
      signatures, signer order, committee membership at the reference block, and the
      contract's verifyCertificate. Prints VERIFIED and exits 0, or the failed check and 1.
  selftest [--backend cpu|cuda|cuda-emu] [--device N] [--isa auto|avx2|portable] [--threads N]
           [--full] [--json]
      Checks that a backend reproduces the CPU reference bit for bit on this machine: runs
      graphs covering every op on both and compares hashes; a mismatch names the first
      differing op. Exit 0 when all match, 1 otherwise (see `consensor selftest --help`).
  version
      Prints the version.

The node address comes from --node, else $CONSENSOR_NODE, else 127.0.0.1:7400. A node that
requires client keys gets the key from --api-key-file FILE, else $CONSENSOR_API_KEY (never
from the command line itself).

caps (run and inspect): --max-elements N  --max-memory BYTES  --max-flops N  --max-ops N
)";

using Args = ParsedArgs;

// run, inspect, submit, status, result, trace, node and version share one set of options: each has
// always accepted all of them (ignoring those it does not use), and they may come before the
// command name (`consensor --node ADDR status ID`). Narrowing the set per command would turn
// command lines that work today into usage errors.
ArgSpec SharedArgSpec() {
  ArgSpec spec;
  spec.value_options = {"--input",       "--out",          "--threads",     "--isa",          "--blobs",   "--backend",
                        "--device",      "--max-elements", "--max-memory",  "--max-flops",    "--max-ops", "--node",
                        "--nonce",       "--timeout",      "--max-wall-ms", "--replicas",     "--quorum",  "--shape",
                        "--request-out", "--from",         "--count",       "--api-key-file", "--bind"};
  spec.flags = {"--trace", "--help", "--fallback-cpu", "--wait", "--json", "--final"};
  return spec;
}

bool HasFlag(const Args& a, const std::string& f) { return a.HasFlag(f); }
std::optional<std::string> Option(const Args& a, const std::string& key) { return a.Option(key); }

StatusOr<int64_t> ParsePositiveInt(const std::string& text, const std::string& what) {
  return ParseIntOption(text, what, 1, INT64_MAX);
}

StatusOr<executor::Limits> ParseLimits(const Args& a) {
  executor::Limits limits;
  struct Cap {
    const char* flag;
    int64_t* field;
  } caps[] = {{"--max-elements", &limits.max_elements_per_tensor},
              {"--max-memory", &limits.max_total_bytes},
              {"--max-flops", &limits.max_flops},
              {"--max-ops", &limits.max_ops}};
  for (const Cap& c : caps) {
    if (auto v = Option(a, c.flag)) {
      ASSIGN_OR_RETURN(*c.field, ParsePositiveInt(*v, c.flag));
    }
  }
  return limits;
}

std::string HumanBytes(int64_t b) {
  std::ostringstream s;
  if (b < 1024) s << b << " B";
  else if (b < (1 << 20)) s << std::fixed << std::setprecision(1) << b / 1024.0 << " KiB";
  else if (b < (int64_t{1} << 30)) s << std::fixed << std::setprecision(1) << b / 1048576.0 << " MiB";
  else s << std::fixed << std::setprecision(2) << b / 1073741824.0 << " GiB";
  return s.str();
}

std::string TypeString(DType dtype, const Shape& shape) { return std::string(DTypeName(dtype)) + ShapeToString(shape); }

struct LoadedGraph {
  executor::Graph graph;
  executor::ValidatedGraph validated;
  executor::Program program;
};

StatusOr<LoadedGraph> LoadAndCompile(const std::string& path, const Args& a, const executor::Limits& limits,
                                     const std::map<std::string, Tensor>& inputs = {}) {
  std::map<std::string, Shape> shapes;
  RETURN_IF_ERROR(ParseShapeSpecs(a.All("--shape"), &shapes));
  for (const auto& [name, t] : inputs) shapes.emplace(name, t.shape());
  auto bind_files = ParseNamedFiles(a.All("--bind"), "--bind");
  if (!bind_files.ok()) return bind_files.status();
  NpyLimits npy_limits;
  npy_limits.max_bytes = limits.max_total_bytes;
  ASSIGN_OR_RETURN(auto bound, ReadNpyFiles(*bind_files, npy_limits));
  for (const auto& [name, t] : bound) {
    if (shapes.count(name)) return InvalidArgument("input '" + name + "' has both --bind and --input or --shape");
  }
  if (!bound.empty() && !executor::IsOnnxPath(path)) return InvalidArgument("--bind applies to ONNX models only");
  LoadedGraph lg;
  ASSIGN_OR_RETURN(ModelFile model, LoadModelFile(path, shapes, limits, bound));
  lg.graph = std::move(model.graph);
  auto vg = executor::Validate(lg.graph, limits);
  if (!vg.ok()) return vg.status().WithContext("graph '" + path + "'");
  lg.validated = std::move(vg).value();
  std::optional<executor::DirectoryBlobSource> blobs;
  if (auto dir = Option(a, "--blobs")) blobs.emplace(*dir);
  executor::BlobSource* source = nullptr;
  if (model.onnx_blobs) source = model.onnx_blobs.get();
  else if (blobs) source = &*blobs;
  auto program = executor::Compile(lg.graph, lg.validated, source, limits);
  if (!program.ok()) return program.status().WithContext("graph '" + path + "'");
  lg.program = std::move(program).value();
  return lg;
}

int Fail(std::ostream& err, const Status& s) {
  err << "error: " << s.message() << "\n";
  return kExitFailure;
}

int Usage(std::ostream& err, const std::string& message) {
  err << "error: " << message << "\n\n" << kUsage;
  return kExitUsage;
}

// The commands below get the arguments after the command name, parsed with SharedArgSpec.

int CmdRun(const Args& a, std::ostream& out, std::ostream& err) {
  if (a.positional.size() != 1) return Usage(err, "run takes exactly one GRAPH argument");
  auto limits = ParseLimits(a);
  if (!limits.ok()) return Usage(err, limits.status().message());
  auto flags = ParseBackendFlags(a);
  if (!flags.ok()) return Usage(err, flags.status().message());
  kernels::BackendOptions bo = *flags;
  auto input_files = ParseNamedFiles(a.All("--input"), "--input");
  if (!input_files.ok()) return Usage(err, input_files.status().message());
  NpyLimits npy_limits;
  npy_limits.max_bytes = limits->max_total_bytes;
  auto read = ReadNpyFiles(*input_files, npy_limits);
  if (!read.ok()) return Fail(err, read.status());
  const std::map<std::string, Tensor>& inputs = *read;

  auto lg = LoadAndCompile(a.positional[0], a, *limits, inputs);
  if (!lg.ok()) return Fail(err, lg.status());

  executor::RunOptions ro;
  ro.trace = HasFlag(a, "--trace");
  std::string backend_name;
  auto run_on = [&](const kernels::BackendOptions& options) -> StatusOr<executor::RunResult> {
    ASSIGN_OR_RETURN(auto backend, kernels::CreateBackend(options));
    backend_name = backend->name();
    ASSIGN_OR_RETURN(auto loaded, executor::LoadedProgram::Load(lg->program, backend.get()));
    return loaded->Run(inputs, ro);
  };
  auto result = run_on(bo);
  // Fall back only for failures of the device itself, never for a bad task or input.
  bool device_failure = !result.ok() && result.status().code() != StatusCode::kInvalidArgument &&
                        result.status().code() != StatusCode::kOutOfRange;
  if (device_failure && bo.name != "cpu" && HasFlag(a, "--fallback-cpu")) {
    err << "warning: backend " << bo.name << " failed (" << result.status().message() << "); falling back to the CPU\n";
    bo.name = "cpu";
    result = run_on(bo);
  }
  if (!result.ok()) return Fail(err, result.status());

  std::optional<std::string> out_dir = Option(a, "--out");
  if (out_dir) {
    if (Status s = consensor::CreateDirectories(*out_dir); !s.ok()) return Fail(err, s);
  }
  out << "graph    " << ToHex(lg->program.graph_id) << "\n";
  out << "backend  " << backend_name << (bo.name == "cpu" ? " x" + std::to_string(bo.threads) : "") << "\n";
  for (const auto& o : result->outputs) {
    out << "output   " << o.name << " " << TypeString(o.tensor.dtype(), o.tensor.shape()) << " sha256:" << ToHex(o.hash)
        << "\n";
    if (out_dir) {
      // Output names are free text; keep file names safe.
      std::string file = o.name;
      for (char& c : file) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
      }
      Status s = WriteNpyFile(*out_dir + "/" + file + ".npy", o.tensor);
      if (!s.ok()) return Fail(err, s);
    }
  }
  out << "result   " << ToHex(result->result_root) << "\n";
  if (ro.trace) out << "trace    " << ToHex(result->trace_root) << " (" << result->trace.size() << " ops)\n";
  return kExitOk;
}

int CmdInspect(const Args& a, std::ostream& out, std::ostream& err) {
  if (a.positional.size() != 1) return Usage(err, "inspect takes exactly one GRAPH argument");
  auto limits = ParseLimits(a);
  if (!limits.ok()) return Usage(err, limits.status().message());
  auto lg = LoadAndCompile(a.positional[0], a, *limits);
  if (!lg.ok()) return Fail(err, lg.status());
  const auto& p = lg->program;
  out << "graph id     " << ToHex(p.graph_id) << "\n";
  for (const auto& [name, b] : p.inputs)
    out << "input        " << name << " " << TypeString(p.buffers[b].dtype, p.buffers[b].shape) << "\n";
  for (const auto& [name, b] : p.outputs)
    out << "output       " << name << " " << TypeString(p.buffers[b].dtype, p.buffers[b].shape) << "\n";
  int64_t weight_bytes = 0;
  for (const auto& [b, t] : p.constants) weight_bytes += t.byte_size();
  out << "constants    " << p.constants.size() << " (" << HumanBytes(weight_bytes) << ")\n";
  out << "ops          " << p.instructions.size() << "\n";
  out << "flops        " << p.total_flops << "\n";
  out << "peak memory  " << p.arena_bytes << " bytes (" << HumanBytes(p.arena_bytes) << ")\n\n";
  out << std::left << std::setw(6) << "#" << std::setw(16) << "op" << std::setw(28) << "output"
      << "flops\n";
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    const auto& ins = p.instructions[i];
    const auto& b = p.buffers[ins.output];
    out << std::left << std::setw(6) << i << std::setw(16) << ins.op_name << std::setw(28)
        << TypeString(b.dtype, b.shape) << ins.flops << "\n";
  }
  return kExitOk;
}

int CmdVersion(const Args&, std::ostream& out, std::ostream&) {
  out << "consensor " << kProjectVersion << "\n";
  return kExitOk;
}

using SharedOptionsCommand = int (*)(const Args& args, std::ostream& out, std::ostream& err);

// Parses a shared-options command's arguments; --help anywhere prints the general usage.
template <SharedOptionsCommand command>
int WithSharedOptions(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto parsed = ParseArgs(args, SharedArgSpec());
  if (!parsed.ok()) return Usage(err, parsed.status().message());
  if (parsed->HasFlag("--help")) {
    out << kUsage;
    return kExitOk;
  }
  return command(*parsed, out, err);
}

struct Command {
  std::string_view name;
  // Gets the arguments after the command name and parses its own options.
  int (*run)(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
  bool shared_options;  // reads SharedArgSpec, so its options may also precede its name
};

constexpr Command kCommands[] = {
    {"run", WithSharedOptions<CmdRun>, true},
    {"inspect", WithSharedOptions<CmdInspect>, true},
    {"import", RunImportCommand, false},
    {"onnx-test", RunOnnxTestCommand, false},
    {"submit", WithSharedOptions<CmdSubmit>, true},
    {"status", WithSharedOptions<CmdStatus>, true},
    {"result", WithSharedOptions<CmdResult>, true},
    {"trace", WithSharedOptions<CmdTrace>, true},
    {"node", WithSharedOptions<CmdNode>, true},
    {"keys", RunKeysCommand, false},
    {"client-key", RunClientKeyCommand, false},
    {"operator", RunOperatorCommand, false},
    {"evidence", RunEvidenceCommand, false},
    {"verify", RunVerifyCommand, false},
    {"selftest", RunSelfTestCommand, false},
    {"version", WithSharedOptions<CmdVersion>, true},
};

const Command* FindCommand(std::string_view name) {
  for (const Command& command : kCommands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

// Where ParseArgs found its first positional argument in `raw` (which it parsed without error).
size_t FirstPositionalIndex(const std::vector<std::string>& raw, const ArgSpec& spec) {
  for (size_t i = 0; i < raw.size(); ++i) {
    const std::string& s = raw[i];
    if (s.rfind("--", 0) != 0 || s == "--") return i;
    const bool takes_next_value =
        s.find('=') == std::string::npos &&
        std::find(spec.value_options.begin(), spec.value_options.end(), s) != spec.value_options.end();
    if (takes_next_value) ++i;
  }
  return raw.size();
}

// The first argument names no command: no arguments, --help or help, shared options before
// the command name, or an unknown command.
int RunWithoutLeadingCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  const ArgSpec spec = SharedArgSpec();
  auto parsed = ParseArgs(raw, spec);
  if (!parsed.ok()) return Usage(err, parsed.status().message());
  const Args& a = *parsed;
  if (HasFlag(a, "--help") || a.positional.empty() || a.positional[0] == "help") {
    (a.positional.empty() && !HasFlag(a, "--help") ? err : out) << kUsage;
    return a.positional.empty() && !HasFlag(a, "--help") ? kExitUsage : kExitOk;
  }
  const std::string& name = a.positional[0];
  const Command* command = FindCommand(name);
  if (command == nullptr || !command->shared_options) return Usage(err, "unknown command '" + name + "'");
  std::vector<std::string> args = raw;
  args.erase(args.begin() + static_cast<std::ptrdiff_t>(FirstPositionalIndex(raw, spec)));
  return command->run(args, out, err);
}

}  // namespace

int RunCli(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  if (!raw.empty()) {
    if (const Command* command = FindCommand(raw[0])) {
      return command->run(std::vector<std::string>(raw.begin() + 1, raw.end()), out, err);
    }
  }
  return RunWithoutLeadingCommand(raw, out, err);
}

}  // namespace consensor::node
