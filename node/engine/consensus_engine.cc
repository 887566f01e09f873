#include "node/engine/consensus_engine.h"

#include <algorithm>
#include <array>
#include <tuple>

#include "common/clock.h"
#include "common/npy.h"
#include "consensus/committee.h"
#include "consensus/finality.h"
#include "consensus/replication.h"
#include "executor/merkle.h"
#include "executor/serialize.h"
#include "node/engine/certificate_record.h"
#include "node/keys/keystore.h"
#include "node/telemetry/log.h"

namespace consensor::node {

namespace {

using Clock = std::chrono::steady_clock;

// A reveal's bundle lists the commitments its sender admitted: at most the task's operator set,
// which a dispute bounds by RoundRules::max_dispute_committee.
constexpr size_t kMaxRevealBundle = 1024;
constexpr size_t kMaxAsideVotesPerRound = 1024;  // votes from operators not (yet) in the committee
constexpr auto kRetainFinalized = std::chrono::minutes(10);
constexpr int kJobThreads = 2;

int64_t SteadyMillis(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// Head refreshes that peers' votes may cause (RefreshHeadFor): at most one per interval.
constexpr auto kMinHeadRefreshInterval = std::chrono::milliseconds(20);

StatusOr<consensus::Signature65> SignatureField(const std::string& hex) {
  ASSIGN_OR_RETURN(auto bytes, FixedBytesFromHex(hex, 65, "signature"));
  consensus::Signature65 sig{};
  std::copy(bytes.begin(), bytes.end(), sig.begin());
  return sig;
}

}  // namespace

std::string AddressHex(const Address20& a) { return "0x" + ToHex(a); }

StatusOr<Address20> ParseAddress(const std::string& text) {
  auto a = AddressFromHex(text);
  if (!a.ok()) return InvalidArgument("'" + text.substr(0, 64) + "' is not an address: " + a.status().message());
  return *a;
}

StatusOr<consensus::SignedAttestation> FromProto(const v1::SignedAttestation& p) {
  consensus::SignedAttestation a;
  ASSIGN_OR_RETURN(a.attestation.task_id, HashFieldFromHex(p.task_id(), "task_id"));
  ASSIGN_OR_RETURN(a.attestation.result_root, HashFieldFromHex(p.result_root(), "result_root"));
  ASSIGN_OR_RETURN(a.attestation.trace_root, HashFieldFromHex(p.trace_root(), "trace_root"));
  a.attestation.reference_block = p.reference_block();
  ASSIGN_OR_RETURN(a.signature, SignatureField(p.signature()));
  return a;
}

v1::SignedAttestation ToProto(const consensus::SignedAttestation& a, const Address20& signer) {
  v1::SignedAttestation p;
  p.set_task_id(ToHex(a.attestation.task_id));
  p.set_result_root(ToHex(a.attestation.result_root));
  p.set_trace_root(ToHex(a.attestation.trace_root));
  p.set_reference_block(a.attestation.reference_block);
  p.set_signer(AddressHex(signer));
  p.set_signature(ToHex(a.signature));
  return p;
}

StatusOr<consensus::SignedCommitment> FromProto(const v1::ResultCommitment& p) {
  consensus::SignedCommitment c;
  ASSIGN_OR_RETURN(c.task_id, HashFieldFromHex(p.task_id(), "task_id"));
  c.reference_block = p.reference_block();
  ASSIGN_OR_RETURN(c.phase, consensus::VotePhaseFromNumber(p.phase()));
  ASSIGN_OR_RETURN(c.commitment, HashFieldFromHex(p.commitment(), "commitment"));
  ASSIGN_OR_RETURN(c.signature, SignatureField(p.signature()));
  return c;
}

v1::ResultCommitment ToProto(const consensus::SignedCommitment& c, const std::optional<Address20>& signer) {
  v1::ResultCommitment p;
  p.set_task_id(ToHex(c.task_id));
  p.set_reference_block(c.reference_block);
  p.set_phase(static_cast<uint32_t>(c.phase));
  p.set_commitment(ToHex(c.commitment));
  if (signer) p.set_signer(AddressHex(*signer));
  p.set_signature(ToHex(c.signature));
  return p;
}

StatusOr<VoteMessage> ParseVoteMessage(const v1::GossipMessage& message) {
  VoteMessage m;
  if (message.has_commitment()) {
    ASSIGN_OR_RETURN(m.commitment, FromProto(message.commitment()));
    m.task_id = consensus::TaskId(m.commitment->task_id);
    m.phase = m.commitment->phase;
    return m;
  }
  if (!message.has_reveal()) return InvalidArgument("not a commitment or a reveal");
  const v1::Reveal& reveal = message.reveal();
  ASSIGN_OR_RETURN(m.vote, FromProto(reveal.attestation()));
  ASSIGN_OR_RETURN(m.phase, consensus::VotePhaseFromNumber(reveal.phase()));
  if (static_cast<size_t>(reveal.commitments_size()) > kMaxRevealBundle) {
    return InvalidArgument("a reveal lists " + std::to_string(reveal.commitments_size()) + " commitments; at most " +
                           std::to_string(kMaxRevealBundle) + " are allowed");
  }
  for (const auto& c : reveal.commitments()) {
    ASSIGN_OR_RETURN(consensus::SignedCommitment parsed, FromProto(c));
    m.bundle.push_back(parsed);
  }
  m.task_id = consensus::TaskId(m.vote->attestation.task_id);
  return m;
}

v1::Certificate ToProto(const consensus::Certificate& c, uint32_t quorum, uint32_t committee_size, uint32_t replicas,
                        bool dispute) {
  v1::Certificate p;
  p.set_task_id(ToHex(c.attestation.task_id));
  p.set_result_root(ToHex(c.attestation.result_root));
  p.set_trace_root(ToHex(c.attestation.trace_root));
  p.set_reference_block(c.attestation.reference_block);
  for (size_t i = 0; i < c.signers.size(); ++i) {
    p.add_signers(AddressHex(c.signers[i]));
    p.add_signatures(ToHex(c.signatures[i]));
  }
  p.set_quorum(quorum);
  p.set_committee_size(committee_size);
  p.set_replicas(replicas);
  p.set_dispute(dispute);
  return p;
}

// One task's round on this node: the protocol's state (consensus::TaskRound) and what only
// this node cares about (memory only; the task record holds what must survive a restart: the
// plan, the votes and the certificate).
struct ConsensusEngine::Round {
  Round(consensus::TaskId task_id, consensus::TaskRound protocol) : id(task_id), rules(std::move(protocol)) {}
  consensus::TaskId id;
  consensus::TaskRound rules;
  bool result_stored = false;  // SUCCEEDED with the certified result
  bool closed = false;         // the round failed; dropped at the next tick
  // The round failed while this node was executing: the task is failed when execution ends.
  std::string failed_reason;
  Clock::time_point adopted_at;
  Clock::time_point finalized_at;
  Clock::time_point next_result_fetch;
  // This node's signed votes by phase, committed and waiting for their commit window to close.
  std::array<std::vector<consensus::SignedAttestation>, consensus::kVotePhases> own_votes;
};

struct ConsensusEngine::Actions {
  // Published after the record updates, and only once a sync covers them: a reveal goes out
  // only once the commitments and the closed window it reveals on are durable, so a restarted
  // node cannot admit others.
  std::vector<v1::GossipMessage> publish;
  // Published after the record updates are written, before (and without) a sync of their own:
  // this node's commitment. Its write comes first in the WAL, so no later write of the task (a
  // peer's commitment closing the window) can be durable without it; a power failure that takes
  // it back costs nothing, since the re-executed result and its RFC 6979 signatures commit to the
  // same bytes again (docs/SECURITY.md section 8). Sent before `publish`: before any reveal.
  std::vector<v1::GossipMessage> publish_written;
  // Tasks whose own commitment is in `publish_written` (counted in unsent_commitments_), and
  // tasks whose reveal in `publish` waits until no commitment of theirs is unsent.
  std::vector<consensus::TaskId> commitments_unsent;
  std::vector<consensus::TaskId> reveals_after_commitments;
  std::vector<std::pair<consensus::TaskId, std::string>> requeue;  // to execute here, and why
  std::vector<std::function<void()>> jobs;
  // Record updates, applied in order after the lock.
  struct Mutation {
    Mutation(const consensus::TaskId& id, RecordChange record_change, bool deferrable = false)
        : task(id), change(std::move(record_change)), may_defer(deferrable) {}
    consensus::TaskId task;
    RecordChange change;
    // A change that a power failure may take back without breaking a promise: written without
    // its own sync when every change of its task in the batch is one and the batch publishes
    // nothing that needs a sync (RunActions: `publish`). A commitment admitted while the window
    // stays open is one: a peer's gates nothing this node sends, a restart finds the window open
    // either way and admits it again from the peers' logs; this node's own is made again,
    // identical, when the restarted node signs its (re-executed) result. The synced write that
    // closes the window, which comes later in the same WAL, makes it durable before any reveal
    // that lists it.
    bool may_defer;
  };
  std::vector<Mutation> mutations;
  // Round phases this batch completes ("commitment sent", "reveal sent", "certificate stored"),
  // logged once its records are written and its messages published, so that their timestamps
  // are the times things left the node (bench/round_latency.py reads them).
  struct PhaseLog {
    consensus::TaskId task;
    const char* phase;
  };
  std::vector<PhaseLog> phase_logs;
};

ConsensusEngine::ConsensusEngine(ConsensusOptions options, Secp256k1Secret key, EngineParts parts,
                                 OrphanPoolLimits orphan_limits)
    : options_(std::move(options)),
      key_(key),
      chain_(parts.chain),
      tasks_(parts.tasks),
      store_(parts.store),
      evidence_(parts.evidence),
      peers_(parts.peers),
      honest_(parts.faults ? nullptr : NewFaultInjector(FaultMode::kNone)),
      faults_(parts.faults ? parts.faults : honest_.get()),
      budget_(parts.budget),
      orphans_(orphan_limits),
      remote_outputs_(options_.remote_outputs, parts.metrics, options_.now, parts.store, options_.wall_now) {
  MetricsRegistry* metrics = parts.metrics;
  if (auto a = AddressFromSecretKey(key_); a.ok()) address_ = *a;
  attestations_signed_ = metrics->AddCounter("consensor_attestations_signed_total", "Attestations this node signed.");
  attestations_received_ = metrics->AddCounter("consensor_attestations_received_total",
                                               "Valid attestations counted from committee members.");
  attestations_refused_ =
      metrics->AddCounter("consensor_attestations_refused_total", "Attestations refused (bad signature, wrong task).");
  tasks_certified_ =
      metrics->AddCounter("consensor_tasks_certified_total", "Tasks finalized with a quorum certificate.");
  disputes_ = metrics->AddCounter("consensor_disputes_total", "Tasks whose committee signed conflicting results.");
  members_replaced_ = metrics->AddCounter("consensor_committee_extensions_total",
                                          "Silent committee members replaced by the next operator.");
  evidence_submitted_ =
      metrics->AddCounter("consensor_evidence_submitted_total", "Slashing transactions this node sent successfully.");
  evidence_failed_ = metrics->AddCounter("consensor_evidence_failed_total", "Slashing submissions that failed.");
  announcements_refused_ =
      metrics->AddCounter("consensor_announcements_refused_total", "Task announcements refused (invalid or stale).");
  finality_seconds_ = metrics->AddHistogram("consensor_task_finality_seconds",
                                            "From adopting a task to its quorum certificate.", DefaultSecondsBuckets());
  commitments_admitted_ = metrics->AddCounter("consensor_commitments_admitted_total",
                                              "Vote commitments admitted while their commit window was open.");
  commitments_refused_ = metrics->AddCounter("consensor_commitments_refused_total",
                                             "Vote commitments refused (bad signature, wrong task, not an operator).");
  reveals_not_counted_ = metrics->AddCounter(
      "consensor_reveals_not_counted_total",
      "Well-signed votes that did not count: no commitment seen before the commit window closed, a commitment "
      "to something else, or revealed too early.");
  open_rounds_gauge_ = metrics->AddGauge("consensor_consensus_open_rounds", "Tasks waiting for a quorum.");
  orphan_votes_gauge_ =
      metrics->AddGauge("consensor_orphan_votes", "Votes kept for tasks whose round is not open here.");
  orphan_bytes_gauge_ = metrics->AddGauge("consensor_orphan_vote_bytes",
                                          "Bytes of the votes kept for tasks whose round is not open here.");
  blobs_fetched_ = metrics->AddCounter("consensor_blobs_fetched_total",
                                       "Blobs fetched from peers: task blobs by members, certified outputs.");
  own_key_announcements_ = metrics->AddCounter(
      "consensor_own_key_announcements_total",
      "Announcements signed with this node's operator key that this node never made: another node runs with "
      "the same key.");
  member_fetch_failures_ = metrics->AddCounter(
      "consensor_member_fetch_failures_total",
      "Tasks this node was to execute as a member but whose blobs no holder served (it stays silent).");
  outputs_on_demand_ = metrics->AddCounter(
      "consensor_outputs_fetched_on_demand_total",
      "Certified outputs a non-member fetched because a client asked for them, checked against the certificate.");
  outputs_refused_ =
      metrics->AddCounter("consensor_outputs_refused_total",
                          "Output bytes a peer served that do not match the certified result (not stored).");
}

void ConsensusEngine::UpdateOrphanGaugesLocked() {
  orphan_votes_gauge_->Set(static_cast<double>(orphans_.messages()));
  orphan_bytes_gauge_->Set(static_cast<double>(orphans_.bytes()));
}

ConsensusEngine::~ConsensusEngine() { Shutdown(); }

void ConsensusEngine::Start() {
  adoptions_.Start();
  for (int i = 0; i < kJobThreads; ++i) {
    workers_.emplace_back([this] {
      while (true) {
        std::function<void()> job;
        {
          std::unique_lock<std::mutex> lock(jobs_mu_);
          jobs_cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
          if (stopping_) return;
          job = std::move(jobs_.front());
          jobs_.pop_front();
        }
        job();
      }
    });
  }
  ticker_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(jobs_mu_);
    auto next_tick = Clock::now() + options_.tick_interval;
    auto next_head_read = next_tick;  // only while a seat is imminent
    while (true) {
      // A round's deadline (WakeTickerBy) before the next tick wakes the ticker at that deadline.
      const auto waiting_for = timer_due_;
      ticker_cv_.wait_until(lock, std::min({next_tick, next_head_read, timer_due_}),
                            [this, waiting_for] { return stopping_ || seat_wanted_ || timer_due_ < waiting_for; });
      if (stopping_) return;
      // A new head between ticks seats at once; the timers keep their own pace.
      const auto now = Clock::now();
      const bool deadline = now >= timer_due_;
      const bool tick = now >= next_tick || deadline;
      const bool read_head = now >= next_head_read;
      if (!tick && !read_head && !seat_wanted_) continue;  // an earlier deadline came: wait for it
      if (tick) timer_due_ = Clock::time_point::max();     // Tick's rounds set the next one
      seat_wanted_ = false;
      seat_check_running_ = true;
      lock.unlock();
      if (read_head) ReadHead();  // on a job thread: a slow chain must not hold up the timers
      if (tick) {
        Tick();
      } else {
        SeatSettled();
      }
      const bool imminent = options_.seat_poll_interval.count() > 0 && SeatImminent();
      lock.lock();
      seat_check_running_ = false;
      if (tick) next_tick = Clock::now() + options_.tick_interval;
      next_head_read = imminent ? Clock::now() + options_.seat_poll_interval : next_tick;
    }
  });
}

