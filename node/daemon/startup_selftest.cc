#include "node/daemon/startup_selftest.h"

#include <string>

#include "executor/selftest.h"
#include "node/telemetry/log.h"
#include "node/telemetry/node_metrics.h"

namespace consensor::node {

StatusOr<kernels::BackendOptions> SelfTestBackendAtStartup(kernels::Backend& backend,
                                                           const kernels::BackendOptions& configured, bool fallback_cpu,
                                                           MetricsRegistry* registry) {
  const std::string name = backend.name();
  Log(LogLevel::kInfo, "backend self-test started", {{"backend", name}, {"set", "quick"}});
  executor::SelfTestOptions options;
  options.size = executor::SelfTestSize::kQuick;
  options.on_case = [](const executor::SelfTestCase& c) {
    Log(c.passed ? LogLevel::kDebug : LogLevel::kError, "backend self-test graph",
        {{"graph", c.name}, {"ops", c.ops}, {"passed", c.passed}, {"seconds", c.seconds}, {"problem", c.Problem()}});
  };
  auto report = executor::RunBackendSelfTest(backend, options);
  std::string problem;
  if (!report.ok()) {
    problem = "the self-test could not run: " + report.status().message();
  } else if (!report->passed()) {
    const executor::SelfTestCase& first = *report->first_failure();
    problem = std::to_string(report->failed()) + " of " + std::to_string(report->cases.size()) +
              " self-test graphs differ from the CPU reference; first: graph " + first.name + ": " + first.Problem();
  }
  ExportBackendSelfTest(registry, name, problem.empty(), report.ok() ? report->seconds : 0.0);
  if (problem.empty()) {
    Log(LogLevel::kInfo, "backend self-test passed",
        {{"backend", name},
         {"reference", report->reference},
         {"graphs", static_cast<int64_t>(report->cases.size())},
         {"ops", report->total_ops},
         {"seconds", report->seconds}});
    return configured;
  }
  Log(LogLevel::kError, "backend self-test FAILED: the backend does not reproduce the CPU reference",
      {{"backend", name}, {"error", problem}});
  if (!fallback_cpu) {
    return FailedPrecondition("executor backend '" + configured.name + "' (" + name +
                              ") failed its startup self-test, so this node will not sign results computed on it: " +
                              problem + ". Run `consensor selftest --backend " + configured.name +
                              "` for details, or set fallback_cpu to run on the CPU instead");
  }
  Log(LogLevel::kError, "falling back to the CPU backend for every task (fallback_cpu)", {{"backend", name}});
  kernels::BackendOptions cpu = configured;
  cpu.name = "cpu";
  return cpu;
}

}  // namespace consensor::node
