#include "node/api/task_spec.h"

#include <string>

#include "common/sha256.h"

namespace consensor::node {

StatusOr<consensus::TaskSpec> TaskSpecOfRequest(const v1::SubmitTaskRequest& request) {
  consensus::TaskSpec spec;
  ASSIGN_OR_RETURN(spec.graph_sha256, HashFieldFromHex(request.graph_sha256(), "graph_sha256"));
  for (const auto& [name, hex] : request.inputs()) {
    ASSIGN_OR_RETURN(Hash256 h, HashFieldFromHex(hex, "input '" + name + "'"));
    spec.inputs.emplace_back(name, h);
  }
  const v1::TaskOptions& o = request.options();
  spec.nonce = o.nonce();
  spec.replicas = o.replicas();
  spec.quorum = o.quorum();
  spec.protocol_version = o.protocol_version() == 0 ? consensus::kProtocolVersion : o.protocol_version();
  return spec;
}

StatusOr<consensus::TaskId> TaskIdOfRequest(const v1::SubmitTaskRequest& request) {
  ASSIGN_OR_RETURN(consensus::TaskSpec spec, TaskSpecOfRequest(request));
  return consensus::ComputeTaskId(spec);
}

}  // namespace consensor::node
