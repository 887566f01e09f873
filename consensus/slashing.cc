#include "consensus/slashing.h"

namespace consensor::consensus {

std::vector<SlashDecision> ChooseSlashes(const Eip712Domain& domain, std::span<const Equivocation> equivocations,
                                         const Certificate* dispute_certificate,
                                         std::span<const SignedAttestation> votes, const Address20& self,
                                         std::set<Address20>* reported) {
  std::vector<SlashDecision> slashes;
  for (const Equivocation& e : equivocations) {
    if (e.signer == self || !reported->insert(e.signer).second) continue;
    SlashDecision d;
    d.kind = SlashDecision::Kind::kEquivocation;
    d.accused = e.signer;
    d.first = e.first;
    d.second = e.second;
    slashes.push_back(std::move(d));
  }
  if (dispute_certificate == nullptr) return slashes;
  for (const SignedAttestation& vote : votes) {
    if (vote.attestation.result_root == dispute_certificate->attestation.result_root) continue;
    auto signer = RecoverAttestationSigner(domain, vote.attestation, vote.signature);
    if (!signer.ok() || *signer == self || !reported->insert(*signer).second) continue;
    SlashDecision d;
    d.kind = SlashDecision::Kind::kDispute;
    d.accused = *signer;
    d.first = vote;
    d.certificate = *dispute_certificate;
    slashes.push_back(std::move(d));
  }
  return slashes;
}

}  // namespace consensor::consensus
