// GetBlob streams on the peer port per requesting operator and per host
// (node/api/stream_budget.h): the bookkeeping alone, then over a real gRPC server on loopback
// serving PeerFacingClientService from an in-memory store.
#include "node/api/stream_budget.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/address.h"
#include "common/clock.h"
#include "consensor/v1/node.grpc.pb.h"
#include "node/api/client_service.h"
#include "node/p2p/peer_request_auth.h"
#include "node/telemetry/node_metrics.h"
#include "tests/node/fakes/memory_store.h"

namespace consensor::node {
namespace {

double Refused(MetricsRegistry& metrics, const char* budget) {
  return metrics.AddCounter("consensor_p2p_streams_refused_total", "", {{"budget", budget}})->Value();
}

// The peer-facing service on a loopback port, and a client stub of it.
struct LoopbackServer {
  explicit LoopbackServer(grpc::Service* service) {
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service);
    server = builder.BuildAndStart();
    stub = v1::Client::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Client::Stub> stub;
};

// One GetBlob stream held open by the test.
struct Stream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::BlobChunk>> reader;
};

TEST(StreamBudgetTest, SlotsArePerHostAndGivenBack) {
  MetricsRegistry metrics;
  StreamBudget budget(StreamBudgetLimits{.max_per_host = 2, .max_per_operator = 0}, &metrics);
  auto a1 = budget.Open("10.0.0.1", "");
  auto a2 = budget.Open("10.0.0.1", "0xaa");
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto a3 = budget.Open("10.0.0.1", "0xbb");  // a fresh operator: still over its host's bound
  EXPECT_EQ(a3.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(a3.status().message().find("p2p.max_blob_streams_per_host"), std::string::npos);
  EXPECT_TRUE(budget.Open("10.0.0.2", "").ok()) << "another host has its own slots";
  EXPECT_EQ(budget.open_streams(), 2);  // the other host's slot was given back at once
  a1->Release();
  EXPECT_TRUE(budget.Open("10.0.0.1", "0xbb").ok());
  EXPECT_EQ(Refused(metrics, "host"), 1);
  EXPECT_EQ(Refused(metrics, "operator"), 0);
}

// Operators sharing a host (a devnet: all 127.0.0.1) each get their own budget, and a host's
// unsigned requests share one; the host's bound stays the outer limit over all of them.
TEST(StreamBudgetTest, OperatorsOnOneHostHaveBudgetsOfTheirOwnWithinTheHostBound) {
  MetricsRegistry metrics;
  StreamBudget budget(StreamBudgetLimits{.max_per_host = 5, .max_per_operator = 2}, &metrics);
  const std::string host = "127.0.0.1";
  std::vector<StreamBudget::Slot> held;
  for (int i = 0; i < 2; ++i) held.push_back(budget.Open(host, "0xaa").value());
  auto over = budget.Open(host, "0xaa");
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("operator 0xaa"), std::string::npos) << over.status().message();
  EXPECT_NE(over.status().message().find("p2p.max_blob_streams_per_operator"), std::string::npos);
  // Another operator on the same host is not held up by the first one's streams.
  for (int i = 0; i < 2; ++i) {
    auto s = budget.Open(host, "0xbb");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    held.push_back(std::move(s).value());
  }
  // Unsigned requests share one operator-sized budget per host.
  held.push_back(budget.Open(host, "").value());
  EXPECT_EQ(budget.open_for(host, ""), 1);
  EXPECT_EQ(budget.open_for(host, "0xaa"), 2);
  // Five open on the host: a third operator is refused by the host's bound, not its own.
  auto third = budget.Open(host, "0xcc");
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("p2p.max_blob_streams_per_host"), std::string::npos);
  // Unsigned requests from another host are another budget.
  auto elsewhere = budget.Open("10.0.0.9", "");
  EXPECT_TRUE(elsewhere.ok());
  EXPECT_EQ(budget.open_for("10.0.0.9", ""), 1);
  EXPECT_EQ(Refused(metrics, "operator"), 1);
  EXPECT_EQ(Refused(metrics, "host"), 1);
  // A closed stream gives back both its slots: the operator's and the host's.
  held.front().Release();
  EXPECT_EQ(budget.open_for(host, "0xaa"), 1);
  EXPECT_TRUE(budget.Open(host, "0xcc").ok());
  EXPECT_TRUE(budget.Open(host, "0xaa").ok());
  held.clear();
  elsewhere->Release();
  EXPECT_EQ(budget.open_streams(), 0);
  EXPECT_EQ(budget.open_for(host, "0xbb"), 0);
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
  StreamBudget budget(StreamBudgetLimits{.max_per_host = 2, .max_per_operator = 0}, &registry);
  PeerFacingClientService peer_facing(&client, &budget);
  LoopbackServer peer_port(&peer_facing);
  ASSERT_NE(peer_port.server, nullptr);
  v1::Client::Stub* stub = peer_port.stub.get();
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
  peer_port.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

// The same over gRPC with the daemon's verifier: an operator's signed requests fill only its
// own budget (another operator on the same host, here the same loopback, is still served), a
// request whose signature is not the requester's is UNAUTHENTICATED, and a signed request from
// a key that is not an operator is PERMISSION_DENIED; neither takes a slot.
TEST(StreamBudgetTest, SignedRequestsCountAgainstTheirOperatorOnThePeerPort) {
  MetricsRegistry registry;
  NodeMetrics metrics(&registry);
  fakes::MemoryStore store;
  std::vector<uint8_t> bytes(1000, 0x33);
  auto stored = store.PutBlob(bytes);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  const std::string blob = ToHex(stored->sha256);
  ClientService client(&store, nullptr, &metrics, int64_t{1} << 30, [](v1::NodeInfo*) {});
  client.StallServedBlobs();
  StreamBudget budget(StreamBudgetLimits{.max_per_host = 8, .max_per_operator = 2}, &registry);
  const PeerRequestDomain domain{31337, Address20{0xc0, 0x47}};
  auto secret = [](uint8_t n) {
    Secp256k1Secret s{};
    s[31] = n;
    return s;
  };
  const Address20 operator_a = AddressFromSecretKey(secret(1)).value();
  const Address20 operator_b = AddressFromSecretKey(secret(2)).value();
  PeerFacingClientService peer_facing(&client, &budget, [&](const v1::GetBlobRequest& request) {
    return VerifyGetBlob(domain, request, UnixMillisNow(), std::chrono::seconds(60),
                         [&](const Address20& a) { return a == operator_a || a == operator_b; });
  });
  LoopbackServer peer_port(&peer_facing);
  ASSERT_NE(peer_port.server, nullptr);
  v1::Client::Stub* stub = peer_port.stub.get();
  // Opens a stream signed with `key` (0: unsigned), with its signature broken when `forge`.
  auto open = [&](uint8_t key, bool forge = false) {
    auto s = std::make_unique<Stream>();
    s->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetBlobRequest request;
    request.set_sha256(blob);
    if (key != 0) {
      EXPECT_TRUE(SignGetBlob(secret(key), domain, &request).ok());
    }
    if (forge) request.set_sent_unix_ms(request.sent_unix_ms() + 1);
    s->reader = stub->GetBlob(&s->context, request);
    return s;
  };
  auto finish_with = [](Stream& s) {
    v1::BlobChunk chunk;
    EXPECT_FALSE(s.reader->Read(&chunk));
    return s.reader->Finish();
  };
  std::vector<std::unique_ptr<Stream>> held;
  v1::BlobChunk chunk;
  for (int i = 0; i < 2; ++i) {
    held.push_back(open(1));
    ASSERT_TRUE(held.back()->reader->Read(&chunk));
  }
  auto refused = open(1);
  grpc::Status status = finish_with(*refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find(AddressToHex(operator_a)), std::string::npos) << status.error_message();
  // Operator B, on the same host, and unsigned requests each have their own budget.
  held.push_back(open(2));
  EXPECT_TRUE(held.back()->reader->Read(&chunk));
  held.push_back(open(0));
  EXPECT_TRUE(held.back()->reader->Read(&chunk));
  EXPECT_EQ(budget.open_for("127.0.0.1", AddressToHex(operator_a)), 2);
  EXPECT_EQ(budget.open_for("127.0.0.1", AddressToHex(operator_b)), 1);
  EXPECT_EQ(budget.open_for("127.0.0.1", ""), 1);

  auto forged = open(2, /*forge=*/true);
  status = finish_with(*forged);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  auto outsider = open(3);
  status = finish_with(*outsider);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_EQ(budget.open_streams(), 4);
  EXPECT_EQ(registry.AddCounter("consensor_p2p_streams_refused_total", "", {{"budget", "operator"}})->Value(), 1);

  for (auto& s : held) s->context.TryCancel();
  for (auto& s : held) s->reader->Finish().error_code();
  peer_port.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace
}  // namespace consensor::node
