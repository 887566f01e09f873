#include "node/p2p/gossip.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/keccak.h"

namespace consensor::node {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kChain = 31337;
const Address20 kContract{0xc0, 0x47};  // the deployment's service manager

Secp256k1Secret SecretNumber(uint8_t n) {
  Secp256k1Secret secret{};
  secret[31] = n;
  return secret;
}

Address20 AddressOf(uint8_t n) { return AddressFromSecretKey(SecretNumber(n)).value(); }

std::string AddressBytes(const Address20& address) {
  return std::string(reinterpret_cast<const char*>(address.data()), address.size());
}

// Polls until `condition` holds or the timeout passes; the caller asserts on the result.
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return condition();
}

// "m" + to_string(n), written so GCC 12's -Wrestrict false positive on literal + string stays quiet.
std::string Numbered(std::string_view prefix, int n) {
  std::string text(prefix);
  text += std::to_string(n);
  return text;
}

// An announcement told apart by its graph hash field.
v1::GossipMessage Announcement(const std::string& tag, uint64_t reference_block = 1) {
  v1::GossipMessage message;
  message.mutable_announcement()->mutable_spec()->set_graph_sha256(tag);
  message.mutable_announcement()->set_reference_block(reference_block);
  return message;
}

// Operators allowed to gossip; can grow during a test (a registration the node learns late).
class AllowedGossipers {
 public:
  explicit AllowedGossipers(std::set<Address20> members) : members_(std::move(members)) {}
  void Add(const Address20& address) {
    std::lock_guard lock(mu_);
    members_.insert(address);
  }
  bool Contains(const Address20& address) const {
    std::lock_guard lock(mu_);
    return members_.contains(address);
  }

 private:
  mutable std::mutex mu_;
  std::set<Address20> members_;
};

// One gossip network on its own gRPC server, with a handler that records every delivery.
class TestNode {
 public:
  using Verdict = std::function<Status(const v1::GossipMessage&)>;

  TestNode(uint8_t key_number, std::shared_ptr<AllowedGossipers> operators, GossipOptions options = {},
           Verdict verdict = nullptr, int port = 0,
           const std::function<void(grpc::ServerBuilder&)>& configure_server = nullptr)
      : operators_(std::move(operators)), verdict_(std::move(verdict)) {
    options.chain_id = kChain;
    options.contract = kContract;
    options.key = SecretNumber(key_number);
    gossip = std::make_unique<GossipNetwork>(
        options,
        [this](const v1::GossipMessage& message, const Hash256& id, const Address20& sender) {
          return Deliver(message, id, sender);
        },
        [ops = operators_](const Address20& sender) { return ops->Contains(sender); }, &metrics);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(gossip->service());
    if (configure_server) configure_server(builder);
    server = builder.BuildAndStart();
    endpoint = "127.0.0.1:" + std::to_string(port_);
  }
  ~TestNode() { Stop(); }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    gossip->Shutdown();
    if (server) server->Shutdown(std::chrono::system_clock::now() + 1s);
  }

  bool ok() const { return server != nullptr && port_ > 0; }
  int port() const { return port_; }

  int Deliveries(const Hash256& id) const {
    std::lock_guard lock(mu_);
    auto it = deliveries_.find(id);
    return it == deliveries_.end() ? 0 : it->second;
  }
  bool SawTag(const std::string& tag) const {
    std::lock_guard lock(mu_);
    return tags_.contains(tag);
  }
  std::map<Hash256, int> AllDeliveries() const {
    std::lock_guard lock(mu_);
    return deliveries_;
  }
  size_t HandlerCalls() const {
    std::lock_guard lock(mu_);
    size_t total = 0;
    for (const auto& [id, count] : deliveries_) total += static_cast<size_t>(count);
    return total;
  }

  double CounterValue(const std::string& name, const MetricsRegistry::Labels& labels = {}) {
    return metrics.AddCounter(name, "", labels)->Value();
  }
  double Dropped(const std::string& reason) {
    return CounterValue("consensor_p2p_messages_dropped_total", {{"reason", reason}});
  }
  double Duplicates() { return CounterValue("consensor_p2p_messages_duplicate_total"); }

  std::unique_ptr<v1::Peer::Stub> RawStub() const {
    return v1::Peer::NewStub(grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
  }

  MetricsRegistry metrics;
  std::unique_ptr<GossipNetwork> gossip;
  std::unique_ptr<grpc::Server> server;  // declared after gossip: destroyed before the service it serves
  std::string endpoint;

 private:
  Status Deliver(const v1::GossipMessage& message, const Hash256& id, const Address20& sender) {
    Status verdict = verdict_ ? verdict_(message) : OkStatus();
    std::lock_guard lock(mu_);
    ++deliveries_[id];
    tags_.insert(message.announcement().spec().graph_sha256());
    return verdict;
  }

  std::shared_ptr<AllowedGossipers> operators_;
  Verdict verdict_;
  int port_ = 0;
  bool stopped_ = false;
  mutable std::mutex mu_;
  std::map<Hash256, int> deliveries_;
  std::set<std::string> tags_;
};