void ConsensusEngine::OnChainHead(uint64_t head) {
  (void)head;  // the chain view's head() has it already; the ticker reads it there
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    seat_wanted_ = true;
  }
  ticker_cv_.notify_one();
}

void ConsensusEngine::WakeTickerBy(int64_t deadline_ms) {
  // The rounds count in options_.now()'s milliseconds; the ticker waits on the steady clock.
  const auto due =
      Clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, deadline_ms - SteadyMillis(options_.now())));
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    if (due >= timer_due_) return;
    timer_due_ = due;
  }
  ticker_cv_.notify_one();
}

bool ConsensusEngine::SeatCheckPending() {
  std::lock_guard<std::mutex> lock(jobs_mu_);
  return seat_wanted_ || seat_check_running_;
}

void ConsensusEngine::RefreshHeadFor(const consensus::TaskId& task_id) {
  uint64_t settled_at = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = seating_.find(task_id);
    if (it == seating_.end()) return;
    settled_at = it->second + options_.confirmations;
  }
  if (chain_->head() >= settled_at) {  // known already: only the tick was missing
    OnChainHead(chain_->head());
    return;
  }
  ReadHead();
}

void ConsensusEngine::ReadHead() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (head_refresh_running_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_head_refresh_ < kMinHeadRefreshInterval) return;
    head_refresh_running_ = true;
    last_head_refresh_ = now;
  }
  Enqueue([this] {
    auto head = chain_->RefreshHead();
    {
      std::lock_guard<std::mutex> lock(mu_);
      head_refresh_running_ = false;
    }
    if (head.ok()) {
      OnChainHead(*head);
    } else {
      Log(LogLevel::kDebug, "cannot read the chain head", {{"error", head.status().ToString()}});
    }
  });
}

void ConsensusEngine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    if (stopping_ && workers_.empty() && !ticker_.joinable()) return;
    stopping_ = true;
  }
  jobs_cv_.notify_all();
  ticker_cv_.notify_all();
  adoptions_.Shutdown();
  for (auto& t : workers_) t.join();
  workers_.clear();
  if (ticker_.joinable()) ticker_.join();
}

void ConsensusEngine::Enqueue(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    if (stopping_) return;
    jobs_.push_back(std::move(job));
  }
  jobs_cv_.notify_one();  // only workers wait here; the ticker has its own
}

std::vector<std::string> ConsensusEngine::PeersFor(const Address20& preferred) const {
  std::vector<std::string> endpoints;
  std::string first = chain_->EndpointOf(preferred);
  if (!first.empty() && preferred != address_) endpoints.push_back(first);
  for (const std::string& e : chain_->PeerEndpoints(address_)) {
    if (e != first) endpoints.push_back(e);
  }
  return endpoints;
}

// ---- planning and admission

StatusOr<v1::TaskConsensus> ConsensusEngine::PlanConsensus(uint64_t reference_block, uint32_t replicas, uint32_t quorum,
                                                           const std::string& announcer) {
  RETURN_IF_ERROR(consensus::CheckReplication(replicas, quorum, options_.max_replicas));
  RETURN_IF_ERROR(CheckMinReplicas(replicas));
  ASSIGN_OR_RETURN(auto operators, chain_->OperatorsAt(reference_block));
  if (operators->operators.size() < replicas) {
    return FailedPrecondition("the task asks for " + std::to_string(replicas) + " replicas but only " +
                              std::to_string(operators->operators.size()) + " operators were registered at block " +
                              std::to_string(reference_block));
  }
  // The committee itself is drawn once the seed block is mined (Seat).
  v1::TaskConsensus plan;
  plan.set_reference_block(reference_block);
  plan.set_seed_block(consensus::SeedBlock(reference_block, options_.max_reference_age));
  plan.set_replicas(replicas);
  plan.set_quorum(quorum);
  plan.set_announcer(announcer);
  plan.set_announced_unix_ms(UnixMillisNow());
  return plan;
}

uint64_t ConsensusEngine::ReferenceForNewTask(uint64_t head) const {
  const uint64_t settled = head > options_.confirmations ? head - options_.confirmations : 0;
  const uint64_t age = options_.max_reference_age > options_.reference_margin_blocks
                           ? options_.max_reference_age - options_.reference_margin_blocks
                           : 0;
  const uint64_t oldest_accepted = head > age ? head - age : 0;
  return std::min(settled, oldest_accepted);
}

