// `consensor verify`: checks a task's quorum certificate against the chain, trusting no node.
// A node (or a file) only supplies the certificate's bytes; the signatures, the committee and
// the stake are all recomputed here from the EIP-712 domain of the deployment and the operator
// set the registry reports at the certificate's reference block, and the contract's own
// verifyCertificate view is asked for the stake it carries.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/secp256k1_sign.h"
#include "common/status.h"
#include "consensor/v1/node.pb.h"
#include "consensus/attestation.h"
#include "node/chain/abi.h"
#include "node/chain/chain_client.h"

namespace consensor::node {

// The most signatures a certificate may carry (a bound on work for hostile input).
inline constexpr size_t kMaxCertificateSigners = 1024;

// A certificate's fields in binary form; formats checked, nothing else.
struct ParsedCertificate {
  consensus::Attestation attestation;
  std::vector<Address20> signers;
  std::vector<std::vector<uint8_t>> signatures;  // 65 bytes r || s || v each, same order
  uint32_t quorum = 0;
  uint32_t committee_size = 0;
  uint32_t replicas = 0;
  bool dispute = false;
};

// INVALID_ARGUMENT naming the field that is malformed: hashes must be 64 hex digits, signers
// addresses, signatures 130 hex digits (each may carry a 0x prefix), and there must be as many
// signatures as signers, at least one and at most kMaxCertificateSigners.
StatusOr<ParsedCertificate> ParseCertificate(const v1::Certificate& certificate);

struct CertificateSigner {
  Address20 address{};
  size_t position = 0;  // 0-based index in the task's committee order
  Uint256 stake{};      // at the reference block
};

struct CertificateReport {
  ParsedCertificate certificate;
  std::vector<CertificateSigner> signers;  // in certificate (ascending) order
  Uint256 signed_stake{};
  Uint256 total_stake{};  // of the whole operator set at the reference block
  size_t operator_count = 0;
};

// Everything that can be checked without a chain, given the operator set at the certificate's
// reference block (ChainClient::OperatorsAt): formats; every signature recovers, under
// `domain`, to its listed signer; signers strictly ascending; every signer an operator with
// stake. A result certificate must also satisfy the committee rules: replicas >= 1,
// quorum * 2 > replicas, committee_size >= replicas, at least `quorum` signers, each within the
// first `committee_size` of the committee order (consensus::CommitteeOrder). A dispute
// certificate's committee is the whole operator set; whether it carries enough stake is the
// contract's threshold, which the caller checks. Errors are INVALID_ARGUMENT (malformed) or
// FAILED_PRECONDITION (well-formed but not valid), with a message that names the failed check.
StatusOr<CertificateReport> CheckCertificate(const v1::Certificate& certificate, const consensus::Eip712Domain& domain,
                                             const OperatorSet& operators);

// consensor verify TASK_ID [--node HOST:PORT] [chain] [--json]
// consensor verify --certificate FILE [chain] [--json]
// (args without the leading "verify"). Exit 0 when verified, 1 when not, 2 for bad usage.
int RunVerifyCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace consensor::node
