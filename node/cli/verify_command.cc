#include "node/cli/verify_command.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "consensus/certificate.h"
#include "consensus/committee.h"
#include "consensus/task.h"
#include "node/api/client.h"
#include "node/api/task_spec.h"
#include "node/cli/chain_flags.h"
#include "node/cli/cli_args.h"
#include "node/cli/client_commands.h"
#include "node/keys/keystore.h"

namespace consensor::node {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int64_t kMaxCertificateFileBytes = 4 << 20;

constexpr char kVerifyUsage[] = R"(usage:
  consensor verify TASK_ID [--node HOST:PORT] [--require-stake] [--require-final] [chain] [--json]
  consensor verify --certificate FILE [--request FILE] [--require-stake] [--require-final] [chain] [--json]
  either form also takes [--submitted-at UNIX_SECONDS [--max-seed-delay BLOCKS]]

Checks a task's certificate against the chain and names the guarantee it carries:
  stake threshold  its signers hold the contract's threshold of all stake at the reference
                   block (what slashDispute accepts); a third party or a contract can rely on it
  committee        the task's own committee reached its quorum; this protects the client who
                   asked for the task, so it counts only for YOUR task: TASK_ID (the id
                   `consensor submit` checked against your request) or --request FILE (the
                   request `consensor submit --request-out` saved)
  none             neither
Every signature must recover to its signer under the deployment's EIP-712 domain, the
certificate's request must hash to the signed task id (replicas, quorum and protocol version
come from there, never from the unsigned fields), the signers must be operators at the
reference block, none may have been slashed for the task, and the contract's
verifyCertificate must accept them. VERIFIED (exit 0) only when the guarantee meets the
policy: the stake threshold with --require-stake; otherwise the committee for your task or
the stake threshold; --require-final also wants the challenge window closed (the contract's
finalityBlock(ref) passed; until then the result is certified but may still be disputed).
The committee is drawn from the hash of the seed block ref + R + 1. With --submitted-at (the
time `consensor submit` printed) the committee also needs its seed block mined after you
submitted and at most --max-seed-delay blocks (default 8) after the head at that time: an entry
node that held your task back to pick among seeds it had seen gets at most that many draws.
The node is only a source of bytes: nothing it says is trusted.

chain: --rpc URL (default $CONSENSOR_RPC or http://127.0.0.1:8545; http:// or https://)
       --rpc-ca-file FILE (default $CONSENSOR_RPC_CA_FILE; https: PEM CAs trusted instead of the system's)
       --deployment FILE (default contracts/deployments/<chain id>.json)
)";

ArgSpec VerifyArgSpec() {
  ArgSpec spec;
  spec.value_options = {"--node",         "--certificate",    "--rpc",
                        "--rpc-ca-file",  "--deployment",     "--request",
                        "--submitted-at", "--max-seed-delay", "--api-key-file"};
  spec.flags = {"--json", "--help", "--require-stake", "--require-final"};
  return spec;
}

int Usage(std::ostream& err, const std::string& message) {
  err << "error: " << message << "\n\n" << kVerifyUsage;
  return kExitUsage;
}

long double StakeValue(const Uint256& v) {
  long double x = 0;
  for (uint8_t b : v) x = x * 256 + b;
  return x;
}

std::string Percent(long double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2Lf%%", fraction * 100);
  return buf;
}

std::string Checksum(const Address20& a) { return AddressToChecksumHex(a); }

}  // namespace

