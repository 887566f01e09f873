// What the consensus engine (consensus_engine.h) is configured with; its own header so the
// node's config can hold it without pulling in the engine.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace consensor::node {

// Bounds of a non-member's on-demand output fetches (node/engine/remote_outputs.h); config keys
// [outputs] in docs/NODE.md.
struct RemoteOutputLimits {
  size_t max_entries = 100000;                    // outputs.max_remote_entries
  int64_t max_bytes = int64_t{32} << 20;          // outputs.max_remote_bytes: entries and failure texts
  size_t max_fetches_in_flight = 4;               // outputs.max_fetches_in_flight
  std::chrono::milliseconds backoff{5000};        // outputs.fetch_backoff_ms: after a first failure
  std::chrono::milliseconds backoff_max{600000};  // outputs.fetch_backoff_max_ms
  size_t max_persisted_backoffs = 10000;          // outputs.max_persisted_backoffs: rows in the store
};

// Defaults are the node's ([consensus] in docs/NODE.md).
struct ConsensusOptions {
  uint32_t default_replicas = 3;  // committee size when a task asks for 0
  uint32_t default_quorum = 2;    // matching signatures for that size
  uint32_t max_replicas = 16;     // bound on a task's requested replicas
  uint32_t min_replicas = 1;      // the deployment's minReplicas (read from the chain, not a config key)
  std::chrono::milliseconds member_timeout{20000};  // a silent member is replaced after this
  // Every operator is in the committee and no vote came for this long: the task fails.
  std::chrono::milliseconds exhausted_grace{120000};
  // Commit-reveal: once a quorum of commitments is in, how long the commit window stays open for
  // the rest of the committee (it closes at once when every member committed).
  std::chrono::milliseconds commit_grace{500};
  uint32_t max_dispute_committee = 1024;  // disputes run over the whole set, up to this many
  uint64_t max_reference_age = 256;       // blocks; older announcements are only observed
  // Announcements older than this are refused outright: evidence about them has expired
  // (the deployment's evidenceDeadlineBlocks in a networked node).
  uint64_t evidence_deadline_blocks = 7200;
  // Blocks after the last possible announcement in which a certified result can still be
  // challenged; it is final after them (consensus/finality.h).
  uint64_t challenge_window_blocks = 4;
  // Blocks a block must have on top before it is read: the reference block of a new task is
  // at most head - confirmations, and a committee is seated once its seed block is this deep
  // (chain.confirmations).
  uint64_t confirmations = 1;
  // A new task's reference block is head - (R - margin): as old as peers still accept, less
  // this margin for peers whose head is ahead, so its seed block ref + R + 1 comes soon.
  uint64_t reference_margin_blocks = 2;
  int64_t max_blob_bytes = int64_t{1} << 30;  // limits.max_blob_bytes
  // How often the engine's timers run (member deadlines, the commit grace, finality, expiry).
  // Seating does not wait for it: a new chain head wakes the engine (OnChainHead). Not a config
  // key; unit tests make it long to show that a path does not depend on it.
  std::chrono::milliseconds tick_interval{250};
  // While a task waits for the very next block to seat its committee, the head is read this
  // often (one eth_blockNumber), so members seat within this of the block's settling instead of
  // up to a chain poll apart (chain.seat_poll_ms; 0: only the chain view's poll).
  std::chrono::milliseconds seat_poll_interval{50};
  RemoteOutputLimits remote_outputs;
  // Every deadline and age the engine keeps (member timeout, orphan votes, finality) reads this
  // clock; unit tests pass one they move by hand. Not a config key.
  std::function<std::chrono::steady_clock::time_point()> now = [] { return std::chrono::steady_clock::now(); };
  // Unix milliseconds, for what must outlive a restart (persisted output fetch backoffs); null:
  // the system clock. Not a config key.
  std::function<int64_t()> wall_now;
};

}  // namespace consensor::node
