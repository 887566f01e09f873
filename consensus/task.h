// A task's identity and lifecycle: pure rules shared by every node.
//
// The task id is a hash of exactly what determines the result (the graph blob, the input blobs
// by placeholder name, and the client's nonce) and of what the client asked the network to
// guarantee (replicas, quorum, protocol version). Any node computes the same id for the same
// submission, resubmission is idempotent, and because attestations sign the id, every signature
// covers the replication the client asked for: an entry node that announces the task with fewer
// replicas announces a different task, under an id the client does not accept.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"

namespace consensor::consensus {

// The protocol version this build speaks: the task-id encoding, the committee draw, the
// attestation and the executor's bits (docs/DETERMINISM.md). Any change that could make two
// honest nodes sign different bytes for one task bumps it; tasks carry it in their id, and a
// node refuses a task of another version instead of attesting to it (an honest minority in a
// rolling upgrade is then silent, not slashed).
// Version 3: attestations carry a zero trace root (kDeferredTraceRoot).
inline constexpr uint32_t kProtocolVersion = 3;

// The trace root an attestation carries: zero. The trace is computed only when asked for
// (docs/DETERMINISM.md, "Trace root"; docs/SECURITY.md says why nothing rests on it before).
inline constexpr Hash256 kDeferredTraceRoot{};

struct TaskSpec {
  Hash256 graph_sha256{};
  // Placeholder name -> blob hash. The id does not depend on the order given.
  std::vector<std::pair<std::string, Hash256>> inputs;
  uint64_t nonce = 0;
  // Network mode: committee size and matching signatures (0 in local mode, where nobody signs).
  uint32_t replicas = 0;
  uint32_t quorum = 0;
  uint32_t protocol_version = kProtocolVersion;
};

// A task's id: the 32 bytes of ComputeTaskId. Hex() is the form of the API, gossip and logs;
// Key() is the raw form the store keys records by.
class TaskId {
 public:
  TaskId() = default;
  explicit TaskId(const Hash256& bytes) : bytes_(bytes) {}

  // INVALID_ARGUMENT, worded for the API's task_id field: missing, wrong length, or not hex.
  static StatusOr<TaskId> FromHex(std::string_view hex);
  // DATA_LOSS unless `key` is 32 bytes (a store key is never anything else).
  static StatusOr<TaskId> FromKey(std::string_view key);

  std::string Hex() const;  // 64 lowercase hex digits
  std::string Key() const;  // the 32 raw bytes
  const Hash256& bytes() const { return bytes_; }

  friend auto operator<=>(const TaskId&, const TaskId&) = default;

 private:
  Hash256 bytes_{};
};

// SHA-256 over "consensor.task.v2\0", the protocol version (u32 LE), the graph hash, the input
// count (u32 LE), each input sorted by name as (u32 LE name length, name bytes, hash), the nonce
// (u64 LE), replicas (u32 LE) and quorum (u32 LE).
// INVALID_ARGUMENT for an empty or duplicate input name.
StatusOr<TaskId> ComputeTaskId(const TaskSpec& spec);

// kCertifying exists in network mode only: the node has executed the task (or is not in its
// committee) and waits for a quorum certificate; kSucceeded then means certified.
enum class TaskState : uint8_t { kQueued = 1, kRunning = 2, kSucceeded = 3, kFailed = 4, kCertifying = 5 };

std::string_view TaskStateName(TaskState state);  // "queued", "running", ...
bool IsFinal(TaskState state);

// The lifecycle on one node: queued -> running -> succeeded | failed. running -> queued is
// allowed only on recovery after a crash (the execution is repeated; results are
// deterministic, so repeating is safe). queued -> failed covers tasks that can no longer run
// (e.g. a blob lost to disk corruption). Final states never change, except as below.
// Network mode adds: running -> certifying (executed, waiting for the quorum), queued ->
// certifying (an observer never runs it), certifying -> queued (the node became a member as a
// silent member's replacement or in a dispute), certifying -> succeeded (certified),
// certifying -> failed (the committee order ran out without a quorum), and succeeded -> queued:
// a certified task whose challenge window is still open is re-executed for a dispute (the node
// held outputs fetched from signers the dispute may overrule). In network mode SUCCEEDED means
// certified; the task is final once its window closes (consensus/finality.h).
bool IsAllowedTransition(TaskState from, TaskState to);

}  // namespace consensor::consensus
