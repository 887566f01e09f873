#include "node/engine/orphan_pool.h"

#include <string>

namespace consensor::node {

size_t OrphanBytes(const VoteMessage& message) {
  return sizeof(VoteMessage) + message.bundle.size() * sizeof(consensus::SignedCommitment);
}

Status OrphanPool::Add(VoteMessage message, const Address20& signer, TimePoint now) {
  const size_t cost = OrphanBytes(message);
  if (bytes_ + cost > limits_.max_bytes) {
    return ResourceExhausted("no room for more votes for unknown tasks (" + std::to_string(bytes_) + " of " +
                             std::to_string(limits_.max_bytes) + " bytes kept)");
  }
  const size_t signer_bytes = bytes_of(signer);
  if (signer_bytes + cost > limits_.max_bytes_per_signer) {
    return ResourceExhausted("the signer's votes for unknown tasks already take " + std::to_string(signer_bytes) +
                             " of its " + std::to_string(limits_.max_bytes_per_signer) + " bytes");
  }
  auto [it, inserted] = tasks_.try_emplace(message.task_id);
  if (inserted) it->second.since = now;
  it->second.kept.push_back(Kept{std::move(message), signer, cost});
  by_signer_[signer] += cost;
  bytes_ += cost;
  ++messages_;
  return OkStatus();
}

size_t OrphanPool::bytes_of(const Address20& signer) const {
  auto it = by_signer_.find(signer);
  return it == by_signer_.end() ? 0 : it->second;
}

void OrphanPool::Release(const std::vector<Kept>& kept) {
  for (const Kept& k : kept) {
    auto it = by_signer_.find(k.signer);
    it->second -= k.bytes;
    if (it->second == 0) by_signer_.erase(it);
    bytes_ -= k.bytes;
    --messages_;
  }
}

std::vector<VoteMessage> OrphanPool::Take(const consensus::TaskId& task_id) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return {};
  Release(it->second.kept);
  std::vector<VoteMessage> messages;
  messages.reserve(it->second.kept.size());
  for (Kept& k : it->second.kept) messages.push_back(std::move(k.message));
  tasks_.erase(it);
  return messages;
}

void OrphanPool::Expire(TimePoint now) {
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (now - it->second.since < limits_.lifetime) {
      ++it;
      continue;
    }
    Release(it->second.kept);
    it = tasks_.erase(it);
  }
}

}  // namespace consensor::node
