#include "node/cli/selftest_command.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "executor/selftest.h"
#include "kernels/backend_factory.h"
#include "node/cli/cli_args.h"

namespace consensor::node {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr char kSelfTestUsage[] = R"(usage: consensor selftest [--backend cpu|cuda|cuda-emu] [--device N]
                          [--isa auto|avx2|portable] [--threads N] [--full] [--json]

Runs a fixed set of graphs that covers every op and dtype (with NaN, ±inf, -0, subnormals
and shapes that cross the GPU kernels' tile boundaries) on the chosen backend and on the
CPU reference (portable, one thread), and compares the output hashes, result roots and trace
roots bit for bit. Prints one line per graph and a summary; a mismatch names the graph and
the first op whose output differs. consensord runs the quick set at startup for a non-CPU
backend. It checks agreement with the CPU reference, which the golden conformance vectors
pin; it does not check the reference itself.

  --backend NAME   backend to check (default cpu; --isa and --threads apply to cpu)
  --device N       GPU index for --backend cuda (default 0)
  --full           add large shapes (long reductions, big GEMMs); for real GPUs, slow
                   under cuda-emu
  --json           print one JSON report instead of lines

Exit codes: 0 every graph matches, 1 a mismatch or the backend is unavailable or fails,
2 usage error.
)";

int Usage(std::ostream& err, const std::string& message) {
  err << "error: " << message << "\n\n" << kSelfTestUsage;
  return kExitUsage;
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f s", s);
  return buf;
}

std::string PadRight(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}
std::string PadLeft(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

void PrintCase(const executor::SelfTestCase& c, std::ostream& out) {
  out << PadRight(c.name, 30) << PadLeft(std::to_string(c.ops), 4) << " ops  " << (c.passed ? "PASS" : "FAIL") << "  "
      << PadLeft(Seconds(c.seconds), 9) << "\n";
  if (!c.passed) out << "    " << c.Problem() << "\n";
  out.flush();  // progress, one graph at a time (the emulation is slow)
}

nlohmann::json CaseJson(const executor::SelfTestCase& c) {
  nlohmann::json j = {{"name", c.name},
                      {"ops", c.ops},
                      {"passed", c.passed},
                      {"seconds", c.seconds},
                      {"reference_seconds", c.reference_seconds},
                      {"result_root_matches", c.result_root_matches},
                      {"trace_root_matches", c.trace_root_matches},
                      {"differing_outputs", c.differing_outputs}};
  if (!c.error.empty()) j["error"] = c.error;
  if (c.first_differing_op) {
    j["first_differing_op"] = {{"index", c.first_differing_op->index},
                               {"op", c.first_differing_op->op},
                               {"node", c.first_differing_op->node_label},
                               {"output_type", c.first_differing_op->output_type}};
  }
  if (!c.first_difference.empty()) j["first_difference"] = c.first_difference;
  if (!c.passed) j["problem"] = c.Problem();
  return j;
}

// "graph matmul_i8 (first differing op: matmul_i8)"
std::string FailureSummary(const executor::SelfTestCase& c) {
  std::string s = "graph " + c.name;
  if (c.first_differing_op) s += " (first differing op: " + c.first_differing_op->op + ")";
  if (!c.error.empty()) s += " (" + c.error + ")";
  return s;
}

}  // namespace

int RunSelfTestCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  ArgSpec spec;
  spec.value_options = {"--backend", "--device", "--isa", "--threads"};
  spec.flags = {"--full", "--json", "--help"};
  auto parsed = ParseArgs(raw, spec);
  if (!parsed.ok()) return Usage(err, parsed.status().message());
  const ParsedArgs& a = *parsed;
  if (a.HasFlag("--help")) {
    out << kSelfTestUsage;
    return kExitOk;
  }
  if (!a.positional.empty()) return Usage(err, "selftest takes no arguments, got '" + a.positional[0] + "'");

  auto flags = ParseBackendFlags(a);
  if (!flags.ok()) return Usage(err, flags.status().message());
  const kernels::BackendOptions& bo = *flags;
  const bool json = a.HasFlag("--json");
  executor::SelfTestOptions options;
  options.size = a.HasFlag("--full") ? executor::SelfTestSize::kFull : executor::SelfTestSize::kQuick;

  auto fail = [&](const std::string& message) {
    if (json) out << nlohmann::json{{"passed", false}, {"backend", bo.name}, {"error", message}}.dump(2) << "\n";
    err << "error: " << message << "\n";
    return kExitFailure;
  };
  auto backend = kernels::CreateBackend(bo);
  if (!backend.ok()) return fail("backend '" + bo.name + "' is not available: " + backend.status().message());
  std::string candidate = (*backend)->name();
  if (bo.name == "cpu") candidate += " x" + std::to_string(bo.threads);

  if (!json) {
    out << "selftest  " << candidate << " against cpu-portable x1 (" << executor::SelfTestSizeName(options.size)
        << " set)\n";
    if (bo.name != "cpu") out << "device    " << (*backend)->description() << "\n";
    options.on_case = [&](const executor::SelfTestCase& c) { PrintCase(c, out); };
  }
  auto report = executor::RunBackendSelfTest(**backend, options);
  if (!report.ok()) return fail("the self-test could not run: " + report.status().message());
  const size_t graphs = report->cases.size();
  const int failed = report->failed();

  if (json) {
    nlohmann::json cases = nlohmann::json::array();
    for (const auto& c : report->cases) cases.push_back(CaseJson(c));
    out << nlohmann::json{{"passed", report->passed()},
                          {"backend", candidate},
                          {"device", (*backend)->description()},
                          {"reference", report->reference},
                          {"size", executor::SelfTestSizeName(options.size)},
                          {"graphs", graphs},
                          {"failed", failed},
                          {"ops", report->total_ops},
                          {"seconds", report->seconds},
                          {"cases", cases}}
               .dump(2)
        << "\n";
  } else if (report->passed()) {
    out << "PASS      " << graphs << " of " << graphs << " graphs match the CPU reference bit for bit ("
        << report->total_ops << " ops, " << Seconds(report->seconds) << ")\n";
  } else {
    out << "FAIL      " << failed << " of " << graphs << " graphs differ from the CPU reference (" << report->total_ops
        << " ops, " << Seconds(report->seconds) << ")\n";
  }
  if (report->passed()) return kExitOk;
  err << "error: backend " << candidate
      << " does not reproduce the CPU reference: " << FailureSummary(*report->first_failure())
      << "; do not sign results with it\n";
  return kExitFailure;
}

}  // namespace consensor::node
