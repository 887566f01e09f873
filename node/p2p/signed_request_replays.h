// Each signed peer request is served once. A request an operator signs (GetBlob, GetTask,
// GetNodeInfo, Pull) is valid for the clock skew either side of its time, and peer links have no
// TLS: without this, an on-path observer could resend a captured request for as long as it is
// valid and spend that operator's budgets at this node (its lookups, its pull rate, its GetBlob
// streams) in its name. Honest signers never repeat one: a node's signing time is unique per
// process (UniqueRequestMillis), and each call is signed afresh.
//
// The guard remembers the digest of every verified request until its time is outside the skew
// (when the signature check would refuse it anyway). Only verified operators' requests reach it,
// and each operator has at most `max_per_requester` remembered (about 48 bytes each), so its
// memory is bounded by the operator set, not by the traffic.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "common/secp256k1_sign.h"
#include "common/sha256.h"
#include "common/status.h"

namespace consensor::node {

// How far a signed peer request's time may be from the receiver's clock (GetBlob, GetTask,
// GetNodeInfo; Pull's default).
inline constexpr std::chrono::milliseconds kSignedPeerRequestClockSkew{60000};

// At most this many of one operator's signed requests are remembered at a node (about 3 MiB):
// over 1,000 a second for the whole window. The lookup and pull rates allow 125 a second, but
// GetBlob has no rate (only a bound on open streams), and a busy entry node's members fetch two
// or three blobs per task from it.
inline constexpr size_t kMaxRememberedRequestsPerOperator = 65536;

class SignedRequestReplays {
 public:
  SignedRequestReplays(std::chrono::milliseconds max_clock_skew, size_t max_per_requester)
      : max_clock_skew_(max_clock_skew), max_per_requester_(max_per_requester) {}

  // OK the first time `digest` (a request `requester` signed at `sent_unix_ms`) is seen;
  // ALREADY_EXISTS for a repeat (the peer port answers it UNAUTHENTICATED: the signature proves
  // nothing about who sent it this time); RESOURCE_EXHAUSTED when the requester already has
  // `max_per_requester` requests inside the window (a refusal remembers nothing). `call` names
  // the request in the message.
  Status Admit(const std::string& call, const Address20& requester, const Hash256& digest, int64_t sent_unix_ms,
               int64_t now_unix_ms);

  size_t remembered() const;

 private:
  // (signing time, the digest's first 8 bytes): ordered by time for eviction; 48 bytes or so in
  // the set. An honest request is mistaken for a replay only if it has the same millisecond and
  // the same 64 digest bits as another of its operator's: about 2^-64.
  using Entry = std::pair<int64_t, uint64_t>;

  // Drops the requester's entries whose time is outside the skew at `now`.
  void Forget(std::set<Entry>* entries, int64_t now_unix_ms);

  const std::chrono::milliseconds max_clock_skew_;
  const size_t max_per_requester_;
  mutable std::mutex mu_;
  std::map<Address20, std::set<Entry>> seen_;
  size_t remembered_ = 0;
  uint64_t admitted_ = 0;  // a whole sweep every so many admissions frees quiet requesters
};

// A signing time for a new request: the wall clock in unix ms, but never the same value twice in
// this process (one more than the last when the clock has not moved), so two requests with the
// same body signed by this node never have the same digest.
uint64_t UniqueRequestMillis();

}  // namespace consensor::node
