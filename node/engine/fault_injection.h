// Operator misbehaviour on purpose, for tests and devnets only (config `[fault] mode`,
// docs/NETWORK.md). The engine asks its FaultInjector at two points, after executing and when
// signing (and, as an entry node, before announcing); the honest injector changes nothing, so no fault code runs in a
// real deployment.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "consensus/attestation.h"

namespace consensor::node {

enum class FaultMode {
  kNone,
  kCorruptOutput,  // signs a result root with one bit flipped
  kEquivocate,     // signs its result and a second, different one
  kSilent,         // executes but never signs
  kCrashMidTask,   // exits (code 86) after executing, before signing
  // As an entry node, announces clients' tasks with replicas = quorum = 1, whatever they asked.
  kDowngradeReplicas,
  kWrongTraceRoot,  // signs the right result root with a wrong trace root
  // Honest, but attests only `delay_ms` after executing: a member still working on a long task
  // (to the others it looks silent until then).
  kSlow,
  // As an entry node, announces with a reference block whose seed block is already mined, so it
  // knows the committee before it announces (the grinding attempt of docs/SECURITY.md, hole 3).
  kStaleReference,
  // A lazy member: never signs its own result; it signs the first result it sees revealed,
  // commits to it and reveals at once (docs/SECURITY.md, hole 5).
  kLazyCopy,
  // Executes, signs and commits, but never reveals its vote (docs/SECURITY.md, section 8).
  kWithholdReveal,
  // Serves its blobs to peers as the adoption staller of docs/SECURITY.md, section 9: the first
  // chunk of each blob, then nothing until the fetcher gives up.
  kTrickleBlobs,
  // Serves the certified outputs it holds to peers with one byte flipped (what a non-member
  // fetches on demand must be checked against the certificate: docs/NETWORK.md, "Certify").
  kCorruptServedOutputs,
  // As a member, cannot fetch a task's blobs from any holder (to the others it looks silent).
  kCannotFetch,
  // The hostile peer of docs/SECURITY.md, section 9: never signs (withholds its commitments and
  // votes), serves every blob with a byte flipped, refuses peers' GetTask, answers every Pull
  // with an empty page (it withholds its gossip log), and floods
  // every peer with signed GetBlob streams it never reads (for the blobs of the tasks it sees
  // announced, else random ones), with signed GetTask calls for tasks that do not exist, and
  // with signed Pull and GetNodeInfo requests, many more than its budgets let through.
  kRefuseEverywhere,
  // Exits (code 88) just before the first task record write it would make without a sync of its
  // own (as a seated member, its task's `queued` write; on a single node, the only fault mode it
  // takes, a RunTask's new task): the disk is then as a power failure after that write would
  // leave it.
  kCrashBeforeUnsyncedRecord,
  // Publishes its own commitment without writing the commitment's record, then exits (code 89):
  // what a power failure leaves when it takes back that unsynced write after the commitment
  // went out (the result, written earlier, is kept).
  kLoseOwnCommitment,
};

// The config names of the faults, in the order the docs list them (kNone has none).
std::span<const std::string_view> FaultModeNames();
// "" is kNone; otherwise one of FaultModeNames(), or INVALID_ARGUMENT.
StatusOr<FaultMode> ParseFaultMode(std::string_view name);

class FaultInjector {
 public:
  virtual ~FaultInjector() = default;
  // This node, as the entry node, is about to fix a client's task (replication resolved).
  virtual void BeforeAnnouncing(uint32_t* replicas, uint32_t* quorum) = 0;
  // The reference block this node, as the entry node, announces with (`honest` is the rule's).
  virtual uint64_t ReferenceBlock(uint64_t honest, uint64_t head, uint64_t max_reference_age) = 0;
  // This node executed the task and is about to attest; crash-mid-task ends the process here.
  virtual void BeforeAttesting(const std::string& task_id_hex) = 0;
  // The engine is about to write a change to this task's record without a sync of its own;
  // crash-before-unsynced-record ends the process here.
  virtual void BeforeUnsyncedRecord(const std::string& task_id_hex) = 0;
  // True: publish this node's own commitment for this task without writing its record
  // (lose-own-commitment); AfterOwnCommitmentSent then ends the process.
  virtual bool LosesOwnCommitmentRecord(const std::string& task_id_hex) = 0;
  virtual void AfterOwnCommitmentSent(const std::string& task_id_hex) = 0;
  // True: sign nothing for this task.
  virtual bool StaySilent(const std::string& task_id_hex) = 0;
  // True: sign a copy of the first vote revealed for a task this node is a member of.
  virtual bool CopiesRevealedVotes() = 0;
  // True: commit to its vote but never reveal it.
  virtual bool WithholdsReveal(const std::string& task_id_hex) = 0;
  // True: stall every blob this node serves after its first chunk.
  virtual bool StallsServedBlobs() = 0;
  // The engine holds these output blobs (hex SHA-256) of a task; corrupt-served-outputs
  // remembers them.
  virtual void HoldsOutputs(const std::vector<std::string>& blob_sha256_hex) = 0;
  // True: flip a byte of this blob when serving it.
  virtual bool CorruptsServedBlob(const std::string& blob_sha256_hex) = 0;
  // True: fail every fetch of a task's blobs for execution.
  virtual bool FailsMemberFetches() = 0;
  // True: refuse peers' GetTask calls, withhold its gossip log from Pull, and flood peers.
  virtual bool RefusesAndFloodsPeers() = 0;
  // The blobs (hex SHA-256) an announcement this node received names.
  virtual void SawAnnouncedBlobs(const std::vector<std::string>& blob_sha256_hex) = 0;
  // The most recent of them (refuse-everywhere floods peers with requests for these).
  virtual std::vector<std::string> AnnouncedBlobs() = 0;
  // What to sign in place of the honest attestation: itself, a corrupted one, or two.
  virtual std::vector<consensus::Attestation> ToSign(const std::string& task_id_hex,
                                                     const consensus::Attestation& honest) = 0;
};

// kNone gives the honest injector. `delay_ms` is kSlow's wait between executing and attesting.
std::unique_ptr<FaultInjector> NewFaultInjector(FaultMode mode, int64_t delay_ms = 0);

}  // namespace consensor::node
