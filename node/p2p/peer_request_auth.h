// Who asks on the peer port. An operator fetching a task's blobs (or an output) from a peer signs
// its GetBlobRequest (node.proto), and one asking for a peer's record of a task its GetTaskRequest
// (a GetNodeInfoRequest may be signed too), so the peer can key its budgets (open GetBlob
// streams; GetTask and GetNodeInfo calls per second) on the operator instead of on the remote
// host: on a devnet every operator is 127.0.0.1, and in production one host may run many
// operators, or one operator many hosts.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/secp256k1_sign.h"
#include "common/sha256.h"
#include "common/status.h"
#include "consensor/v1/node.pb.h"

namespace consensor::node {

// The deployment a request is signed for: the chain id and the service manager, as for gossip.
struct PeerRequestDomain {
  uint64_t chain_id = 0;
  Address20 contract{};
};

// keccak256("consensor.getblob.v1" || u64be(chain_id) || contract || requester ||
// u64be(sent_unix_ms) || sha256 (the request's hex string, as bytes)).
Hash256 GetBlobDigest(const PeerRequestDomain& domain, const v1::GetBlobRequest& request);

// Fills in requester, sent_unix_ms (UniqueRequestMillis(), unless already set) and signature.
Status SignGetBlob(const Secp256k1Secret& key, const PeerRequestDomain& domain, v1::GetBlobRequest* request);

// What a signed peer request proves about who sent it.
struct PeerRequestAuth {
  enum class Outcome {
    kUnsigned,       // no requester and no signature: a client, or a peer that does not sign
    kOperator,       // signed by `requester`, an active operator
    kBadSignature,   // malformed, not the requester's, another deployment's, or outside the clock skew
    kNotAnOperator,  // a valid signature of an address that is not an active operator
  };
  Outcome outcome = Outcome::kUnsigned;
  Address20 requester{};
  std::string error;  // why, for kBadSignature and kNotAnOperator
  // For kOperator: what was signed and when (for SignedRequestReplays).
  Hash256 digest{};
  int64_t sent_unix_ms = 0;
};
using GetBlobAuth = PeerRequestAuth;

// True when the request carries a requester or a signature: checking it costs an ECDSA recovery
// (the peer port charges that to the remote host's p2p.max_signature_checks_per_second_per_host).
template <typename Request>
bool ClaimsSignature(const Request& request) {
  return !request.requester().empty() || !request.signature().empty();
}

// Checks a request's signature against `now_unix_ms` (at most `max_clock_skew` away) and asks
// `is_operator` about a valid requester.
GetBlobAuth VerifyGetBlob(const PeerRequestDomain& domain, const v1::GetBlobRequest& request, int64_t now_unix_ms,
                          std::chrono::milliseconds max_clock_skew,
                          const std::function<bool(const Address20&)>& is_operator);

// keccak256("consensor.gettask.v1" || u64be(chain_id) || contract || requester ||
// u64be(sent_unix_ms) || task_id (the hex string, as bytes)).
Hash256 GetTaskDigest(const PeerRequestDomain& domain, const v1::GetTaskRequest& request);
Status SignGetTask(const Secp256k1Secret& key, const PeerRequestDomain& domain, v1::GetTaskRequest* request);
PeerRequestAuth VerifyGetTask(const PeerRequestDomain& domain, const v1::GetTaskRequest& request, int64_t now_unix_ms,
                              std::chrono::milliseconds max_clock_skew,
                              const std::function<bool(const Address20&)>& is_operator);

// keccak256("consensor.getnodeinfo.v1" || u64be(chain_id) || contract || requester ||
// u64be(sent_unix_ms)).
Hash256 GetNodeInfoDigest(const PeerRequestDomain& domain, const v1::GetNodeInfoRequest& request);
Status SignGetNodeInfo(const Secp256k1Secret& key, const PeerRequestDomain& domain, v1::GetNodeInfoRequest* request);
PeerRequestAuth VerifyGetNodeInfo(const PeerRequestDomain& domain, const v1::GetNodeInfoRequest& request,
                                  int64_t now_unix_ms, std::chrono::milliseconds max_clock_skew,
                                  const std::function<bool(const Address20&)>& is_operator);

}  // namespace consensor::node
