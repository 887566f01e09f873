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
#include "consensus/certificate.h"
#include "consensus/operator_set.h"
#include "node/chain/abi.h"
#include "node/chain/chain_client.h"

namespace consensor::node {

using consensus::CertificateReport;
using consensus::CertificateSigner;
using consensus::kMaxCertificateSigners;

// The certificate's fields in binary form; formats checked, nothing else. INVALID_ARGUMENT
// naming the field that is malformed: hashes must be 64 hex digits, signers addresses,
// signatures 130 hex digits (each may carry a 0x prefix), and there must be as many signatures
// as signers, at least one and at most kMaxCertificateSigners.
StatusOr<consensus::CertificateClaims> ParseCertificate(const v1::Certificate& certificate);

// ParseCertificate, then the protocol's validity rules (consensus::CheckCertificate) against
// the operator set at the certificate's reference block.
StatusOr<CertificateReport> CheckCertificate(const v1::Certificate& certificate, const consensus::Eip712Domain& domain,
                                             const consensus::OperatorSet& operators, const Hash256& seed_block_hash);

// consensor verify TASK_ID [--node HOST:PORT] [chain] [--json]
// consensor verify --certificate FILE [chain] [--json]
// (args without the leading "verify"). Exit 0 when verified, 1 when not, 2 for bad usage.
int RunVerifyCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace consensor::node
