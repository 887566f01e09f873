// GetTask and GetNodeInfo on the peer port, rated per requesting operator within a per-host bound,
// and the signature checks of signed requests rated per host (node/p2p/peer_rate_budget.h), over
// a real gRPC server on loopback serving PeerFacingClientService from an in-memory store.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "common/address.h"
#include "common/clock.h"
#include "consensor/v1/node.grpc.pb.h"
#include "node/api/client_service.h"
#include "node/engine/task_manager.h"
#include "node/p2p/peer_rate_budget.h"
#include "node/p2p/peer_request_auth.h"
#include "node/telemetry/node_metrics.h"
#include "tests/node/fakes/memory_store.h"

namespace consensor::node {
namespace {

Secp256k1Secret Secret(uint8_t n) {
  Secp256k1Secret s{};
  s[31] = n;
  return s;
}

struct PeerPort {
  PeerPort(const PeerRateLimits& lookup_limits, double signature_checks_per_second)
      : metrics(&registry),
        tasks(&store, &metrics, TaskManagerOptions{}),
        client(&store, &tasks, &metrics, int64_t{1} << 30, [](v1::NodeInfo* info) { info->set_version("test"); }),
        lookups(lookup_limits, LookupBudgetNames(), &registry),
        checks(PeerRateLimits{.per_requester = 0, .per_host = signature_checks_per_second}, SignatureCheckBudgetNames(),
               &registry) {
    operator_a = AddressFromSecretKey(Secret(1)).value();
    operator_b = AddressFromSecretKey(Secret(2)).value();
    auto is_operator = [this](const Address20& a) { return a == operator_a || a == operator_b; };
    PeerCallGuards guards;
    guards.lookups = &lookups;
    guards.signature_checks = &checks;
    guards.verify_task = [this, is_operator](const v1::GetTaskRequest& r) {
      return VerifyGetTask(domain, r, UnixMillisNow(), std::chrono::seconds(60), is_operator);
    };
    guards.verify_node_info = [this, is_operator](const v1::GetNodeInfoRequest& r) {
      return VerifyGetNodeInfo(domain, r, UnixMillisNow(), std::chrono::seconds(60), is_operator);
    };
    peer_facing = std::make_unique<PeerFacingClientService>(&client, nullptr, nullptr, std::move(guards));
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(peer_facing.get());
    server = builder.BuildAndStart();
    stub = v1::Client::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  ~PeerPort() {
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  // GetTask for a made-up task (NOT_FOUND when served) signed with `key` (0: unsigned); its
  // signature broken when `forge`.
  grpc::Status GetTask(uint8_t key, bool forge = false) {
    v1::GetTaskRequest request;
    request.set_task_id(std::string(64, 'a'));
    if (key != 0) {
      EXPECT_TRUE(SignGetTask(Secret(key), domain, &request).ok());
    }
    if (forge) request.set_task_id(std::string(64, 'b'));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::Task task;
    return stub->GetTask(&context, request, &task);
  }
  grpc::Status GetNodeInfo(uint8_t key) {
    v1::GetNodeInfoRequest request;
    if (key != 0) {
      EXPECT_TRUE(SignGetNodeInfo(Secret(key), domain, &request).ok());
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::NodeInfo info;
    grpc::Status status = stub->GetNodeInfo(&context, request, &info);
    if (status.ok()) {
      EXPECT_EQ(info.version(), "test");
    }
    return status;
  }
  double Counter(const std::string& name, const std::string& call, const std::string& budget) {
    return registry.AddCounter(name, "", {{"call", call}, {"budget", budget}})->Value();
  }

  const PeerRequestDomain domain{31337, Address20{0xc0, 0x47}};
  Address20 operator_a{}, operator_b{};
  MetricsRegistry registry;
  NodeMetrics metrics;
  fakes::MemoryStore store;
  TaskManager tasks;
  ClientService client;
  PeerRateBudget lookups;
  PeerRateBudget checks;
  std::unique_ptr<PeerFacingClientService> peer_facing;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Client::Stub> stub;
};

// One operator's flood of GetTask and GetNodeInfo (one budget for both) is refused past its own
// rate with RESOURCE_EXHAUSTED naming it, while another operator on the same host (here the same
// loopback) is still served; unsigned calls of the host share one rate; a forged signature is
// UNAUTHENTICATED and an outsider's PERMISSION_DENIED, neither spending a budget.
TEST(PeerCallBudgetTest, LookupsAreRatedPerOperatorWithinTheHostBound) {
  PeerPort port(PeerRateLimits{.per_requester = 2, .per_host = 7}, 1000);  // bursts 4 and 14
  ASSERT_NE(port.server, nullptr);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(port.GetTask(1).error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(port.GetNodeInfo(1).ok());
  }
  for (int i = 0; i < 20; ++i) {
    grpc::Status over = i % 2 ? port.GetTask(1) : port.GetNodeInfo(1);
    ASSERT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.error_message();
    EXPECT_NE(over.error_message().find(AddressToHex(port.operator_a)), std::string::npos) << over.error_message();
    EXPECT_NE(over.error_message().find("p2p.max_lookups_per_second_per_operator"), std::string::npos);
  }
  EXPECT_EQ(port.Counter("consensor_p2p_calls_refused_total", "GetTask", "operator"), 10);
  EXPECT_EQ(port.Counter("consensor_p2p_calls_refused_total", "GetNodeInfo", "operator"), 10);

  // Refused before any budget is spent.
  EXPECT_EQ(port.GetTask(2, /*forge=*/true).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(port.GetTask(3).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(port.GetNodeInfo(3).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // Operator B, on the same host, has its whole burst; so do the host's unsigned calls.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(port.GetNodeInfo(2).ok()) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(port.GetTask(0).error_code(), grpc::StatusCode::NOT_FOUND) << i;
  grpc::Status unsigned_over = port.GetNodeInfo(0);
  EXPECT_EQ(unsigned_over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(unsigned_over.error_message().find("unsigned requests from host"), std::string::npos)
      << unsigned_over.error_message();
  EXPECT_EQ(port.GetTask(2).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);  // B's own burst is spent
  // 12 of the host's 14 were taken, all within their requesters' rates: the host bound refused
  // nothing, and A's 20 refused calls took none of it.
  EXPECT_EQ(port.Counter("consensor_p2p_calls_refused_total", "GetTask", "host"), 0);
  EXPECT_EQ(port.Counter("consensor_p2p_calls_refused_total", "GetNodeInfo", "host"), 0);
}

// The host bound over every operator there: with a per-operator rate larger than the host's, the
// host's burst is the limit, counted as budget="host".
TEST(PeerCallBudgetTest, HostBoundIsTheOuterLimit) {
  PeerPort port(PeerRateLimits{.per_requester = 100, .per_host = 2}, 1000);  // host burst 4
  ASSERT_NE(port.server, nullptr);
  EXPECT_TRUE(port.GetNodeInfo(1).ok());
  EXPECT_TRUE(port.GetNodeInfo(1).ok());
  EXPECT_TRUE(port.GetNodeInfo(2).ok());
  EXPECT_TRUE(port.GetNodeInfo(0).ok());
  grpc::Status over = port.GetNodeInfo(2);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.error_message().find("p2p.max_lookups_per_second_per_host"), std::string::npos)
      << over.error_message();
  EXPECT_EQ(port.Counter("consensor_p2p_calls_refused_total", "GetNodeInfo", "host"), 1);
}

// Signed requests pay an ECDSA recovery each; a host over its signature checks per second is
// refused before the check is made (counted per call), while its unsigned calls, which need no
// check, are still served.
TEST(PeerCallBudgetTest, SignatureChecksAreRatedPerHostBeforeTheyAreMade) {
  PeerPort port(PeerRateLimits{.per_requester = 1000, .per_host = 1000}, 1);  // burst of 2 checks
  ASSERT_NE(port.server, nullptr);
  EXPECT_EQ(port.GetTask(1).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(port.GetNodeInfo(2).ok());
  grpc::Status over = port.GetTask(2);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.error_message().find("p2p.max_signature_checks_per_second_per_host"), std::string::npos)
      << over.error_message();
  // A forged signature is refused by the same budget before it costs a recovery.
  EXPECT_EQ(port.GetTask(1, /*forge=*/true).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(port.GetNodeInfo(0).error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(port.Counter("consensor_p2p_signature_checks_refused_total", "GetTask", "host"), 2);
}

}  // namespace
}  // namespace consensor::node
