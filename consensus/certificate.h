// Certificate validity: what `consensor verify` checks, and what any consumer of a result must
// check, given the operator set at the certificate's reference block. Pure: the caller fetches
// the operator set (and asks the contract for its own view); this decides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/status.h"
#include "common/uint256.h"
#include "consensus/attestation.h"
#include "consensus/operator_set.h"
#include "consensus/task.h"

namespace consensor::consensus {

// The most signatures a certificate may carry (a bound on work for hostile input).
inline constexpr size_t kMaxCertificateSigners = 1024;

// A certificate in binary form: the signed attestation, its signatures, the task it is about,
// and the committee size it claims. The signatures cover the task id, and the id covers the
// task's replicas, quorum and protocol version, so those come from `task` (checked to hash to
// the signed id); `replicas` and `quorum` are unsigned copies that must agree with it (0: absent).
struct CertificateClaims {
  Attestation attestation;
  std::optional<TaskSpec> task;
  std::vector<Address20> signers;
  std::vector<std::vector<uint8_t>> signatures;  // 65 bytes r || s || v each, same order
  uint32_t quorum = 0;
  uint32_t committee_size = 0;
  uint32_t replicas = 0;
  bool dispute = false;
};

struct CertificateSigner {
  Address20 address{};
  size_t position = 0;  // 0-based index in the task's committee order
  Uint256 stake{};      // at the reference block
};

struct CertificateReport {
  CertificateClaims certificate;
  std::vector<CertificateSigner> signers;  // in certificate (ascending) order
  Uint256 signed_stake{};
  Uint256 total_stake{};  // of the whole operator set at the reference block
  size_t operator_count = 0;
};

// `seed_block_hash` is the hash of the task's seed block, SeedBlock(reference block, R)
// (consensus/committee.h), read from the chain by the caller.
// Checks, in this order: the task hashes to the signed task id (and the unsigned replicas and
// quorum agree with it); every signature recovers, under `domain`, to its listed signer;
// signers strictly ascending (what the contract requires; it also rules out counting a signer
// twice); every signer holds stake in `operators`. A result certificate must also satisfy the
// committee rules: replicas >= 1, quorum a majority of the replicas (consensus/replication.h),
// committee_size >= replicas, at least `quorum` signers, each within the first
// `committee_size` of the committee order (consensus/committee.h). A dispute certificate's
// committee is the whole operator set; whether it carries enough stake is the contract's
// threshold, which the caller checks. Errors are INVALID_ARGUMENT (malformed) or
// FAILED_PRECONDITION (well-formed but not valid), with a message that names the failed check.
StatusOr<CertificateReport> CheckCertificate(const CertificateClaims& certificate, const Eip712Domain& domain,
                                             const OperatorSet& operators, const Hash256& seed_block_hash);

}  // namespace consensor::consensus
