// A client of a node's consensor.v1.Client API, used by the `consensor` CLI and the
// benchmarks. Errors come back as Status with the server's code and message.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "consensor/v1/node.grpc.pb.h"

namespace grpc {
class ClientContext;
class Status;
}  // namespace grpc

namespace consensor::node {

class NodeClient {
 public:
  // Connects lazily; the first call fails with UNAVAILABLE if nothing listens at `address`.
  explicit NodeClient(const std::string& address, std::chrono::milliseconds call_timeout = std::chrono::seconds(60));

  // Uploads in chunks; the node verifies the hash it computes against the one computed here.
  StatusOr<v1::PutBlobResponse> PutBlob(std::span<const uint8_t> bytes);
  StatusOr<v1::PutBlobResponse> PutBlobFile(const std::string& path, int64_t max_bytes);
  StatusOr<std::vector<uint8_t>> GetBlob(const std::string& sha256_hex, int64_t max_bytes);
  StatusOr<v1::SubmitTaskResponse> SubmitTask(const v1::SubmitTaskRequest& request);
  StatusOr<v1::Task> GetTask(const std::string& task_id);
  // Calls on_update for every state the node reports; returns the last task, when the node
  // ends the stream (the task is done: final, or failed) or as soon as `done` holds.
  StatusOr<v1::Task> WatchTask(const std::string& task_id, std::chrono::milliseconds timeout,
                               const std::function<void(const v1::Task&)>& on_update,
                               const std::function<bool(const v1::Task&)>& done = nullptr);
  // SubmitTask and a wait in one call: the task once it is final, or as it is when `max_wait`
  // has passed (not final then). The call's deadline is `max_wait` plus the usual call timeout
  // unless `deadline` is given (a shorter one ends the call with DEADLINE_EXCEEDED instead).
  StatusOr<v1::RunTaskResponse> RunTask(const v1::SubmitTaskRequest& request, std::chrono::milliseconds max_wait,
                                        std::optional<std::chrono::milliseconds> deadline = std::nullopt);
  StatusOr<v1::NodeInfo> GetNodeInfo();
  // The node executes the task again to recompute its trace (as long as `call_timeout`).
  StatusOr<v1::TraceResponse> GetTrace(const std::string& task_id, uint32_t first_op, uint32_t max_ops);

  const std::string& address() const { return address_; }
  // Every call from now on carries `authorization: Bearer <key>` (empty: no key).
  void SetApiKey(std::string key) { api_key_ = std::move(key); }

 private:
  void Prepare(grpc::ClientContext* context, std::chrono::milliseconds timeout) const;

  std::string address_;
  std::string api_key_;
  std::chrono::milliseconds call_timeout_;
  std::unique_ptr<v1::Client::Stub> stub_;
};

Status FromGrpcStatus(const grpc::Status& status, const std::string& address);

}  // namespace consensor::node