Status ConsensusEngine::Seat(const consensus::TaskId& id) {
  ASSIGN_OR_RETURN(v1::Task task, tasks_->Get(id));
  if (task.consensus().committee_size() == 0) {
    const uint64_t seed_block = task.consensus().seed_block();
    const uint64_t reference_block = task.consensus().reference_block();
    const bool observer_only = task.consensus().observer_only();
    ASSIGN_OR_RETURN(Hash256 seed_hash, chain_->BlockHashAt(seed_block));
    ASSIGN_OR_RETURN(auto operators, chain_->OperatorsAt(reference_block));
    ASSIGN_OR_RETURN(auto order, consensus::CommitteeOrder(id.bytes(), reference_block, seed_hash, operators->operators,
                                                           task.consensus().replicas()));
    std::vector<std::string> committee;
    bool member = false;
    for (const Address20& a : order) {
      committee.push_back(AddressHex(a));
      member = member || (a == address_ && !observer_only);
    }
    const std::string seed_hex = ToHex(seed_hash);
    // Not synced on its own (one fsync less on every seat): the draw is the chain's, and a
    // record that lost it is seated again at startup (Recover). The next synced write of the
    // task covers it (an observer's next round write; a member's commit window closing, or the
    // worker's sync after its result).
    RETURN_IF_ERROR(tasks_->Mutate(
        id,
        [&](v1::Task* t) -> Status {
          auto* tc = t->mutable_consensus();
          if (tc->committee_size() > 0) return OkStatus();  // seated by a concurrent job
          for (const auto& m : committee) tc->add_committee(m);
          tc->set_member(member);
          tc->set_seed_block_hash(seed_hex);
          return OkStatus();
        },
        nullptr, Durability::kDeferred));
    ASSIGN_OR_RETURN(task, tasks_->Get(id));
    Log(LogLevel::kInfo, "committee seated",
        {{"task", id.Hex()}, {"seed_block", static_cast<int64_t>(seed_block)}, {"member", task.consensus().member()}});
  }
  if (task.state() == v1::TASK_STATE_SUCCEEDED || task.state() == v1::TASK_STATE_FAILED) return OkStatus();
  auto operators = chain_->OperatorsAt(task.consensus().reference_block());  // before the lock
  if (!operators.ok()) return operators.status();
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seating_.erase(id);
    if (rounds_.count(id)) return OkStatus();
    RETURN_IF_ERROR(OpenRound(task, *operators, &actions));
  }
  if (task.consensus().member() && task.state() == v1::TASK_STATE_CERTIFYING && !task.has_result()) {
    actions.requeue.emplace_back(id, "committee member");
  }
  RunActions(actions);
  return OkStatus();
}

StatusOr<SubmitOutcome> ConsensusEngine::Submit(const v1::SubmitTaskRequest& request) {
  v1::SubmitTaskRequest resolved = request;
  auto* opts = resolved.mutable_options();
  // The announcement states everything the id covers, so that every node computes the same id
  // whatever its own defaults are.
  if (opts->protocol_version() == 0) opts->set_protocol_version(consensus::kProtocolVersion);
  if (opts->replicas() == 0) opts->set_replicas(options_.default_replicas);
  if (opts->quorum() == 0) {
    opts->set_quorum(consensus::DefaultQuorum(opts->replicas(), options_.default_replicas, options_.default_quorum));
  }
  {
    uint32_t replicas = opts->replicas(), quorum = opts->quorum();
    faults_->BeforeAnnouncing(&replicas, &quorum);
    opts->set_replicas(replicas);
    opts->set_quorum(quorum);
  }
  // Validate before anything is announced: the content must be here and within the caps.
  ASSIGN_OR_RETURN(consensus::TaskId id, tasks_->Check(resolved));
  if (auto known = tasks_->Get(id); known.ok()) return SubmitOutcome{id, true};

  // Peers drop announcements from keys that are not active operators (never registered, not yet
  // active, withdrawn or slashed): such a task could never be certified, so the client hears it
  // now rather than when the round gives up.
  if (!chain_->IsActiveOperator(address_)) {
    return FailedPrecondition("this node's operator " + AddressHex(address_) +
                              " is not an active operator (not registered or not yet active, withdrawn, or "
                              "slashed): peers ignore its announcements, so submit to another node");
  }
  const uint64_t head = chain_->head();
  const uint64_t reference = faults_->ReferenceBlock(ReferenceForNewTask(head), head, options_.max_reference_age);
  ASSIGN_OR_RETURN(v1::TaskConsensus plan,
                   PlanConsensus(reference, opts->replicas(), opts->quorum(), AddressHex(address_)));
  ASSIGN_OR_RETURN(SubmitOutcome outcome, tasks_->Submit(resolved, &plan));
  if (outcome.already_known) return outcome;

  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seating_.emplace(id, plan.seed_block());
  }
  OnChainHead(head);  // the ticker looks at what it waits for
  v1::GossipMessage message;
  auto* announcement = message.mutable_announcement();
  *announcement->mutable_spec() = resolved;
  announcement->set_reference_block(reference);
  actions.publish.insert(actions.publish.begin(), message);
  RunActions(actions);
  Log(LogLevel::kInfo, "task announced",
      {{"task", id.Hex()},
       {"reference_block", static_cast<int64_t>(reference)},
       {"seed_block", static_cast<int64_t>(plan.seed_block())}});
  return outcome;
}

Status ConsensusEngine::OnMessage(const v1::GossipMessage& message, const Hash256& message_id,
                                  const Address20& sender) {
  (void)message_id;
  if (message.has_announcement()) {
    const v1::TaskAnnouncement& ann = message.announcement();
    {
      std::vector<std::string> named = {ann.spec().graph_sha256()};
      for (const auto& [name, hex] : ann.spec().inputs()) named.push_back(hex);
      faults_->SawAnnouncedBlobs(named);
    }
    uint64_t head = chain_->head();
    if (ann.reference_block() > head) {
      ASSIGN_OR_RETURN(head, chain_->RefreshHead());
      if (ann.reference_block() > head) {
        announcements_refused_->Increment();
        return InvalidArgument("reference block " + std::to_string(ann.reference_block()) + " is ahead of the chain");
      }
    }
    if (ann.reference_block() + options_.evidence_deadline_blocks < head) {
      announcements_refused_->Increment();
      return InvalidArgument("reference block " + std::to_string(ann.reference_block()) +
                             " is past the evidence deadline");
    }
    // Past its acceptance window the seed block is mined, and the committee was known to
    // whoever picked the reference block: follow the task, never execute or sign it.
    const bool late = ann.reference_block() + options_.max_reference_age < head;
    // Refused here, not only at adoption, so that peers do not relay it either.
    const auto& o = ann.spec().options();
    if (Status s = consensus::CheckReplication(o.replicas(), o.quorum(), options_.max_replicas); !s.ok()) {
      announcements_refused_->Increment();
      return s;
    }
    if (Status s = CheckMinReplicas(o.replicas()); !s.ok()) {
      announcements_refused_->Increment();
      return s;
    }
    // Blob fetching can take long: adopt in the background, in turn with other announcers
    // (a full queue is RESOURCE_EXHAUSTED: gossip takes a later copy).
    return adoptions_.Add(sender, [this, ann, sender, late] {
      if (Status s = Adopt(ann, sender, late); !s.ok()) {
        announcements_refused_->Increment();
        Log(LogLevel::kWarn, "task announcement not adopted",
            {{"announcer", AddressHex(sender)}, {"error", s.ToString()}});
      }
    });
  }
  if (message.has_commitment() || message.has_reveal()) {
    auto parsed = ParseVoteMessage(message);
    if (!parsed.ok()) {
      (message.has_commitment() ? commitments_refused_ : attestations_refused_)->Increment();
      return parsed.status();
    }
    Actions actions;
    bool orphan = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = rounds_.find(parsed->task_id);
      orphan = it == rounds_.end();
      if (!orphan) ApplyVoteMessage(*it->second, *parsed, &actions);
    }
    // The announcement may still be on its way (or being fetched), or the committee is not
    // drawn yet: keep the message aside (KeepOrphan checks it first, outside the lock). A vote
    // means its sender seated the committee: the seed block may be settled already.
    if (orphan) {
      const consensus::TaskId task_id = parsed->task_id;
      Status kept = KeepOrphan(*std::move(parsed));
      if (kept.ok()) RefreshHeadFor(task_id);
      return kept;
    }
    RunActions(actions);
    return OkStatus();
  }
  return InvalidArgument("empty gossip message");
}

Status ConsensusEngine::KeepOrphan(VoteMessage message) {
  // Verified before it is kept, so nobody can charge its junk to another operator's share of
  // the pool, and an operator outside the set gets none.
  const consensus::Eip712Domain domain = chain_->domain();
  StatusOr<Address20> signer = message.commitment ? consensus::RecoverCommitmentSigner(domain, *message.commitment)
                                                  : consensus::RecoverAttestationSigner(
                                                        domain, message.vote->attestation, message.vote->signature);
  Counter* refused = message.commitment ? commitments_refused_ : attestations_refused_;
  if (!signer.ok()) {
    refused->Increment();
    return signer.status().WithContext("vote for a task not open here");
  }
  if (!chain_->IsActiveOperator(*signer)) {
    refused->Increment();
    return PermissionDenied("vote for a task not open here, signed by " + AddressHex(*signer) +
                            ", who is not an active operator");
  }
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The round may have opened while the signature was checked.
    if (auto it = rounds_.find(message.task_id); it != rounds_.end()) {
      ApplyVoteMessage(*it->second, message, &actions);
    } else {
      Status kept = orphans_.Add(std::move(message), *signer, options_.now());
      UpdateOrphanGaugesLocked();
      return kept;
    }
  }
  RunActions(actions);
  return OkStatus();
}

Status ConsensusEngine::FetchBlob(const Hash256& sha256, const std::vector<std::string>& endpoints) {
  if (store_->BlobSize(sha256).ok()) return OkStatus();
  if (endpoints.empty()) return Unavailable("no peer to fetch blob " + ToHex(sha256) + " from");
  // Every holder's failure is named: the one that stalled is rarely the last one asked.
  StatusCode code = StatusCode::kUnavailable;
  std::string failures;
  for (const std::string& endpoint : endpoints) {
    // Bounded like a client's upload: checked before the first byte and as the bytes arrive.
    DiskBudget::Reservation claim;
    if (budget_ != nullptr) {
      ASSIGN_OR_RETURN(claim, budget_->Reserve(0, "blob fetched from a peer"));
    }
    auto writer = store_->NewBlobWriter(sha256, options_.max_blob_bytes);
    if (!writer.ok()) return writer.status();
    int64_t received = 0;
    Status over_budget = OkStatus();
    Status fetched = peers_->FetchBlob(endpoint, sha256, [&](std::span<const uint8_t> bytes) -> Status {
      received += static_cast<int64_t>(bytes.size());
      if (budget_ != nullptr) over_budget = claim.GrowTo(received);
      RETURN_IF_ERROR(over_budget);
      return (*writer)->Append(bytes);
    });
    if (!over_budget.ok()) return over_budget;  // this node is full: no other holder helps
    if (fetched.ok()) {
      auto committed = (*writer)->Commit();  // verifies the hash
      if (committed.ok()) {
        blobs_fetched_->Increment();
        return OkStatus();
      }
      fetched = committed.status().WithContext("blob from " + endpoint);
    }
    code = fetched.code();
    constexpr size_t kMaxFailureText = 2048;  // a long holder list must not make a huge log line
    if (failures.size() < kMaxFailureText) failures += (failures.empty() ? "" : "; ") + fetched.message();
  }
  return Status(code, failures);
}

