#include "node/p2p/gossip.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include "common/clock.h"
#include "common/keccak.h"
#include "node/telemetry/log.h"

namespace consensor::node {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxEnvelopesPerRequest = 256;
constexpr size_t kMaxBatchMessages = 64;
// gRPC refuses messages over 4 MiB by default. Batches and pull pages stay well below that, and
// always carry at least one envelope, so one envelope must fit in a gRPC message on its own:
// otherwise it could not be pushed, and a peer pulling it would stay stuck on it forever.
constexpr int64_t kGrpcMessageLimit = int64_t{4} << 20;
constexpr int64_t kMaxPayloadBytes = kGrpcMessageLimit - 4096;  // room for signature and framing
constexpr size_t kMaxBatchBytes = 2u << 20;
constexpr size_t kMaxPullResponseBytes = 3u << 20;
constexpr uint32_t kMaxPullMessages = 1024;
constexpr uint32_t kPullPageMessages = 512;
constexpr int kMaxPullPagesPerRound = 8;
constexpr auto kRpcDeadline = std::chrono::seconds(2);
constexpr auto kMinSendBackoff = std::chrono::milliseconds(100);
constexpr auto kMaxSendBackoff = std::chrono::milliseconds(5000);
constexpr auto kMinPullInterval = std::chrono::milliseconds(10);
// Rate-limit buckets are per connection; this caps the memory an attacker opening many
// connections can make us hold.
constexpr size_t kMaxRateBuckets = 4096;
// v2: the contract joined the chain id (v1 messages replayed across deployments on one chain).
constexpr std::string_view kSigningDomain = "consensor.gossip.v2";
constexpr std::string_view kPullDomain = "consensor.pull.v1";

const char* const kDropReasons[] = {"rate_limited",     "too_many",      "oversized",    "malformed", "wrong_chain",
                                    "signature_budget", "bad_signature", "unregistered", "rejected",  "no_room"};

std::string_view AsBytes(const Address20& address) {
  return {reinterpret_cast<const char*>(address.data()), address.size()};
}

uint64_t RandomEpoch() {
  std::random_device device;
  uint64_t epoch = 0;
  while (epoch == 0) epoch = (uint64_t{device()} << 32) ^ device();  // 0 is what a fresh client sends
  return epoch;
}

}  // namespace

struct GossipNetwork::Peer {
  explicit Peer(std::string endpoint_in) : endpoint(std::move(endpoint_in)) {
    grpc::ChannelArguments args;
    // gRPC's default reconnect backoff grows to 120 s; a restarted peer should be back sooner.
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
    channel = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
    stub = v1::Peer::NewStub(channel);
  }

  const std::string endpoint;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Peer::Stub> stub;

  std::mutex mu;  // guards queue, in_flight and writes to stop
  std::condition_variable cv;
  std::deque<Logged> queue;
  size_t queue_bytes = 0;                    // serialized bytes in `queue`
  grpc::ClientContext* in_flight = nullptr;  // so Shutdown can cancel it
  std::atomic<bool> stop{false};
  std::thread worker;
  std::atomic<bool> connected{false};

  // Anti-entropy position in the peer's log; only the worker touches these.
  uint64_t pull_epoch = 0;
  uint64_t pull_cursor = 0;
  uint32_t pull_page_messages = kPullPageMessages;  // shrinks while pages hit a size limit
  bool pull_refused = false;                        // the peer answers our pulls with a refusal
};

class GossipNetwork::PeerService final : public v1::Peer::Service {
 public:
  explicit PeerService(GossipNetwork* network) : network_(network) {}
  grpc::Status Gossip(grpc::ServerContext* context, const v1::GossipRequest* request,
                      v1::GossipResponse* response) override {
    return network_->HandleGossip(context, *request, response);
  }
  grpc::Status Pull(grpc::ServerContext* context, const v1::PullRequest* request, v1::PullResponse* response) override {
    return network_->HandlePull(context, *request, response);
  }

 private:
  GossipNetwork* network_;
};

size_t GossipNetwork::IdHash::operator()(const Hash256& id) const noexcept {
  size_t h;  // ids are SHA-256 outputs: any 8 bytes are uniformly distributed
  std::memcpy(&h, id.data(), sizeof(h));
  return h;
}

