#include "consensus/task.h"

#include <algorithm>

namespace consensor::consensus {

StatusOr<TaskId> TaskId::FromHex(std::string_view hex) {
  if (hex.empty()) return InvalidArgument("task_id is missing");
  if (hex.size() != 64) {
    return InvalidArgument("task_id must be a SHA-256 hash as 64 hex digits, got " + std::to_string(hex.size()) +
                           " characters");
  }
  auto bytes = Hash256FromHex(hex);
  if (!bytes.ok()) {
    return InvalidArgument("task_id must be a SHA-256 hash as 64 hex digits: " + bytes.status().message());
  }
  return TaskId(*bytes);
}

StatusOr<TaskId> TaskId::FromKey(std::string_view key) {
  if (key.size() != Hash256{}.size()) {
    return DataLoss("a task key is 32 bytes, got " + std::to_string(key.size()));
  }
  Hash256 bytes{};
  std::copy(key.begin(), key.end(), bytes.begin());
  return TaskId(bytes);
}

std::string TaskId::Hex() const { return ToHex(bytes_); }

std::string TaskId::Key() const { return std::string(reinterpret_cast<const char*>(bytes_.data()), bytes_.size()); }

StatusOr<TaskId> ComputeTaskId(const TaskSpec& spec) {
  std::vector<const std::pair<std::string, Hash256>*> sorted;
  sorted.reserve(spec.inputs.size());
  for (const auto& in : spec.inputs) {
    if (in.first.empty()) return InvalidArgument("task input with an empty placeholder name");
    sorted.push_back(&in);
  }
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->first == sorted[i - 1]->first) {
      return InvalidArgument("task input '" + sorted[i]->first + "' is given twice");
    }
  }
  Sha256 h;
  static constexpr char kTag[] = "consensor.task.v2";
  h.Update(std::string_view(kTag, sizeof(kTag)));  // with the NUL
  h.UpdateU32(spec.protocol_version);
  h.Update(spec.graph_sha256);
  h.UpdateU32(static_cast<uint32_t>(sorted.size()));
  for (const auto* in : sorted) {
    h.UpdateU32(static_cast<uint32_t>(in->first.size()));
    h.Update(std::string_view(in->first));
    h.Update(in->second);
  }
  h.UpdateU64(spec.nonce);
  h.UpdateU32(spec.replicas);
  h.UpdateU32(spec.quorum);
  return TaskId(h.Finish());
}

std::string_view TaskStateName(TaskState state) {
  switch (state) {
    case TaskState::kQueued: return "queued";
    case TaskState::kRunning: return "running";
    case TaskState::kSucceeded: return "succeeded";
    case TaskState::kFailed: return "failed";
    case TaskState::kCertifying: return "certifying";
  }
  return "unknown";
}

bool IsFinal(TaskState state) { return state == TaskState::kSucceeded || state == TaskState::kFailed; }

bool IsAllowedTransition(TaskState from, TaskState to) {
  switch (from) {
    case TaskState::kQueued:
      return to == TaskState::kRunning || to == TaskState::kFailed || to == TaskState::kCertifying;
    case TaskState::kRunning:
      return to == TaskState::kSucceeded || to == TaskState::kFailed || to == TaskState::kQueued ||
             to == TaskState::kCertifying;
    case TaskState::kCertifying:
      return to == TaskState::kSucceeded || to == TaskState::kFailed || to == TaskState::kQueued;
    case TaskState::kSucceeded:
      // Network mode: a certified (not yet final) task re-executed for a dispute.
      return to == TaskState::kQueued;
    case TaskState::kFailed: return false;
  }
  return false;
}

}  // namespace consensor::consensus