GossipOptions FastOptions() {
  GossipOptions options;
  options.pull_interval = 200ms;
  return options;
}

v1::Envelope SignedBy(uint8_t key_number, const v1::GossipMessage& message, uint64_t chain_id = kChain,
                      const Address20& contract = kContract) {
  return GossipNetwork::Sign(SecretNumber(key_number), chain_id, contract, message).value();
}

// Pushes envelopes the way a peer would; returns accepted (or -1 on an RPC error).
int Push(v1::Peer::Stub& stub, const std::vector<v1::Envelope>& envelopes, grpc::Status* status_out = nullptr) {
  v1::GossipRequest request;
  for (const auto& envelope : envelopes) *request.add_messages() = envelope;
  v1::GossipResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  grpc::Status status = stub.Gossip(&context, request, &response);
  if (status_out != nullptr) *status_out = status;
  return status.ok() ? static_cast<int>(response.accepted()) : -1;
}

// A Pull request as a registered operator's node makes it: signed by `signer`'s key.
v1::PullRequest SignedPull(uint64_t epoch, uint64_t cursor, uint32_t max_messages = 0, uint8_t signer = 1) {
  v1::PullRequest request;
  request.set_epoch(epoch);
  request.set_cursor(cursor);
  request.set_max_messages(max_messages);
  EXPECT_TRUE(GossipNetwork::SignPull(SecretNumber(signer), kChain, kContract, &request).ok());
  return request;
}

grpc::Status CallPull(v1::Peer::Stub& stub, const v1::PullRequest& request, v1::PullResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  return stub.Pull(&context, request, response);
}

v1::PullResponse PullPage(v1::Peer::Stub& stub, uint64_t epoch, uint64_t cursor, uint32_t max_messages = 0) {
  v1::PullResponse response;
  grpc::Status status = CallPull(stub, SignedPull(epoch, cursor, max_messages), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

TEST(GossipSigningTest, DigestIdAndSignatureFollowTheWireFormat) {
  v1::GossipMessage message = Announcement("abc");
  v1::Envelope envelope = SignedBy(7, message);

  v1::GossipMessage parsed;
  ASSERT_TRUE(parsed.ParseFromString(envelope.payload()));
  EXPECT_EQ(parsed.chain_id(), kChain);                    // filled in when unset
  EXPECT_EQ(parsed.sender(), AddressBytes(AddressOf(7)));  // filled in when unset
  EXPECT_EQ(GossipNetwork::MessageId(envelope.payload()), Sha256Of(envelope.payload()));

  // keccak256("consensor.gossip.v2" || u64be(chain_id) || contract || payload), built
  // independently.
  std::string preimage = "consensor.gossip.v2";
  for (int shift = 56; shift >= 0; shift -= 8) preimage.push_back(static_cast<char>((kChain >> shift) & 0xff));
  preimage.append(reinterpret_cast<const char*>(kContract.data()), kContract.size());
  preimage += envelope.payload();
  const Hash256 digest = Keccak256(preimage);
  EXPECT_EQ(GossipNetwork::SigningDigest(kChain, kContract, envelope.payload()), digest);
  Address20 other_contract = kContract;
  other_contract[19] ^= 1;
  EXPECT_NE(GossipNetwork::SigningDigest(kChain, other_contract, envelope.payload()), digest);

  ASSERT_EQ(envelope.signature().size(), 65u);
  const uint8_t v = static_cast<uint8_t>(envelope.signature()[64]);
  EXPECT_TRUE(v == 27 || v == 28);
  auto signature = FromBytes65(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(envelope.signature().data()),
                                                        envelope.signature().size()));
  ASSERT_TRUE(signature.ok());
  auto signer = RecoverAddress(digest, *signature);
  ASSERT_TRUE(signer.ok());
  EXPECT_EQ(*signer, AddressOf(7));

  // Fields the caller set are kept, even when they do not match the key.
  v1::GossipMessage forged = Announcement("abc");
  forged.set_sender(AddressBytes(AddressOf(1)));
  forged.set_chain_id(5);
  ASSERT_TRUE(parsed.ParseFromString(SignedBy(7, forged).payload()));
  EXPECT_EQ(parsed.sender(), AddressBytes(AddressOf(1)));
  EXPECT_EQ(parsed.chain_id(), 5u);
}

TEST(GossipNetworkTest, PublishReachesEveryOtherNodeExactlyOnce) {
  auto operators =
      std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1), AddressOf(2), AddressOf(3), AddressOf(4)});
  std::vector<std::unique_ptr<TestNode>> nodes;
  for (uint8_t k = 1; k <= 4; ++k) {
    nodes.push_back(std::make_unique<TestNode>(k, operators, FastOptions()));
    ASSERT_TRUE(nodes.back()->ok());
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::vector<std::string> others;
    for (size_t j = 0; j < nodes.size(); ++j) {
      if (j != i) others.push_back(nodes[j]->endpoint);
    }
    nodes[i]->gossip->SetPeers(others);
    nodes[i]->gossip->Start();
  }

  // Every node publishes at once, so copies of the same message race each other everywhere.
  std::vector<std::pair<size_t, Hash256>> published;  // (origin, id)
  for (int round = 0; round < 5; ++round) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      auto id = nodes[i]->gossip->Publish(Announcement(Numbered("n", static_cast<int>(i)) + Numbered("r", round)));
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      published.emplace_back(i, *id);
    }
  }

  auto everyone_has_everything = [&] {
    for (const auto& [origin, id] : published) {
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (i != origin && nodes[i]->Deliveries(id) == 0) return false;
      }
    }
    return true;
  };
  ASSERT_TRUE(WaitFor(everyone_has_everything));
  // Let the redundant copies arrive (relays and pulls) before judging "exactly once": each
  // message is relayed back to its origin by the 3 others, so 60 duplicates is a floor.
  ASSERT_TRUE(WaitFor([&] {
    double duplicates = 0;
    for (auto& node : nodes) duplicates += node->Duplicates();
    return duplicates >= 60;
  }));
  ASSERT_TRUE(WaitFor([&] {
    for (auto& node : nodes) {
      if (node->gossip->connected_peers() != 3) return false;
    }
    return true;
  }));

  for (const auto& [origin, id] : published) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      EXPECT_EQ(nodes[i]->Deliveries(id), i == origin ? 0 : 1) << "node " << i << " origin " << origin;
    }
  }
  for (auto& node : nodes) {
    EXPECT_EQ(node->HandlerCalls(), 15u);
    EXPECT_EQ(node->metrics.AddGauge("consensor_p2p_peers", "")->Value(), 3);
    EXPECT_EQ(node->metrics.AddGauge("consensor_p2p_peers_connected", "")->Value(), 3);
  }

  for (auto& node : nodes) node->Stop();
  // Every envelope that arrived is accounted for exactly once.
  for (auto& node : nodes) {
    double dropped = 0;
    for (const char* reason : {"rate_limited", "too_many", "oversized", "malformed", "wrong_chain", "bad_signature",
                               "unregistered", "rejected"}) {
      dropped += node->Dropped(reason);
    }
    EXPECT_EQ(dropped, 0);
    EXPECT_EQ(node->CounterValue("consensor_p2p_messages_received_total"),
              node->CounterValue("consensor_p2p_messages_accepted_total") + node->Duplicates() + dropped);
    EXPECT_EQ(node->CounterValue("consensor_p2p_messages_accepted_total"), 15);
    EXPECT_EQ(node->gossip->connected_peers(), 0u);
  }
}

