#include "node/p2p/signed_request_replays.h"

#include <algorithm>
#include <atomic>

#include "common/address.h"
#include "common/clock.h"

namespace consensor::node {

namespace {
constexpr uint64_t kSweepEvery = 4096;
}  // namespace

void SignedRequestReplays::Forget(std::set<Entry>* entries, int64_t now_unix_ms) {
  // A time below this is refused by the skew check before it could be replayed.
  const int64_t oldest_valid = now_unix_ms - max_clock_skew_.count();
  while (!entries->empty() && entries->begin()->first < oldest_valid) {
    entries->erase(entries->begin());
    --remembered_;
  }
}

Status SignedRequestReplays::Admit(const std::string& call, const Address20& requester, const Hash256& digest,
                                   int64_t sent_unix_ms, int64_t now_unix_ms) {
  std::lock_guard lock(mu_);
  if (++admitted_ % kSweepEvery == 0) {
    for (auto it = seen_.begin(); it != seen_.end();) {
      Forget(&it->second, now_unix_ms);
      it = it->second.empty() ? seen_.erase(it) : std::next(it);
    }
  }
  std::set<Entry>& entries = seen_[requester];
  Forget(&entries, now_unix_ms);
  uint64_t prefix = 0;
  for (int i = 0; i < 8; ++i) prefix = (prefix << 8) | digest[i];
  const Entry entry{sent_unix_ms, prefix};
  if (entries.count(entry) != 0) {
    return Unauthenticated("this signed " + call + " request from " + AddressToHex(requester) +
                           " was served already: a signed request is served once (a replay?)");
  }
  if (entries.size() >= max_per_requester_) {
    return ResourceExhausted(AddressToHex(requester) + " has " + std::to_string(entries.size()) +
                             " signed requests within the last " + std::to_string(max_clock_skew_.count()) +
                             " ms here, the most this node remembers per operator; retry later");
  }
  entries.insert(entry);
  ++remembered_;
  return OkStatus();
}

size_t SignedRequestReplays::remembered() const {
  std::lock_guard lock(mu_);
  return remembered_;
}

uint64_t UniqueRequestMillis() {
  static std::atomic<uint64_t> last{0};
  const uint64_t now = static_cast<uint64_t>(UnixMillisNow());
  uint64_t previous = last.load(std::memory_order_relaxed);
  uint64_t next = 0;
  do {
    next = std::max(now, previous + 1);
  } while (!last.compare_exchange_weak(previous, next, std::memory_order_relaxed));
  return next;
}

}  // namespace consensor::node
