// When a certified result becomes final. No member can vote before the task's seed block,
// ref + R + 1, is mined (consensus/committee.h), and a node may still accept an announcement for
// the same reference block until ref + R. From the seed block on, any operator or watcher has a
// challenge window of W blocks to bring conflicting evidence; the result is final once the
// chain is past it: block > ref + R + 1 + W. The contract's finalityBlock(ref) states the same
// rule with the deployment's R and W.
#pragma once

#include <cstdint>

namespace consensor::consensus {

// The last block of the challenge window of a result certified at `reference_block`
// (saturating: a window past 2^64 never closes).
inline uint64_t FinalityBlock(uint64_t reference_block, uint64_t max_reference_age, uint64_t challenge_window) {
  const uint64_t span = max_reference_age + 1 + challenge_window;
  if (span <= max_reference_age || span <= challenge_window || reference_block > UINT64_MAX - span) return UINT64_MAX;
  return reference_block + span;
}

// Final once the chain has mined a block after the window.
inline bool IsFinalAt(uint64_t head, uint64_t finality_block) { return head > finality_block; }

}  // namespace consensor::consensus