StatusOr<consensus::CertificateClaims> ParseCertificate(const v1::Certificate& c) {
  consensus::CertificateClaims p;
  ASSIGN_OR_RETURN(p.attestation.task_id, HashFieldFromHex(c.task_id(), "task_id"));
  ASSIGN_OR_RETURN(p.attestation.result_root, HashFieldFromHex(c.result_root(), "result_root"));
  ASSIGN_OR_RETURN(p.attestation.trace_root, HashFieldFromHex(c.trace_root(), "trace_root"));
  p.attestation.reference_block = c.reference_block();
  if (c.signers_size() == 0) return InvalidArgument("the certificate has no signers");
  if (static_cast<size_t>(c.signers_size()) > kMaxCertificateSigners) {
    return InvalidArgument("the certificate has " + std::to_string(c.signers_size()) + " signers, more than " +
                           std::to_string(kMaxCertificateSigners));
  }
  if (c.signatures_size() != c.signers_size()) {
    return InvalidArgument("the certificate has " + std::to_string(c.signers_size()) + " signers but " +
                           std::to_string(c.signatures_size()) + " signatures");
  }
  for (int i = 0; i < c.signers_size(); ++i) {
    const std::string what = "signers[" + std::to_string(i) + "]";
    auto address = AddressFromHex(c.signers(i));
    if (!address.ok()) return InvalidArgument(what + ": " + address.status().message());
    p.signers.push_back(*address);
    ASSIGN_OR_RETURN(auto sig, FixedBytesFromHex(c.signatures(i), 65, "signatures[" + std::to_string(i) + "]"));
    p.signatures.push_back(std::move(sig));
  }
  p.quorum = c.quorum();
  p.committee_size = c.committee_size();
  p.replicas = c.replicas();
  p.dispute = c.dispute();
  if (c.has_request()) {
    auto task = TaskSpecOfRequest(c.request());
    if (!task.ok()) return InvalidArgument("request: " + task.status().message());
    p.task = *task;
  }
  return p;
}

StatusOr<CertificateReport> CheckCertificate(const v1::Certificate& certificate, const consensus::Eip712Domain& domain,
                                             const consensus::OperatorSet& operators, const Hash256& seed_block_hash) {
  ASSIGN_OR_RETURN(consensus::CertificateClaims claims, ParseCertificate(certificate));
  return consensus::CheckCertificate(claims, domain, operators, seed_block_hash);
}