GossipNetwork::GossipNetwork(GossipOptions options, GossipHandler handler, GossipAuthorizer authorizer,
                             MetricsRegistry* metrics)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      authorizer_(std::move(authorizer)),
      max_payload_bytes_(std::min(options_.max_message_bytes, kMaxPayloadBytes)),
      epoch_(RandomEpoch()),
      service_(std::make_unique<PeerService>(this)),
      rng_(std::random_device{}()) {
  if (metrics == nullptr) {
    own_metrics_ = std::make_unique<MetricsRegistry>();
    metrics = own_metrics_.get();
  }
  auto address = AddressFromSecretKey(options_.key);
  if (address.ok()) {
    self_address_ = *address;
  } else {
    key_status_ = address.status().WithContext("gossip signing key");
    Log(LogLevel::kError, "gossip key is invalid; publishing will fail", {{"error", key_status_.message()}});
  }

  metrics_.received = metrics->AddCounter("consensor_p2p_messages_received_total",
                                          "Gossip messages that arrived from peers, pushed or pulled.");
  metrics_.accepted = metrics->AddCounter("consensor_p2p_messages_accepted_total",
                                          "Gossip messages that were new, valid and accepted by the node.");
  metrics_.duplicate = metrics->AddCounter("consensor_p2p_messages_duplicate_total",
                                           "Gossip messages that arrived again after being seen.");
  for (const char* reason : kDropReasons) {
    metrics_.dropped[reason] = metrics->AddCounter("consensor_p2p_messages_dropped_total",
                                                   "Gossip messages dropped, by reason.", {{"reason", reason}});
  }
  metrics_.send_failures =
      metrics->AddCounter("consensor_p2p_send_failures_total", "Gossip messages lost because a push to a peer failed.");
  metrics_.queue_dropped = metrics->AddCounter("consensor_p2p_send_queue_dropped_total",
                                               "Gossip messages not pushed because a peer's queue was full.");
  signature_checks_ = std::make_unique<PeerRateBudget>(
      PeerRateLimits{.per_requester = 0, .per_host = options_.max_signature_checks_per_second_per_host},
      SignatureCheckBudgetNames(), metrics);
  pull_requests_ = std::make_unique<PeerRateBudget>(
      PeerRateLimits{.per_requester = options_.max_pull_requests_per_second_per_operator,
                     .per_host = options_.max_pull_requests_per_second_per_ip},
      PullBudgetNames(), metrics);
  signed_request_replays_ = std::make_unique<SignedRequestReplays>(
      std::max(options_.max_pull_clock_skew, kSignedPeerRequestClockSkew), kMaxRememberedRequestsPerOperator);
  metrics_.peers = metrics->AddGauge("consensor_p2p_peers", "Configured gossip peers.");
  metrics_.peers_connected =
      metrics->AddGauge("consensor_p2p_peers_connected", "Gossip peers whose last RPC succeeded.");
}

GossipNetwork::~GossipNetwork() { Shutdown(); }

grpc::Service* GossipNetwork::service() { return service_.get(); }

// ---------------------------------------------------------------------------------------------
// Signing

Hash256 GossipNetwork::MessageId(std::string_view payload) { return Sha256Of(payload); }

Hash256 GossipNetwork::SigningDigest(uint64_t chain_id, const Address20& contract, std::string_view payload) {
  uint8_t chain_be[8];
  for (int i = 0; i < 8; ++i) chain_be[i] = static_cast<uint8_t>(chain_id >> (56 - 8 * i));
  Keccak256Hasher hasher;
  hasher.Update(kSigningDomain);
  hasher.Update(std::span<const uint8_t>(chain_be, sizeof(chain_be)));
  hasher.Update(std::span<const uint8_t>(contract.data(), contract.size()));
  hasher.Update(payload);
  return hasher.Finish();
}

