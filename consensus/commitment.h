// Commit-reveal for votes (docs/SECURITY.md, hole 5). A member that executed a task first
// gossips a signed commitment to its vote, and reveals the vote itself only once the commit
// window of its phase is closed: when the commitments a node admitted reach what a certificate
// needs. A reveal counts only if its signer's commitment was admitted, that is, seen before the
// window closed. So a lazy member that copies the first revealed result commits too late, and
// its copy never counts toward a certificate.
//
// The commitment hides the vote: it hashes the whole signed attestation, signature included,
// and the signature (RFC 6979, over the roots) is unknown to anyone but the signer until the
// reveal, so nobody can test candidate results against it.
//
//   commitment = keccak256("consensor.commit.v1" || taskId || u64be(referenceBlock)
//                          || resultRoot || traceRoot || signer || signature65)
//
// The commitment is signed as EIP-712 typed data in the attestation's domain:
//   ResultCommitment(bytes32 taskId,uint64 referenceBlock,uint8 phase,bytes32 commitment)
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/secp256k1_sign.h"
#include "common/status.h"
#include "consensus/attestation.h"
#include "consensus/quorum.h"

namespace consensor::consensus {

inline constexpr std::string_view kCommitmentTag = "consensor.commit.v1";
inline constexpr std::string_view kResultCommitmentType =
    "ResultCommitment(bytes32 taskId,uint64 referenceBlock,uint8 phase,bytes32 commitment)";

// The round a vote is for. Dispute rounds re-execute after results are public, so they have a
// commit window of their own.
enum class VotePhase : uint8_t { kCommittee = 0, kDispute = 1 };
inline constexpr size_t kVotePhases = 2;

struct SignedCommitment {
  Hash256 task_id{};
  uint64_t reference_block = 0;
  VotePhase phase = VotePhase::kCommittee;
  Hash256 commitment{};
  Signature65 signature{};
};

// The commitment to a signed vote by `signer`.
Hash256 VoteCommitment(const SignedAttestation& vote, const Address20& signer);
Hash256 CommitmentDigest(const Eip712Domain& domain, const SignedCommitment& c);
// Commits `vote` (signed by `secret`'s address, `signer`) for `phase`.
StatusOr<SignedCommitment> SignCommitment(const Secp256k1Secret& secret, const Eip712Domain& domain,
                                          const SignedAttestation& vote, const Address20& signer, VotePhase phase);
// The committer. INVALID_ARGUMENT for a malformed signature.
StatusOr<Address20> RecoverCommitmentSigner(const Eip712Domain& domain, const SignedCommitment& c);
// INVALID_ARGUMENT for a phase number the protocol does not have.
StatusOr<VotePhase> VotePhaseFromNumber(uint32_t n);

}  // namespace consensor::consensus
