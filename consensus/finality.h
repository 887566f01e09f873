// When a certified result becomes final. A certificate exists as soon as a quorum signs, but a
// node may still accept an announcement for the same reference block until `max_reference_age`
// blocks later, and any operator or watcher may still bring conflicting evidence. The result is
// final once a challenge window of W blocks has passed after that: block > ref + R + W. The
// contract's finalityBlock(ref) states the same rule with the deployment's R and W.
#pragma once

#include <cstdint>

namespace consensor::consensus {

// The last block of the challenge window of a result certified at `reference_block`
// (saturating: a window past 2^64 never closes).
inline uint64_t FinalityBlock(uint64_t reference_block, uint64_t max_reference_age, uint64_t challenge_window) {
  const uint64_t span = max_reference_age + challenge_window;
  if (span < max_reference_age || reference_block > UINT64_MAX - span) return UINT64_MAX;
  return reference_block + span;
}

// Final once the chain has mined a block after the window.
inline bool IsFinalAt(uint64_t head, uint64_t finality_block) { return head > finality_block; }

}  // namespace consensor::consensus
