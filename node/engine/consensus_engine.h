// Network mode: carries the protocol's decisions (consensus/) to gossip, the task manager, the
// store, peers and the chain. It decides nothing itself. For each task it
//   - plans the round (consensus/replication.h, consensus/committee.h) and announces it, or
//     adopts a peer's announcement after fetching and verifying the task's blobs,
//   - signs and gossips an EIP-712 attestation when this node is a member and has executed,
//   - feeds every vote and timer to the task's consensus::TaskRound and carries out what it
//     returns, in order: store votes and certificates, re-queue the task when this node joins the
//     committee or the dispute round, fetch a certified result it did not compute, and send
//     equivocation and dispute evidence to the contract.
// It reads the chain only outside its lock. Time comes from this node's steady clock only
// (ConsensusOptions::now); peers' clocks are never trusted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/status.h"
#include "consensor/v1/peer.pb.h"
#include "consensus/commitment.h"
#include "consensus/quorum.h"
#include "consensus/round.h"
#include "node/chain/chain_view.h"
#include "node/engine/adoption_queue.h"
#include "node/engine/consensus_options.h"
#include "node/engine/fault_injection.h"
#include "node/engine/orphan_pool.h"
#include "node/engine/remote_outputs.h"
#include "node/engine/task_manager.h"
#include "node/p2p/gossip_publisher.h"
#include "node/p2p/peer_client.h"
#include "node/storage/disk_budget.h"
#include "node/storage/store.h"
#include "node/telemetry/metrics.h"

namespace consensor::node {

// Sends slashing evidence to the contract; ChainClient in the node, a fake in unit tests.
class EvidenceSubmitter {
 public:
  virtual ~EvidenceSubmitter() = default;
  // Returns the transaction hash.
  virtual StatusOr<std::string> SlashEquivocation(const consensus::SignedAttestation& a,
                                                  const consensus::SignedAttestation& b) = 0;
  virtual StatusOr<std::string> SlashDispute(const consensus::SignedAttestation& accused,
                                             const consensus::Certificate& certificate) = 0;
};

// What the engine works with. The node assembles the real ones, unit tests pass fakes; the
// engine owns none of them.
struct EngineParts {
  ChainView* chain = nullptr;
  TaskManager* tasks = nullptr;
  Store* store = nullptr;
  MetricsRegistry* metrics = nullptr;
  PeerClient* peers = nullptr;
  EvidenceSubmitter* evidence = nullptr;  // null: report only
  FaultInjector* faults = nullptr;        // null: honest (tests and devnets set one)
  // Blobs fetched from peers are checked against it before and as they are written; a full node
  // adopts nothing and so stays silent as a member (docs/NODE.md). Null: no checks.
  DiskBudget* budget = nullptr;
};

class ConsensusEngine {
 public:
  ConsensusEngine(ConsensusOptions options, Secp256k1Secret key, EngineParts parts,
                  OrphanPoolLimits orphan_limits = {});
  ~ConsensusEngine();

  // Gossip is built after the engine (its handler calls OnMessage), so it comes in here.
  void SetGossip(GossipPublisher* gossip) { gossip_ = gossip; }
  const Address20& address() const { return address_; }

  // Rebuilds the rounds of unfinished tasks from the store and re-sends this node's own
  // attestations. Call after the task manager recovered and before Start.
  Status Recover();
  void Start();
  void Shutdown();

  // SubmitTask from a client: validates, stores and announces. Errors use the client API's codes.
  StatusOr<SubmitOutcome> Submit(const v1::SubmitTaskRequest& request);
  // The gossip handler: OK accepts (and relays) the message.
  Status OnMessage(const v1::GossipMessage& message, const Hash256& message_id, const Address20& sender);
  // The task manager's callback after a successful local execution.
  void OnExecuted(const consensus::TaskId& task_id, const v1::TaskResult& result);
  // Rounds still waiting for a certificate (what the open-rounds gauge shows after a tick).
  size_t open_rounds() const;
  // The chain view saw a new head: committees whose seed block it settles are seated now, not
  // at the next tick. Cheap (wakes the ticker); callable from any thread, before Start too.
  void OnChainHead(uint64_t head);
  // True while a seat check that OnChainHead asked for has not finished (tests wait on it before
  // they move the chain, so that the check sees the head it was asked for).
  bool SeatCheckPending();
  // A client asked for a blob this node does not hold. When it is an output of a certified task
  // whose result this node recorded without the bytes (a non-member: docs/NETWORK.md, "Certify"),
  // it is fetched now from the entry node or the committee, and kept only if it holds the
  // tensor the certified result names. NOT_FOUND when it is no such output; UNAVAILABLE when no
  // holder served the certified bytes, or at once while that blob's backoff after such a
  // failure runs; RESOURCE_EXHAUSTED when too many fetches are in flight. Concurrent requests
  // for one blob share one fetch; `admit` (the client's budget) is asked only by a request that
  // starts one (node/engine/remote_outputs.h).
  Status FetchOutputOnDemand(const Hash256& sha256, const std::function<Status()>& admit = {});
  // Retention deleted this task: this node no longer serves its outputs on demand.
  void OnTaskDeleted(const consensus::TaskId& task_id);
  // Outputs recorded without their bytes (tests).
  size_t remote_outputs() const { return remote_outputs_.entries(); }

