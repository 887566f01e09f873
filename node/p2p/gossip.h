// Operator-to-operator gossip (service consensor.v1.Peer, proto/consensor/v1/peer.proto).
//
// Every message is an Envelope: a serialized GossipMessage plus the sender's secp256k1 signature
// over keccak256("consensor.gossip.v2" || u64be(chain_id) || contract || payload), contract being
// the deployment's service manager: a message does not replay on another deployment of the
// same chain. A node pushes each new
// message to a random `fanout` subset of its peers, which verify, dedupe and relay it. Pushes are
// best effort (bounded queues, no retries); every pull_interval each node also pulls the recent
// log of every peer (anti-entropy), which repairs whatever pushing lost.
//
// Inbound accounting: every envelope that arrives (pushed or pulled) counts in
// consensor_p2p_messages_received_total and ends in exactly one of accepted_total,
// duplicate_total or dropped_total{reason}, reason being one of rate_limited, too_many,
// oversized, malformed, wrong_chain, signature_budget, bad_signature, unregistered, rejected,
// no_room.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "common/secp256k1_sign.h"
#include "common/sha256.h"
#include "common/status.h"
#include "consensor/v1/peer.grpc.pb.h"
#include "node/p2p/gossip_publisher.h"
#include "node/p2p/peer_rate_budget.h"
#include "node/p2p/signed_request_replays.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

struct GossipOptions {
  uint64_t chain_id = 0;
  Address20 contract{};   // the deployment's service manager (EIP-712 verifying contract)
  Secp256k1Secret key{};  // this operator's key: signs every message it publishes
  int fanout = 6;         // peers each new message is pushed to (random subset; all if fewer)
  // Per inbound peer (keyed by the grpc peer's address string): a token bucket holding up to
  // 2x this many messages. Zero or negative: no limit.
  double max_messages_per_second = 500;
  // Per author: the registered operator whose signature an envelope carries, whichever peer or
  // connection it comes through (new connections do not reset it). A token bucket holding up
  // to 2x this many new messages; over it a message is dropped as rate_limited and not
  // remembered, so a later copy is taken. Zero or negative: no limit.
  double max_messages_per_second_per_operator = 1000;
  // Pull (anti-entropy) is served only to registered operators, proved by a signed request.
  // Once the signature is verified, requests are limited per operator (a token bucket of 2x
  // max_pull_requests_per_second_per_operator), then per remote IP as the outer bound over every
  // operator there (2x max_pull_requests_per_second_per_ip; charged only by requests their
  // operator's bucket let through, so one operator's flood cannot spend its host's), then each
  // operator's response bytes (2x max_pull_bytes_per_second_per_operator). Over any:
  // RESOURCE_EXHAUSTED with kPullBudgetMessage. Zero or negative: no limit.
  double max_pull_requests_per_second_per_operator = 25;
  double max_pull_requests_per_second_per_ip = 100;
  double max_pull_bytes_per_second_per_operator = 16 << 20;
  // Signature checks (ECDSA recoveries) per remote host, taken before each check of a pushed
  // envelope, a Pull request, and (on the peer port) a signed GetBlob, GetTask or GetNodeInfo
  // request: a token bucket of 2x this many. Over it a pushed envelope is dropped as
  // signature_budget and not remembered (a later copy, or a pull, delivers it), and a request is
  // refused with RESOURCE_EXHAUSTED. Envelopes this node pulls are not charged: it chooses whom
  // it pulls from and how much. Zero or negative: no limit.
  double max_signature_checks_per_second_per_host = 5000;
  std::chrono::milliseconds max_pull_clock_skew = kSignedPeerRequestClockSkew;  // |receiver's clock - sent_unix_ms|
  int peer_queue_capacity = 4096;  // outbound messages waiting per peer; beyond: dropped and counted
  int log_capacity = 20000;        // recent messages kept for Pull
  // The same two bounds in bytes (serialized envelopes): messages may be up to
  // max_message_bytes each, so a count alone would allow gigabytes. The newest message is
  // always kept in the log.
  int64_t peer_queue_capacity_bytes = int64_t{16} << 20;
  int64_t log_capacity_bytes = int64_t{64} << 20;
  // Message ids remembered for dedupe (FIFO eviction). Keep it above log_capacity: an id
  // forgotten while still in peers' logs is pulled and handled again.
  int seen_capacity = 100000;
  std::chrono::milliseconds pull_interval{2000};  // anti-entropy pull from every peer
  // An envelope payload larger than this is dropped (and cannot be published). Capped at just
  // under gRPC's default 4 MiB message limit: every envelope must fit in one Gossip or Pull
  // message, whatever the peers' gRPC limits.
  int64_t max_message_bytes = 1 << 20;
  // Fault injection only (refuse-everywhere): every Pull is answered with an empty page.
  bool withhold_pulls = false;
};

