#include "node/p2p/peer_client.h"

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <mutex>
#include <thread>

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
    if (options_.sign_blob_request) {
      if (Status s = options_.sign_blob_request(&request); !s.ok()) return s.WithContext("signing GetBlob");
    }
    auto reader = stub->GetBlob(&context, request);
    // The watchdog cancels the call once it runs past what the bytes received so far allow
    // (a Read blocked on a silent peer cannot check that itself).
    struct Progress {
      std::mutex mu;
      std::condition_variable cv;
      int64_t received = 0;
      bool done = false;
      bool too_slow = false;
    } progress;
    const auto start = std::chrono::steady_clock::now();
    std::thread watchdog([&] {
      std::unique_lock<std::mutex> lock(progress.mu);
      while (!progress.done) {
        const auto allowed =
            options_.first_bytes_within +
            std::chrono::milliseconds(progress.received * 1000 / std::max<int64_t>(options_.min_bytes_per_second, 1));
        if (std::chrono::steady_clock::now() - start > allowed) {
          progress.too_slow = true;
          context.TryCancel();
          return;
        }
        progress.cv.wait_for(lock, std::chrono::milliseconds(100));
      }
    });
    v1::BlobChunk chunk;
    Status appended = OkStatus();
    while (appended.ok() && reader->Read(&chunk)) {
      {
        std::lock_guard<std::mutex> lock(progress.mu);
        progress.received += static_cast<int64_t>(chunk.data().size());
      }
      appended =
          sink(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(chunk.data().data()), chunk.data().size()));
    }
    if (!appended.ok()) context.TryCancel();
    grpc::Status finished = reader->Finish();
    bool too_slow = false;
    int64_t received = 0;
    {
      std::lock_guard<std::mutex> lock(progress.mu);
      progress.done = true;
      too_slow = progress.too_slow;
      received = progress.received;
    }
    progress.cv.notify_all();
    watchdog.join();
    if (!appended.ok()) return appended;
    if (too_slow) {
      return DeadlineExceeded(endpoint + ": blob " + ToHex(sha256) + " came too slowly (" + std::to_string(received) +
                              " bytes; at least " + std::to_string(options_.min_bytes_per_second) +
                              " bytes per second are expected)");
    }
    if (!finished.ok()) return Unavailable(endpoint + ": " + finished.error_message());
    return OkStatus();
  }

  StatusOr<v1::Task> GetTask(const std::string& endpoint, const std::string& task_id_hex) override {
    auto stub = v1::Client::NewStub(grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + options_.task_deadline);
    v1::GetTaskRequest request;
    request.set_task_id(task_id_hex);
    if (options_.sign_task_request) RETURN_IF_ERROR(options_.sign_task_request(&request));
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