 private:
  struct Round;
  struct Actions;  // side effects gathered under the lock, run after it

  StatusOr<v1::TaskConsensus> PlanConsensus(uint64_t reference_block, uint32_t replicas, uint32_t quorum,
                                            const std::string& announcer);
  uint64_t ReferenceForNewTask(uint64_t head) const;
  // Draws the committee from the seed block's hash, stores it with the task and opens its round
  // (queueing the task here when this node is a member). Runs outside the lock.
  Status Seat(const consensus::TaskId& task_id);
  // `late`: accepted after its seed block was mined, so this node only observes the task.
  Status Adopt(const v1::TaskAnnouncement& announcement, const Address20& announcer, bool late);
  Status FetchBlob(const Hash256& sha256, const std::vector<std::string>& endpoints);
  Status FetchTaskBlobs(const v1::SubmitTaskRequest& spec, const std::vector<std::string>& endpoints);
  // One on-demand fetch of a recorded output from its task's holders (RemoteOutputs::Fetcher).
  Status FetchRemoteOutput(const consensus::TaskId& task_id, const Hash256& sha256);
  // This node executes the task (a seated member, a replacement, a dispute member): queued at
  // once when its blobs are here, else once a member fetch (first in the adoption queue) got
  // them from a holder. A member that cannot get them stays silent and is replaced.
  void ExecuteHere(const consensus::TaskId& task_id, const std::string& reason);
  // Who may hold a task's blobs: the announcer, the committee, the certificate's signers, then
  // (`all_peers`) every other peer. Never this node.
  std::vector<std::string> HoldersOf(const v1::Task& task, bool all_peers) const;
  consensus::RoundRules Rules() const;
  Status OpenRound(const v1::Task& task, std::shared_ptr<const consensus::OperatorSet> operators, Actions* actions);
  void AddVote(Round& round, const consensus::SignedAttestation& vote, bool persist, Actions* actions);
  void ApplyVoteMessage(Round& round, const VoteMessage& message, Actions* actions);
  // A vote for a task whose round is not open here: kept once its signer checks out.
  Status KeepOrphan(VoteMessage message);
  void CopyVote(Round& round, const VoteMessage& seen, Actions* actions);
  bool OwnVoteStored(const v1::Task& task) const;
  void Carry(Round& round, const consensus::RoundDecisions& decisions, bool persist, Actions* actions);
  void OnCertified(Round& round, const consensus::Certified& certified, Actions* actions);
  uint64_t FinalBlockOf(const Round& round) const;
  Status CheckMinReplicas(uint32_t replicas) const;
  void SendEvidence(const consensus::TaskId& task_id, const consensus::SlashDecision& slash, Actions* actions);
  void Attest(const consensus::TaskId& task_id, const v1::TaskResult& result);
  void FetchCertifiedResult(const consensus::TaskId& task_id);
  void Tick();
  // A round has a deadline (consensus::TaskRound::NextTimerMs, in options_.now()'s ms): the
  // ticker runs Tick then if that is before its next tick. Takes jobs_mu_ (after mu_ is fine).
  void WakeTickerBy(int64_t deadline_ms);
  // Queues Seat for every task whose seed block is settled at the current head.
  void SeatSettled();
  // True when a task waits for the next block only: the ticker then reads the head every
  // seat_poll_interval.
  bool SeatImminent() const;
  // A vote arrived for a task waiting for its seed block: a peer has seen that block (or is
  // lying). Asks the chain for its head now instead of waiting for the next poll, at most once
  // per kMinHeadRefreshInterval, so that peers cannot make this node hammer its RPC endpoint.
  void RefreshHeadFor(const consensus::TaskId& task_id);
  // Reads the chain head on a job thread (one read at a time, at most one per
  // kMinHeadRefreshInterval) and seats what the new head settles.
  void ReadHead();
  size_t OpenRoundsLocked() const;
  void RunActions(Actions& actions);
  void Publish(std::vector<v1::GossipMessage>& messages);
  void Enqueue(std::function<void()> job);
  std::vector<std::string> PeersFor(const Address20& preferred) const;

