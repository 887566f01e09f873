// Gossip from a peer, from receipt to the consensus rules, without sockets: each envelope of a
// Gossip request goes through the inbound checks and signature verification of node/p2p/gossip
// (GossipNetwork::DecodeInbound, VerifySender), the registered-operator check, dedupe, and then
// what the engine does with it (node/engine/consensus_engine): the checks an announcement passes
// before adoption, or ParseVoteMessage and the task's consensus::TaskRound (commitments,
// reveals, timers). Every certificate the round produces must pass consensus::CheckCertificate.
//
// Input: one flag byte, then a serialized GossipRequest. A fuzzer cannot forge signatures, but a
// registered operator can sign anything, so the flags let the target act as one:
//   bit 0: re-sign each envelope with the key of the operator its message names as sender;
//   bit 1: also re-sign the votes and commitments inside with the key of the signer they name.
#include <cstring>
#include <set>

#include "common/secp256k1_sign.h"
#include "consensus/certificate.h"
#include "consensus/committee.h"
#include "consensus/replication.h"
#include "consensus/round.h"
#include "node/api/task_spec.h"
#include "node/engine/consensus_engine.h"
#include "node/p2p/gossip.h"
#include "tests/fuzz/fuzz_target.h"

using namespace consensor;
using namespace consensor::node;