Status ConsensusEngine::FetchTaskBlobs(const v1::SubmitTaskRequest& spec, const std::vector<std::string>& endpoints) {
  ASSIGN_OR_RETURN(Hash256 graph_hash, HashFieldFromHex(spec.graph_sha256(), "graph_sha256"));
  RETURN_IF_ERROR(FetchBlob(graph_hash, endpoints).WithContext("graph"));
  // Weights referenced by the graph are blobs too.
  executor::Limits limits = tasks_->options().limits;
  ASSIGN_OR_RETURN(auto bytes, store_->GetBlob(graph_hash, limits.max_graph_file_bytes));
  auto graph = executor::ParseGraph(bytes, /*text_format=*/false, limits);
  if (graph.ok()) {
    for (const auto& value : graph->values()) {
      if (value.blob) RETURN_IF_ERROR(FetchBlob(value.blob->sha256, endpoints).WithContext("weights"));
    }
  }
  for (const auto& [name, hex] : spec.inputs()) {
    ASSIGN_OR_RETURN(Hash256 h, HashFieldFromHex(hex, "input"));
    RETURN_IF_ERROR(FetchBlob(h, endpoints).WithContext("input '" + name + "'"));
  }
  return OkStatus();
}

std::vector<std::string> ConsensusEngine::HoldersOf(const v1::Task& task, bool all_peers) const {
  std::vector<std::string> endpoints;
  auto add = [&](const std::string& endpoint) {
    if (!endpoint.empty() && std::find(endpoints.begin(), endpoints.end(), endpoint) == endpoints.end()) {
      endpoints.push_back(endpoint);
    }
  };
  auto add_operator = [&](const std::string& hex) {
    auto a = ParseAddress(hex);
    if (a.ok() && *a != address_) add(chain_->EndpointOf(*a));
  };
  const v1::TaskConsensus& c = task.consensus();
  add_operator(c.announcer());  // it had every blob from the client
  for (const std::string& m : c.committee()) add_operator(m);
  for (const std::string& signer : c.certificate().signers()) add_operator(signer);
  if (all_peers) {
    for (const std::string& e : chain_->PeerEndpoints(address_)) add(e);
  }
  return endpoints;
}

void ConsensusEngine::ExecuteHere(const consensus::TaskId& id, const std::string& reason) {
  // A seated member's task that has not executed here is queued without a sync of its own: a
  // power failure that takes the write back leaves it to recovery, which queues it again
  // (RecoveryReexecutes, Recover). The task manager decides on the record it rewrites.
  auto requeue = [this, id, reason](const v1::Task& seen) {
    if (RecoveryReexecutes(seen)) faults_->BeforeUnsyncedRecord(id.Hex());
    if (Status s = tasks_->Requeue(id, reason, Durability::kDeferred); !s.ok()) {
      Log(LogLevel::kWarn, "cannot queue task for execution", {{"task", id.Hex()}, {"error", s.ToString()}});
    }
  };
  auto task = tasks_->Get(id);
  if (!task.ok()) {
    Log(LogLevel::kWarn, "cannot queue task for execution", {{"task", id.Hex()}, {"error", task.status().ToString()}});
    return;
  }
  // The entry node, or a member that fetched them before, has every blob: no queue, no peer.
  if (FetchTaskBlobs(task->spec(), {}).ok()) {
    requeue(*task);
    return;
  }
  Address20 announcer{};
  if (auto a = ParseAddress(task->consensus().announcer()); a.ok()) announcer = *a;
  // Member work comes before any adoption; one job per announcer at a time, so a staller's
  // tasks hold one thread.
  Status queued = adoptions_.Add(
      announcer,
      [this, id, reason, requeue] {
        auto task = tasks_->Get(id);
        if (!task.ok()) return;
        Status fetched = faults_->FailsMemberFetches()
                             ? Unavailable("fault injection: this member fetches nothing")
                             : FetchTaskBlobs(task->spec(), HoldersOf(*task, /*all_peers=*/true));
        if (!fetched.ok()) {
          member_fetch_failures_->Increment();
          // Its commit window closes without it: the committee replaces it like a silent member.
          Log(LogLevel::kWarn, "member cannot fetch the task's blobs: it stays silent and is replaced",
              {{"task", id.Hex()}, {"reason", reason}, {"error", fetched.ToString()}});
          return;
        }
        Log(LogLevel::kInfo, "member fetched the task's blobs", {{"task", id.Hex()}, {"reason", reason}});
        requeue(*task);
      },
      AdoptionPriority::kMember);
  if (!queued.ok()) {
    member_fetch_failures_->Increment();
    Log(LogLevel::kWarn, "cannot queue the member fetch", {{"task", id.Hex()}, {"error", queued.ToString()}});
  }
}

Status ConsensusEngine::FetchOutputOnDemand(const Hash256& sha256, const std::function<Status()>& admit) {
  return remote_outputs_.Fetch(sha256, admit, [this](const consensus::TaskId& task_id, const Hash256& blob) {
    return FetchRemoteOutput(task_id, blob);
  });
}

void ConsensusEngine::OnTaskDeleted(const consensus::TaskId& task_id) { remote_outputs_.RemoveTask(task_id); }

Status ConsensusEngine::FetchRemoteOutput(const consensus::TaskId& task_id, const Hash256& sha256) {
  const std::string blob_hex = ToHex(sha256);
  const Status not_here = NotFound("blob " + blob_hex + " is not stored on this node");
  auto found = tasks_->Get(task_id);
  if (!found.ok()) return found.status().code() == StatusCode::kNotFound ? not_here : found.status();
  const v1::Task& task = *found;
  const v1::TaskResult& result = task.result();
  if (!task.consensus().has_certificate() || result.result_root() != task.consensus().certificate().result_root()) {
    return not_here;  // overruled by a dispute certificate meanwhile
  }
  auto output = std::find_if(result.outputs().begin(), result.outputs().end(),
                             [&](const v1::TaskOutput& o) { return o.blob_sha256() == blob_hex; });
  if (output == result.outputs().end()) return not_here;
  const bool fetched_before = store_->BlobSize(sha256).ok();  // a concurrent request's
  std::string failures;
  NpyLimits limits;
  limits.max_bytes = options_.max_blob_bytes;
  // The entry node and the committee hold the outputs; other non-members do not.
  for (const std::string& endpoint : HoldersOf(task, /*all_peers=*/false)) {
    Status s = FetchBlob(sha256, {endpoint});  // a blob whose bytes do not hash to its name is never stored
    bool refused = s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kDataLoss;
    if (s.ok()) {
      // Its hash names the blob, the certified result names its tensor: the two must agree.
      auto bytes = store_->GetBlob(sha256, options_.max_blob_bytes);
      s = bytes.ok() ? CheckNpyTensorHash(*bytes, output->tensor_hash(), limits) : bytes.status();
      if (s.ok()) {
        outputs_on_demand_->Increment();
        Log(LogLevel::kInfo, "certified output fetched on demand",
            {{"task", task_id.Hex()}, {"output", output->name()}, {"from", endpoint}});
        return OkStatus();
      }
      refused = true;
      if (!fetched_before) store_->DeleteBlob(sha256).IgnoreError();
    }
    if (refused) {
      outputs_refused_->Increment();
      Log(LogLevel::kWarn, "output refused: it does not match the certificate",
          {{"task", task_id.Hex()}, {"output", output->name()}, {"from", endpoint}, {"error", s.ToString()}});
    }
    constexpr size_t kMaxFailureText = 2048;
    if (failures.size() < kMaxFailureText) failures += (failures.empty() ? "" : "; ") + endpoint + ": " + s.message();
  }
  return Unavailable("no holder served output '" + output->name() + "' of task " + task_id.Hex() +
                     " matching its certificate" +
                     (failures.empty() ? std::string(" (no holder known)") : ": " + failures));
}

Status ConsensusEngine::Adopt(const v1::TaskAnnouncement& ann, const Address20& announcer, bool late) {
  const v1::SubmitTaskRequest& spec = ann.spec();
  ASSIGN_OR_RETURN(const consensus::TaskId id, tasks_->IdOf(spec));  // needs no blobs
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (rounds_.count(id) || adopting_.count(id)) return OkStatus();
    adopting_.insert(id);
  }
  auto done = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    adopting_.erase(id);
  };
  if (auto known = tasks_->Get(id); known.ok()) {
    done();
    return OkStatus();  // e.g. announced twice; the first announcement stands
  }
  if (announcer == address_) {
    // Two nodes signing as one operator double every vote's risk: if they ever disagree, the
    // operator has signed two results and is slashed. The operator must hear of it.
    own_key_announcements_->Increment();
    Log(LogLevel::kWarn,
        "a task announced with this node's operator key that this node never announced: "
        "is another node running with the same key?",
        {{"task", id.Hex()}});
  }
  // No blobs: only the committee fetches them, once it is seated (ExecuteHere). A non-member's
  // cost per task is the announcement, the votes and the certificate.
  auto plan =
      PlanConsensus(ann.reference_block(), spec.options().replicas(), spec.options().quorum(), AddressHex(announcer));
  if (!plan.ok()) {
    done();
    return plan.status();
  }
  plan->set_observer_only(late);
  auto submitted = tasks_->Submit(spec, &*plan, /*blobs_here=*/false);
  if (!submitted.ok()) {
    done();
    return submitted.status();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    adopting_.erase(id);
    if (!rounds_.count(id)) seating_.emplace(id, plan->seed_block());
  }
  OnChainHead(chain_->head());  // its seed block may be settled already (a slow fetch)
  Log(LogLevel::kInfo, "task adopted",
      {{"task", id.Hex()},
       {"announcer", AddressHex(announcer)},
       {"seed_block", static_cast<int64_t>(plan->seed_block())},
       {"observer_only", late}});
  return OkStatus();
}

// ---- rounds (called with mu_ held)

consensus::RoundRules ConsensusEngine::Rules() const {
  consensus::RoundRules rules;
  rules.domain = chain_->domain();
  rules.self = address_;
  rules.dispute_threshold_bps = chain_->threshold_bps();
  rules.max_dispute_committee = options_.max_dispute_committee;
  rules.member_timeout_ms = options_.member_timeout.count();
  rules.exhausted_grace_ms = options_.exhausted_grace.count();
  rules.commit_grace_ms = options_.commit_grace.count();
  rules.max_aside_votes = kMaxAsideVotesPerRound;
  rules.report_evidence = evidence_ != nullptr;
  return rules;
}