TEST(GossipNetworkTest, InvalidMessagesAreDroppedAndCounted) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1), AddressOf(2)});
  GossipOptions options = FastOptions();
  options.max_message_bytes = 4096;
  TestNode node(2, operators, options);
  ASSERT_TRUE(node.ok());
  node.gossip->Start();
  auto stub = node.RawStub();

  // A valid message is delivered once; its copy is only counted.
  const v1::Envelope valid = SignedBy(1, Announcement("valid"));
  const Hash256 valid_id = GossipNetwork::MessageId(valid.payload());
  EXPECT_EQ(Push(*stub, {valid}), 1);
  EXPECT_EQ(Push(*stub, {valid, valid}), 0);
  EXPECT_EQ(node.Deliveries(valid_id), 1);
  EXPECT_EQ(node.Duplicates(), 2);

  // Signed by a key that is not a registered operator.
  const v1::Envelope stranger = SignedBy(9, Announcement("stranger"));
  EXPECT_EQ(Push(*stub, {stranger}), 0);
  EXPECT_EQ(node.Dropped("unregistered"), 1);

  // The sender field names operator 1, but key 9 signed it.
  v1::GossipMessage impostor = Announcement("impostor");
  impostor.set_sender(AddressBytes(AddressOf(1)));
  EXPECT_EQ(Push(*stub, {SignedBy(9, impostor)}), 0);
  // A signature that is not 65 bytes, and one that is 65 bytes of garbage.
  v1::Envelope short_signature = SignedBy(1, Announcement("short"));
  short_signature.set_signature("too short");
  v1::Envelope garbage_signature = SignedBy(1, Announcement("garbage"));
  garbage_signature.set_signature(std::string(65, '\x01'));
  EXPECT_EQ(Push(*stub, {short_signature, garbage_signature}), 0);
  EXPECT_EQ(node.Dropped("bad_signature"), 3);

  // Signed correctly, for another chain.
  v1::GossipMessage other_chain = Announcement("other chain");
  other_chain.set_chain_id(kChain + 1);
  EXPECT_EQ(Push(*stub, {SignedBy(1, other_chain, kChain + 1)}), 0);
  EXPECT_EQ(node.Dropped("wrong_chain"), 1);

  // Signed correctly for another deployment on the same chain (issue 18): does not replay here.
  Address20 other_deployment = kContract;
  other_deployment[0] ^= 0xff;
  EXPECT_EQ(Push(*stub, {SignedBy(1, Announcement("other deployment"), kChain, other_deployment)}), 0);
  EXPECT_EQ(node.Dropped("bad_signature"), 4);

  // Not a GossipMessage at all, and one whose sender is not 20 bytes.
  v1::Envelope malformed;
  malformed.set_payload(std::string("\xff\xff\xff\xff", 4));
  malformed.set_signature(std::string(65, '\0'));
  v1::GossipMessage short_sender = Announcement("short sender");
  short_sender.set_sender("12345");
  EXPECT_EQ(Push(*stub, {malformed, SignedBy(1, short_sender), v1::Envelope()}), 0);
  EXPECT_EQ(node.Dropped("malformed"), 3);

  // Over max_message_bytes.
  EXPECT_EQ(Push(*stub, {SignedBy(1, Announcement(std::string(5000, 'x')))}), 0);
  EXPECT_EQ(node.Dropped("oversized"), 1);

  // More than 256 envelopes in one request.
  grpc::Status status;
  EXPECT_EQ(Push(*stub, std::vector<v1::Envelope>(257, valid), &status), -1);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(node.Dropped("too_many"), 257);

  EXPECT_EQ(node.HandlerCalls(), 1u);  // only the valid message ever reached the handler

  // None of the refused ids was remembered: the genuine envelope behind a forged signature still
  // gets through, and so does an operator whose registration we learn late.
  v1::Envelope genuine = SignedBy(1, Announcement("garbage"));
  EXPECT_EQ(Push(*stub, {genuine}), 1);
  operators->Add(AddressOf(9));
  EXPECT_EQ(Push(*stub, {stranger}), 1);
  EXPECT_TRUE(node.SawTag("stranger"));
  EXPECT_EQ(node.HandlerCalls(), 3u);
}