StatusOr<v1::Envelope> GossipNetwork::Sign(const Secp256k1Secret& key, uint64_t chain_id, const Address20& contract,
                                           const v1::GossipMessage& message) {
  v1::GossipMessage filled = message;
  if (filled.chain_id() == 0) filled.set_chain_id(chain_id);
  if (filled.sender().empty()) {
    ASSIGN_OR_RETURN(Address20 address, AddressFromSecretKey(key));
    filled.set_sender(std::string(AsBytes(address)));
  }
  v1::Envelope envelope;
  if (!filled.SerializeToString(envelope.mutable_payload())) return Internal("cannot serialize gossip message");
  ASSIGN_OR_RETURN(EcdsaSignature signature, SignDigest(key, SigningDigest(chain_id, contract, envelope.payload())));
  const auto bytes = ToBytes65(signature);
  envelope.set_signature(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return envelope;
}

namespace {

void AppendBigEndian(Keccak256Hasher& hasher, uint64_t value, int bytes) {
  uint8_t out[8];
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(value >> (8 * (bytes - 1 - i)));
  hasher.Update(std::span<const uint8_t>(out, static_cast<size_t>(bytes)));
}

// "1.2.3.4" from grpc's "ipv4:1.2.3.4:5678" (and "[::1]" from "ipv6:[::1]:5678"): the bucket of
// a remote host, whatever connection or port it comes from.
std::string RemoteHost(const std::string& grpc_peer) {
  std::string_view view = grpc_peer;
  if (auto colon = view.find(':'); colon != std::string_view::npos) view.remove_prefix(colon + 1);
  if (auto last = view.rfind(':'); last != std::string_view::npos && !view.empty() && view.back() != ']') {
    view = view.substr(0, last);
  }
  return std::string(view);
}

}  // namespace

Hash256 GossipNetwork::PullDigest(uint64_t chain_id, const Address20& contract, const v1::PullRequest& request) {
  Keccak256Hasher hasher;
  hasher.Update(kPullDomain);
  AppendBigEndian(hasher, chain_id, 8);
  hasher.Update(std::span<const uint8_t>(contract.data(), contract.size()));
  hasher.Update(request.requester());
  AppendBigEndian(hasher, request.sent_unix_ms(), 8);
  AppendBigEndian(hasher, request.epoch(), 8);
  AppendBigEndian(hasher, request.cursor(), 8);
  AppendBigEndian(hasher, request.max_messages(), 4);
  return hasher.Finish();
}

Status GossipNetwork::SignPull(const Secp256k1Secret& key, uint64_t chain_id, const Address20& contract,
                               v1::PullRequest* request) {
  ASSIGN_OR_RETURN(Address20 address, AddressFromSecretKey(key));
  request->set_requester(std::string(AsBytes(address)));
  if (request->sent_unix_ms() == 0) request->set_sent_unix_ms(UniqueRequestMillis());
  ASSIGN_OR_RETURN(EcdsaSignature signature, SignDigest(key, PullDigest(chain_id, contract, *request)));
  const auto bytes = ToBytes65(signature);
  request->set_signature(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Publishing

StatusOr<Hash256> GossipNetwork::Publish(v1::GossipMessage message) {
  RETURN_IF_ERROR(key_status_);
  message.set_chain_id(options_.chain_id);
  message.set_sender(std::string(AsBytes(self_address_)));
  message.set_sent_unix_ms(UnixMillisNow());
  ASSIGN_OR_RETURN(v1::Envelope envelope, Sign(options_.key, options_.chain_id, options_.contract, message));
  if (static_cast<int64_t>(envelope.payload().size()) > max_payload_bytes_) {
    return InvalidArgument("gossip message of " + std::to_string(envelope.payload().size()) +
                           " bytes is over the limit of " + std::to_string(max_payload_bytes_));
  }
  const Hash256 id = MessageId(envelope.payload());
  const Logged entry = Share(envelope);
  if (MarkSeenIfNew(id)) AppendToLog(entry);
  Relay(entry, nullptr);
  return id;
}

Status GossipNetwork::VerifySender(uint64_t chain_id, const Address20& contract, const v1::Envelope& envelope,
                                   const v1::GossipMessage& message) {
  const std::string& signature = envelope.signature();
  auto parsed =
      FromBytes65(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(signature.data()), signature.size()));
  if (!parsed.ok()) return parsed.status();
  auto signer = RecoverAddress(SigningDigest(chain_id, contract, envelope.payload()), *parsed);
  if (!signer.ok()) return signer.status();
  if (AsBytes(*signer) != message.sender()) return PermissionDenied("signature is not the sender's");
  return OkStatus();
}

const char* GossipNetwork::DecodeInbound(const v1::Envelope& envelope, uint64_t chain_id, int64_t max_payload_bytes,
                                         v1::GossipMessage* message) {
  const std::string& payload = envelope.payload();
  if (static_cast<int64_t>(payload.size()) > max_payload_bytes) return "oversized";
  if (!message->ParseFromString(payload) || message->sender().size() != sizeof(Address20)) return "malformed";
  if (message->chain_id() != chain_id) return "wrong_chain";
  return nullptr;
}

StatusOr<Hash256> GossipNetwork::Rebroadcast(const v1::Envelope& envelope) {
  if (static_cast<int64_t>(envelope.payload().size()) > max_payload_bytes_) {
    return InvalidArgument("gossip envelope is over the size limit");
  }
  v1::GossipMessage message;
  if (!message.ParseFromString(envelope.payload())) return InvalidArgument("gossip envelope payload does not parse");
  if (message.chain_id() != options_.chain_id) return InvalidArgument("gossip envelope is for another chain");
  RETURN_IF_ERROR(VerifySender(options_.chain_id, options_.contract, envelope, message).WithContext("gossip envelope"));
  const Hash256 id = MessageId(envelope.payload());
  const Logged entry = Share(envelope);
  if (MarkSeenIfNew(id)) AppendToLog(entry);
  Relay(entry, nullptr);
  return id;
}

// ---------------------------------------------------------------------------------------------
// Inbound

GossipNetwork::Outcome GossipNetwork::Drop(const char* reason, size_t count) {
  metrics_.dropped.find(reason)->second->Increment(static_cast<double>(count));
  return Outcome::kDropped;
}

grpc::Status GossipNetwork::HandleGossip(grpc::ServerContext* context, const v1::GossipRequest& request,
                                         v1::GossipResponse* response) {
  if (shut_down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "gossip is shutting down");
  const int count = request.messages_size();
  if (count > kMaxEnvelopesPerRequest) {
    metrics_.received->Increment(count);
    Drop("too_many", static_cast<size_t>(count));
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "at most " + std::to_string(kMaxEnvelopesPerRequest) + " messages per Gossip request");
  }
  // Before any parsing or signature work, so a flooding peer costs us almost nothing.
  if (!TakeTokens(context->peer(), static_cast<size_t>(count))) {
    metrics_.received->Increment(count);
    Drop("rate_limited", static_cast<size_t>(count));
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "over the gossip rate limit of " + std::to_string(options_.max_messages_per_second) + " messages per second");
  }
  uint32_t accepted = 0;
  const std::string host = RemoteHost(context->peer());
  for (const v1::Envelope& envelope : request.messages()) {
    if (ProcessEnvelope(envelope, nullptr, &host) == Outcome::kAccepted) ++accepted;
  }
  response->set_accepted(accepted);
  return grpc::Status::OK;
}

