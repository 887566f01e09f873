// Votes (commitments and reveals) that arrived before their task's round opened on this node:
// the announcement may still be on its way or its blobs being fetched, or the committee is not
// drawn yet. They are kept in arrival order (the order decides admission) until the round
// opens, or until they expire.
//
// Anyone registered can send such messages for task ids nobody will ever announce, so the pool
// is bounded by bytes, in total and per signer: one operator filling its own share cannot crowd
// out the others' early votes. The engine verifies each message's signature before it offers
// it here, so a signer's share is charged to the operator that really signed it. A message
// refused for lack of room is refused with RESOURCE_EXHAUSTED, which gossip does not remember
// as seen, so a later copy is accepted once there is room again.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/status.h"
#include "consensus/attestation.h"
#include "consensus/commitment.h"
#include "consensus/quorum.h"
#include "consensus/task.h"

namespace consensor::node {

// A commitment or a reveal from gossip, parsed (consensus/commitment.h).
struct VoteMessage {
  consensus::TaskId task_id;
  consensus::VotePhase phase = consensus::VotePhase::kCommittee;
  std::optional<consensus::SignedCommitment> commitment;  // a commitment, or
  std::optional<consensus::SignedAttestation> vote;       // a reveal, with
  std::vector<consensus::SignedCommitment> bundle;        // the commitments its sender admitted
};

// What a kept message costs: its in-memory size, bundle included.
size_t OrphanBytes(const VoteMessage& message);

struct OrphanPoolLimits {
  size_t max_bytes = size_t{32} << 20;                                     // all orphans together
  size_t max_bytes_per_signer = size_t{2} << 20;                           // one signer's orphans
  std::chrono::steady_clock::duration lifetime = std::chrono::minutes(2);  // from a task's first orphan
};

// Not thread-safe: the engine calls it under its lock.
class OrphanPool {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  explicit OrphanPool(OrphanPoolLimits limits = {}) : limits_(limits) {}

  // Keeps `message`, whose signature recovered to `signer`. RESOURCE_EXHAUSTED (nothing kept)
  // when it would take the pool or the signer's share over its bound.
  Status Add(VoteMessage message, const Address20& signer, TimePoint now);
  // Removes and returns the task's messages in arrival order.
  std::vector<VoteMessage> Take(const consensus::TaskId& task_id);
  // Drops the messages of tasks whose first orphan arrived `lifetime` or more before `now`.
  void Expire(TimePoint now);

  size_t bytes() const { return bytes_; }
  size_t bytes_of(const Address20& signer) const;
  size_t messages() const { return messages_; }

 private:
  struct Kept {
    VoteMessage message;
    Address20 signer{};
    size_t bytes = 0;
  };
  struct TaskOrphans {
    TimePoint since;
    std::vector<Kept> kept;
  };
  void Release(const std::vector<Kept>& kept);

  OrphanPoolLimits limits_;
  std::map<consensus::TaskId, TaskOrphans> tasks_;
  std::map<Address20, size_t> by_signer_;
  size_t bytes_ = 0;
  size_t messages_ = 0;
};

}  // namespace consensor::node