TEST(GossipNetworkTest, RejectedMessagesAreNotRelayed) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1), AddressOf(2), AddressOf(3)});
  // A -> B -> C, and C also pulls from B. B refuses announcements at reference block 666.
  TestNode a(1, operators, FastOptions());
  TestNode b(2, operators, FastOptions(), [](const v1::GossipMessage& message) {
    return message.announcement().reference_block() == 666 ? InvalidArgument("refused") : OkStatus();
  });
  TestNode c(3, operators, FastOptions());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  a.gossip->SetPeers({b.endpoint});
  b.gossip->SetPeers({c.endpoint});
  c.gossip->SetPeers({b.endpoint});
  for (TestNode* node : {&a, &b, &c}) node->gossip->Start();

  ASSERT_TRUE(a.gossip->Publish(Announcement("refused", 666)).ok());
  ASSERT_TRUE(a.gossip->Publish(Announcement("fine", 7)).ok());
  // B handles A's messages in order and relays in order, so once C has the second one, the
  // first would have reached it too had B relayed it.
  ASSERT_TRUE(WaitFor([&] { return c.SawTag("fine"); }));
  EXPECT_TRUE(b.SawTag("refused"));
  EXPECT_FALSE(c.SawTag("refused"));
  EXPECT_EQ(b.Dropped("rejected"), 1);
  EXPECT_EQ(c.HandlerCalls(), 1u);
}

// A handler out of room (RESOURCE_EXHAUSTED) is not a verdict on the message: the id stays
// unseen, and the same envelope is handled again, and accepted, once there is room.
TEST(GossipNetworkTest, MessageRefusedForLackOfRoomIsAcceptedLater) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1), AddressOf(2)});
  std::atomic<bool> full{true};
  TestNode node(2, operators, FastOptions(),
                [&](const v1::GossipMessage&) { return full.load() ? ResourceExhausted("no room") : OkStatus(); });
  ASSERT_TRUE(node.ok());
  node.gossip->Start();
  auto stub = node.RawStub();

  const v1::Envelope early = SignedBy(1, Announcement("early"));
  const Hash256 id = GossipNetwork::MessageId(early.payload());
  EXPECT_EQ(Push(*stub, {early}), 0);
  EXPECT_EQ(node.Dropped("no_room"), 1);
  EXPECT_EQ(node.Dropped("rejected"), 0);
  EXPECT_EQ(Push(*stub, {early}), 0);  // still no room: handled again, not a duplicate
  EXPECT_EQ(node.Duplicates(), 0);
  EXPECT_EQ(node.Deliveries(id), 2);

  full = false;
  EXPECT_EQ(Push(*stub, {early}), 1);
  EXPECT_EQ(node.Deliveries(id), 3);
  EXPECT_EQ(Push(*stub, {early}), 0);  // now it is seen
  EXPECT_EQ(node.Duplicates(), 1);
}