namespace {

// Takes `messages` tokens from `key`'s bucket (rate per second, burst 2x), creating it full.
// Callers hold the lock that guards `buckets`.
template <typename Key, typename BucketT>
bool TakeFromBucket(std::map<Key, BucketT>& buckets, const Key& key, double rate, size_t messages) {
  if (!(rate > 0)) return true;
  const double burst = 2 * rate;
  const auto now = std::chrono::steady_clock::now();
  auto it = buckets.find(key);
  if (it == buckets.end()) {
    if (buckets.size() >= kMaxRateBuckets) {
      // Buckets that have refilled completely carry no state worth keeping.
      const auto refill_time = std::chrono::duration<double>(burst / rate);
      std::erase_if(buckets, [&](const auto& entry) { return now - entry.second.last >= refill_time; });
      if (buckets.size() >= kMaxRateBuckets) return false;
    }
    it = buckets.emplace(key, BucketT{burst, now}).first;
  } else {
    const double elapsed = std::chrono::duration<double>(now - it->second.last).count();
    it->second.tokens = std::min(burst, it->second.tokens + elapsed * rate);
    it->second.last = now;
  }
  // An empty request still costs a token. A batch larger than the burst passes on a full bucket
  // and leaves it in debt, so small rates do not make large batches impossible.
  const double cost = static_cast<double>(std::max<size_t>(messages, 1));
  if (it->second.tokens < std::min(cost, burst)) return false;
  it->second.tokens -= cost;
  return true;
}

}  // namespace

bool GossipNetwork::TakeTokens(const std::string& peer, size_t messages) {
  std::lock_guard lock(rate_mu_);
  return TakeFromBucket(buckets_, peer, options_.max_messages_per_second, messages);
}

bool GossipNetwork::TakeOperatorToken(const Address20& author) {
  std::lock_guard lock(rate_mu_);
  return TakeFromBucket(operator_buckets_, author, options_.max_messages_per_second_per_operator, 1);
}