namespace {

// Where the certificate's bytes come from: a node or a file. Neither is trusted.
StatusOr<v1::Certificate> LoadCertificate(const ParsedArgs& a) {
  v1::Certificate certificate;
  if (auto file = a.Option("--certificate")) {
    ASSIGN_OR_RETURN(auto bytes, consensor::ReadFileBytes(*file, kMaxCertificateFileBytes));
    const std::string json(bytes.begin(), bytes.end());
    auto parsed = google::protobuf::util::JsonStringToMessage(json, &certificate);
    if (!parsed.ok()) {
      return InvalidArgument("certificate file '" + *file + "' is not a consensor.v1.Certificate in JSON: " +
                             std::string(parsed.message().data(), parsed.message().size()));
    }
    return certificate;
  }
  const std::string& task_id = a.positional[0];
  ASSIGN_OR_RETURN(NodeClient client, ConnectNode(a));
  auto fetched = client.GetTask(task_id);
  if (!fetched.ok()) return fetched.status().WithContext("fetching task " + task_id + " from node " + client.address());
  const v1::Task& task = *fetched;
  if (!task.has_consensus() || !task.consensus().has_certificate()) {
    return FailedPrecondition("task " + task_id + " has no certificate on node " + client.address() +
                              " (certificates exist for finalized tasks of a networked node)");
  }
  certificate = task.consensus().certificate();
  // The node answers for the task asked about, or its certificate proves nothing about it.
  auto asked = HashFieldFromHex(task_id, "TASK_ID");
  auto got = HashFieldFromHex(certificate.task_id(), "the certificate's task_id");
  if (asked.ok() && got.ok() && *asked != *got) {
    return FailedPrecondition("node " + client.address() + " returned a certificate for task " + certificate.task_id() +
                              ", not " + task_id);
  }
  return certificate;
}

long double Fraction(const CertificateStake& s) {
  const long double total = StakeValue(s.total_stake);
  return total > 0 ? StakeValue(s.signed_stake) / total : 0;
}

// What a certificate is worth, strongest first.
enum class Guarantee {
  // Signers holding the contract's threshold of all stake at the reference block: the same
  // evidence slashDispute accepts, so a third party or a contract can rely on it (no choice of
  // committee reaches it without that much stake).
  kStakeThreshold,
  // The task's own committee reached its quorum. It protects the client who asked for the task
  // (the committee was drawn for the client's request); it is anchored only when the user named
  // the task (TASK_ID) or gave the request (--request).
  kCommittee,
  kNone,
};

std::string_view GuaranteeName(Guarantee g) {
  switch (g) {
    case Guarantee::kStakeThreshold: return "stake threshold";
    case Guarantee::kCommittee: return "committee";
    case Guarantee::kNone: break;
  }
  return "none";
}

struct Verified {
  CertificateReport report;
  CertificateStake onchain;
  uint64_t threshold_bps = 0;
  consensus::Eip712Domain domain;  // chain id and manager of the deployment
  uint64_t head = 0;
  Guarantee guarantee = Guarantee::kNone;
  std::string committee_problem;  // why the committee rule does not hold, when it does not
  bool anchored = false;          // checked against the user's own task id or request
  uint64_t seed_block = 0;        // ref + R + 1: its hash seeds the committee
  std::string seed_timing;        // what the --submitted-at check found ("" when not asked)
  bool require_stake = false;
  bool require_final = false;
  uint64_t final_block = 0;  // the manager's finalityBlock(ref)
  bool final = false;        // the chain is past it: nobody can challenge the result any more
  bool verified = false;     // the guarantee meets the policy the user asked for
  std::string verdict;       // why not, when not
};

// The newest block mined at or before `unix_seconds` (0 when none), by binary search over
// block timestamps; block 0..head.
StatusOr<uint64_t> HeadAt(EthRpc& rpc, uint64_t unix_seconds, uint64_t head) {
  uint64_t lo = 0, hi = head;  // invariant: the answer is in [lo, hi]
  ASSIGN_OR_RETURN(EthRpc::BlockHeader last, rpc.Block(head));
  if (last.timestamp <= unix_seconds) return head;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    ASSIGN_OR_RETURN(EthRpc::BlockHeader b, rpc.Block(mid));
    if (b.timestamp <= unix_seconds) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// --submitted-at and --max-seed-delay, parsed once, before anything is read (a bad value is a
// usage error).
struct SeedTimingArgs {
  std::optional<uint64_t> submitted;  // unix seconds; the check runs only when given
  uint64_t max_delay = 8;             // blocks
};

StatusOr<SeedTimingArgs> ParseSeedTimingArgs(const ParsedArgs& a) {
  SeedTimingArgs args;
  if (auto t = a.Option("--submitted-at")) {
    ASSIGN_OR_RETURN(const int64_t v, ParseIntOption(*t, "--submitted-at (unix seconds)", 0, INT64_MAX));
    args.submitted = static_cast<uint64_t>(v);
  }
  if (auto t = a.Option("--max-seed-delay")) {
    if (!args.submitted) return InvalidArgument("--max-seed-delay needs --submitted-at");
    ASSIGN_OR_RETURN(const int64_t d, ParseIntOption(*t, "--max-seed-delay (blocks)", 1, 1000000));
    args.max_delay = static_cast<uint64_t>(d);
  }
  return args;
}

// --submitted-at: the seed block must come after the head at submission and within the
// allowed delay. Returns what it found; a violation goes to *problem (and the committee
// guarantee does not hold).
StatusOr<std::string> CheckSeedTiming(EthRpc& rpc, uint64_t submitted, uint64_t max_delay, uint64_t seed_block,
                                      uint64_t head, std::string* problem) {
  ASSIGN_OR_RETURN(uint64_t head_then, HeadAt(rpc, submitted, head));
  const std::string found = "the head was block " + std::to_string(head_then) + " when you submitted";
  if (seed_block <= head_then) {
    *problem = "the seed block " + std::to_string(seed_block) + " was mined before you submitted (" + found +
               "): whoever picked the reference block knew this committee";
  } else if (seed_block - head_then > max_delay) {
    *problem = "the seed block " + std::to_string(seed_block) + " came " + std::to_string(seed_block - head_then) +
               " blocks after you submitted (" + found + "), more than --max-seed-delay " + std::to_string(max_delay) +
               ": the entry node could have waited and picked among that many draws";
  }
  return found + ", " + std::to_string(seed_block - std::min(seed_block, head_then)) + " blocks before the seed";
}

// The user's own view of the task: a TASK_ID they typed (the id `consensor submit` checked
// against their request) or the request itself. A certificate about another task is refused.
StatusOr<bool> CheckAnchor(const ParsedArgs& a, const consensus::CertificateClaims& claims) {
  if (auto file = a.Option("--request")) {
    ASSIGN_OR_RETURN(auto bytes, consensor::ReadFileBytes(*file, kMaxCertificateFileBytes));
    v1::SubmitTaskRequest request;
    auto parsed = google::protobuf::util::JsonStringToMessage(std::string(bytes.begin(), bytes.end()), &request);
    if (!parsed.ok()) {
      return InvalidArgument("request file '" + *file + "' is not a consensor.v1.SubmitTaskRequest in JSON: " +
                             std::string(parsed.message().data(), parsed.message().size()));
    }
    ASSIGN_OR_RETURN(consensus::TaskId id, TaskIdOfRequest(request));
    if (id.bytes() != claims.attestation.task_id) {
      return FailedPrecondition("the certificate is for task " + ToHex(claims.attestation.task_id) +
                                ", but your request (" + *file + ") is task " + id.Hex() +
                                ": it certifies something you did not ask for (e.g. fewer replicas)");
    }
    return true;
  }
  return !a.positional.empty();  // LoadCertificate checked the node answered for TASK_ID
}

StatusOr<Verified> Verify(const ParsedArgs& a, const SeedTimingArgs& timing) {
  ASSIGN_OR_RETURN(v1::Certificate certificate, LoadCertificate(a));
  // Formats first: a malformed file should not need a chain to be rejected.
  ASSIGN_OR_RETURN(consensus::CertificateClaims parsed, ParseCertificate(certificate));
  const uint64_t ref = parsed.attestation.reference_block;
  Verified v;
  ASSIGN_OR_RETURN(v.anchored, CheckAnchor(a, parsed));
  v.require_stake = a.HasFlag("--require-stake");
  v.require_final = a.HasFlag("--require-final");

  ASSIGN_OR_RETURN(ChainSession session, OpenChainSession(a, /*need_key=*/false));
  ASSIGN_OR_RETURN(v.head, session.rpc->BlockNumber());
  // Stake in a block that is not mined yet can still change; the contract refuses it the same
  // way (its eth_call runs in the pending block, so the head itself is settled).
  if (ref > v.head) {
    return FailedPrecondition("reference block " + std::to_string(ref) + " is not mined yet (the chain head is block " +
                              std::to_string(v.head) + ")");
  }
  auto registered = session.chain->OperatorsAt(ref);
  if (!registered.ok()) {
    return registered.status().WithContext("reading the operator set at block " + std::to_string(ref));
  }
  const consensus::OperatorSet operators = consensus::OperatorSet::FromRegistry(ref, *registered);
  // The committee is drawn from the hash of the seed block, ref + R + 1 (consensus/committee.h),
  // read from the chain: the certificate's own word on it counts for nothing.
  ASSIGN_OR_RETURN(DeploymentParams params, session.chain->ReadDeploymentParams());
  const uint64_t seed_block = consensus::SeedBlock(ref, params.max_reference_age);
  std::optional<Hash256> seed_hash;
  if (seed_block <= v.head) {
    auto h = session.rpc->Block(seed_block);
    if (!h.ok()) return h.status().WithContext("reading the seed block " + std::to_string(seed_block));
    seed_hash = h->hash;
  }
  v.seed_block = seed_block;
  std::string seed_problem;
  if (timing.submitted && seed_hash) {
    ASSIGN_OR_RETURN(v.seed_timing, CheckSeedTiming(*session.rpc, *timing.submitted, timing.max_delay, seed_block,
                                                    v.head, &seed_problem));
  }
  // Signatures, binding and membership hold for any certificate; checked as a whole-set
  // certificate, a failure here is a broken certificate, not a weak one.
  consensus::CertificateClaims as_stake = parsed;
  as_stake.dispute = true;
  ASSIGN_OR_RETURN(v.report, consensus::CheckCertificate(as_stake, session.chain->domain(), operators,
                                                         seed_hash.value_or(Hash256{})));
  v.report.certificate.dispute = parsed.dispute;
  if (!parsed.dispute && !seed_hash) {
    v.committee_problem = "the committee's seed block " + std::to_string(seed_block) +
                          " is not mined yet, so no committee can have been drawn";
  } else if (!parsed.dispute) {
    auto committee = consensus::CheckCertificate(parsed, session.chain->domain(), operators, *seed_hash);
    if (committee.ok() && !seed_problem.empty()) {
      v.report = *committee;
      v.committee_problem = seed_problem;
    } else if (committee.ok()) {
      v.report = *committee;
    } else {
      v.committee_problem = committee.status().message();
    }
  } else {
    v.committee_problem = "a dispute certificate has no committee quorum; it stands on stake alone";
  }

  auto onchain = session.chain->VerifyCertificate(parsed.attestation, parsed.signatures);
  if (!onchain.ok()) return onchain.status().WithContext("the contract rejects the certificate");
  v.onchain = *onchain;
  ASSIGN_OR_RETURN(v.threshold_bps, session.chain->ThresholdBps());
  // Two views of one registry must agree; a difference means the RPC or the deployment is off.
  if (v.onchain.signed_stake != v.report.signed_stake || v.onchain.total_stake != v.report.total_stake) {
    return DataLoss("the contract counts " + FormatEther(v.onchain.signed_stake) + " of " +
                    FormatEther(v.onchain.total_stake) + " but operatorsAt(" + std::to_string(ref) + ") gives " +
                    FormatEther(v.report.signed_stake) + " of " + FormatEther(v.report.total_stake));
  }
  // A signer already slashed for this very task signed something it was punished for: its
  // signature backs nothing.
  for (const CertificateSigner& s : v.report.signers) {
    ASSIGN_OR_RETURN(bool used, session.chain->EvidenceUsed(s.address, parsed.attestation.task_id));
    if (used) {
      return FailedPrecondition("signer " + Checksum(s.address) + " was slashed for task " +
                                ToHex(parsed.attestation.task_id) + " (evidenceUsed): its signature backs nothing");
    }
  }
  v.domain = session.chain->domain();
  ASSIGN_OR_RETURN(v.final_block, session.chain->FinalityBlock(ref));
  v.final = v.head > v.final_block;

  if (v.onchain.meets_threshold) {
    v.guarantee = Guarantee::kStakeThreshold;
  } else if (v.committee_problem.empty()) {
    v.guarantee = Guarantee::kCommittee;
  }
  const std::string stake_words = FormatEther(v.onchain.signed_stake) + " of " + FormatEther(v.onchain.total_stake) +
                                  " (" + Percent(Fraction(v.onchain)) + "), below the contract's threshold of " +
                                  Percent(v.threshold_bps / 10000.0L) + " of the stake";
  if (v.require_final && !v.final) {
    v.verdict = "--require-final: the result is certified but its challenge window is open until block " +
                std::to_string(v.final_block) + " (head " + std::to_string(v.head) + ")";
  } else if (v.guarantee == Guarantee::kStakeThreshold) {
    v.verified = true;
  } else if (v.require_stake) {
    v.verdict = "--require-stake: the signers hold " + stake_words;
  } else if (v.guarantee == Guarantee::kCommittee && v.anchored) {
    v.verified = true;
  } else if (v.guarantee == Guarantee::kCommittee) {
    v.verdict =
        "a committee certificate protects only the client who asked for the task; name the task (TASK_ID) or give "
        "your request (--request FILE) to rely on it, or ask for the stake threshold (--require-stake)";
  } else {
    v.verdict = (parsed.dispute ? "dispute certificate carries "
                                : "no committee quorum (" + v.committee_problem + ") and the signers hold ") +
                stake_words;
  }
  return v;
}

void PrintHuman(const Verified& v, std::ostream& out) {
  const CertificateReport& r = v.report;
  const consensus::CertificateClaims& c = r.certificate;
  out << "task        " << ToHex(c.attestation.task_id) << (v.anchored ? " (yours)" : "") << "\n";
  out << "result      " << ToHex(c.attestation.result_root) << "\n";
  out << "trace       " << ToHex(c.attestation.trace_root)
      << (c.attestation.trace_root == consensus::kDeferredTraceRoot ? " (not attested: `consensor trace` recomputes it)"
                                                                    : "")
      << "\n";
  out << "reference   block " << c.attestation.reference_block << " (chain " << v.domain.chain_id << ", head " << v.head
      << ")\n";
  if (c.task) {
    out << "request     replicas " << c.task->replicas << ", quorum " << c.task->quorum << ", protocol version "
        << c.task->protocol_version << " (signed, in the task id)\n";
  }
  if (c.dispute) {
    out << "kind        dispute certificate; committee: all " << r.operator_count << " operators\n";
  } else {
    out << "kind        result certificate; quorum " << c.quorum << " of " << c.replicas << " replicas, committee "
        << "positions 0.." << (c.committee_size == 0 ? 0 : c.committee_size - 1) << " of " << r.operator_count
        << " operators\n";
  }
  for (const CertificateSigner& s : r.signers) {
    out << "signer      " << Checksum(s.address) << "  position " << s.position << "  " << FormatEther(s.stake) << "\n";
  }
  out << "stake       " << FormatEther(v.onchain.signed_stake) << " of " << FormatEther(v.onchain.total_stake) << " ("
      << Percent(Fraction(v.onchain)) << "); contract threshold " << Percent(v.threshold_bps / 10000.0L)
      << (v.onchain.meets_threshold ? ", met" : ", not met") << "\n";
  out << "seed        block " << v.seed_block
      << (v.seed_timing.empty() ? " (timing not checked: give --submitted-at)" : "; " + v.seed_timing) << "\n";
  if (!v.committee_problem.empty() && !c.dispute) out << "committee   not met: " << v.committee_problem << "\n";
  out << "guarantee   " << GuaranteeName(v.guarantee) << "\n";
  if (v.final) {
    out << "finality    final: the challenge window closed after block " << v.final_block << "\n";
  } else {
    out << "finality    certified, not final: challengeable until block " << v.final_block << "\n";
  }
  out << "policy      " << (v.require_stake ? "stake threshold (--require-stake)" : "committee for your task, or stake")
      << "\n";
  if (v.verified) {
    out << "VERIFIED    " << r.signers.size() << " valid signatures; guarantee: " << GuaranteeName(v.guarantee) << "\n";
  } else {
    out << "NOT VERIFIED  " << v.verdict << "\n";
  }
}

nlohmann::json JsonReport(const Verified& v) {
  const CertificateReport& r = v.report;
  const consensus::CertificateClaims& c = r.certificate;
  nlohmann::json signers = nlohmann::json::array();
  for (const CertificateSigner& s : r.signers) {
    signers.push_back(
        {{"address", Checksum(s.address)}, {"position", s.position}, {"stake", Uint256ToDecimal(s.stake)}});
  }
  nlohmann::json j = {{"verified", v.verified},
                      {"guarantee", GuaranteeName(v.guarantee)},
                      {"anchored", v.anchored},
                      {"require_stake", v.require_stake},
                      {"final", v.final},
                      {"final_block", v.final_block},
                      {"task_id", ToHex(c.attestation.task_id)},
                      {"result_root", ToHex(c.attestation.result_root)},
                      {"trace_root", ToHex(c.attestation.trace_root)},
                      {"reference_block", c.attestation.reference_block},
                      {"seed_block", v.seed_block},
                      {"seed_timing", v.seed_timing},
                      {"chain_id", v.domain.chain_id},
                      {"manager", Checksum(v.domain.verifying_contract)},
                      {"dispute", c.dispute},
                      {"quorum", c.quorum},
                      {"replicas", c.replicas},
                      {"committee_size", c.committee_size},
                      {"operators", r.operator_count},
                      {"signers", signers},
                      {"signed_stake", Uint256ToDecimal(v.onchain.signed_stake)},
                      {"total_stake", Uint256ToDecimal(v.onchain.total_stake)},
                      {"stake_fraction", static_cast<double>(Fraction(v.onchain))},
                      {"threshold_bps", v.threshold_bps},
                      {"meets_threshold", v.onchain.meets_threshold}};
  if (c.task) j["protocol_version"] = c.task->protocol_version;
  if (!v.committee_problem.empty()) j["committee_problem"] = v.committee_problem;
  if (!v.verified) j["error"] = v.verdict;
  return j;
}

}  // namespace

int RunVerifyCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  auto parsed = ParseArgs(raw, VerifyArgSpec());
  if (!parsed.ok()) return Usage(err, parsed.status().message());
  const ParsedArgs& a = *parsed;
  if (a.HasFlag("--help")) {
    out << kVerifyUsage;
    return kExitOk;
  }
  const bool from_file = a.Option("--certificate").has_value();
  if (from_file && !a.positional.empty()) return Usage(err, "give either TASK_ID or --certificate FILE, not both");
  if (!from_file && a.positional.size() != 1) return Usage(err, "verify takes one TASK_ID or --certificate FILE");
  if (from_file && a.Option("--node")) return Usage(err, "--node is for TASK_ID; a --certificate file needs no node");
  auto timing = ParseSeedTimingArgs(a);
  if (!timing.ok()) return Usage(err, timing.status().message());

  const bool json = a.HasFlag("--json");
  auto verified = Verify(a, *timing);
  if (!verified.ok()) {
    const std::string message = verified.status().message();
    if (json) out << nlohmann::json{{"verified", false}, {"error", message}}.dump(2) << "\n";
    err << "error: " << message << "\n";
    return kExitFailure;
  }
  if (json) {
    out << JsonReport(*verified).dump(2) << "\n";
  } else {
    PrintHuman(*verified, out);
  }
  if (!verified->verified) {
    err << "error: not verified: " << verified->verdict << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace consensor::node