// Called for each new, signature-verified message from an authorized sender (never for the
// node's own Publish). OK accepts it (it is then logged and relayed); an error rejects it (not
// relayed; counted as dropped with reason "rejected"; not offered to the handler again), except
// RESOURCE_EXHAUSTED: no room for it now (reason "no_room"; a later copy is offered again).
// Called concurrently from several threads. It may call Publish, but not SetPeers or Shutdown.
using GossipHandler =
    std::function<Status(const v1::GossipMessage& message, const Hash256& message_id, const Address20& sender)>;
// True when the address is an active registered operator (the node asks its chain view).
// Called concurrently from several threads.
using GossipAuthorizer = std::function<bool(const Address20& sender)>;

class GossipNetwork final : public GossipPublisher {
 public:
  // `metrics` may be null (the network then keeps its own registry). An invalid key makes every
  // Publish fail (the constructor cannot).
  GossipNetwork(GossipOptions options, GossipHandler handler, GossipAuthorizer authorizer, MetricsRegistry* metrics);
  ~GossipNetwork() override;  // Shutdown()
  GossipNetwork(const GossipNetwork&) = delete;
  GossipNetwork& operator=(const GossipNetwork&) = delete;

  // The consensor.v1.Peer service; the node registers it on its grpc server. The server must be
  // shut down before this object is destroyed.
  grpc::Service* service();
  void Start();     // starts one worker thread per peer (pushes and pulls); later peers get theirs at once
  void Shutdown();  // idempotent; cancels in-flight RPCs and joins the workers. No restart afterwards.

  // Replaces the peer list (endpoints "host:port"); the node's own endpoint must be excluded by
  // the caller. Endpoints that stay keep their channel, queue and pull cursor. New peers are
  // pulled from cursor 0 at once (catch-up).
  void SetPeers(const std::vector<std::string>& endpoints);

  // Signs (sets chain_id, sender, sent_unix_ms), records as seen, appends to the log and pushes
  // to `fanout` peers. Returns the message id.
  StatusOr<Hash256> Publish(v1::GossipMessage message) override;
  // Re-pushes an already-built envelope (e.g. re-announcing after restart); not re-signed. The
  // envelope must parse, carry our chain id, be signed by the sender it names and be at most
  // max_message_bytes; it is logged (so peers can pull it) unless already seen.
  StatusOr<Hash256> Rebroadcast(const v1::Envelope& envelope);

  size_t connected_peers() const;  // peers whose last RPC succeeded
  // The per-host signature-check budget (max_signature_checks_per_second_per_host), for the
  // peer port's signed requests to share with gossip. Never null.
  PeerRateBudget* signature_checks() { return signature_checks_.get(); }
  // The signed requests served on the peer port (Pull here; GetBlob, GetTask and GetNodeInfo on
  // the peer-facing client service), each served once (node/p2p/signed_request_replays.h).
  SignedRequestReplays* signed_request_replays() { return signed_request_replays_.get(); }
  uint64_t log_epoch() const { return epoch_; }

  static Hash256 MessageId(std::string_view payload);  // SHA-256(payload)
  // keccak256("consensor.gossip.v2" || u64be(chain_id) || contract (20 bytes) || payload)
  static Hash256 SigningDigest(uint64_t chain_id, const Address20& contract, std::string_view payload);
  // Serializes and signs `message`. Fields left unset are filled in: chain_id (0 -> `chain_id`)
  // and sender (empty -> the key's address). Fields already set are kept as they are, so tests
  // can build envelopes that receivers must refuse.
  static StatusOr<v1::Envelope> Sign(const Secp256k1Secret& key, uint64_t chain_id, const Address20& contract,
                                     const v1::GossipMessage& message);
  // The inbound path's checks before dedupe, in order: size, a payload that parses with a
  // 20-byte sender, the chain id. Returns the drop reason ("oversized", "malformed",
  // "wrong_chain"), or null with `message` parsed. Public for the fuzz target.
  static const char* DecodeInbound(const v1::Envelope& envelope, uint64_t chain_id, int64_t max_payload_bytes,
                                   v1::GossipMessage* message);
  // What a Pull request's requester signs (peer.proto, PullRequest).
  static Hash256 PullDigest(uint64_t chain_id, const Address20& contract, const v1::PullRequest& request);
  // Fills in the requester, sent_unix_ms (now, unless already set) and signature.
  static Status SignPull(const Secp256k1Secret& key, uint64_t chain_id, const Address20& contract,
                         v1::PullRequest* request);
  // The message of a refusal for being over a Pull budget (the puller waits for its next round).
  static constexpr std::string_view kPullBudgetMessage = "over the pull budget";