// Which ids become "seen" (never processed again): accepted messages, and messages the handler
// rejected (its verdict on the same bytes would not change, and re-running it is the expensive
// part). Everything else stays unseen on purpose:
//  - no_room: the handler refused it with RESOURCE_EXHAUSTED (e.g. its pool of votes for tasks
//    not open yet is full); the same message is welcome once there is room, so a later copy,
//    pushed or pulled from any peer, is handled again.
//  - unregistered: our operator set may be stale (a new operator's first messages can arrive
//    before we see its registration); the same message offered again by a peer's log is then
//    accepted.
//  - signature_budget: the pushing host was over its signature checks per second; nothing about
//    the message is known yet.
//  - bad_signature: the id covers the payload only, so a forged signature on someone else's
//    payload must not block the genuine envelope.
//  - malformed / wrong_chain / oversized: cheap to re-check, and remembering junk would let a
//    peer flush genuine ids out of the bounded seen set.
// While an id is being verified and handled it is "in flight": concurrent copies (the same
// message pushed by several peers at once) count as duplicates, so the handler runs once. If the
// in-flight copy then fails (a forged signature racing the genuine one), the genuine copy was
// dropped as a duplicate; it stays unseen, so the next pull from any peer delivers it.
GossipNetwork::Outcome GossipNetwork::ProcessEnvelope(const v1::Envelope& envelope, const std::string* origin,
                                                      const std::string* pusher_host) {
  metrics_.received->Increment();
  const std::string& payload = envelope.payload();
  v1::GossipMessage message;
  if (const char* reason = DecodeInbound(envelope, options_.chain_id, max_payload_bytes_, &message)) {
    return Drop(reason);
  }

  const Hash256 id = MessageId(payload);
  {
    std::lock_guard lock(seen_mu_);
    if (seen_.contains(id) || !in_flight_.insert(id).second) {
      metrics_.duplicate->Increment();
      return Outcome::kDuplicate;
    }
  }

  Address20 sender;
  std::memcpy(sender.data(), message.sender().data(), sender.size());
  const char* drop_reason = nullptr;
  if (pusher_host != nullptr && !signature_checks_->Take("Gossip", *pusher_host, "").ok()) {
    drop_reason = "signature_budget";  // not remembered: a later copy or a pull delivers it
  } else if (!VerifySender(options_.chain_id, options_.contract, envelope, message).ok()) {
    drop_reason = "bad_signature";
  } else if (!authorizer_(sender)) {
    drop_reason = "unregistered";
  } else if (!TakeOperatorToken(sender)) {
    drop_reason = "rate_limited";  // per author, however many connections it uses
  } else if (Status verdict = handler_(message, id, sender); !verdict.ok()) {
    drop_reason = verdict.code() == StatusCode::kResourceExhausted ? "no_room" : "rejected";
    Log(LogLevel::kDebug, "gossip message rejected",
        {{"id", ToHex(id)}, {"sender", ToHex(sender)}, {"error", verdict.ToString()}});
  }
  const bool remember = drop_reason == nullptr || std::string_view(drop_reason) == "rejected";
  {
    std::lock_guard lock(seen_mu_);
    in_flight_.erase(id);
    if (remember) MarkSeenLocked(id);
  }
  if (drop_reason != nullptr) return Drop(drop_reason);

  metrics_.accepted->Increment();
  const Logged entry = Share(envelope);
  AppendToLog(entry);
  Relay(entry, origin);
  return Outcome::kAccepted;
}

bool GossipNetwork::MarkSeenIfNew(const Hash256& id) {
  std::lock_guard lock(seen_mu_);
  if (seen_.contains(id)) return false;
  MarkSeenLocked(id);
  return true;
}

void GossipNetwork::MarkSeenLocked(const Hash256& id) {
  if (!seen_.insert(id).second) return;
  seen_order_.push_back(id);
  const size_t capacity = static_cast<size_t>(std::max(options_.seen_capacity, 1));
  while (seen_order_.size() > capacity) {
    seen_.erase(seen_order_.front());
    seen_order_.pop_front();
  }
}

GossipNetwork::Logged GossipNetwork::Share(const v1::Envelope& envelope) {
  return Logged{std::make_shared<const v1::Envelope>(envelope), envelope.ByteSizeLong()};
}

void GossipNetwork::AppendToLog(const Logged& entry) {
  std::lock_guard lock(log_mu_);
  log_bytes_ += entry.bytes;
  log_.push_back(entry);
  ++log_head_;
  const size_t capacity = static_cast<size_t>(std::max(options_.log_capacity, 1));
  const size_t capacity_bytes = static_cast<size_t>(std::max<int64_t>(options_.log_capacity_bytes, 0));
  while (log_.size() > capacity || (log_.size() > 1 && log_bytes_ > capacity_bytes)) {
    log_bytes_ -= log_.front().bytes;
    log_.pop_front();
  }
}

grpc::Status GossipNetwork::AuthorizePull(grpc::ServerContext* context, const v1::PullRequest& request,
                                          Address20* requester) {
  // The checks that cost nothing come first; the signature is checked within the host's budget
  // of signature checks; the request rates are then keyed on the verified operator, so another
  // operator on the same host is not refused for this one's flood.
  if (request.requester().size() != sizeof(Address20) || request.signature().size() != 65) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "Pull needs the requester's 20-byte operator address and its 65-byte signature");
  }
  const int64_t now = static_cast<int64_t>(UnixMillisNow());
  const int64_t sent = static_cast<int64_t>(std::min<uint64_t>(request.sent_unix_ms(), uint64_t{1} << 62));
  if (std::abs(now - sent) > options_.max_pull_clock_skew.count()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "Pull request signed at unix ms " + std::to_string(request.sent_unix_ms()) + ", more than " +
                            std::to_string(options_.max_pull_clock_skew.count()) + " ms from this node's clock (" +
                            std::to_string(now) + ")");
  }
  const std::string host = RemoteHost(context->peer());
  if (Status room = signature_checks_->Take("Pull", host, ""); !room.ok()) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(kPullBudgetMessage) + ": " + room.message());
  }
  std::memcpy(requester->data(), request.requester().data(), sizeof(Address20));
  auto parsed = FromBytes65(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(request.signature().data()), 65));
  if (!parsed.ok()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "Pull signature: " + parsed.status().message());
  }
  const Hash256 digest = PullDigest(options_.chain_id, options_.contract, request);
  auto signer = RecoverAddress(digest, *parsed);
  if (!signer.ok() || *signer != *requester) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "Pull signature is not the requester's (or was made for another chain or deployment)");
  }
  if (!authorizer_(*requester)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "Pull is served to registered operators only; 0x" + ToHex(*requester) + " is not one");
  }
  if (Status fresh = signed_request_replays_->Admit("Pull", *requester, digest, sent, now); !fresh.ok()) {
    // UNAUTHENTICATED for a copy, RESOURCE_EXHAUSTED when the operator's share is full.
    return grpc::Status(static_cast<grpc::StatusCode>(fresh.code()), fresh.message());
  }
  if (Status room = pull_requests_->Take("Pull", host, "0x" + ToHex(*requester)); !room.ok()) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(kPullBudgetMessage) + ": " + room.message());
  }
  return grpc::Status::OK;
}

