// Wall-clock time as the node records it in tasks, plans and gossip: milliseconds since the Unix
// epoch. Durations and timeouts use std::chrono::steady_clock instead, which never jumps.
#pragma once

#include <chrono>
#include <cstdint>

namespace consensor {

inline int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace consensor