namespace {

constexpr uint64_t kChainId = 31337;
// The deployment the gossip domain names (consensor.gossip.v2 covers the contract).
const Address20 kContract = [] {
  Address20 a;
  a.fill(0xcc);
  return a;
}();
constexpr uint64_t kReferenceBlock = 100;
constexpr int kOperators = 5;
constexpr int64_t kMaxPayloadBytes = 1 << 20;
constexpr uint32_t kMaxReplicas = 16;
constexpr int kMaxEnvelopes = 64;

struct Network {
  std::vector<Secp256k1Secret> keys;
  std::vector<Address20> addresses;
  std::shared_ptr<const consensus::OperatorSet> operators;
  consensus::RoundRules rules;
  v1::SubmitTaskRequest spec;  // the task the round is about
  consensus::RoundRecord record;
};

const Network& TheNetwork() {
  static const Network network = [] {
    Network n;
    std::vector<consensus::WeightedOperator> registry;
    for (int i = 0; i < kOperators; ++i) {
      Secp256k1Secret key{};
      key.fill(static_cast<uint8_t>(0x10 + i));
      auto address = AddressFromSecretKey(key);
      CNSR_FUZZ_CHECK(address.ok());
      n.keys.push_back(key);
      n.addresses.push_back(*address);
      registry.push_back({*address, Uint256FromU64(uint64_t{1000000} * static_cast<uint64_t>(i + 1))});
    }
    n.operators =
        std::make_shared<consensus::OperatorSet>(consensus::OperatorSet::FromRegistry(kReferenceBlock, registry));
    n.rules.domain.chain_id = kChainId;
    n.rules.domain.verifying_contract = kContract;
    n.rules.self.fill(0xee);  // an observer: not an operator, so it never executes or signs
    n.rules.dispute_threshold_bps = 6000;
    n.rules.member_timeout_ms = 2000;
    n.rules.exhausted_grace_ms = 6000;
    n.spec.set_graph_sha256(std::string(64, 'a'));
    (*n.spec.mutable_inputs())["x"] = std::string(64, 'b');
    n.spec.mutable_options()->set_replicas(3);
    n.spec.mutable_options()->set_quorum(2);
    auto id = TaskIdOfRequest(n.spec);
    CNSR_FUZZ_CHECK(id.ok());
    n.record.task_id = id->bytes();
    n.record.reference_block = kReferenceBlock;
    n.record.seed_block_hash = Sha256Of(std::string_view("seed block"));
    n.record.replicas = 3;
    n.record.quorum = 2;
    return n;
  }();
  return network;
}

const Secp256k1Secret* KeyOf(const Network& n, std::string_view address) {
  for (size_t i = 0; i < n.addresses.size(); ++i) {
    if (address.size() == sizeof(Address20) &&
        std::memcmp(address.data(), n.addresses[i].data(), address.size()) == 0) {
      return &n.keys[i];
    }
  }
  return nullptr;
}

const Secp256k1Secret* KeyOfHex(const Network& n, const std::string& hex) {
  auto address = ParseAddress(hex);
  if (!address.ok()) return nullptr;
  return KeyOf(n, std::string_view(reinterpret_cast<const char*>(address->data()), address->size()));
}

// Signs a commitment as it stands (any fields the fuzzer chose).
void SignCommitmentProto(const Network& n, const Secp256k1Secret& key, v1::ResultCommitment* p) {
  auto parsed = FromProto(*p);
  if (!parsed.ok()) return;  // nothing to sign: it cannot parse either way
  auto sig = SignDigest(key, consensus::CommitmentDigest(n.rules.domain, *parsed));
  if (sig.ok()) p->set_signature(ToHex(ToBytes65(*sig)));
}

void SignAttestationProto(const Network& n, const Secp256k1Secret& key, v1::SignedAttestation* p) {
  auto parsed = FromProto(*p);
  if (!parsed.ok()) return;
  auto sig = consensus::SignAttestation(key, n.rules.domain, parsed->attestation);
  if (sig.ok()) p->set_signature(ToHex(*sig));
}

// What a registered operator could send: the same message with valid signatures of its own.
void ResignAsOperator(const Network& n, bool inner, v1::Envelope* envelope) {
  v1::GossipMessage message;
  if (!message.ParseFromString(envelope->payload())) return;
  const Secp256k1Secret* sender = KeyOf(n, message.sender());
  if (sender == nullptr) return;
  if (inner && message.has_commitment()) SignCommitmentProto(n, *sender, message.mutable_commitment());
  if (inner && message.has_reveal()) {
    SignAttestationProto(n, *sender, message.mutable_reveal()->mutable_attestation());
    for (auto& c : *message.mutable_reveal()->mutable_commitments()) {
      if (const Secp256k1Secret* signer = KeyOfHex(n, c.signer())) SignCommitmentProto(n, *signer, &c);
    }
  }
  auto signed_envelope = GossipNetwork::Sign(*sender, kChainId, kContract, message);
  if (signed_envelope.ok()) *envelope = *std::move(signed_envelope);
}

void CheckCertificateDecision(const Network& n, const consensus::TaskRound& round, const consensus::Certificate& c,
                              size_t committee_size, bool dispute) {
  consensus::CertificateClaims claims;
  claims.attestation = c.attestation;
  auto task = TaskSpecOfRequest(n.spec);
  CNSR_FUZZ_CHECK(task.ok());
  claims.task = *task;
  claims.signers = c.signers;
  for (const auto& s : c.signatures) claims.signatures.emplace_back(s.begin(), s.end());
  claims.quorum = round.quorum();
  claims.replicas = round.replicas();
  claims.committee_size = static_cast<uint32_t>(committee_size);
  claims.dispute = dispute;
  auto report = consensus::CheckCertificate(claims, n.rules.domain, *n.operators, n.record.seed_block_hash);
  if (!report.ok()) std::fprintf(stderr, "certificate refused: %s\n", report.status().ToString().c_str());
  CNSR_FUZZ_CHECK(report.ok());
}

void CheckDecisions(const Network& n, const consensus::TaskRound& round, const consensus::RoundDecisions& decisions) {
  for (const auto& d : decisions) {
    if (auto* c = std::get_if<consensus::Certified>(&d)) {
      CheckCertificateDecision(n, round, c->certificate, c->committee_size, false);
    } else if (auto* r = std::get_if<consensus::CertificateRefreshed>(&d)) {
      CheckCertificateDecision(n, round, r->certificate, r->committee_size, false);
    } else if (auto* dc = std::get_if<consensus::DisputeCertified>(&d)) {
      CheckCertificateDecision(n, round, dc->certificate, dc->committee_size, true);
    }
  }
}

}  // namespace

