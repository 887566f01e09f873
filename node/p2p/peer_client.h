// Requests this node makes to another operator's consensor.v1.Client service: the blobs of a
// task it adopts and the result of a task certified by others. The interface is the seam for
// unit tests; the gRPC implementation owns channels and deadlines. It moves bytes and records
// only: checking them (hashes, result roots) is the caller's business.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "common/sha256.h"
#include "common/status.h"
#include "consensor/v1/node.pb.h"

namespace consensor::node {

// Receives a blob's bytes in order; an error stops the transfer and is returned as is.
using BlobSink = std::function<Status(std::span<const uint8_t>)>;

class PeerClient {
 public:
  virtual ~PeerClient() = default;
  // Streams blob `sha256` from the peer at `endpoint` ("host:port") into `sink`. The sink's
  // first error is returned; a failed request is UNAVAILABLE naming the endpoint.
  virtual Status FetchBlob(const std::string& endpoint, const Hash256& sha256, const BlobSink& sink) = 0;
  // The peer's record of a task (with its result when it has one); UNAVAILABLE on failure.
  virtual StatusOr<v1::Task> GetTask(const std::string& endpoint, const std::string& task_id_hex) = 0;
};

// A blob's deadline is sized to its bytes as they arrive: a fetch may take first_bytes_within
// plus one second per min_bytes_per_second received so far. A peer that sends nothing, or
// trickles, is cut off (DEADLINE_EXCEEDED) and the caller tries the next holder; a large blob
// from a peer that keeps up gets the time it needs, up to blob_deadline.
struct GrpcPeerClientOptions {
  std::chrono::milliseconds first_bytes_within{10000};
  int64_t min_bytes_per_second = 256 * 1024;
  std::chrono::seconds blob_deadline{3600};  // a whole blob, however fast it comes
  std::chrono::seconds task_deadline{10};
  // Signs each GetBlob request as this operator (SignGetBlob), so the peer counts the stream
  // against this operator's budget, not its host's. Empty: requests go unsigned.
  std::function<Status(v1::GetBlobRequest*)> sign_blob_request;
  // The same for GetTask requests (SignGetTask): the peer's budget of GetTask and GetNodeInfo
  // calls is then this operator's own.
  std::function<Status(v1::GetTaskRequest*)> sign_task_request;
};

std::unique_ptr<PeerClient> NewGrpcPeerClient(GrpcPeerClientOptions options = {});

}  // namespace consensor::node
