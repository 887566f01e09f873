// consensord's startup self-test of a non-CPU backend (executor/selftest.h): before the node
// signs anything computed on a GPU, that GPU must reproduce the CPU reference on this machine.
#pragma once

#include "common/status.h"
#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

// Runs the quick self-test on `backend` (created from `configured`), logs the outcome and
// exports it (ExportBackendSelfTest). Returns the backend options tasks run with:
// `configured` when every graph matched; the CPU with the same threads and ISA when the
// backend differed or failed and `fallback_cpu` is set; otherwise FAILED_PRECONDITION, which
// stops startup.
StatusOr<kernels::BackendOptions> SelfTestBackendAtStartup(kernels::Backend& backend,
                                                           const kernels::BackendOptions& configured, bool fallback_cpu,
                                                           MetricsRegistry* registry);

}  // namespace consensor::node
