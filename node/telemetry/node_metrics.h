// The node's Prometheus metrics, registered once at startup and passed to the components
// that update them.
#pragma once

#include <array>
#include <atomic>
#include <string>
#include <string_view>

#include "node/telemetry/metrics.h"

namespace consensor::node {

struct NodeMetrics {
  explicit NodeMetrics(MetricsRegistry* registry);

  // consensor_rpc_requests_total{method, code}: a pair is registered at its first call (so the
  // exposition lists only pairs seen), then found without the registry's lock or an allocation.
  Counter* RpcRequests(std::string_view method, int code);

  MetricsRegistry* registry;
  Counter* tasks_received;   // accepted by SubmitTask (new tasks only)
  Counter* tasks_rejected;   // SubmitTask refused (bad request, over cap, queue full)
  Counter* tasks_completed;  // finished with a result
  Counter* tasks_failed;     // finished with an error
  Counter* tasks_recovered;  // re-queued after a restart
  Histogram* execution_seconds;
  Gauge* queue_depth;
  Gauge* tasks_running;
  Counter* blob_bytes_received;  // committed uploads
  Counter* blobs_received;
  Counter* blob_bytes_sent;
  Gauge* blobs_stored_bytes;
  Gauge* blobs_stored;
  Gauge* up;  // 1 while serving
  // The warm path (node/engine/program_cache.h).
  Counter* program_cache_hits;
  Counter* program_cache_misses;
  Counter* program_cache_evictions;
  Gauge* program_cache_bytes;
  Gauge* program_cache_entries;
  // Decoded task inputs kept between tasks (node/engine/input_cache.h).
  Counter* input_cache_hits;
  Counter* input_cache_misses;
  Counter* input_cache_evictions;
  Gauge* input_cache_bytes;
  Gauge* input_cache_entries;

 private:
  static constexpr int kRpcCodes = 17;  // gRPC's status codes, OK (0) to UNAUTHENTICATED (16)
  static constexpr std::array<std::string_view, 8> kRpcMethods = {"PutBlob",   "GetBlob",     "SubmitTask", "GetTask",
                                                                  "WatchTask", "GetNodeInfo", "GetTrace",   "RunTask"};
  std::array<std::atomic<Counter*>, kRpcMethods.size() * kRpcCodes> rpc_requests_{};
};

// The outcome of the startup self-test of a non-CPU backend (executor/selftest.h):
// consensor_backend_selftest_ok{backend} 1 or 0 and consensor_backend_selftest_seconds{backend}.
// Exported only when the self-test ran.
void ExportBackendSelfTest(MetricsRegistry* registry, const std::string& backend, bool ok, double seconds);

// consensor_backend_info{backend, device} = 1: the Prometheus "info" pattern, so dashboards
// can show and join on the device that runs tasks.
void ExportBackendInfo(MetricsRegistry* registry, const std::string& backend, const std::string& device);

}  // namespace consensor::node