grpc::Status GossipNetwork::HandlePull(grpc::ServerContext* context, const v1::PullRequest& request,
                                       v1::PullResponse* response) {
  if (shut_down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "gossip is shutting down");
  if (options_.withhold_pulls) return grpc::Status::OK;  // fault injection: an empty page, whatever is asked
  Address20 requester{};
  if (grpc::Status authorized = AuthorizePull(context, request, &requester); !authorized.ok()) return authorized;
  const uint32_t limit =
      request.max_messages() == 0 ? kMaxPullMessages : std::min(request.max_messages(), kMaxPullMessages);
  // The page is chosen under the lock and copied after it, so a Pull never holds up publishing.
  std::vector<std::shared_ptr<const v1::Envelope>> page;
  size_t page_bytes = 0;
  {
    std::lock_guard lock(log_mu_);
    response->set_epoch(epoch_);
    // A cursor from another epoch refers to a previous run's log (or is a first contact).
    uint64_t cursor = request.epoch() == epoch_ ? request.cursor() : 0;
    if (cursor >= log_head_) {  // up to date (or a cursor we never handed out): nothing to send
      response->set_next_cursor(log_head_);
      return grpc::Status::OK;
    }
    const uint64_t oldest = log_head_ - log_.size() + 1;
    if (cursor + 1 < oldest) cursor = oldest - 1;  // what the cursor pointed at has been evicted
    uint64_t seq = cursor + 1;
    size_t bytes = 0;
    while (seq <= log_head_ && page.size() < limit) {
      const Logged& logged = log_[seq - oldest];
      if (!page.empty() && bytes + logged.bytes > kMaxPullResponseBytes) break;
      page.push_back(logged.envelope);
      bytes += logged.bytes;
      ++seq;
    }
    response->set_next_cursor(seq - 1);
    response->set_more(seq <= log_head_);
    page_bytes = bytes;
  }
  {
    std::lock_guard lock(rate_mu_);
    if (!TakeFromBucket(pull_operator_buckets_, requester, options_.max_pull_bytes_per_second_per_operator,
                        page_bytes)) {
      response->Clear();
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(kPullBudgetMessage) + ": operator 0x" +
                                                                    ToHex(requester) +
                                                                    " pulled more bytes than it may per second");
    }
  }
  for (const auto& envelope : page) *response->add_messages() = *envelope;
  return grpc::Status::OK;
}

// ---------------------------------------------------------------------------------------------
// Outbound

void GossipNetwork::Relay(const Logged& entry, const std::string* origin) {
  std::vector<std::shared_ptr<Peer>> targets;
  {
    std::lock_guard lock(peers_mu_);
    for (const auto& [endpoint, peer] : peers_) {
      if (origin == nullptr || endpoint != *origin) targets.push_back(peer);
    }
  }
  const size_t fanout = static_cast<size_t>(std::max(options_.fanout, 0));
  if (targets.size() > fanout) {
    std::lock_guard lock(rng_mu_);
    for (size_t i = 0; i < fanout; ++i) {  // a partial Fisher-Yates shuffle picks the subset
      std::uniform_int_distribution<size_t> pick(i, targets.size() - 1);
      std::swap(targets[i], targets[pick(rng_)]);
    }
    targets.resize(fanout);
  }
  for (const auto& peer : targets) Enqueue(*peer, entry);
}

void GossipNetwork::Enqueue(Peer& peer, const Logged& entry) {
  {
    const size_t bytes = entry.bytes;
    std::lock_guard lock(peer.mu);
    const size_t capacity_bytes = static_cast<size_t>(std::max<int64_t>(options_.peer_queue_capacity_bytes, 0));
    if (peer.queue.size() >= static_cast<size_t>(std::max(options_.peer_queue_capacity, 1)) ||
        (!peer.queue.empty() && peer.queue_bytes + bytes > capacity_bytes)) {
      metrics_.queue_dropped->Increment();  // anti-entropy delivers it later
      return;
    }
    peer.queue.push_back(entry);
    peer.queue_bytes += bytes;
  }
  peer.cv.notify_one();
}