TEST(GossipNetworkTest, AntiEntropyCatchesUpANodeThatHadNoPeers) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1), AddressOf(4)});
  TestNode a(1, operators, FastOptions());
  TestNode d(4, operators, FastOptions());
  ASSERT_TRUE(a.ok() && d.ok());
  a.gossip->Start();
  d.gossip->Start();
  // More than two pull pages' worth, published while nobody listens (A knows no peers).
  constexpr int kMessages = 1100;
  for (int i = 0; i < kMessages; ++i) ASSERT_TRUE(a.gossip->Publish(Announcement(Numbered("m", i))).ok());
  EXPECT_EQ(d.HandlerCalls(), 0u);

  d.gossip->SetPeers({a.endpoint});
  ASSERT_TRUE(WaitFor([&] { return d.HandlerCalls() == kMessages; }));
  EXPECT_EQ(d.AllDeliveries().size(), static_cast<size_t>(kMessages));
  EXPECT_EQ(d.gossip->connected_peers(), 1u);

  // Dropping the peer again stops the worker and clears the gauges.
  d.gossip->SetPeers({});
  EXPECT_EQ(d.gossip->connected_peers(), 0u);
  EXPECT_EQ(d.metrics.AddGauge("consensor_p2p_peers", "")->Value(), 0);
}

TEST(GossipNetworkTest, PullPagesShrinkToFitThePeersMessageLimit) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1), AddressOf(4)});
  // A's server refuses to send any gRPC message over 2 KB, a handful of envelopes.
  TestNode a(1, operators, FastOptions(), nullptr, 0,
             [](grpc::ServerBuilder& builder) { builder.SetMaxSendMessageSize(2000); });
  TestNode d(4, operators, FastOptions());
  ASSERT_TRUE(a.ok() && d.ok());
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(a.gossip->Publish(Announcement(Numbered(std::string(200, 'x'), i))).ok());
  }
  d.gossip->SetPeers({a.endpoint});
  d.gossip->Start();
  ASSERT_TRUE(WaitFor([&] { return d.HandlerCalls() == 40; }));
}

TEST(GossipNetworkTest, PublishRefusesMessagesTooLargeForOneRpc) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1)});
  GossipOptions options = FastOptions();
  options.max_message_bytes = int64_t{64} << 20;  // capped to what one gRPC message can carry
  TestNode node(1, operators, options);
  auto too_large = node.gossip->Publish(Announcement(std::string(5 << 20, 'x')));
  ASSERT_FALSE(too_large.ok());
  EXPECT_EQ(too_large.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(node.gossip->Publish(Announcement(std::string(3 << 20, 'x'))).ok());
}

TEST(GossipNetworkTest, RestartedPeerIsPulledFromTheStartOfItsNewLog) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1), AddressOf(4)});
  auto a = std::make_unique<TestNode>(1, operators, FastOptions());
  TestNode d(4, operators, FastOptions());
  ASSERT_TRUE(a->ok() && d.ok());
  const int port = a->port();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a->gossip->Publish(Announcement(Numbered("before", i))).ok());
  d.gossip->SetPeers({a->endpoint});
  d.gossip->Start();
  ASSERT_TRUE(WaitFor([&] { return d.HandlerCalls() == 3; }));  // D's cursor into A's log is now 3
  const uint64_t old_epoch = a->gossip->log_epoch();

  // Same endpoint, new process: a new log whose first message has sequence number 1 < 3.
  a.reset();
  a = std::make_unique<TestNode>(1, operators, FastOptions(), nullptr, port);
  ASSERT_TRUE(a->ok());
  EXPECT_NE(a->gossip->log_epoch(), old_epoch);
  ASSERT_TRUE(a->gossip->Publish(Announcement("after")).ok());
  ASSERT_TRUE(WaitFor([&] { return d.SawTag("after"); }));
  EXPECT_EQ(d.HandlerCalls(), 4u);
}

