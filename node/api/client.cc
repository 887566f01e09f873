#include "node/api/client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "common/file_io.h"
#include "common/sha256.h"

namespace consensor::node {

namespace {

constexpr size_t kUploadChunkBytes = size_t{1} << 20;

}  // namespace

void NodeClient::Prepare(grpc::ClientContext* context, std::chrono::milliseconds timeout) const {
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  if (!api_key_.empty()) context->AddMetadata("authorization", "Bearer " + api_key_);
}

Status FromGrpcStatus(const grpc::Status& status, const std::string& address) {
  if (status.ok()) return OkStatus();
  std::string message = status.error_message();
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) message = "node " + address + " unavailable: " + message;
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED)
    message = "unauthenticated by node " + address + ": " + message;
  return Status(static_cast<StatusCode>(status.error_code()), message);
}

NodeClient::NodeClient(const std::string& address, std::chrono::milliseconds call_timeout)
    : address_(address), call_timeout_(call_timeout) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(8 << 20);
  args.SetMaxSendMessageSize(8 << 20);
  stub_ = v1::Client::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

StatusOr<v1::PutBlobResponse> NodeClient::PutBlob(std::span<const uint8_t> bytes) {
  grpc::ClientContext context;
  Prepare(&context, call_timeout_);
  v1::PutBlobResponse response;
  auto writer = stub_->PutBlob(&context, &response);
  v1::PutBlobRequest message;
  message.set_expected_sha256(ToHex(Sha256Of(bytes)));
  // Declared up front: a full node refuses before it stores a byte.
  message.set_size(bytes.size());
  size_t offset = 0;
  do {
    size_t n = std::min(kUploadChunkBytes, bytes.size() - offset);
    message.set_data(bytes.data() + offset, n);
    offset += n;
    if (!writer->Write(message)) break;  // the server ended the call early; Finish has why
    message.clear_expected_sha256();
    message.clear_size();
  } while (offset < bytes.size());
  writer->WritesDone();
  RETURN_IF_ERROR(FromGrpcStatus(writer->Finish(), address_));
  return response;
}

StatusOr<v1::PutBlobResponse> NodeClient::PutBlobFile(const std::string& path, int64_t max_bytes) {
  ASSIGN_OR_RETURN(auto bytes, consensor::ReadFileBytes(path, max_bytes));
  return PutBlob(bytes);
}

StatusOr<std::vector<uint8_t>> NodeClient::GetBlob(const std::string& sha256_hex, int64_t max_bytes) {
  grpc::ClientContext context;
  Prepare(&context, call_timeout_);
  v1::GetBlobRequest request;
  request.set_sha256(sha256_hex);
  auto reader = stub_->GetBlob(&context, request);
  v1::BlobChunk chunk;
  std::vector<uint8_t> bytes;
  bool too_big = false;
  while (reader->Read(&chunk)) {
    if (static_cast<int64_t>(chunk.total_size()) > max_bytes ||
        static_cast<int64_t>(bytes.size() + chunk.data().size()) > max_bytes) {
      too_big = true;
      context.TryCancel();
      break;
    }
    bytes.insert(bytes.end(), chunk.data().begin(), chunk.data().end());
  }
  grpc::Status status = reader->Finish();
  if (too_big)
    return ResourceExhausted("blob " + sha256_hex + " is larger than " + std::to_string(max_bytes) + " bytes");
  RETURN_IF_ERROR(FromGrpcStatus(status, address_));
  if (ToHex(Sha256Of(bytes)) != sha256_hex) {
    return DataLoss("blob " + sha256_hex + " from node " + address_ + " does not match its hash");
  }
  return bytes;
}

StatusOr<v1::SubmitTaskResponse> NodeClient::SubmitTask(const v1::SubmitTaskRequest& request) {
  grpc::ClientContext context;
  Prepare(&context, call_timeout_);
  v1::SubmitTaskResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->SubmitTask(&context, request, &response), address_));
  return response;
}

StatusOr<v1::Task> NodeClient::GetTask(const std::string& task_id) {
  grpc::ClientContext context;
  Prepare(&context, call_timeout_);
  v1::GetTaskRequest request;
  request.set_task_id(task_id);
  v1::Task task;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->GetTask(&context, request, &task), address_));
  return task;
}

StatusOr<v1::Task> NodeClient::WatchTask(const std::string& task_id, std::chrono::milliseconds timeout,
                                         const std::function<void(const v1::Task&)>& on_update,
                                         const std::function<bool(const v1::Task&)>& done) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  v1::WatchTaskRequest request;
  request.set_task_id(task_id);
  auto reader = stub_->WatchTask(&context, request);
  v1::Task task, last;
  bool any = false;
  while (reader->Read(&task)) {
    if (on_update) on_update(task);
    last = task;
    any = true;
    if (done && done(task)) {
      context.TryCancel();
      while (reader->Read(&task)) {
      }
      (void)reader->Finish();
      return last;
    }
  }
  RETURN_IF_ERROR(FromGrpcStatus(reader->Finish(), address_));
  if (!any) return Internal("the watch stream ended without a task");
  return last;
}

StatusOr<v1::RunTaskResponse> NodeClient::RunTask(const v1::SubmitTaskRequest& request,
                                                  std::chrono::milliseconds max_wait,
                                                  std::optional<std::chrono::milliseconds> deadline) {
  grpc::ClientContext context;
  Prepare(&context, deadline.value_or(max_wait + call_timeout_));
  v1::RunTaskRequest run;
  *run.mutable_task() = request;
  run.set_max_wait_ms(static_cast<uint64_t>(std::max<int64_t>(max_wait.count(), 1)));
  v1::RunTaskResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->RunTask(&context, run, &response), address_));
  return response;
}

StatusOr<v1::NodeInfo> NodeClient::GetNodeInfo() {
  grpc::ClientContext context;
  Prepare(&context, call_timeout_);
  v1::NodeInfo info;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->GetNodeInfo(&context, v1::GetNodeInfoRequest(), &info), address_));
  return info;
}

StatusOr<v1::TraceResponse> NodeClient::GetTrace(const std::string& task_id, uint32_t first_op, uint32_t max_ops) {
  grpc::ClientContext context;
  Prepare(&context, call_timeout_);
  v1::GetTraceRequest request;
  request.set_task_id(task_id);
  request.set_first_op(first_op);
  request.set_max_ops(max_ops);
  v1::TraceResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->GetTrace(&context, request, &response), address_));
  return response;
}

}  // namespace consensor::node