void GossipNetwork::Start() {
  std::lock_guard lifecycle(lifecycle_mu_);
  if (started_ || shut_down_) return;
  started_ = true;
  std::vector<std::shared_ptr<Peer>> peers;
  {
    std::lock_guard lock(peers_mu_);
    for (const auto& [endpoint, peer] : peers_) peers.push_back(peer);
  }
  for (const auto& peer : peers) StartWorker(peer);
}

void GossipNetwork::Shutdown() {
  std::lock_guard lifecycle(lifecycle_mu_);
  if (shut_down_.exchange(true)) return;
  std::map<std::string, std::shared_ptr<Peer>> peers;
  {
    std::lock_guard lock(peers_mu_);
    peers.swap(peers_);
  }
  metrics_.peers->Set(0);
  for (const auto& [endpoint, peer] : peers) StopWorker(*peer);
}

void GossipNetwork::SetPeers(const std::vector<std::string>& endpoints) {
  std::lock_guard lifecycle(lifecycle_mu_);
  if (shut_down_) return;
  std::set<std::string> wanted;
  for (const std::string& endpoint : endpoints) {
    if (!endpoint.empty()) wanted.insert(endpoint);
  }
  std::vector<std::shared_ptr<Peer>> added, removed;
  {
    std::lock_guard lock(peers_mu_);
    for (auto it = peers_.begin(); it != peers_.end();) {
      if (wanted.contains(it->first)) {
        ++it;
      } else {
        removed.push_back(it->second);
        it = peers_.erase(it);
      }
    }
    for (const std::string& endpoint : wanted) {
      if (peers_.contains(endpoint)) continue;
      auto peer = std::make_shared<Peer>(endpoint);
      peers_.emplace(endpoint, peer);
      added.push_back(std::move(peer));
    }
    metrics_.peers->Set(static_cast<double>(peers_.size()));
  }
  if (started_) {
    for (const auto& peer : added) StartWorker(peer);
  }
  // Joined outside peers_mu_: a worker may be relaying, which takes that lock.
  for (const auto& peer : removed) StopWorker(*peer);
}

size_t GossipNetwork::connected_peers() const { return static_cast<size_t>(std::max(connected_count_.load(), 0)); }

void GossipNetwork::StartWorker(const std::shared_ptr<Peer>& peer) {
  // The thread gets a plain pointer: whoever removes the peer joins it while holding a reference.
  Peer* raw = peer.get();
  raw->worker = std::thread([this, raw] { RunWorker(*raw); });
}

void GossipNetwork::StopWorker(Peer& peer) {
  {
    std::lock_guard lock(peer.mu);
    peer.stop = true;
    if (peer.in_flight != nullptr) peer.in_flight->TryCancel();
  }
  peer.cv.notify_all();
  if (peer.worker.joinable()) peer.worker.join();
  SetConnected(peer, false);
}

void GossipNetwork::SetConnected(Peer& peer, bool connected) {
  if (peer.connected.exchange(connected) == connected) return;
  connected_count_ += connected ? 1 : -1;
  metrics_.peers_connected->Add(connected ? 1 : -1);
  if (peer.stop) return;  // leaving on purpose is not news
  Log(connected ? LogLevel::kInfo : LogLevel::kWarn, connected ? "gossip peer connected" : "gossip peer unreachable",
      {{"peer", peer.endpoint}});
}

void GossipNetwork::RunWorker(Peer& peer) {
  const auto pull_interval = std::max<Clock::duration>(options_.pull_interval, kMinPullInterval);
  auto next_pull = Clock::now();  // a new peer is pulled at once: catch-up from cursor 0
  auto next_send = Clock::now();
  Clock::duration backoff = Clock::duration::zero();
  for (;;) {
    std::vector<std::shared_ptr<const v1::Envelope>> batch;
    bool pull_now = false;
    {
      std::unique_lock lock(peer.mu);
      for (;;) {
        if (peer.stop) return;
        const auto now = Clock::now();
        if (now >= next_pull) {
          pull_now = true;
          break;
        }
        if (!peer.queue.empty() && now >= next_send) break;
        peer.cv.wait_until(lock, peer.queue.empty() ? next_pull : std::min(next_pull, next_send));
      }
      if (!pull_now) {
        size_t bytes = 0;
        while (!peer.queue.empty() && batch.size() < kMaxBatchMessages) {
          const size_t size = peer.queue.front().bytes;
          if (!batch.empty() && bytes + size > kMaxBatchBytes) break;
          bytes += size;
          peer.queue_bytes -= std::min(peer.queue_bytes, size);
          batch.push_back(std::move(peer.queue.front().envelope));
          peer.queue.pop_front();
        }
      }
    }
    if (pull_now) {
      PullFrom(peer);
      next_pull = Clock::now() + pull_interval;
      continue;
    }
    if (SendBatch(peer, batch)) {
      backoff = Clock::duration::zero();
    } else {
      // Not retried: the peer pulls what it missed from our log.
      metrics_.send_failures->Increment(static_cast<double>(batch.size()));
      backoff = std::clamp<Clock::duration>(backoff * 2, kMinSendBackoff, kMaxSendBackoff);
      next_send = Clock::now() + backoff;
    }
  }
}