Status ConsensusEngine::OpenRound(const v1::Task& task, std::shared_ptr<const consensus::OperatorSet> operators,
                                  Actions* actions) {
  const v1::TaskConsensus& c = task.consensus();
  consensus::RoundRecord record;
  ASSIGN_OR_RETURN(record.task_id, Hash256FromHex(task.task_id()));
  record.reference_block = c.reference_block();
  if (c.committee_size() == 0) return FailedPrecondition("the task's committee is not seated yet");
  ASSIGN_OR_RETURN(record.seed_block_hash, Hash256FromHex(c.seed_block_hash()));
  record.replicas = c.replicas();
  record.quorum = c.quorum();
  for (const std::string& a : c.committee()) {
    ASSIGN_OR_RETURN(Address20 addr, ParseAddress(a));
    record.committee.push_back(addr);
  }
  record.executed =
      task.has_result() && !task.result().result_root().empty() && task.state() != v1::TASK_STATE_SUCCEEDED;
  record.finalized = c.has_certificate();
  record.observer_only = c.observer_only();
  const auto now = options_.now();
  ASSIGN_OR_RETURN(consensus::TaskRound protocol,
                   consensus::TaskRound::Open(Rules(), std::move(operators), record, SteadyMillis(now)));
  auto round = std::make_unique<Round>(consensus::TaskId(record.task_id), std::move(protocol));
  round->result_stored = task.state() == v1::TASK_STATE_SUCCEEDED;
  round->adopted_at = now;
  Round& r = *round;
  rounds_[r.id] = std::move(round);
  // What was admitted and closed before a restart, then the votes that counted then.
  for (const auto& stored : c.commitments()) {
    if (auto commitment = FromProto(stored); commitment.ok()) r.rules.RestoreCommitment(*commitment);
  }
  r.rules.RestoreClosedWindows(c.closed_commit_windows(), SteadyMillis(now));
  for (const auto& stored : c.attestations()) {
    if (auto vote = FromProto(stored); vote.ok()) AddVote(r, *vote, /*persist=*/false, actions);
  }
  for (const auto& m : orphans_.Take(r.id)) ApplyVoteMessage(r, m, actions);
  if (c.disputed()) {
    consensus::RoundDecisions decisions;
    r.rules.ResumeDispute(&decisions);
    Carry(r, decisions, /*persist=*/true, actions);
  }
  // Submit and Adopt queue the task before its round opens, so this node's execution can end
  // first; its vote was not signed then (no round), and would never be: sign it now.
  if (task.state() == v1::TASK_STATE_CERTIFYING && task.has_result() && r.rules.member() && !OwnVoteStored(task)) {
    const consensus::TaskId id = r.id;
    const v1::TaskResult result = task.result();
    actions->jobs.push_back([this, id, result] { Attest(id, result); });
  }
  return OkStatus();
}

bool ConsensusEngine::OwnVoteStored(const v1::Task& task) const {
  const std::string self = AddressHex(address_);
  return std::any_of(task.consensus().attestations().begin(), task.consensus().attestations().end(),
                     [&](const v1::SignedAttestation& a) { return a.signer() == self; });
}

void ConsensusEngine::AddVote(Round& r, const consensus::SignedAttestation& vote, bool persist, Actions* actions) {
  consensus::RoundDecisions decisions;
  r.rules.AddVote(vote, &decisions);
  Carry(r, decisions, persist, actions);
}

void ConsensusEngine::ApplyVoteMessage(Round& r, const VoteMessage& m, Actions* actions) {
  consensus::RoundDecisions decisions;
  r.rules.AdvanceClock(SteadyMillis(options_.now()));
  if (m.commitment) {
    r.rules.AddCommitment(*m.commitment, &decisions);
  } else {
    r.rules.AddReveal(*m.vote, m.phase, m.bundle, &decisions);
  }
  Carry(r, decisions, /*persist=*/true, actions);
  if (m.vote && faults_->CopiesRevealedVotes() && r.rules.member() && !r.rules.finalized() &&
      r.own_votes[static_cast<size_t>(m.phase)].empty()) {
    CopyVote(r, m, actions);
  }
}

// The lazy-copy fault (tests only): signs the first result it sees revealed, commits to it and
// reveals at once, with the bundle it saw plus its own commitment. Commit-reveal must keep this
// vote out of every certificate.
void ConsensusEngine::CopyVote(Round& r, const VoteMessage& seen, Actions* actions) {
  consensus::SignedAttestation copy;
  copy.attestation = seen.vote->attestation;
  auto sig = consensus::SignAttestation(key_, chain_->domain(), copy.attestation);
  if (!sig.ok()) return;
  copy.signature = *sig;
  auto commitment = consensus::SignCommitment(key_, chain_->domain(), copy, address_, seen.phase);
  if (!commitment.ok()) return;
  attestations_signed_->Increment();
  r.own_votes[static_cast<size_t>(seen.phase)].push_back(copy);
  v1::GossipMessage commit;
  *commit.mutable_commitment() = ToProto(*commitment, address_);
  actions->publish.push_back(commit);
  v1::GossipMessage reveal;
  *reveal.mutable_reveal()->mutable_attestation() = ToProto(copy, address_);
  reveal.mutable_reveal()->set_phase(static_cast<uint32_t>(seen.phase));
  for (const auto& c : seen.bundle) *reveal.mutable_reveal()->add_commitments() = ToProto(c, std::nullopt);
  *reveal.mutable_reveal()->add_commitments() = ToProto(*commitment, address_);
  actions->publish.push_back(reveal);
  Log(LogLevel::kWarn, "fault: copied a revealed vote without executing", {{"task", r.id.Hex()}});
}

// Carries out the round's decisions in order: record updates, metrics, logs, and the jobs that
// talk to peers and the chain (run after the lock).
namespace {

// The record change that ends a task whose round failed. Refused while it is executing here.
std::function<Status(v1::Task*)> FailTask(const std::string& reason) {
  return [reason](v1::Task* t) -> Status {
    if (t->state() != v1::TASK_STATE_CERTIFYING && t->state() != v1::TASK_STATE_QUEUED) {
      return Aborted("executing here");
    }
    t->set_state(v1::TASK_STATE_FAILED);
    t->set_error_code("ABORTED");
    t->set_error_message(reason);
    t->set_finished_unix_ms(UnixMillisNow());
    return OkStatus();
  };
}

}  // namespace