TEST(GossipNetworkTest, PullServesTheLogByEpochAndCursor) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1)});
  GossipOptions options = FastOptions();
  options.log_capacity = 4;
  TestNode node(1, operators, options);
  ASSERT_TRUE(node.ok());
  std::vector<Hash256> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(node.gossip->Publish(Announcement(Numbered("p", i))).value());
  auto stub = node.RawStub();
  auto id_of = [](const v1::PullResponse& response, int i) {
    return GossipNetwork::MessageId(response.messages(i).payload());
  };

  // A first contact (epoch 0) starts at the oldest kept message, sequence 3.
  v1::PullResponse page = PullPage(*stub, 0, 0, 2);
  const uint64_t epoch = page.epoch();
  EXPECT_EQ(epoch, node.gossip->log_epoch());
  ASSERT_EQ(page.messages_size(), 2);
  EXPECT_EQ(id_of(page, 0), ids[2]);
  EXPECT_EQ(id_of(page, 1), ids[3]);
  EXPECT_EQ(page.next_cursor(), 4u);
  EXPECT_TRUE(page.more());

  page = PullPage(*stub, epoch, 4);
  ASSERT_EQ(page.messages_size(), 2);
  EXPECT_EQ(id_of(page, 1), ids[5]);
  EXPECT_EQ(page.next_cursor(), 6u);
  EXPECT_FALSE(page.more());

  page = PullPage(*stub, epoch, 6);  // up to date
  EXPECT_EQ(page.messages_size(), 0);
  EXPECT_EQ(page.next_cursor(), 6u);
  EXPECT_FALSE(page.more());

  page = PullPage(*stub, epoch + 1, 6);  // a cursor from another epoch counts as 0
  EXPECT_EQ(page.messages_size(), 4);
  EXPECT_EQ(page.next_cursor(), 6u);

  page = PullPage(*stub, epoch, 1);  // older than anything kept: from the oldest
  ASSERT_EQ(page.messages_size(), 4);
  EXPECT_EQ(id_of(page, 0), ids[2]);

  page = PullPage(*stub, epoch, ~uint64_t{0});  // a cursor never handed out
  EXPECT_EQ(page.messages_size(), 0);
  EXPECT_EQ(page.next_cursor(), 6u);
  EXPECT_FALSE(page.more());
}

