// The gRPC peer client (node/p2p/peer_client.h) against real loopback servers that play the
// peer: one that serves a blob at once, one that never sends a byte, one that trickles. The
// deadline follows the bytes: the honest transfer completes, the other two are cut off with
// DEADLINE_EXCEEDED instead of holding the caller for the whole blob deadline.
#include "node/p2p/peer_client.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/sha256.h"
#include "consensor/v1/node.grpc.pb.h"

namespace consensor::node {
namespace {

using namespace std::chrono_literals;

enum class Behaviour { kServes, kSilent, kTrickles };

// Serves GetBlob the way `behaviour` says, until the call is cancelled.
class PlayedPeer final : public v1::Client::Service {
 public:
  explicit PlayedPeer(Behaviour behaviour) : behaviour_(behaviour) {}
  grpc::Status GetBlob(grpc::ServerContext* context, const v1::GetBlobRequest*,
                       grpc::ServerWriter<v1::BlobChunk>* writer) override {
    v1::BlobChunk chunk;
    switch (behaviour_) {
      case Behaviour::kServes:
        chunk.set_data(std::string(64 * 1024, 'x'));
        for (int i = 0; i < 4; ++i) writer->Write(chunk);
        return grpc::Status::OK;
      case Behaviour::kSilent:
        while (!context->IsCancelled()) std::this_thread::sleep_for(10ms);
        return grpc::Status::CANCELLED;
      case Behaviour::kTrickles:
        chunk.set_data("x");
        while (!context->IsCancelled()) {
          writer->Write(chunk);
          std::this_thread::sleep_for(20ms);
        }
        return grpc::Status::CANCELLED;
    }
    return grpc::Status::OK;
  }

 private:
  Behaviour behaviour_;
};

struct Server {
  explicit Server(Behaviour behaviour) : service(behaviour) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  }
  ~Server() { server->Shutdown(std::chrono::system_clock::now() + 1s); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port); }
  PlayedPeer service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

// A second to show the first bytes, then 1 KiB/s: the trickler sends ~50 B/s.
GrpcPeerClientOptions Options() {
  GrpcPeerClientOptions options;
  options.first_bytes_within = 1000ms;
  options.min_bytes_per_second = 1024;
  options.blob_deadline = 600s;  // far beyond what the test waits for
  return options;
}

Status Fetch(const Server& server, int64_t* received) {
  auto client = NewGrpcPeerClient(Options());
  return client->FetchBlob(server.endpoint(), Sha256Of(std::string("any")), [&](std::span<const uint8_t> bytes) {
    *received += static_cast<int64_t>(bytes.size());
    return OkStatus();
  });
}

TEST(GrpcPeerClientTest, APeerThatKeepsUpGetsTheTimeItsBytesNeed) {
  Server peer(Behaviour::kServes);
  ASSERT_GT(peer.port, 0);
  int64_t received = 0;
  Status s = Fetch(peer, &received);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(received, 4 * 64 * 1024);
}

TEST(GrpcPeerClientTest, APeerThatSendsNothingIsCutOff) {
  Server peer(Behaviour::kSilent);
  ASSERT_GT(peer.port, 0);
  int64_t received = 0;
  Status s = Fetch(peer, &received);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("too slowly"), std::string::npos) << s.ToString();
  EXPECT_EQ(received, 0);
}

TEST(GrpcPeerClientTest, APeerThatTricklesIsCutOff) {
  Server peer(Behaviour::kTrickles);
  ASSERT_GT(peer.port, 0);
  int64_t received = 0;
  Status s = Fetch(peer, &received);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_GT(received, 0);
}

}  // namespace
}  // namespace consensor::node