void ConsensusEngine::Carry(Round& r, const consensus::RoundDecisions& decisions, bool persist, Actions* actions) {
  // The round's state after these decisions may have a deadline before the next periodic timer.
  if (std::optional<int64_t> deadline = r.rules.NextTimerMs()) WakeTickerBy(*deadline);
  for (const consensus::RoundDecision& decision : decisions) {
    if (auto* counted = std::get_if<consensus::VoteCounted>(&decision)) {
      attestations_received_->Increment();
      Log(LogLevel::kInfo, "vote counted", {{"task", r.id.Hex()}, {"signer", AddressHex(counted->signer)}});
      if (!persist) continue;
      v1::SignedAttestation stored = ToProto(counted->vote, counted->signer);
      actions->mutations.emplace_back(r.id, [stored](v1::Task* t) -> Status {
        for (const auto& existing : t->consensus().attestations()) {
          if (existing.signature() == stored.signature()) return OkStatus();
        }
        *t->mutable_consensus()->add_attestations() = stored;
        return OkStatus();
      });
    } else if (std::holds_alternative<consensus::VoteRefused>(decision)) {
      attestations_refused_->Increment();
    } else if (auto* certified = std::get_if<consensus::Certified>(&decision)) {
      OnCertified(r, *certified, actions);
    } else if (auto* started = std::get_if<consensus::DisputeStarted>(&decision)) {
      disputes_->Increment();
      std::vector<std::string> members;
      for (const Address20& m : started->members) members.push_back(AddressHex(m));
      actions->mutations.emplace_back(r.id, [members](v1::Task* t) -> Status {
        t->mutable_consensus()->set_disputed(true);
        t->mutable_consensus()->clear_dispute_committee();
        for (const auto& m : members) t->mutable_consensus()->add_dispute_committee(m);
        return OkStatus();
      });
      Log(LogLevel::kWarn, "conflicting results: dispute round",
          {{"task", r.id.Hex()}, {"dispute_committee", static_cast<int64_t>(members.size())}});
    } else if (auto* failed = std::get_if<consensus::DisputeNotStarted>(&decision)) {
      disputes_->Increment();
      Log(LogLevel::kError, "cannot start dispute round", {{"task", r.id.Hex()}, {"error", failed->error.ToString()}});
    } else if (auto* dispute = std::get_if<consensus::DisputeCertified>(&decision)) {
      const consensus::Certificate& cert = dispute->certificate;
      v1::Certificate proto =
          ToProto(cert, 0, static_cast<uint32_t>(dispute->committee_size), r.rules.replicas(), true);
      Log(LogLevel::kInfo, "dispute certificate",
          {{"task", r.id.Hex()},
           {"result_root", ToHex(cert.attestation.result_root)},
           {"signers", static_cast<int64_t>(cert.signers.size())}});
      const bool replaces = dispute->supersedes;
      const uint64_t final_block = FinalBlockOf(r);
      actions->mutations.emplace_back(r.id, [proto, replaces, final_block](v1::Task* t) -> Status {
        if (replaces || !t->consensus().has_certificate()) StoreCertificate(proto, final_block, t);
        return OkStatus();
      });
      awaiting_final_.emplace(r.id, final_block);
      if (dispute->first_certificate) {
        r.finalized_at = options_.now();
        tasks_certified_->Increment();
      }
      if (replaces) {
        // The stored outputs may be the overruled ones: replace them now (after the mutation
        // above stores the new certificate), not at the next fetch time.
        r.result_stored = false;
        r.next_result_fetch = options_.now() + std::chrono::seconds(1);
        const consensus::TaskId id = r.id;
        actions->jobs.push_back([this, id] { FetchCertifiedResult(id); });
      }
    } else if (auto* extended = std::get_if<consensus::CommitteeExtended>(&decision)) {
      members_replaced_->Increment(static_cast<double>(extended->added));
      std::vector<std::string> committee;
      for (const Address20& m : extended->members) committee.push_back(AddressHex(m));
      const bool now_member = extended->self_joined;
      actions->mutations.emplace_back(r.id, [committee, now_member](v1::Task* t) -> Status {
        t->mutable_consensus()->clear_committee();
        for (const auto& c : committee) t->mutable_consensus()->add_committee(c);
        if (now_member) t->mutable_consensus()->set_member(true);
        return OkStatus();
      });
      Log(LogLevel::kInfo, "silent committee members replaced",
          {{"task", r.id.Hex()},
           {"silent", static_cast<int64_t>(extended->silent)},
           {"committee", static_cast<int64_t>(committee.size())}});
    } else if (std::holds_alternative<consensus::ExecuteHere>(decision)) {
      actions->requeue.emplace_back(r.id, r.rules.disputed() ? "dispute re-execution" : "joined the committee");
    } else if (auto* evidence = std::get_if<consensus::SendEvidence>(&decision)) {
      SendEvidence(r.id, evidence->slash, actions);
    } else if (auto* refreshed = std::get_if<consensus::CertificateRefreshed>(&decision)) {
      // Same result, signers without the equivocator; a dispute certificate stays as it is.
      v1::Certificate proto = ToProto(refreshed->certificate, r.rules.quorum(),
                                      static_cast<uint32_t>(refreshed->committee_size), r.rules.replicas(), false);
      const uint64_t final_block = FinalBlockOf(r);
      // Possibly before the first certificate's write (another thread's actions): it must
      // win either way (certificate_record.h).
      actions->mutations.emplace_back(r.id, [proto, final_block](v1::Task* t) -> Status {
        StoreRefreshedCertificate(proto, final_block, t);
        return OkStatus();
      });
      Log(LogLevel::kInfo, "certificate re-signed without an equivocator",
          {{"task", r.id.Hex()}, {"signers", static_cast<int64_t>(refreshed->certificate.signers.size())}});
    } else if (auto* admitted = std::get_if<consensus::CommitmentAdmitted>(&decision)) {
      commitments_admitted_->Increment();
      Log(LogLevel::kInfo, "commitment admitted",
          {{"task", r.id.Hex()},
           {"signer", AddressHex(admitted->signer)},
           {"phase", static_cast<int64_t>(admitted->commitment.phase)}});
      // Stored even from a timer's decisions: admission is what a reveal lists, and a restart
      // after the window closed must find what it closed on. No commitment needs a sync of its
      // own (Actions::Mutation::may_defer): this node's own is written before it goes out and
      // synced by the write that closes the window, before the reveal.
      v1::ResultCommitment stored = ToProto(admitted->commitment, admitted->signer);
      actions->mutations.emplace_back(
          r.id,
          [stored](v1::Task* t) -> Status {
            for (const auto& existing : t->consensus().commitments()) {
              if (existing.signature() == stored.signature()) return OkStatus();
            }
            *t->mutable_consensus()->add_commitments() = stored;
            return OkStatus();
          },
          /*deferrable=*/true);
    } else if (auto* refused = std::get_if<consensus::CommitmentRefused>(&decision)) {
      commitments_refused_->Increment();
      Log(LogLevel::kDebug, "commitment refused", {{"task", r.id.Hex()}, {"reason", refused->reason}});
    } else if (auto* closed = std::get_if<consensus::WindowClosed>(&decision)) {
      Log(LogLevel::kInfo, "commit window closed",
          {{"task", r.id.Hex()}, {"phase", static_cast<int64_t>(closed->phase)}});
      const uint32_t bit = 1u << static_cast<uint32_t>(closed->phase);
      actions->mutations.emplace_back(r.id, [bit](v1::Task* t) -> Status {
        t->mutable_consensus()->set_closed_commit_windows(t->consensus().closed_commit_windows() | bit);
        return OkStatus();
      });
    } else if (auto* reopened = std::get_if<consensus::WindowReopened>(&decision)) {
      Log(LogLevel::kInfo, "commit window reopened",
          {{"task", r.id.Hex()},
           {"equivocator", AddressHex(reopened->equivocator)},
           {"late_admitted", static_cast<int64_t>(reopened->late_admitted)}});
    } else if (auto* due = std::get_if<consensus::RevealDue>(&decision)) {
      // Not signed yet (reopened after a restart): Attest reveals when it signs again.
      if (faults_->WithholdsReveal(r.id.Hex())) continue;
      for (const consensus::SignedAttestation& vote : r.own_votes[static_cast<size_t>(due->phase)]) {
        v1::GossipMessage message;
        v1::Reveal* reveal = message.mutable_reveal();
        *reveal->mutable_attestation() = ToProto(vote, address_);
        reveal->set_phase(static_cast<uint32_t>(due->phase));
        for (const auto& c : due->bundle) *reveal->add_commitments() = ToProto(c, std::nullopt);
        actions->publish.push_back(std::move(message));
        actions->phase_logs.push_back({r.id, "reveal sent"});
        {
          std::lock_guard<std::mutex> unsent(unsent_mu_);
          if (unsent_commitments_.count(r.id) != 0) actions->reveals_after_commitments.push_back(r.id);
        }
        consensus::RoundDecisions counted;
        r.rules.AddReveal(vote, due->phase, {}, &counted);
        Carry(r, counted, /*persist=*/true, actions);
      }
    } else if (auto* not_counted = std::get_if<consensus::RevealNotCounted>(&decision)) {
      reveals_not_counted_->Increment();
      Log(LogLevel::kInfo, "vote not counted",
          {{"task", r.id.Hex()}, {"signer", AddressHex(not_counted->signer)}, {"reason", not_counted->reason}});
    } else if (auto* failed = std::get_if<consensus::RoundFailed>(&decision)) {
      const std::string reason = failed->reason;
      // Carried out by Tick, which retries while the task is executing here (it cannot be
      // failed under the executor); the round is closed once the task is.
      r.failed_reason = reason;
      Log(LogLevel::kWarn, "consensus round failed", {{"task", r.id.Hex()}, {"error", reason}});
    }
  }
}

Status ConsensusEngine::CheckMinReplicas(uint32_t replicas) const {
  if (replicas >= options_.min_replicas) return OkStatus();
  return InvalidArgument("replicas must be at least " + std::to_string(options_.min_replicas) +
                         ", the deployment's minReplicas (got " + std::to_string(replicas) + ")");
}

uint64_t ConsensusEngine::FinalBlockOf(const Round& r) const {
  return consensus::FinalityBlock(r.rules.reference_block(), options_.max_reference_age,
                                  options_.challenge_window_blocks);
}

void ConsensusEngine::OnCertified(Round& r, const consensus::Certified& certified, Actions* actions) {
  r.finalized_at = options_.now();
  tasks_certified_->Increment();
  finality_seconds_->Observe(std::chrono::duration<double>(r.finalized_at - r.adopted_at).count());
  const consensus::Certificate& cert = certified.certificate;
  v1::Certificate proto =
      ToProto(cert, r.rules.quorum(), static_cast<uint32_t>(certified.committee_size), r.rules.replicas(), false);
  const uint64_t final_block = FinalBlockOf(r);
  actions->mutations.emplace_back(r.id, [proto, final_block](v1::Task* t) -> Status {
    StoreFirstCertificate(proto, final_block, t);
    return OkStatus();
  });
  actions->phase_logs.push_back({r.id, "certificate stored"});
  awaiting_final_.emplace(r.id, final_block);
  Log(LogLevel::kInfo, "task certified",
      {{"task", r.id.Hex()},
       {"result_root", ToHex(cert.attestation.result_root)},
       {"signers", static_cast<int64_t>(cert.signers.size())}});
  // Store the certified result now rather than at the next tick: clients are waiting.
  const consensus::TaskId id = r.id;
  r.next_result_fetch = r.finalized_at + std::chrono::seconds(1);
  actions->jobs.push_back([this, id] { FetchCertifiedResult(id); });
}

void ConsensusEngine::SendEvidence(const consensus::TaskId& task_id, const consensus::SlashDecision& slash,
                                   Actions* actions) {
  if (evidence_ == nullptr) return;
  const bool equivocation = slash.kind == consensus::SlashDecision::Kind::kEquivocation;
  actions->jobs.push_back([this, slash, task_id, equivocation] {
    const std::string id_hex = task_id.Hex();
    auto tx = equivocation ? evidence_->SlashEquivocation(slash.first, slash.second)
                           : evidence_->SlashDispute(slash.first, *slash.certificate);
    v1::SlashRecord record;
    record.set_kind(equivocation ? "equivocation" : "dispute");
    record.set_operator_address(AddressHex(slash.accused));
    if (tx.ok()) {
      record.set_tx_hash(*tx);
      evidence_submitted_->Increment();
      Log(LogLevel::kInfo, equivocation ? "equivocation evidence sent" : "dispute evidence sent",
          {{"task", id_hex}, {"operator", AddressHex(slash.accused)}, {"tx", *tx}});
    } else {
      record.set_error(tx.status().message());
      evidence_failed_->Increment();
      if (equivocation) {
        Log(LogLevel::kWarn, "equivocation evidence failed", {{"task", id_hex}, {"error", tx.status().ToString()}});
      } else {
        // Another honest node may have been first (EvidenceAlreadyUsed): that is the expected race.
        Log(LogLevel::kInfo, "dispute evidence not sent", {{"task", id_hex}, {"error", tx.status().ToString()}});
      }
    }
    tasks_
        ->Mutate(task_id,
                 [record](v1::Task* t) -> Status {
                   *t->mutable_consensus()->add_slashes() = record;
                   return OkStatus();
                 })
        .IgnoreError();
  });
}

// ---- local execution

void ConsensusEngine::OnExecuted(const consensus::TaskId& task_id, const v1::TaskResult& result) {
  std::vector<std::string> outputs;
  for (const auto& out : result.outputs()) outputs.push_back(out.blob_sha256());
  faults_->HoldsOutputs(outputs);
  faults_->BeforeAttesting(task_id.Hex());
  Attest(task_id, result);
}