// Pull hands out up to 3 MiB per request. Served to anyone, it let any host read a node's
// whole gossip log as fast as it could ask; now only a registered operator that signs its
// request is served, each operator's bytes are metered, and requests are limited per host
// before any signature is checked.
TEST(GossipNetworkTest, PullIsServedOnlyToRegisteredOperatorsWithinTheirBudget) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1), AddressOf(2), AddressOf(4)});
  GossipOptions options = FastOptions();
  options.max_pull_requests_per_second_per_ip = 0;         // unlimited here; tested below
  options.max_pull_bytes_per_second_per_operator = 20000;  // a bucket of 40,000 bytes
  TestNode node(1, operators, options);
  ASSERT_TRUE(node.ok());
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(node.gossip->Publish(Announcement(Numbered("m", i) + std::string(10000, 'x'))).ok());
  }
  auto stub = node.RawStub();
  v1::PullResponse response;
  auto expect_refused = [&](const v1::PullRequest& request, grpc::StatusCode code, std::string_view says) {
    v1::PullResponse refused;
    grpc::Status status = CallPull(*stub, request, &refused);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
    EXPECT_EQ(refused.messages_size(), 0);
  };

  v1::PullRequest unsigned_pull;
  expect_refused(unsigned_pull, grpc::StatusCode::UNAUTHENTICATED, "signature");
  expect_refused(SignedPull(0, 0, 0, /*signer=*/3), grpc::StatusCode::PERMISSION_DENIED, "registered operators only");
  v1::PullRequest altered = SignedPull(0, 0, 1, 2);
  altered.set_max_messages(1000);  // changed after signing
  expect_refused(altered, grpc::StatusCode::UNAUTHENTICATED, "not the requester's");
  v1::PullRequest claimed = SignedPull(0, 0, 0, 3);  // key 3 claims to be operator 2
  const Address20 operator_two = AddressOf(2);
  claimed.set_requester(std::string(reinterpret_cast<const char*>(operator_two.data()), operator_two.size()));
  expect_refused(claimed, grpc::StatusCode::UNAUTHENTICATED, "not the requester's");
  v1::PullRequest other_deployment;
  ASSERT_TRUE(GossipNetwork::SignPull(SecretNumber(2), kChain, Address20{0x99}, &other_deployment).ok());
  expect_refused(other_deployment, grpc::StatusCode::UNAUTHENTICATED, "another chain or deployment");
  v1::PullRequest stale;
  stale.set_sent_unix_ms(UnixMillisNow() - 10 * 60 * 1000);  // a request captured ten minutes ago
  ASSERT_TRUE(GossipNetwork::SignPull(SecretNumber(2), kChain, kContract, &stale).ok());
  expect_refused(stale, grpc::StatusCode::UNAUTHENTICATED, "from this node's clock");

  // Operator 2 takes the whole log (60 KB, more than its 40 KB bucket: a full bucket lets one
  // page through and goes into debt), then is over its budget; operator 4 is not affected.
  ASSERT_TRUE(CallPull(*stub, SignedPull(0, 0, 0, 2), &response).ok());
  EXPECT_EQ(response.messages_size(), 6);
  expect_refused(SignedPull(0, 0, 0, 2), grpc::StatusCode::RESOURCE_EXHAUSTED, GossipNetwork::kPullBudgetMessage);
  v1::PullResponse other;
  ASSERT_TRUE(CallPull(*stub, SignedPull(0, 0, 0, 4), &other).ok());
  EXPECT_EQ(other.messages_size(), 6);

  // Requests are rated per operator once the signature is verified, with the host's rate as the
  // outer bound: operator 4's flood is refused at its own rate and spends nothing of the host's,
  // so operator 1 on the same host (this loopback) is still served; the host bound then caps
  // them together. Unsigned requests cost no signature check and are refused as such.
  GossipOptions limited = FastOptions();
  limited.max_pull_requests_per_second_per_operator = 1;  // a bucket of 2
  limited.max_pull_requests_per_second_per_ip = 2;        // a bucket of 4
  TestNode second(2, operators, limited);
  ASSERT_TRUE(second.ok());
  auto second_stub = second.RawStub();
  auto pull_as = [&](uint8_t signer) {
    v1::PullResponse ignored;
    return CallPull(*second_stub, SignedPull(0, 0, 0, signer), &ignored);
  };
  EXPECT_TRUE(pull_as(4).ok());
  EXPECT_TRUE(pull_as(4).ok());
  for (int i = 0; i < 10; ++i) {
    grpc::Status status = pull_as(4);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_NE(status.error_message().find(GossipNetwork::kPullBudgetMessage), std::string::npos);
    EXPECT_NE(status.error_message().find("p2p.max_pull_requests_per_second_per_operator"), std::string::npos)
        << status.error_message();
  }
  for (int i = 0; i < 5; ++i) {
    v1::PullResponse ignored;
    EXPECT_EQ(CallPull(*second_stub, unsigned_pull, &ignored).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_TRUE(pull_as(1).ok()) << "another operator on the flooder's host";
  EXPECT_TRUE(pull_as(1).ok());
  grpc::Status host_full = pull_as(2);  // the host's 4 are taken: a third operator there waits
  EXPECT_EQ(host_full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << host_full.error_message();
  EXPECT_NE(host_full.error_message().find("p2p.max_pull_requests_per_second_per_ip"), std::string::npos)
      << host_full.error_message();
  const char kRefused[] = "consensor_p2p_calls_refused_total";
  EXPECT_EQ(second.CounterValue(kRefused, {{"call", "Pull"}, {"budget", "operator"}}), 10);
  EXPECT_EQ(second.CounterValue(kRefused, {{"call", "Pull"}, {"budget", "host"}}), 1);
}

// Signature checks per remote host: a pushed envelope over the host's budget is dropped before
// its signature is checked (reason signature_budget) and not remembered, so the same bytes are
// taken once the bucket has refilled; duplicates of a seen message cost no check. A signed Pull
// over it is refused as over the pull budget, before its check.
TEST(GossipNetworkTest, SignatureChecksAreRatedPerHostAndARefusalIsNotSeen) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1), AddressOf(2)});
  GossipOptions options = FastOptions();
  options.max_signature_checks_per_second_per_host = 2;  // a bucket of 4, refilled in 2 s
  TestNode node(2, operators, options);
  ASSERT_TRUE(node.ok());
  auto stub = node.RawStub();
  std::vector<v1::Envelope> batch;
  for (int i = 0; i < 6; ++i) batch.push_back(SignedBy(1, Announcement(Numbered("check", i))));
  grpc::Status status;
  EXPECT_EQ(Push(*stub, batch, &status), 4);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(node.Dropped("signature_budget"), 2);
  EXPECT_EQ(node.CounterValue("consensor_p2p_signature_checks_refused_total", {{"call", "Gossip"}, {"budget", "host"}}),
            2);
  // Copies of what was accepted are duplicates: no check is paid for them.
  EXPECT_EQ(Push(*stub, {batch[0], batch[1]}, &status), 0);
  EXPECT_EQ(node.Dropped("signature_budget"), 2);
  v1::PullResponse ignored;
  grpc::Status pull = CallPull(*stub, SignedPull(0, 0, 0, 1), &ignored);
  EXPECT_EQ(pull.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << pull.error_message();
  EXPECT_NE(pull.error_message().find("p2p.max_signature_checks_per_second_per_host"), std::string::npos)
      << pull.error_message();
  // The refused envelopes were not remembered: once the bucket refills they are taken.
  std::this_thread::sleep_for(1100ms);
  EXPECT_EQ(Push(*stub, {batch[4], batch[5]}, &status), 2);
  EXPECT_EQ(node.Dropped("signature_budget"), 2);
}