bool GossipNetwork::SendBatch(Peer& peer, const std::vector<std::shared_ptr<const v1::Envelope>>& batch) {
  v1::GossipRequest request;
  request.mutable_messages()->Reserve(static_cast<int>(batch.size()));
  for (const auto& envelope : batch) *request.add_messages() = *envelope;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
  {
    std::lock_guard lock(peer.mu);
    if (peer.stop) return false;
    peer.in_flight = &context;
  }
  v1::GossipResponse response;
  const grpc::Status status = peer.stub->Gossip(&context, request, &response);
  {
    std::lock_guard lock(peer.mu);
    peer.in_flight = nullptr;
  }
  SetConnected(peer, status.ok());
  if (!status.ok()) {
    Log(LogLevel::kDebug, "gossip push failed",
        {{"peer", peer.endpoint}, {"code", static_cast<int>(status.error_code())}, {"error", status.error_message()}});
  }
  return status.ok();
}

void GossipNetwork::PullFrom(Peer& peer) {
  for (int page = 0; page < kMaxPullPagesPerRound && !peer.stop; ++page) {
    v1::PullRequest request;
    request.set_epoch(peer.pull_epoch);
    request.set_cursor(peer.pull_cursor);
    request.set_max_messages(peer.pull_page_messages);
    if (Status signed_pull = SignPull(options_.key, options_.chain_id, options_.contract, &request);
        !signed_pull.ok()) {
      Log(LogLevel::kWarn, "cannot sign a gossip pull", {{"error", signed_pull.ToString()}});
      return;
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
    {
      std::lock_guard lock(peer.mu);
      if (peer.stop) return;
      peer.in_flight = &context;
    }
    v1::PullResponse response;
    const grpc::Status status = peer.stub->Pull(&context, request, &response);
    {
      std::lock_guard lock(peer.mu);
      peer.in_flight = nullptr;
    }
    const bool over_budget = status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                             status.error_message().find(kPullBudgetMessage) != std::string::npos;
    if (over_budget) {  // the peer is metering us: the rest waits for the next round
      Log(LogLevel::kDebug, "gossip pull over the peer's budget", {{"peer", peer.endpoint}});
      return;
    }
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && peer.pull_page_messages > 1) {
      // The page was over a message size limit (the peer's or ours): ask for fewer at a time.
      peer.pull_page_messages /= 2;
      continue;
    }
    // A peer that answers but will not serve our pulls (our key is not, or not yet, an active
    // operator in its view, or our clocks disagree) is still reachable: pushes to it work.
    const bool refused = status.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
                         status.error_code() == grpc::StatusCode::UNAUTHENTICATED;
    SetConnected(peer, status.ok() || refused);
    if (refused != peer.pull_refused) {
      peer.pull_refused = refused;
      if (refused) {
        Log(LogLevel::kWarn, "gossip peer refuses our pulls",
            {{"peer", peer.endpoint}, {"error", status.error_message()}});
      }
    }
    if (!status.ok()) {
      Log(LogLevel::kDebug, "gossip pull failed",
          {{"peer", peer.endpoint},
           {"code", static_cast<int>(status.error_code())},
           {"error", status.error_message()}});
      return;
    }
    if (response.epoch() != peer.pull_epoch && peer.pull_epoch != 0) {
      // The peer restarted: its new log is served from the beginning (the server sees our stale
      // epoch and ignores our cursor).
      Log(LogLevel::kInfo, "gossip peer restarted; pulling its log from the start", {{"peer", peer.endpoint}});
    }
    for (const v1::Envelope& envelope : response.messages()) {
      if (peer.stop) return;  // the cursor stays put, so nothing is skipped
      ProcessEnvelope(envelope, &peer.endpoint);
    }
    peer.pull_epoch = response.epoch();
    peer.pull_cursor = response.next_cursor();
    peer.pull_page_messages = std::min(peer.pull_page_messages * 2, kPullPageMessages);
    if (!response.more() || response.messages_size() == 0) return;
  }
}

}  // namespace consensor::node