void ConsensusEngine::Attest(const consensus::TaskId& task_id, const v1::TaskResult& result) {
  Actions actions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = rounds_.find(task_id);
    if (it == rounds_.end()) return;
    Round& r = *it->second;
    // The round failed while this node executed: nothing to sign; Tick fails the task.
    if (!r.failed_reason.empty()) return;
    r.rules.MarkExecuted();
    if (r.rules.finalized()) {
      // Certified while this node was executing, or re-executed for a dispute after it stored a
      // certified result: either way the record is now CERTIFYING with this node's own result,
      // and must be brought back to the certified one (ours if it matches, else fetched).
      r.result_stored = false;
      const consensus::TaskId id = r.id;
      actions.jobs.push_back([this, id] { FetchCertifiedResult(id); });
    }
    if (faults_->StaySilent(task_id.Hex())) return;
    consensus::SignedAttestation vote;
    vote.attestation.task_id = r.rules.task_id();
    auto root = Hash256FromHex(result.result_root());
    auto trace = Hash256FromHex(result.trace_root());
    if (!root.ok() || !trace.ok()) return;
    vote.attestation.result_root = *root;
    vote.attestation.trace_root = *trace;
    vote.attestation.reference_block = r.rules.reference_block();
    // Commit-reveal: gossip a commitment to the vote now, the vote once the commitments this
    // node admitted could certify (consensus/commitment.h). An equivocator signs two votes and
    // commits to the first.
    const consensus::VotePhase phase = r.rules.current_phase();
    std::vector<consensus::SignedAttestation>& own = r.own_votes[static_cast<size_t>(phase)];
    own.clear();
    for (const auto& a : faults_->ToSign(task_id.Hex(), vote.attestation)) {
      auto sig = consensus::SignAttestation(key_, chain_->domain(), a);
      if (!sig.ok()) return;
      own.push_back(consensus::SignedAttestation{a, *sig});
      attestations_signed_->Increment();
    }
    if (own.empty()) return;
    auto commitment = consensus::SignCommitment(key_, chain_->domain(), own.front(), address_, phase);
    if (!commitment.ok()) return;
    v1::GossipMessage message;
    *message.mutable_commitment() = ToProto(*commitment, address_);
    actions.publish_written.push_back(message);  // written first, then out, before any reveal
    {
      std::lock_guard<std::mutex> unsent(unsent_mu_);
      ++unsent_commitments_[r.id];
    }
    actions.commitments_unsent.push_back(r.id);
    actions.phase_logs.push_back({r.id, "commitment sent"});
    consensus::RoundDecisions decisions;
    r.rules.AdvanceClock(SteadyMillis(options_.now()));
    r.rules.AddCommitment(*commitment, &decisions);
    Carry(r, decisions, /*persist=*/true, &actions);
  }
  // lose-own-commitment (tests): the commitment goes out and its unsynced record is lost, as a
  // power failure right after would leave it. Not when the batch closes the window (synced).
  const bool lose_record = actions.publish.empty() && faults_->LosesOwnCommitmentRecord(task_id.Hex());
  if (lose_record) actions.mutations.clear();
  RunActions(actions);
  if (lose_record) faults_->AfterOwnCommitmentSent(task_id.Hex());
}

void ConsensusEngine::FetchCertifiedResult(const consensus::TaskId& task_id) {
  v1::Certificate cert;
  std::vector<std::string> endpoints;
  // The committee and the entry node keep the outputs; any other node records the certified
  // result (names, tensor hashes, blob names) and fetches an output when a client asks for it.
  bool keep_outputs = true;
  {
    auto task = tasks_->Get(task_id);
    if (!task.ok() || !task->consensus().has_certificate()) return;
    cert = task->consensus().certificate();
    // Stored and certified already. A SUCCEEDED task whose outputs are not the certified ones
    // (a dispute certificate overruled them) goes on: they are replaced, never served on.
    if (task->state() == v1::TASK_STATE_SUCCEEDED && task->has_result() &&
        task->result().result_root() == cert.result_root() && task->result().trace_root() == cert.trace_root()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = rounds_.find(task_id); it != rounds_.end()) it->second->result_stored = true;
      return;
    }
    // Our own result may already be the certified one.
    if (task->has_result() && task->result().result_root() == cert.result_root() &&
        task->result().trace_root() == cert.trace_root()) {
      v1::TaskResult result = task->result();
      const std::string root = cert.result_root();
      Status s = tasks_->Mutate(
          task_id,
          [root](v1::Task* t) -> Status {
            if (t->consensus().certificate().result_root() != root) return Aborted("the certificate changed meanwhile");
            t->set_state(v1::TASK_STATE_SUCCEEDED);
            return OkStatus();
          },
          &result);
      if (s.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = rounds_.find(task_id); it != rounds_.end()) it->second->result_stored = true;
        Log(LogLevel::kInfo, "certified result stored", {{"task", task_id.Hex()}, {"own", true}});
      }
      return;
    }
    for (const std::string& signer : cert.signers()) {
      auto a = ParseAddress(signer);
      if (!a.ok() || *a == address_) continue;
      std::string e = chain_->EndpointOf(*a);
      if (!e.empty()) endpoints.push_back(e);
    }
    keep_outputs = task->consensus().member() || task->consensus().announcer() == AddressHex(address_);
  }
  // Not executed here (an observer) or executed differently: take the outputs from a signer,
  // and accept them only if their hashes make up the certified result root.
  for (const std::string& endpoint : endpoints) {
    auto remote = peers_->GetTask(endpoint, task_id.Hex());
    if (!remote.ok() || !remote->has_result()) continue;
    const v1::TaskResult& result = remote->result();
    std::vector<std::pair<std::string, Hash256>> named;
    bool ok = result.result_root() == cert.result_root() && result.trace_root() == cert.trace_root();
    for (const auto& out : result.outputs()) {
      auto h = Hash256FromHex(out.tensor_hash());
      if (!h.ok()) ok = false;
      else named.emplace_back(out.name(), *h);
    }
    if (!ok || ToHex(executor::ResultRoot(named)) != cert.result_root()) continue;
    // Each output blob must hold the tensor its hash names.
    auto fetch_output = [&](const v1::TaskOutput& out) -> Status {
      ASSIGN_OR_RETURN(Hash256 h, Hash256FromHex(out.blob_sha256()));
      RETURN_IF_ERROR(FetchBlob(h, {endpoint}));
      ASSIGN_OR_RETURN(auto bytes, store_->GetBlob(h, options_.max_blob_bytes));
      NpyLimits limits;
      limits.max_bytes = options_.max_blob_bytes;
      return CheckNpyTensorHash(bytes, out.tensor_hash(), limits);
    };
    bool outputs_ok = true;
    std::vector<Hash256> left_remote;  // output blobs left with the holders
    for (const auto& out : result.outputs()) {
      if (keep_outputs) {
        outputs_ok = outputs_ok && fetch_output(out).ok();
      } else if (auto h = Hash256FromHex(out.blob_sha256()); h.ok()) {
        if (!store_->BlobSize(*h).ok()) left_remote.push_back(*h);
      } else {
        outputs_ok = false;
      }
    }
    if (!outputs_ok) continue;
    v1::TaskResult stored = result;
    const std::string root = cert.result_root();
    // Before the record says SUCCEEDED: a client that sees it may ask for an output at once.
    remote_outputs_.Add(task_id, left_remote);
    Status s = tasks_->Mutate(
        task_id,
        [root](v1::Task* t) -> Status {
          if (t->state() == v1::TASK_STATE_QUEUED || t->state() == v1::TASK_STATE_RUNNING) {
            return Aborted("executing here meanwhile");
          }
          // A dispute certificate replaced the one these outputs were fetched for: never store
          // the overruled outputs over the ones it certifies.
          if (t->consensus().certificate().result_root() != root) return Aborted("the certificate changed meanwhile");
          t->set_state(v1::TASK_STATE_SUCCEEDED);
          return OkStatus();
        },
        &stored);
    if (s.ok()) {
      std::vector<std::string> held;
      for (const auto& out : result.outputs()) held.push_back(out.blob_sha256());
      if (keep_outputs) faults_->HoldsOutputs(held);
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = rounds_.find(task_id); it != rounds_.end()) it->second->result_stored = true;
      Log(LogLevel::kInfo, keep_outputs ? "certified result fetched" : "certified result recorded, outputs on demand",
          {{"task", task_id.Hex()}, {"from", endpoint}, {"result_root", cert.result_root()}});
    } else {
      remote_outputs_.Remove(task_id, left_remote);
    }
    return;
  }
}

// ---- timers

void ConsensusEngine::Tick() {
  Actions actions;
  std::vector<consensus::TaskId> fetch;
  std::vector<std::pair<consensus::TaskId, std::string>> failing;  // rounds that failed, tasks to fail
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = options_.now();
    for (auto it = rounds_.begin(); it != rounds_.end();) {
      Round& r = *it->second;
      if (r.closed) {
        it = rounds_.erase(it);
        continue;
      }
      if (r.rules.finalized() && !r.result_stored && now >= r.next_result_fetch) {
        r.next_result_fetch = now + std::chrono::seconds(1);
        fetch.push_back(r.id);
      }
      // Kept while the challenge window is open: a late conflicting vote must still start a
      // dispute. Then kept a while longer for stragglers' fetches.
      if (r.rules.finalized() && r.result_stored && !awaiting_final_.count(r.id) &&
          now - r.finalized_at > kRetainFinalized) {
        it = rounds_.erase(it);
        continue;
      }
      // Silent members are replaced at the member deadline (consensus/membership.h).
      consensus::RoundDecisions decisions;
      r.rules.OnTimer(SteadyMillis(now), &decisions);
      Carry(r, decisions, /*persist=*/false, &actions);
      if (!r.failed_reason.empty()) failing.emplace_back(r.id, r.failed_reason);
      ++it;
    }
    // Votes for tasks never announced to us (or long finished) do not stay forever.
    orphans_.Expire(now);
    const uint64_t head = chain_->head();
    // Certified results become final once the chain passes their challenge window.
    for (auto it = awaiting_final_.begin(); it != awaiting_final_.end();) {
      if (!consensus::IsFinalAt(head, it->second)) {
        ++it;
        continue;
      }
      const consensus::TaskId id = it->first;
      const uint64_t final_block = it->second;
      actions.mutations.emplace_back(id, [](v1::Task* t) -> Status {
        if (!t->consensus().has_certificate()) return FailedPrecondition("no certificate to make final");
        t->mutable_consensus()->set_final(true);
        return OkStatus();
      });
      Log(LogLevel::kInfo, "task final",
          {{"task", id.Hex()},
           {"final_block", static_cast<int64_t>(final_block)},
           {"head", static_cast<int64_t>(head)}});
      it = awaiting_final_.erase(it);
    }
    open_rounds_gauge_->Set(static_cast<double>(OpenRoundsLocked()));
    UpdateOrphanGaugesLocked();
  }
  RunActions(actions);
  for (const auto& id : fetch) Enqueue([this, id] { FetchCertifiedResult(id); });
  SeatSettled();
  // Failed rounds end their tasks; one still executing here is tried again at the next tick.
  for (const auto& [id, reason] : failing) {
    Status s = tasks_->Mutate(id, FailTask(reason));
    if (s.code() == StatusCode::kAborted) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = rounds_.find(id); it != rounds_.end()) it->second->closed = true;
  }
}

