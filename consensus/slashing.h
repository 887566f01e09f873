// Whom to slash for one task, and with which evidence. The contract checks the evidence
// itself; this rule decides what an honest node sends, so that it never accuses itself, never
// sends the same accusation twice, and accuses every operator the evidence convicts.
#pragma once

#include <optional>
#include <set>
#include <span>
#include <vector>

#include "common/secp256k1_sign.h"
#include "consensus/attestation.h"
#include "consensus/quorum.h"

namespace consensor::consensus {

struct SlashDecision {
  enum class Kind { kEquivocation, kDispute };
  Kind kind = Kind::kEquivocation;
  Address20 accused{};
  // kEquivocation: the accused's two signatures over different results.
  // kDispute: `first` is the accused's vote; `certificate` the dispute certificate it contradicts.
  SignedAttestation first;
  SignedAttestation second;
  std::optional<Certificate> certificate;
};

// Evidence to send:
//   - every equivocation the committee's tracker recorded;
//   - once the dispute round has a certificate, every operator among `votes` that signed
//     another result root than that certificate.
// Never `self`, and never an operator already in `reported`, which is updated: an operator is
// accused at most once per task. Votes whose signer does not recover under `domain` are
// ignored. Deterministic: equivocations in the tracker's order, then votes in the given order.
std::vector<SlashDecision> ChooseSlashes(const Eip712Domain& domain, std::span<const Equivocation> equivocations,
                                         const Certificate* dispute_certificate,
                                         std::span<const SignedAttestation> votes, const Address20& self,
                                         std::set<Address20>* reported);

}  // namespace consensor::consensus