CNSR_FUZZ_TARGET(gossip) {
  if (size == 0) return 0;
  const Network& n = TheNetwork();
  const uint8_t flags = data[0];
  v1::GossipRequest request;
  if (!request.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  if (request.messages_size() > kMaxEnvelopes) return 0;  // the service refuses large batches unread

  int64_t now_ms = 0;
  auto round = consensus::TaskRound::Open(n.rules, n.operators, n.record, now_ms);
  CNSR_FUZZ_CHECK(round.ok());
  std::set<Hash256> seen;
  for (v1::Envelope& envelope : *request.mutable_messages()) {
    if (flags & 3) ResignAsOperator(n, (flags & 2) != 0, &envelope);
    v1::GossipMessage message;
    if (GossipNetwork::DecodeInbound(envelope, kChainId, kMaxPayloadBytes, &message) != nullptr) continue;
    if (!GossipNetwork::VerifySender(kChainId, kContract, envelope, message).ok()) continue;
    if (KeyOf(n, message.sender()) == nullptr) continue;  // not a registered operator
    if (!seen.insert(GossipNetwork::MessageId(envelope.payload())).second) continue;

    now_ms += 50;
    consensus::RoundDecisions decisions;
    if (message.has_announcement()) {
      // What the engine checks before it adopts (the rest needs the chain and the blobs).
      const auto& spec = message.announcement().spec();
      if (consensus::CheckReplication(spec.options().replicas(), spec.options().quorum(), kMaxReplicas).ok()) {
        (void)TaskIdOfRequest(spec);
      }
    } else {
      auto vote = ParseVoteMessage(message);
      if (!vote.ok()) continue;
      if (vote->task_id.bytes() != n.record.task_id) continue;  // an orphan: kept aside by the engine
      if (vote->commitment) {
        round->AddCommitment(*vote->commitment, &decisions);
      } else {
        round->AddReveal(*vote->vote, vote->phase, vote->bundle, &decisions);
      }
    }
    round->OnTimer(now_ms, &decisions);
    CheckDecisions(n, *round, decisions);
  }
  // Long after the last message: silent members are replaced, and an exhausted round fails.
  for (int64_t later : {4000, 60000, 600000}) {
    consensus::RoundDecisions decisions;
    round->OnTimer(now_ms + later, &decisions);
    CheckDecisions(n, *round, decisions);
  }
  return 0;
}

CNSR_FUZZ_SEEDS(gossip) {
  const Network& n = TheNetwork();
  auto drawn = consensus::CommitteeOrder(n.record.task_id, kReferenceBlock, n.record.seed_block_hash,
                                         n.operators->operators, kOperators);
  CNSR_FUZZ_CHECK(drawn.ok() && drawn->size() == kOperators);
  const std::vector<Address20>& order = *drawn;
  auto key_at = [&](size_t position) {
    return *KeyOf(n, std::string_view(reinterpret_cast<const char*>(order[position].data()), 20));
  };

  auto envelope = [&](const Secp256k1Secret& key, const v1::GossipMessage& m) {
    auto e = GossipNetwork::Sign(key, kChainId, kContract, m);
    CNSR_FUZZ_CHECK(e.ok());
    return *e;
  };
  auto vote_of = [&](size_t position, uint8_t result) {
    consensus::SignedAttestation v;
    v.attestation.task_id = n.record.task_id;
    v.attestation.result_root.fill(result);
    v.attestation.trace_root.fill(static_cast<uint8_t>(result + 1));
    v.attestation.reference_block = kReferenceBlock;
    auto sig = consensus::SignAttestation(key_at(position), n.rules.domain, v.attestation);
    CNSR_FUZZ_CHECK(sig.ok());
    v.signature = *sig;
    return v;
  };
  // A round where members at `positions` vote `results`: commitments, then reveals that carry
  // every commitment.
  auto round_request = [&](std::vector<size_t> positions, std::vector<uint8_t> results, bool announce) {
    v1::GossipRequest request;
    if (announce) {
      v1::GossipMessage m;
      *m.mutable_announcement()->mutable_spec() = n.spec;
      m.mutable_announcement()->set_reference_block(kReferenceBlock);
      *request.add_messages() = envelope(key_at(0), m);
    }
    std::vector<v1::ResultCommitment> commitments;
    std::vector<consensus::SignedAttestation> votes;
    for (size_t i = 0; i < positions.size(); ++i) {
      votes.push_back(vote_of(positions[i], results[i]));
      auto c = consensus::SignCommitment(key_at(positions[i]), n.rules.domain, votes.back(), order[positions[i]],
                                         consensus::VotePhase::kCommittee);
      CNSR_FUZZ_CHECK(c.ok());
      commitments.push_back(ToProto(*c, order[positions[i]]));
      v1::GossipMessage m;
      *m.mutable_commitment() = commitments.back();
      *request.add_messages() = envelope(key_at(positions[i]), m);
    }
    for (size_t i = 0; i < positions.size(); ++i) {
      v1::GossipMessage m;
      *m.mutable_reveal()->mutable_attestation() = ToProto(votes[i], order[positions[i]]);
      m.mutable_reveal()->set_phase(0);
      for (const auto& c : commitments) *m.mutable_reveal()->add_commitments() = c;
      *request.add_messages() = envelope(key_at(positions[i]), m);
    }
    std::string bytes(1, '\0');
    bytes += request.SerializeAsString();
    return fuzz::Bytes(bytes);
  };
  return {
      round_request({0, 1, 2}, {1, 1, 1}, true),   // certified by the committee
      round_request({0, 1, 2}, {1, 2, 1}, false),  // a dispute
      round_request({0}, {1}, false),              // one vote: the committee is extended at the deadline
      round_request({0, 1, 3, 4}, {1, 1, 2, 2}, false),
  };
}