bool ConsensusEngine::SeatImminent() const {
  const uint64_t head = chain_->head();
  std::lock_guard<std::mutex> lock(mu_);
  return std::any_of(seating_.begin(), seating_.end(),
                     [&](const auto& entry) { return entry.second + options_.confirmations == head + 1; });
}

void ConsensusEngine::SeatSettled() {
  std::vector<consensus::TaskId> seat;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Committees whose seed block is mined and settled are drawn now.
    const uint64_t head = chain_->head();
    for (auto it = seating_.begin(); it != seating_.end();) {
      if (it->second > head || head - it->second < options_.confirmations) {
        ++it;
        continue;
      }
      seat.push_back(it->first);
      it = seating_.erase(it);
    }
  }
  for (const auto& id : seat) {
    Enqueue([this, id] {
      if (Status s = Seat(id); !s.ok()) {
        // Tried again at the next tick (the chain may be briefly unreachable).
        Log(LogLevel::kWarn, "cannot seat the committee", {{"task", id.Hex()}, {"error", s.ToString()}});
        auto task = tasks_->Get(id);
        std::lock_guard<std::mutex> lock(mu_);
        if (task.ok() && !rounds_.count(id)) seating_.emplace(id, task->consensus().seed_block());
      }
    });
  }
}

size_t ConsensusEngine::open_rounds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return OpenRoundsLocked();
}

size_t ConsensusEngine::OpenRoundsLocked() const {
  size_t open = 0;
  for (const auto& [id, round] : rounds_) {
    open += round->rules.finalized() || round->closed || !round->failed_reason.empty() ? 0 : 1;
  }
  return open;
}

void ConsensusEngine::RunActions(Actions& actions) {
  // One write per task, however many of its record's changes this batch holds (a commitment
  // admitted, the window closed, a vote counted, the certificate: each was a synced write of its
  // own, one after the other, before the reveal or the relay could go out). Synced unless every
  // change may be deferred and the batch sends nothing that needs a sync (`publish`).
  const auto records_start = Clock::now();
  struct TaskWrite {
    consensus::TaskId id;
    std::vector<RecordChange> changes;
    bool synced = false;
  };
  std::vector<TaskWrite> by_task;  // first-change order
  for (Actions::Mutation& m : actions.mutations) {
    auto it = std::find_if(by_task.begin(), by_task.end(), [&](const TaskWrite& w) { return w.id == m.task; });
    if (it == by_task.end()) it = by_task.insert(by_task.end(), TaskWrite{m.task, {}, false});
    it->changes.push_back(std::move(m.change));
    it->synced = it->synced || !m.may_defer || !actions.publish.empty();
  }
  for (const TaskWrite& w : by_task) {
    const std::vector<RecordChange>& changes = w.changes;
    if (!w.synced) faults_->BeforeUnsyncedRecord(w.id.Hex());
    Status s = tasks_->Mutate(
        w.id, [&changes](v1::Task* t) { return ApplyRecordChanges(changes, t); }, nullptr,
        w.synced ? Durability::kSynced : Durability::kDeferred);
    if (!s.ok()) Log(LogLevel::kWarn, "cannot update task record", {{"task", w.id.Hex()}, {"error", s.ToString()}});
  }
  const double records_ms = std::chrono::duration<double, std::milli>(Clock::now() - records_start).count();
  const auto records = static_cast<int64_t>(by_task.size());
  for (const auto& [id, reason] : actions.requeue) ExecuteHere(id, reason);
  Publish(actions.publish_written);
  if (!actions.commitments_unsent.empty()) {
    std::lock_guard<std::mutex> unsent(unsent_mu_);
    for (const consensus::TaskId& id : actions.commitments_unsent) {
      if (auto it = unsent_commitments_.find(id); it != unsent_commitments_.end() && --it->second <= 0) {
        unsent_commitments_.erase(it);
      }
    }
    commitment_sent_.notify_all();
  }
  if (!actions.reveals_after_commitments.empty()) {
    // The commitment's batch only writes and sends (it waits for nothing), so this wait is short;
    // it is bounded all the same, and a reveal that waited too long goes out anyway.
    std::unique_lock<std::mutex> unsent(unsent_mu_);
    const bool sent = commitment_sent_.wait_for(unsent, std::chrono::seconds(10), [&] {
      return std::none_of(actions.reveals_after_commitments.begin(), actions.reveals_after_commitments.end(),
                          [&](const consensus::TaskId& id) { return unsent_commitments_.count(id) != 0; });
    });
    if (!sent) Log(LogLevel::kWarn, "reveal sent before this node's commitment was (its batch is still writing)", {});
  }
  Publish(actions.publish);
  for (const Actions::PhaseLog& p : actions.phase_logs) {
    Log(LogLevel::kInfo, p.phase, {{"task", p.task.Hex()}, {"records", records}, {"records_ms", records_ms}});
  }
  for (auto& job : actions.jobs) Enqueue(std::move(job));
}

void ConsensusEngine::Publish(std::vector<v1::GossipMessage>& messages) {
  if (gossip_ == nullptr) return;
  for (auto& m : messages) {
    if (auto published = gossip_->Publish(m); !published.ok()) {
      Log(LogLevel::kWarn, "cannot publish", {{"error", published.status().ToString()}});
    }
  }
}

Status ApplyRecordChanges(const std::vector<RecordChange>& changes, v1::Task* task) {
  if (changes.size() == 1) return changes.front()(task);
  // Each change applies or not on its own, as if it were written alone: a refused one (its
  // Status says why) leaves the record as the changes before it made it.
  bool applied = false;
  for (const RecordChange& change : changes) {
    v1::Task trial = *task;
    if (Status s = change(&trial); !s.ok()) {
      Log(LogLevel::kWarn, "cannot update task record", {{"task", task->task_id()}, {"error", s.ToString()}});
      continue;
    }
    *task = std::move(trial);
    applied = true;
  }
  return applied ? OkStatus() : Aborted("none of the record's changes applied");
}

// ---- recovery

Status ConsensusEngine::Recover() {
  std::vector<v1::Task> open;
  std::vector<std::pair<consensus::TaskId, uint64_t>> certified;
  std::vector<consensus::TaskId> to_execute;
  // Certified results recorded without their outputs, by when they finished: re-added oldest
  // first, so that the bounds keep the newest.
  std::vector<std::tuple<int64_t, consensus::TaskId, std::vector<Hash256>>> remote;
  RETURN_IF_ERROR(tasks_->ForEach([&](const v1::Task& t) -> Status {
    auto id = consensus::TaskId::FromHex(t.task_id());
    if (id.ok() && t.has_consensus() && t.state() == v1::TASK_STATE_SUCCEEDED && t.has_result()) {
      std::vector<Hash256> left;
      for (const auto& out : t.result().outputs()) {
        if (auto h = Hash256FromHex(out.blob_sha256()); h.ok() && !store_->BlobSize(*h).ok()) left.push_back(*h);
      }
      if (!left.empty()) remote.emplace_back(t.finished_unix_ms(), *id, std::move(left));
    }
    // A seated member whose blob fetch the restart cut short, or whose unsynced `queued` write a
    // power failure took back (ExecuteHere).
    if (id.ok() && RecoveryReexecutes(t)) {
      to_execute.push_back(*id);
    }
    if (t.has_consensus() && t.consensus().has_certificate() && !t.consensus().final()) {
      if (auto id = consensus::TaskId::FromHex(t.task_id()); id.ok())
        certified.emplace_back(*id, t.consensus().final_block());
    }
    if (t.has_consensus() && (t.state() != v1::TASK_STATE_SUCCEEDED && t.state() != v1::TASK_STATE_FAILED)) {
      open.push_back(t);
    }
    return OkStatus();
  }));
  std::sort(remote.begin(), remote.end());
  for (const auto& [finished, id, blobs] : remote) remote_outputs_.Add(id, blobs);
  // The backoffs of outputs nobody served before the restart: a flood does not get a new round.
  RETURN_IF_ERROR(remote_outputs_.LoadBackoffs().WithContext("reloading output fetch backoffs"));
  for (const v1::Task& t : open) {
    Actions actions;
    if (t.consensus().committee_size() == 0) {
      // Not seated before the restart: seated at a tick, like a new task.
      if (auto id = consensus::TaskId::FromHex(t.task_id()); id.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        seating_.emplace(*id, t.consensus().seed_block());
      }
    } else {
      auto operators = chain_->OperatorsAt(t.consensus().reference_block());  // before the lock
      {
        std::lock_guard<std::mutex> lock(mu_);
        Status s = operators.ok() ? OpenRound(t, *operators, &actions) : operators.status();
        if (!s.ok()) {
          Log(LogLevel::kWarn, "cannot reopen consensus round", {{"task", t.task_id()}, {"error", s.ToString()}});
          continue;
        }
      }
    }
    // Our own announcement may have been lost with the gossip log too (killed right after
    // SubmitTask acknowledged the task, before any peer got it): announce it again. Peers that
    // know the task already ignore it.
    if (!t.consensus().has_certificate() && t.consensus().announcer() == AddressHex(address_)) {
      v1::GossipMessage message;
      *message.mutable_announcement()->mutable_spec() = t.spec();
      message.mutable_announcement()->set_reference_block(t.consensus().reference_block());
      actions.publish.insert(actions.publish.begin(), message);
    }
    RunActions(actions);
    // Our own vote may have been lost with the gossip log: sign it again (same bytes: RFC 6979).
    // (A vote never stored is signed by OpenRound.)
    if (t.state() == v1::TASK_STATE_CERTIFYING && t.has_result() && t.consensus().member() && OwnVoteStored(t)) {
      if (auto id = consensus::TaskId::FromHex(t.task_id()); id.ok()) Attest(*id, t.result());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, final_block] : certified) awaiting_final_.emplace(id, final_block);
  }
  for (const auto& id : to_execute) ExecuteHere(id, "committee member, after a restart");
  if (!open.empty()) Log(LogLevel::kInfo, "reopened consensus rounds", {{"count", static_cast<int64_t>(open.size())}});
  return OkStatus();
}

}  // namespace consensor::node
