#include "node/telemetry/node_metrics.h"

#include <algorithm>

#include "common/status.h"

namespace consensor::node {

Counter* NodeMetrics::RpcRequests(std::string_view method, int code) {
  auto registered = [&] {
    const std::string code_name =
        code >= 0 && code < kRpcCodes ? std::string(StatusCodeName(static_cast<StatusCode>(code))) : "UNKNOWN";
    return registry->AddCounter("consensor_rpc_requests_total", "Client API calls handled, by method and status code.",
                                {{"method", std::string(method)}, {"code", code_name}});
  };
  auto m = std::find(kRpcMethods.begin(), kRpcMethods.end(), method);
  if (m == kRpcMethods.end() || code < 0 || code >= kRpcCodes) return registered();
  std::atomic<Counter*>& cell = rpc_requests_[static_cast<size_t>(m - kRpcMethods.begin()) * kRpcCodes + code];
  Counter* counter = cell.load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter = registered();  // the registry returns the same counter to every caller of a pair
    cell.store(counter, std::memory_order_release);
  }
  return counter;
}

NodeMetrics::NodeMetrics(MetricsRegistry* r)
    : registry(r),
      tasks_received(r->AddCounter("consensor_tasks_received_total", "Tasks accepted by SubmitTask.")),
      tasks_rejected(r->AddCounter("consensor_tasks_rejected_total",
                                   "SubmitTask requests refused: bad request, over a cap, or queue full.")),
      tasks_completed(r->AddCounter("consensor_tasks_completed_total", "Tasks that finished with a result.")),
      tasks_failed(r->AddCounter("consensor_tasks_failed_total", "Tasks that finished with an error.")),
      tasks_recovered(r->AddCounter("consensor_tasks_recovered_total",
                                    "Unfinished tasks found in the store at startup and queued again.")),
      execution_seconds(r->AddHistogram("consensor_task_execution_seconds",
                                        "Wall time of task execution: load, compile, run and store outputs.",
                                        DefaultSecondsBuckets())),
      queue_depth(r->AddGauge("consensor_queue_depth", "Tasks waiting for a worker.")),
      tasks_running(r->AddGauge("consensor_tasks_running", "Tasks executing now.")),
      blob_bytes_received(r->AddCounter("consensor_blob_received_bytes_total", "Bytes of blobs committed by PutBlob.")),
      blobs_received(r->AddCounter("consensor_blobs_received_total", "Blobs committed by PutBlob.")),
      blob_bytes_sent(r->AddCounter("consensor_blob_sent_bytes_total", "Bytes of blobs streamed by GetBlob.")),
      blobs_stored_bytes(r->AddGauge("consensor_blobs_stored_bytes", "Total size of the blobs in the store.")),
      blobs_stored(r->AddGauge("consensor_blobs_stored", "Number of blobs in the store.")),
      up(r->AddGauge("consensor_up", "1 while the node serves requests.")),
      program_cache_hits(r->AddCounter("consensor_program_cache_hits_total",
                                       "Tasks whose compiled program and weights were already resident.")),
      program_cache_misses(r->AddCounter("consensor_program_cache_misses_total",
                                         "Tasks that read, verified and compiled their graph and weights.")),
      program_cache_evictions(r->AddCounter("consensor_program_cache_evictions_total",
                                            "Programs dropped from the cache to stay within its byte budget.")),
      program_cache_bytes(
          r->AddGauge("consensor_program_cache_bytes", "Bytes the cached programs hold: weights plus one arena each.")),
      program_cache_entries(r->AddGauge("consensor_program_cache_entries", "Compiled programs in the cache.")),
      input_cache_hits(r->AddCounter("consensor_input_cache_hits_total",
                                     "Task inputs found decoded in memory: no blob read, hash or parse.")),
      input_cache_misses(r->AddCounter("consensor_input_cache_misses_total",
                                       "Task inputs read from the store, verified against their hash and parsed.")),
      input_cache_evictions(r->AddCounter("consensor_input_cache_evictions_total",
                                          "Decoded inputs dropped to stay within the input cache's byte budget.")),
      input_cache_bytes(r->AddGauge("consensor_input_cache_bytes", "Bytes the decoded inputs in memory cost.")),
      input_cache_entries(r->AddGauge("consensor_input_cache_entries", "Decoded inputs in memory.")) {}

void ExportBackendSelfTest(MetricsRegistry* registry, const std::string& backend, bool ok, double seconds) {
  const MetricsRegistry::Labels labels = {{"backend", backend}};
  registry
      ->AddGauge("consensor_backend_selftest_ok",
                 "1 when the executor backend reproduced the CPU reference in the startup self-test, 0 when it did "
                 "not (the node then runs on the CPU or does not start).",
                 labels)
      ->Set(ok ? 1 : 0);
  registry->AddGauge("consensor_backend_selftest_seconds", "Wall time of the startup backend self-test.", labels)
      ->Set(seconds);
}

void ExportBackendInfo(MetricsRegistry* registry, const std::string& backend, const std::string& device) {
  registry
      ->AddGauge("consensor_backend_info",
                 "Always 1; the labels say which executor backend runs tasks and on what device (GPU model, "
                 "compute capability, memory).",
                 {{"backend", backend}, {"device", device}})
      ->Set(1);
}

}  // namespace consensor::node
