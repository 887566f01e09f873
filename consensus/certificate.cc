#include "consensus/certificate.h"

#include <map>
#include <string>

#include "common/address.h"
#include "consensus/committee.h"
#include "consensus/replication.h"
#include "consensus/task.h"

namespace consensor::consensus {

namespace {

// The claims the signatures do not cover directly must follow from what they do: the task id.
Status CheckTaskBinding(CertificateClaims* p) {
  if (!p->task) {
    return InvalidArgument(
        "the certificate does not carry its task's request (graph, inputs, nonce, replicas, quorum, protocol "
        "version), so nothing says what its signatures promise");
  }
  ASSIGN_OR_RETURN(TaskId id, ComputeTaskId(*p->task));
  if (id.bytes() != p->attestation.task_id) {
    return FailedPrecondition("the certificate's request is task " + id.Hex() + ", but its signatures are over task " +
                              ToHex(p->attestation.task_id));
  }
  // Unsigned copies that disagree with the signed request are a forgery attempt, not a typo.
  if ((p->replicas != 0 && p->replicas != p->task->replicas) || (p->quorum != 0 && p->quorum != p->task->quorum)) {
    return FailedPrecondition("the certificate claims quorum " + std::to_string(p->quorum) + " of " +
                              std::to_string(p->replicas) + " replicas, but its signed task asks for quorum " +
                              std::to_string(p->task->quorum) + " of " + std::to_string(p->task->replicas));
  }
  p->replicas = p->task->replicas;
  p->quorum = p->task->quorum;
  return OkStatus();
}

}  // namespace

StatusOr<CertificateReport> CheckCertificate(const CertificateClaims& certificate, const Eip712Domain& domain,
                                             const OperatorSet& operators, const Hash256& seed_block_hash) {
  CertificateReport report;
  report.certificate = certificate;
  const CertificateClaims& p = report.certificate;
  const uint64_t ref = p.attestation.reference_block;
  if (p.signers.empty()) return InvalidArgument("the certificate has no signers");
  if (p.signers.size() > kMaxCertificateSigners) {
    return InvalidArgument("the certificate has " + std::to_string(p.signers.size()) + " signers, more than " +
                           std::to_string(kMaxCertificateSigners));
  }
  if (p.signers.size() != p.signatures.size()) {
    return InvalidArgument("the certificate has " + std::to_string(p.signers.size()) + " signers but " +
                           std::to_string(p.signatures.size()) + " signatures");
  }
  RETURN_IF_ERROR(CheckTaskBinding(&report.certificate));

  // Signatures: each over exactly this attestation in this deployment's domain, from its signer.
  for (size_t i = 0; i < p.signers.size(); ++i) {
    const std::string who = "signature " + std::to_string(i) + " (signer " + AddressToChecksumHex(p.signers[i]) + ")";
    auto recovered = RecoverAttestationSigner(domain, p.attestation, p.signatures[i]);
    if (!recovered.ok()) return InvalidArgument(who + " is malformed: " + recovered.status().message());
    if (*recovered != p.signers[i]) {
      return FailedPrecondition(who + " does not recover to its signer but to " + AddressToChecksumHex(*recovered) +
                                ": it was not made by that signer over this attestation in the EIP-712 domain of "
                                "chain " +
                                std::to_string(domain.chain_id) + ", contract " +
                                AddressToChecksumHex(domain.verifying_contract));
    }
    // Strict order is what the contract requires, and it rules out counting a signer twice.
    if (i > 0 && !(p.signers[i - 1] < p.signers[i])) {
      if (p.signers[i - 1] == p.signers[i]) {
        return FailedPrecondition("signer " + AddressToChecksumHex(p.signers[i]) + " appears twice (signatures " +
                                  std::to_string(i - 1) + " and " + std::to_string(i) + ")");
      }
      return FailedPrecondition("signers are not strictly ascending: signer " + std::to_string(i) + " " +
                                AddressToChecksumHex(p.signers[i]) + " comes after " +
                                AddressToChecksumHex(p.signers[i - 1]));
    }
  }

  // The operator set at the reference block decides who may sign and with what weight.
  report.total_stake = operators.total_stake;
  report.operator_count = operators.operators.size();
  for (const Address20& signer : p.signers) {
    if (operators.Find(signer) == nullptr) {
      return FailedPrecondition("signer " + AddressToChecksumHex(signer) + " is not an operator at reference block " +
                                std::to_string(ref) + " (it had no stake there)");
    }
  }

  // The full order, so a signer outside the committee can be told its position.
  auto order =
      CommitteeOrder(p.attestation.task_id, ref, seed_block_hash, operators.operators, operators.operators.size());
  if (!order.ok()) return order.status().WithContext("computing the committee order");
  std::map<Address20, size_t> position_of;
  for (size_t i = 0; i < order->size(); ++i) position_of[(*order)[i]] = i;

  if (!p.dispute) {
    if (p.replicas == 0) return InvalidArgument("replicas is 0; a result certificate needs at least one replica");
    if (p.quorum < SmallestMajority(p.replicas)) {
      return FailedPrecondition("quorum " + std::to_string(p.quorum) + " is not a majority of " +
                                std::to_string(p.replicas) + " replicas (needs quorum * 2 > replicas)");
    }
    if (p.committee_size < p.replicas) {
      return FailedPrecondition("committee_size " + std::to_string(p.committee_size) + " is smaller than replicas " +
                                std::to_string(p.replicas));
    }
    // A committee grown by replacements needs a quorum of its size (consensus/replication.h):
    // claiming a larger committee never lowers the bar.
    const uint64_t required = RequiredSignatures(p.replicas, p.quorum, p.committee_size);
    if (p.signers.size() < required) {
      return FailedPrecondition(std::to_string(p.signers.size()) + " signatures are fewer than the quorum of " +
                                std::to_string(required) +
                                (required == p.quorum ? std::string()
                                                      : " that a committee of " + std::to_string(p.committee_size) +
                                                            " needs (" + std::to_string(p.quorum) + " of " +
                                                            std::to_string(p.replicas) + " replicas, scaled)"));
    }
  }
  for (size_t i = 0; i < p.signers.size(); ++i) {
    auto it = position_of.find(p.signers[i]);
    if (it == position_of.end()) {
      return Internal("signer " + AddressToChecksumHex(p.signers[i]) +
                      " has stake but is missing from the committee order");
    }
    if (!p.dispute && it->second >= p.committee_size) {
      return FailedPrecondition("signer " + AddressToChecksumHex(p.signers[i]) + " is at position " +
                                std::to_string(it->second) + " of the task's committee order, outside the committee " +
                                "(positions 0.." + std::to_string(p.committee_size - 1) + ")");
    }
    const Uint256& stake = operators.Find(p.signers[i])->stake;
    report.signers.push_back({p.signers[i], it->second, stake});
    report.signed_stake = Uint256Add(report.signed_stake, stake);
  }
  return report;
}

}  // namespace consensor::consensus
