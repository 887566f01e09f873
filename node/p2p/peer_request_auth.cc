#include "node/p2p/peer_request_auth.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/address.h"
#include "common/clock.h"
#include "common/keccak.h"

namespace consensor::node {

namespace {

constexpr std::string_view kGetBlobDomain = "consensor.getblob.v1";

void AppendU64(Keccak256Hasher& hasher, uint64_t value) {
  uint8_t out[8];
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * (7 - i)));
  hasher.Update(std::span<const uint8_t>(out, 8));
}

}  // namespace

Hash256 GetBlobDigest(const PeerRequestDomain& domain, const v1::GetBlobRequest& request) {
  Keccak256Hasher hasher;
  hasher.Update(kGetBlobDomain);
  AppendU64(hasher, domain.chain_id);
  hasher.Update(std::span<const uint8_t>(domain.contract.data(), domain.contract.size()));
  hasher.Update(request.requester());
  AppendU64(hasher, request.sent_unix_ms());
  hasher.Update(request.sha256());
  return hasher.Finish();
}

Status SignGetBlob(const Secp256k1Secret& key, const PeerRequestDomain& domain, v1::GetBlobRequest* request) {
  ASSIGN_OR_RETURN(Address20 address, AddressFromSecretKey(key));
  request->set_requester(reinterpret_cast<const char*>(address.data()), address.size());
  if (request->sent_unix_ms() == 0) request->set_sent_unix_ms(static_cast<uint64_t>(UnixMillisNow()));
  ASSIGN_OR_RETURN(EcdsaSignature signature, SignDigest(key, GetBlobDigest(domain, *request)));
  const auto bytes = ToBytes65(signature);
  request->set_signature(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return OkStatus();
}

GetBlobAuth VerifyGetBlob(const PeerRequestDomain& domain, const v1::GetBlobRequest& request, int64_t now_unix_ms,
                          std::chrono::milliseconds max_clock_skew,
                          const std::function<bool(const Address20&)>& is_operator) {
  GetBlobAuth auth;
  if (request.requester().empty() && request.signature().empty()) return auth;
  auto refuse = [&auth](GetBlobAuth::Outcome outcome, std::string error) {
    auth.outcome = outcome;
    auth.error = std::move(error);
    return auth;
  };
  using Outcome = GetBlobAuth::Outcome;
  if (request.requester().size() != sizeof(Address20) || request.signature().size() != 65) {
    return refuse(Outcome::kBadSignature,
                  "a signed GetBlob needs the requester's 20-byte operator address and its 65-byte signature");
  }
  const int64_t sent = static_cast<int64_t>(std::min<uint64_t>(request.sent_unix_ms(), uint64_t{1} << 62));
  if (std::abs(now_unix_ms - sent) > max_clock_skew.count()) {
    return refuse(Outcome::kBadSignature, "GetBlob signed at unix ms " + std::to_string(request.sent_unix_ms()) +
                                              ", more than " + std::to_string(max_clock_skew.count()) +
                                              " ms from this node's clock (" + std::to_string(now_unix_ms) + ")");
  }
  std::memcpy(auth.requester.data(), request.requester().data(), sizeof(Address20));
  auto parsed = FromBytes65(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(request.signature().data()), 65));
  if (!parsed.ok()) return refuse(Outcome::kBadSignature, "GetBlob signature: " + parsed.status().message());
  auto signer = RecoverAddress(GetBlobDigest(domain, request), *parsed);
  if (!signer.ok() || *signer != auth.requester) {
    return refuse(Outcome::kBadSignature,
                  "GetBlob signature is not the requester's (or was made for another chain or deployment)");
  }
  if (is_operator && !is_operator(auth.requester)) {
    return refuse(Outcome::kNotAnOperator,
                  "signed GetBlob from " + AddressToHex(auth.requester) + ", which is not an active operator");
  }
  auth.outcome = Outcome::kOperator;
  return auth;
}

}  // namespace consensor::node
