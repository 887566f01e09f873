#include "node/p2p/peer_client.h"

#include <grpcpp/grpcpp.h>

#include "consensor/v1/node.grpc.pb.h"

namespace consensor::node {

namespace {

// A channel per request: peers come and go with the registry, and these requests are rare
// (a task's blobs at adoption, a certified result) next to the work they start.
class GrpcPeerClient final : public PeerClient {
 public:
  explicit GrpcPeerClient(GrpcPeerClientOptions options) : options_(options) {}

  Status FetchBlob(const std::string& endpoint, const Hash256& sha256, const BlobSink& sink) override {
    auto stub = v1::Client::NewStub(grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + options_.blob_deadline);
    v1::GetBlobRequest request;
    request.set_sha256(ToHex(sha256));
    auto reader = stub->GetBlob(&context, request);
    v1::BlobChunk chunk;
    Status appended = OkStatus();
    while (appended.ok() && reader->Read(&chunk)) {
      appended =
          sink(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(chunk.data().data()), chunk.data().size()));
    }
    if (!appended.ok()) context.TryCancel();
    grpc::Status finished = reader->Finish();
    if (!appended.ok()) return appended;
    if (!finished.ok()) return Unavailable(endpoint + ": " + finished.error_message());
    return OkStatus();
  }

  StatusOr<v1::Task> GetTask(const std::string& endpoint, const std::string& task_id_hex) override {
    auto stub = v1::Client::NewStub(grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + options_.task_deadline);
    v1::GetTaskRequest request;
    request.set_task_id(task_id_hex);
    v1::Task task;
    grpc::Status s = stub->GetTask(&context, request, &task);
    if (!s.ok()) return Unavailable(endpoint + ": " + s.error_message());
    return task;
  }

 private:
  const GrpcPeerClientOptions options_;
};

}  // namespace

std::unique_ptr<PeerClient> NewGrpcPeerClient(GrpcPeerClientOptions options) {
  return std::make_unique<GrpcPeerClient>(options);
}

}  // namespace consensor::node
