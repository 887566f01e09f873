// What a client computes from its own request: the task id the network must sign. A client that
// fixes every field the id covers (replicas, quorum, protocol version) and compares the id a
// node returns, or a certificate carries, with this one knows that nobody between it and the
// committee changed what it asked for.
#pragma once

#include "common/status.h"
#include "consensor/v1/node.pb.h"
#include "consensus/task.h"

namespace consensor::node {

// The id of `request` as it stands (a 0 protocol version is this build's). INVALID_ARGUMENT
// for a malformed hash or input name.
StatusOr<consensus::TaskSpec> TaskSpecOfRequest(const v1::SubmitTaskRequest& request);
StatusOr<consensus::TaskId> TaskIdOfRequest(const v1::SubmitTaskRequest& request);

}  // namespace consensor::node
