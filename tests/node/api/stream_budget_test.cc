// Per-host GetBlob streams on the peer port (node/api/stream_budget.h), over a real gRPC server
// on loopback serving PeerFacingClientService from an in-memory store.
#include "node/api/stream_budget.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "consensor/v1/node.grpc.pb.h"
#include "node/api/client_service.h"
#include "node/telemetry/node_metrics.h"
#include "tests/node/fakes/memory_store.h"

namespace consensor::node {
namespace {

TEST(StreamBudgetTest, SlotsArePerHostAndGivenBack) {
  MetricsRegistry metrics;
  StreamBudget budget(2, &metrics);
  auto a1 = budget.Open("10.0.0.1");
  auto a2 = budget.Open("10.0.0.1");
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto a3 = budget.Open("10.0.0.1");
  EXPECT_EQ(a3.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(a3.status().message().find("p2p.max_blob_streams_per_host"), std::string::npos);
  EXPECT_TRUE(budget.Open("10.0.0.2").ok()) << "another host has its own slots";
  EXPECT_EQ(budget.open_streams(), 2);  // the other host's slot was given back at once
  a1->Release();
  EXPECT_TRUE(budget.Open("10.0.0.1").ok());
  EXPECT_EQ(metrics.AddCounter("consensor_p2p_streams_refused_total", "")->Value(), 1);
}

// A host whose GetBlob streams on the peer port hold a server thread each (here the server stalls
// every blob after its first chunk, as a reader that never reads would make it wait) gets its
// budget of them; the next one is refused at once, and a stream it closes frees a slot.
TEST(StreamBudgetTest, HostHoldingBlobStreamsOnThePeerPortIsRefusedPastItsBudget) {
  MetricsRegistry registry;
  NodeMetrics metrics(&registry);
  fakes::MemoryStore store;
  std::vector<uint8_t> bytes(1000, 0x5a);
  auto stored = store.PutBlob(bytes);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  const std::string blob = ToHex(stored->sha256);
  ClientService client(&store, nullptr, &metrics, int64_t{1} << 30, [](v1::NodeInfo*) {});
  client.StallServedBlobs();  // each stream holds its handler until the reader goes away
  StreamBudget budget(2, &registry);
  PeerFacingClientService peer_facing(&client, &budget);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&peer_facing);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub =
      v1::Client::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));

  struct Stream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::BlobChunk>> reader;
  };
  auto open = [&] {
    auto s = std::make_unique<Stream>();
    s->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetBlobRequest request;
    request.set_sha256(blob);
    s->reader = stub->GetBlob(&s->context, request);
    return s;
  };
  std::vector<std::unique_ptr<Stream>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(open());
    v1::BlobChunk chunk;
    ASSERT_TRUE(held.back()->reader->Read(&chunk));  // its handler runs and holds a slot
  }
  auto refused = open();
  v1::BlobChunk chunk;
  EXPECT_FALSE(refused->reader->Read(&chunk));
  grpc::Status status = refused->reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("p2p.max_blob_streams_per_host"), std::string::npos);

  held.front()->context.TryCancel();
  held.front()->reader->Finish().error_code();
  held.erase(held.begin());
  // The cancelled handler gives its slot back once it notices (within its 50 ms poll); a new
  // stream is then served.
  bool served = false;
  for (int attempt = 0; attempt < 200 && !served; ++attempt) {
    held.push_back(open());
    served = held.back()->reader->Read(&chunk) && chunk.data().size() == bytes.size();
    if (!served) {
      held.back()->reader->Finish().error_code();
      held.pop_back();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_TRUE(served);
  for (auto& s : held) s->context.TryCancel();
  for (auto& s : held) s->reader->Finish().error_code();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace
}  // namespace consensor::node
