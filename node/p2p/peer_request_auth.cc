#include "node/p2p/peer_request_auth.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/address.h"
#include "common/clock.h"
#include "common/keccak.h"
#include "node/p2p/signed_request_replays.h"

namespace consensor::node {

namespace {

constexpr std::string_view kGetBlobDomain = "consensor.getblob.v1";
constexpr std::string_view kGetTaskDomain = "consensor.gettask.v1";
constexpr std::string_view kGetNodeInfoDomain = "consensor.getnodeinfo.v1";

void AppendU64(Keccak256Hasher& hasher, uint64_t value) {
  uint8_t out[8];
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * (7 - i)));
  hasher.Update(std::span<const uint8_t>(out, 8));
}

// keccak256(tag || u64be(chain_id) || contract || requester || u64be(sent_unix_ms) || body).
Hash256 RequestDigest(std::string_view tag, const PeerRequestDomain& domain, std::string_view requester,
                      uint64_t sent_unix_ms, std::string_view body) {
  Keccak256Hasher hasher;
  hasher.Update(tag);
  AppendU64(hasher, domain.chain_id);
  hasher.Update(std::span<const uint8_t>(domain.contract.data(), domain.contract.size()));
  hasher.Update(requester);
  AppendU64(hasher, sent_unix_ms);
  hasher.Update(body);
  return hasher.Finish();
}

// Fills in requester, sent_unix_ms (now, unless already set) and the signature of `digest_of`.
template <typename Request, typename Digest>
Status SignRequest(const Secp256k1Secret& key, Request* request, const Digest& digest_of) {
  ASSIGN_OR_RETURN(Address20 address, AddressFromSecretKey(key));
  request->set_requester(reinterpret_cast<const char*>(address.data()), address.size());
  if (request->sent_unix_ms() == 0) request->set_sent_unix_ms(UniqueRequestMillis());
  ASSIGN_OR_RETURN(EcdsaSignature signature, SignDigest(key, digest_of(*request)));
  const auto bytes = ToBytes65(signature);
  request->set_signature(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return OkStatus();
}

template <typename Request, typename Digest>
PeerRequestAuth VerifyRequest(std::string_view call, const Request& request, const Digest& digest_of,
                              int64_t now_unix_ms, std::chrono::milliseconds max_clock_skew,
                              const std::function<bool(const Address20&)>& is_operator) {
  PeerRequestAuth auth;
  if (request.requester().empty() && request.signature().empty()) return auth;
  auto refuse = [&auth](PeerRequestAuth::Outcome outcome, std::string error) {
    auth.outcome = outcome;
    auth.error = std::move(error);
    return auth;
  };
  using Outcome = PeerRequestAuth::Outcome;
  const std::string name(call);
  if (request.requester().size() != sizeof(Address20) || request.signature().size() != 65) {
    return refuse(Outcome::kBadSignature,
                  "a signed " + name + " needs the requester's 20-byte operator address and its 65-byte signature");
  }
  const int64_t sent = static_cast<int64_t>(std::min<uint64_t>(request.sent_unix_ms(), uint64_t{1} << 62));
  if (std::abs(now_unix_ms - sent) > max_clock_skew.count()) {
    return refuse(Outcome::kBadSignature, name + " signed at unix ms " + std::to_string(request.sent_unix_ms()) +
                                              ", more than " + std::to_string(max_clock_skew.count()) +
                                              " ms from this node's clock (" + std::to_string(now_unix_ms) + ")");
  }
  std::memcpy(auth.requester.data(), request.requester().data(), sizeof(Address20));
  auto parsed = FromBytes65(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(request.signature().data()), 65));
  if (!parsed.ok()) return refuse(Outcome::kBadSignature, name + " signature: " + parsed.status().message());
  const Hash256 digest = digest_of(request);
  auto signer = RecoverAddress(digest, *parsed);
  if (!signer.ok() || *signer != auth.requester) {
    return refuse(Outcome::kBadSignature,
                  name + " signature is not the requester's (or was made for another chain or deployment)");
  }
  if (is_operator && !is_operator(auth.requester)) {
    return refuse(Outcome::kNotAnOperator,
                  "signed " + name + " from " + AddressToHex(auth.requester) + ", which is not an active operator");
  }
  auth.outcome = Outcome::kOperator;
  auth.digest = digest;
  auth.sent_unix_ms = sent;
  return auth;
}

}  // namespace

Hash256 GetBlobDigest(const PeerRequestDomain& domain, const v1::GetBlobRequest& request) {
  return RequestDigest(kGetBlobDomain, domain, request.requester(), request.sent_unix_ms(), request.sha256());
}

Status SignGetBlob(const Secp256k1Secret& key, const PeerRequestDomain& domain, v1::GetBlobRequest* request) {
  return SignRequest(key, request, [&domain](const v1::GetBlobRequest& r) { return GetBlobDigest(domain, r); });
}

GetBlobAuth VerifyGetBlob(const PeerRequestDomain& domain, const v1::GetBlobRequest& request, int64_t now_unix_ms,
                          std::chrono::milliseconds max_clock_skew,
                          const std::function<bool(const Address20&)>& is_operator) {
  return VerifyRequest(
      "GetBlob", request, [&domain](const v1::GetBlobRequest& r) { return GetBlobDigest(domain, r); }, now_unix_ms,
      max_clock_skew, is_operator);
}

Hash256 GetTaskDigest(const PeerRequestDomain& domain, const v1::GetTaskRequest& request) {
  return RequestDigest(kGetTaskDomain, domain, request.requester(), request.sent_unix_ms(), request.task_id());
}

Status SignGetTask(const Secp256k1Secret& key, const PeerRequestDomain& domain, v1::GetTaskRequest* request) {
  return SignRequest(key, request, [&domain](const v1::GetTaskRequest& r) { return GetTaskDigest(domain, r); });
}

PeerRequestAuth VerifyGetTask(const PeerRequestDomain& domain, const v1::GetTaskRequest& request, int64_t now_unix_ms,
                              std::chrono::milliseconds max_clock_skew,
                              const std::function<bool(const Address20&)>& is_operator) {
  return VerifyRequest(
      "GetTask", request, [&domain](const v1::GetTaskRequest& r) { return GetTaskDigest(domain, r); }, now_unix_ms,
      max_clock_skew, is_operator);
}

Hash256 GetNodeInfoDigest(const PeerRequestDomain& domain, const v1::GetNodeInfoRequest& request) {
  return RequestDigest(kGetNodeInfoDomain, domain, request.requester(), request.sent_unix_ms(), {});
}

Status SignGetNodeInfo(const Secp256k1Secret& key, const PeerRequestDomain& domain, v1::GetNodeInfoRequest* request) {
  return SignRequest(key, request, [&domain](const v1::GetNodeInfoRequest& r) { return GetNodeInfoDigest(domain, r); });
}

PeerRequestAuth VerifyGetNodeInfo(const PeerRequestDomain& domain, const v1::GetNodeInfoRequest& request,
                                  int64_t now_unix_ms, std::chrono::milliseconds max_clock_skew,
                                  const std::function<bool(const Address20&)>& is_operator) {
  return VerifyRequest(
      "GetNodeInfo", request, [&domain](const v1::GetNodeInfoRequest& r) { return GetNodeInfoDigest(domain, r); },
      now_unix_ms, max_clock_skew, is_operator);
}

}  // namespace consensor::node