  // OK when the envelope's signature (for this chain and contract) recovers to the sender its
  // message names.
  static Status VerifySender(uint64_t chain_id, const Address20& contract, const v1::Envelope& envelope,
                             const v1::GossipMessage& message);

 private:
  enum class Outcome { kAccepted, kDuplicate, kDropped };
  struct Peer;
  class PeerService;
  struct IdHash {
    size_t operator()(const Hash256& id) const noexcept;
  };
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point last;
  };

  // One envelope as the log and every peer queue hold it: shared, not copied per peer (Pull also
  // copies it outside log_mu_), with its serialized size computed once.
  struct Logged {
    std::shared_ptr<const v1::Envelope> envelope;
    size_t bytes = 0;
  };
  static Logged Share(const v1::Envelope& envelope);

  // The inbound path shared by pushes and pulls. `origin` is the endpoint the envelope came from
  // when known (pulls), so the relay skips it. `pusher_host` is the remote host of a push, whose
  // signature-check budget pays for verifying it (null for pulls).
  Outcome ProcessEnvelope(const v1::Envelope& envelope, const std::string* origin,
                          const std::string* pusher_host = nullptr);
  Outcome Drop(const char* reason, size_t count = 1);
  bool TakeTokens(const std::string& peer, size_t messages);
  bool TakeOperatorToken(const Address20& author);
  bool MarkSeenIfNew(const Hash256& id);  // false when already seen
  void MarkSeenLocked(const Hash256& id);
  void AppendToLog(const Logged& entry);
  void Relay(const Logged& entry, const std::string* origin);
  void Enqueue(Peer& peer, const Logged& entry);
  grpc::Status HandleGossip(grpc::ServerContext* context, const v1::GossipRequest& request,
                            v1::GossipResponse* response);
  grpc::Status HandlePull(grpc::ServerContext* context, const v1::PullRequest& request, v1::PullResponse* response);
  // Why a Pull request may not be served (its rate, its signature, its requester), or OK with
  // the verified requester in *requester.
  grpc::Status AuthorizePull(grpc::ServerContext* context, const v1::PullRequest& request, Address20* requester);

  void StartWorker(const std::shared_ptr<Peer>& peer);
  void StopWorker(Peer& peer);
  void RunWorker(Peer& peer);
  bool SendBatch(Peer& peer, const std::vector<std::shared_ptr<const v1::Envelope>>& batch);
  void PullFrom(Peer& peer);
  void SetConnected(Peer& peer, bool connected);

  const GossipOptions options_;
  const GossipHandler handler_;
  const GossipAuthorizer authorizer_;
  const int64_t max_payload_bytes_;  // options_.max_message_bytes, capped to fit in a gRPC message
  std::unique_ptr<MetricsRegistry> own_metrics_;
  Status key_status_;
  Address20 self_address_{};
  const uint64_t epoch_;
  std::unique_ptr<PeerService> service_;
  std::unique_ptr<PeerRateBudget> signature_checks_;
  std::unique_ptr<PeerRateBudget> pull_requests_;  // per operator, then per host
  std::unique_ptr<SignedRequestReplays> signed_request_replays_;

  struct Metrics {
    Counter* received;
    Counter* accepted;
    Counter* duplicate;
    std::map<std::string, Counter*, std::less<>> dropped;  // by reason
    Counter* send_failures;
    Counter* queue_dropped;
    Gauge* peers;
    Gauge* peers_connected;
  } metrics_{};

  mutable std::mutex lifecycle_mu_;  // serializes Start, SetPeers and Shutdown
  bool started_ = false;
  std::atomic<bool> shut_down_{false};

  mutable std::mutex peers_mu_;  // before any Peer::mu
  std::map<std::string, std::shared_ptr<Peer>> peers_;
  std::atomic<int> connected_count_{0};

  std::mutex seen_mu_;
  std::unordered_set<Hash256, IdHash> seen_;
  std::deque<Hash256> seen_order_;                 // FIFO eviction
  std::unordered_set<Hash256, IdHash> in_flight_;  // ids being verified or handled right now

  mutable std::mutex log_mu_;
  std::deque<Logged> log_;  // log_.back() has sequence number log_head_
  uint64_t log_head_ = 0;
  size_t log_bytes_ = 0;

  std::mutex rate_mu_;
  std::map<std::string, Bucket> buckets_;              // by connection
  std::map<Address20, Bucket> operator_buckets_;       // by verified author
  std::map<Address20, Bucket> pull_operator_buckets_;  // Pull response bytes, by verified requester

  std::mutex rng_mu_;
  std::mt19937_64 rng_;
};

}  // namespace consensor::node