// The rate limit that a new connection does not reset: per author, after the signature is
// verified. One operator's messages over its budget are dropped (and taken again later, they are
// not remembered); another operator's are unaffected.
TEST(GossipNetworkTest, OperatorOverItsRateLimitIsLimitedOnEveryConnection) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1), AddressOf(2), AddressOf(3)});
  GossipOptions options = FastOptions();
  options.max_messages_per_second = 0;               // no per-connection limit: only the author's
  options.max_messages_per_second_per_operator = 1;  // burst of 2
  TestNode node(3, operators, options);
  ASSERT_TRUE(node.ok());
  int accepted = 0;
  std::vector<v1::Envelope> refused;
  for (int i = 0; i < 6; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("consensor.test.connection", 100 + i);  // a fresh connection each time
    auto stub = v1::Peer::NewStub(grpc::CreateCustomChannel(node.endpoint, grpc::InsecureChannelCredentials(), args));
    v1::Envelope envelope = SignedBy(1, Announcement(Numbered("flood", i)));
    grpc::Status status;
    const int n = Push(*stub, {envelope}, &status);
    ASSERT_TRUE(status.ok()) << status.error_message();
    accepted += n;
    if (n == 0) refused.push_back(envelope);
  }
  EXPECT_LE(accepted, 3);  // the burst, plus at most one refill while pushing
  EXPECT_EQ(node.Dropped("rate_limited"), 6 - accepted);
  // Another author is unaffected.
  auto stub = node.RawStub();
  grpc::Status status;
  EXPECT_EQ(Push(*stub, {SignedBy(2, Announcement("other"))}, &status), 1);
  // A refused message was not remembered: once the bucket refills, the same bytes are taken.
  ASSERT_FALSE(refused.empty());
  std::this_thread::sleep_for(2100ms);
  EXPECT_EQ(Push(*stub, {refused.front()}, &status), 1);
}

// Messages may be up to max_message_bytes each, so the log and the per-peer queues are bounded
// in bytes too: a count of 20,000 (or 4,096 per peer) of 1 MiB messages would be gigabytes.
TEST(GossipNetworkTest, LogAndPeerQueuesAreBoundedByBytes) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1)});
  GossipOptions options = FastOptions();
  options.log_capacity_bytes = 250 * 1024;
  options.peer_queue_capacity_bytes = 250 * 1024;
  TestNode node(1, operators, options);
  ASSERT_TRUE(node.ok());
  node.gossip->SetPeers({"127.0.0.1:1"});  // never started: everything pushed waits in its queue
  std::vector<Hash256> ids;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(node.gossip->Publish(Announcement(Numbered("big", i) + std::string(100 * 1024, 'x'))).value());
  }
  // Two ~100 KiB messages fit in 250 KiB; the queue refused the other four.
  EXPECT_EQ(node.CounterValue("consensor_p2p_send_queue_dropped_total"), 4);
  auto stub = node.RawStub();
  v1::PullResponse page = PullPage(*stub, 0, 0);
  ASSERT_EQ(page.messages_size(), 2);
  EXPECT_EQ(GossipNetwork::MessageId(page.messages(0).payload()), ids[4]);
  EXPECT_EQ(GossipNetwork::MessageId(page.messages(1).payload()), ids[5]);
  EXPECT_EQ(page.next_cursor(), 6u);

  // A message larger than the byte bound alone is still logged (the newest always is).
  auto huge = node.gossip->Publish(Announcement("huge" + std::string(300 * 1024, 'y')));
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  page = PullPage(*stub, page.epoch(), 6);
  ASSERT_EQ(page.messages_size(), 1);
  EXPECT_EQ(GossipNetwork::MessageId(page.messages(0).payload()), *huge);
  page = PullPage(*stub, 0, 0);
  EXPECT_EQ(page.messages_size(), 1) << "older messages stay past the byte bound";
}

TEST(GossipNetworkTest, PeerOverItsRateLimitGetsResourceExhausted) {
  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1), AddressOf(2)});
  GossipOptions options = FastOptions();
  options.max_messages_per_second = 1;  // burst of 2
  TestNode node(2, operators, options);
  ASSERT_TRUE(node.ok());
  auto stub = node.RawStub();

  int exhausted = 0;
  grpc::Status status;
  EXPECT_EQ(Push(*stub, {SignedBy(1, Announcement("r0"))}, &status), 1);
  for (int i = 1; i < 6; ++i) {
    if (Push(*stub, {SignedBy(1, Announcement(Numbered("r", i)))}, &status) < 0) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
      ++exhausted;
    }
  }
  EXPECT_GE(exhausted, 3);
  EXPECT_EQ(node.Dropped("rate_limited"), exhausted);
  EXPECT_EQ(node.HandlerCalls(), static_cast<size_t>(6 - exhausted));
}

TEST(GossipNetworkTest, ShutdownCancelsRpcsToAPeerThatNeverAnswers) {
  // A socket that accepts TCP connections (in the kernel's backlog) but never speaks HTTP/2.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);

  auto operators = std::make_shared<AllowedGossipers>(std::set<Address20>{AddressOf(1)});
  GossipOptions options;
  options.pull_interval = 60s;
  TestNode node(1, operators, options);
  node.gossip->SetPeers({"127.0.0.1:" + std::to_string(ntohs(address.sin_port))});
  node.gossip->Start();
  ASSERT_TRUE(node.gossip->Publish(Announcement("into the void")).ok());
  std::this_thread::sleep_for(100ms);  // let the worker block in its first RPC

  const auto start = Clock::now();
  node.gossip->Shutdown();
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_EQ(node.gossip->connected_peers(), 0u);
  node.gossip->Shutdown();  // idempotent
  ::close(listener);
}

}  // namespace
}  // namespace consensor::node
