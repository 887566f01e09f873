// What the consensus engine (consensus_engine.h) is configured with; its own header so the
// node's config can hold it without pulling in the engine.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace consensor::node {

struct ConsensusOptions {
  uint32_t default_replicas = 3;
  uint32_t default_quorum = 2;
  uint32_t max_replicas = 16;
  std::chrono::milliseconds member_timeout{20000};
  uint32_t max_dispute_committee = 64;
  uint64_t max_reference_age = 256;
  uint64_t confirmations = 0;
  int64_t max_blob_bytes = int64_t{1} << 30;
  // Fault injection (tests and devnets only): "", "corrupt-output", "equivocate", "silent",
  // "crash-mid-task".
  std::string fault_mode;
};

}  // namespace consensor::node