  ConsensusOptions options_;
  Secp256k1Secret key_;
  Address20 address_{};
  ChainView* chain_;
  TaskManager* tasks_;
  Store* store_;
  EvidenceSubmitter* evidence_;
  PeerClient* peers_;
  std::unique_ptr<FaultInjector> honest_;  // when no injector was given
  FaultInjector* faults_;
  DiskBudget* budget_;
  GossipPublisher* gossip_ = nullptr;

  Counter* attestations_signed_;
  Counter* attestations_received_;
  Counter* attestations_refused_;
  Counter* tasks_certified_;
  Counter* disputes_;
  Counter* members_replaced_;
  Counter* evidence_submitted_;
  Counter* evidence_failed_;
  Counter* announcements_refused_;
  Counter* commitments_admitted_;
  Counter* commitments_refused_;
  Counter* reveals_not_counted_;
  Histogram* finality_seconds_;
  Gauge* open_rounds_gauge_;
  Gauge* orphan_votes_gauge_;
  Gauge* orphan_bytes_gauge_;
  Counter* blobs_fetched_;          // blobs fetched from peers (task blobs and outputs)
  Counter* member_fetch_failures_;  // member fetches that found no holder
  Counter* own_key_announcements_;  // announcements signed with this node's key that it never made
  Counter* outputs_on_demand_;      // outputs fetched because a client asked this non-member
  Counter* outputs_refused_;        // output bytes a peer served that the certificate refutes
  void UpdateOrphanGaugesLocked();

  mutable std::mutex mu_;
  std::map<consensus::TaskId, std::unique_ptr<Round>> rounds_;
  // Certified tasks whose challenge window is still open -> its last block. A round is kept
  // while its task is here, so late votes still count and conflicts still start disputes.
  std::map<consensus::TaskId, uint64_t> awaiting_final_;
  // Commitments and reveals that arrived before their task's round opened, signature checked.
  OrphanPool orphans_;
  std::set<consensus::TaskId> adopting_;  // announcements being stored
  // Stored tasks whose committee is not drawn yet -> their seed block.
  std::map<consensus::TaskId, uint64_t> seating_;
  bool head_refresh_running_ = false;
  std::chrono::steady_clock::time_point last_head_refresh_{};  // real time: a rate limit

  // This node's commitments that are written but not sent yet, by task. A batch that reveals
  // the task's vote sends it only after them (RunActions): the batches run side by side after
  // the lock, and a reveal that reaches a peer before its commitment counts nowhere there.
  // Taken after mu_, never before it.
  std::mutex unsent_mu_;
  std::condition_variable commitment_sent_;
  std::map<consensus::TaskId, int> unsent_commitments_;

  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;    // job workers wait here
  std::condition_variable ticker_cv_;  // the ticker waits here: a head, a deadline or shutdown
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  bool seat_wanted_ = false;         // OnChainHead came: the ticker seats before its next tick
  bool seat_check_running_ = false;  // the ticker is seating or ticking now
  // The earliest round deadline before the next tick (WakeTickerBy); max: none.
  std::chrono::steady_clock::time_point timer_due_ = std::chrono::steady_clock::time_point::max();
  std::vector<std::thread> workers_;
  std::thread ticker_;
  // Output blobs of certified tasks whose result this node recorded without their bytes, and
  // the on-demand fetches for them (bounded; own lock). Rebuilt by Recover.
  RemoteOutputs remote_outputs_;
  // Announcements waiting for their blobs, on threads of their own (last: stopped first).
  AdoptionQueue adoptions_;
};

// One change to a task's record (TaskManager::Mutate); an error leaves the record as it was.
using RecordChange = std::function<Status(v1::Task*)>;
// Applies `changes` in order to one record, each as if written alone: one that fails is skipped
// (and logged) and the others still apply. Fails only when none applied. The engine writes a
// batch's changes to a task with one Mutate, one synced write, instead of one write each.
Status ApplyRecordChanges(const std::vector<RecordChange>& changes, v1::Task* task);

// Conversions between the wire form (hex strings) and the protocol types.
StatusOr<consensus::SignedAttestation> FromProto(const v1::SignedAttestation& p);
v1::SignedAttestation ToProto(const consensus::SignedAttestation& a, const Address20& signer);
StatusOr<consensus::SignedCommitment> FromProto(const v1::ResultCommitment& p);
// `signer` is informational on the wire (receivers recover it); bundles leave it out.
v1::ResultCommitment ToProto(const consensus::SignedCommitment& c, const std::optional<Address20>& signer);
StatusOr<VoteMessage> ParseVoteMessage(const v1::GossipMessage& message);
v1::Certificate ToProto(const consensus::Certificate& c, uint32_t quorum, uint32_t committee_size, uint32_t replicas,
                        bool dispute);
std::string AddressHex(const Address20& a);  // 0x + 40 lowercase hex digits
StatusOr<Address20> ParseAddress(const std::string& text);

}  // namespace consensor::node
