#include "node/cli/operator_command.h"

#include <optional>

#include "common/file_io.h"
#include "consensus/attestation.h"
#include "node/chain/chain_client.h"
#include "node/chain/chain_view.h"
#include "node/cli/chain_flags.h"
#include "node/keys/keystore.h"

namespace consensor::node {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr char kOperatorUsage[] = R"(usage:
  consensor operator register --stake AMOUNT --endpoint HOST:PORT [--signer ADDR --signer-proof HEX] [chain] [key]
  consensor operator rotate-signer --signer ADDR --signer-proof HEX [chain] [key]
  consensor operator signer-proof --owner ADDR [chain] [key]
  consensor operator status [--address ADDR] [chain] [key]
  consensor operator deregister [chain] [key]
  consensor operator withdraw [chain] [key]
  consensor operator set [--block N] [chain]
  consensor evidence submit FILE [chain] [key]

chain: --rpc URL (default $CONSENSOR_RPC or http://127.0.0.1:8545; http:// or https://)
       --rpc-ca-file FILE (default $CONSENSOR_RPC_CA_FILE; https: PEM CAs trusted instead of the system's)
       --deployment FILE (default contracts/deployments/<chain id>.json)
key:   --keystore FILE (--password-file FILE | --password-env VAR)
       --devnet-key N   (anvil's well-known dev account N; only on chain 31337)
AMOUNT: wei, or with a unit: 1ether, 0.5ether, 20gwei.

The key of register, rotate-signer, deregister and withdraw is the operator's OWNER (cold) key:
it holds the stake and is the only one paid by withdraw. --signer names the address of the
node's attestation-signing (hot) key; without it the owner key signs itself. A signer is bound
to one owner forever: rotate-signer takes a fresh key, and the old one stays answerable for
what it signed before the rotation. New stake counts activationDelayBlocks after it arrives.
Binding a signer needs its proof of possession: run signer-proof with the SIGNER's key (the
node's keystore) and the owner's address, and pass the printed hex as --signer-proof.
)";

ArgSpec OperatorArgSpec() {
  ArgSpec spec;
  spec.value_options = {"--rpc",          "--rpc-ca-file", "--deployment",   "--keystore", "--password-file",
                        "--password-env", "--devnet-key",  "--stake",        "--endpoint", "--address",
                        "--block",        "--signer",      "--signer-proof", "--owner"};
  spec.flags = {"--help"};
  return spec;
}

int Fail(std::ostream& err, const Status& s) {
  err << "error: " << s.message() << "\n";
  return kExitFailure;
}

int Usage(std::ostream& err, const std::string& message) {
  err << "error: " << message << "\n\n" << kOperatorUsage;
  return kExitUsage;
}

void PrintTx(std::ostream& out, const std::string& what, const TxOutcome& tx) {
  out << what << " in block " << tx.block_number << " (tx " << tx.tx_hash << ", gas " << tx.gas_used << ")\n";
}

StatusOr<consensus::Attestation> AttestationFromJson(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object()) return InvalidArgument(what + " must be an object");
  consensus::Attestation a;
  struct Field {
    const char* name;
    Hash256* out;
  } fields[] = {{"task_id", &a.task_id}, {"result_root", &a.result_root}, {"trace_root", &a.trace_root}};
  for (const auto& f : fields) {
    if (!j.contains(f.name) || !j[f.name].is_string())
      return InvalidArgument(what + "." + f.name + " must be a hex string");
    std::string hex = j[f.name].get<std::string>();
    if (hex.rfind("0x", 0) == 0) hex = hex.substr(2);
    auto h = Hash256FromHex(hex);
    if (!h.ok()) return InvalidArgument(what + "." + f.name + ": " + h.status().message());
    *f.out = *h;
  }
  if (!j.contains("reference_block") || !j["reference_block"].is_number_unsigned()) {
    return InvalidArgument(what + ".reference_block must be a non-negative integer");
  }
  a.reference_block = j["reference_block"].get<uint64_t>();
  return a;
}

StatusOr<std::vector<uint8_t>> SignatureFromJson(const nlohmann::json& j, const std::string& what) {
  auto bytes = ParseData(j, what);
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() != 65)
    return InvalidArgument(what + " must be 65 bytes (r || s || v), got " + std::to_string(bytes->size()));
  return bytes;
}

// The --signer-proof of a new binding of `signer` to the session's key, checked here so that a
// wrong proof costs no transaction.
StatusOr<std::vector<uint8_t>> SignerProofOption(const ParsedArgs& a, const ChainSession& s, const Address20& signer) {
  auto text = a.Option("--signer-proof");
  if (!text) return InvalidArgument("--signer-proof is missing");
  auto proof = FixedBytesFromHex(*text, 65, "--signer-proof");
  if (!proof.ok()) return proof.status();
  RETURN_IF_ERROR(CheckSignerProof(*proof, s.chain->deployment(), *s.chain->address(), signer));
  return proof;
}

}  // namespace

StatusOr<std::array<uint8_t, 32>> ParseEtherAmount(const std::string& text) {
  std::string number = text;
  int decimals = 0;
  for (auto [unit, digits] : {std::pair<const char*, int>{"ether", 18}, {"gwei", 9}, {"wei", 0}}) {
    const std::string u = unit;
    if (number.size() > u.size() && number.compare(number.size() - u.size(), u.size(), u) == 0) {
      number = number.substr(0, number.size() - u.size());
      decimals = digits;
      break;
    }
  }
  std::string whole = number, frac;
  if (size_t dot = number.find('.'); dot != std::string::npos) {
    whole = number.substr(0, dot);
    frac = number.substr(dot + 1);
  }
  if (whole.empty() || static_cast<int>(frac.size()) > decimals) {
    return InvalidArgument("amount '" + text + "' must be wei or a number with a unit (1ether, 0.5ether, 20gwei)");
  }
  frac.append(static_cast<size_t>(decimals) - frac.size(), '0');
  auto wei = Uint256FromDecimal(whole + frac);
  if (!wei.ok()) return InvalidArgument("amount '" + text + "': " + wei.status().message());
  return *wei;
}

int RunOperatorCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  auto parsed = ParseArgs(raw, OperatorArgSpec());
  if (!parsed.ok()) return Usage(err, parsed.status().message());
  const ParsedArgs& a = *parsed;
  if (a.HasFlag("--help") || a.positional.empty()) {
    (a.positional.empty() && !a.HasFlag("--help") ? err : out) << kOperatorUsage;
    return a.positional.empty() && !a.HasFlag("--help") ? kExitUsage : kExitOk;
  }
  const std::string& cmd = a.positional[0];
  if (a.positional.size() != 1) return Usage(err, "operator " + cmd + " takes no further arguments");

  if (cmd == "register") {
    auto stake = a.Option("--stake");
    auto endpoint = a.Option("--endpoint");
    if (!stake || !endpoint) return Usage(err, "operator register needs --stake AMOUNT and --endpoint HOST:PORT");
    // Every node dials it: refused here rather than registered and ignored by peers.
    if (Status valid = CheckPeerEndpoint(*endpoint); !valid.ok()) return Usage(err, "--endpoint: " + valid.message());
    auto wei = ParseEtherAmount(*stake);
    if (!wei.ok()) return Usage(err, wei.status().message());
    std::optional<Address20> signer;
    if (auto text = a.Option("--signer")) {
      auto parsed_signer = AddressFromHex(*text);
      if (!parsed_signer.ok()) return Usage(err, "--signer: " + parsed_signer.status().message());
      signer = *parsed_signer;
    }
    if (a.Option("--signer-proof") && !signer) return Usage(err, "--signer-proof goes with --signer ADDR");
    auto s = OpenChainSession(a, true);
    if (!s.ok()) return Fail(err, s.status());
    std::vector<uint8_t> proof;
    if (signer && *signer != *s->chain->address()) {
      if (!a.Option("--signer-proof")) {
        return Usage(err, "binding --signer " + AddressToChecksumHex(*signer) +
                              " needs its --signer-proof: run `consensor operator signer-proof --owner " +
                              AddressToChecksumHex(*s->chain->address()) + "` with the signer's key");
      }
      auto checked = SignerProofOption(a, *s, *signer);
      if (!checked.ok()) return Fail(err, checked.status());
      proof = std::move(*checked);
    }
    auto tx = s->chain->Register(*endpoint, *wei, signer, proof);
    if (!tx.ok()) return Fail(err, tx.status().WithContext("register"));
    const Address20 owner = *s->chain->address();
    out << "operator " << AddressToChecksumHex(owner) << " registered with " << FormatEther(*wei) << "\n";
    out << "signer " << AddressToChecksumHex(signer.value_or(owner)) << "\n";
    if (auto active = s->chain->ActivationBlockOf(owner); active.ok()) {
      out << "stake counts from block " << *active << "\n";
    }
    PrintTx(out, "mined", *tx);
    return kExitOk;
  }
  if (cmd == "rotate-signer") {
    auto text = a.Option("--signer");
    if (!text || !a.Option("--signer-proof")) {
      return Usage(err,
                   "operator rotate-signer needs --signer ADDR and --signer-proof HEX (from `consensor "
                   "operator signer-proof --owner OWNER` with the new signer's key)");
    }
    auto new_signer = AddressFromHex(*text);
    if (!new_signer.ok()) return Usage(err, "--signer: " + new_signer.status().message());
    auto s = OpenChainSession(a, true);
    if (!s.ok()) return Fail(err, s.status());
    auto proof = SignerProofOption(a, *s, *new_signer);
    if (!proof.ok()) return Fail(err, proof.status());
    auto tx = s->chain->RotateSigner(*new_signer, *proof);
    if (!tx.ok()) return Fail(err, tx.status().WithContext("rotate-signer"));
    out << "operator " << AddressToChecksumHex(*s->chain->address()) << " signs with "
        << AddressToChecksumHex(*new_signer) << " from block " << tx->block_number << " on\n";
    PrintTx(out, "mined", *tx);
    return kExitOk;
  }
  if (cmd == "signer-proof") {
    // Run with the signer's (the node's) key; prints only the proof, for --signer-proof.
    auto text = a.Option("--owner");
    if (!text) return Usage(err, "operator signer-proof needs --owner ADDR (the owner that will bind this key)");
    auto owner = AddressFromHex(*text);
    if (!owner.ok()) return Usage(err, "--owner: " + owner.status().message());
    auto s = OpenChainSession(a, true);
    if (!s.ok()) return Fail(err, s.status());
    auto proof = s->chain->SignerProofFor(*owner);
    if (!proof.ok()) return Fail(err, proof.status());
    out << "0x" << ToHex(*proof) << "\n";
    return kExitOk;
  }
  if (cmd == "deregister" || cmd == "withdraw") {
    auto s = OpenChainSession(a, true);
    if (!s.ok()) return Fail(err, s.status());
    auto tx = cmd == "deregister" ? s->chain->Deregister() : s->chain->Withdraw();
    if (!tx.ok()) return Fail(err, tx.status().WithContext(cmd));
    out << "operator " << AddressToChecksumHex(*s->chain->address())
        << (cmd == "deregister" ? " deregistered" : " withdrew") << "\n";
    PrintTx(out, "mined", *tx);
    return kExitOk;
  }
  if (cmd == "status") {
    auto s = OpenChainSession(a, false);
    if (!s.ok()) return Fail(err, s.status());
    std::optional<Address20> who = s->chain->address();
    if (auto addr = a.Option("--address")) {
      auto parsed_address = AddressFromHex(*addr);
      if (!parsed_address.ok()) return Usage(err, "--address: " + parsed_address.status().message());
      who = *parsed_address;
    }
    if (!who) return Usage(err, "operator status needs --address ADDR or a key");
    auto info = s->chain->GetOperatorInfo(*who);
    if (!info.ok()) return Fail(err, info.status());
    out << "operator   " << AddressToChecksumHex(*who) << "\n";
    // `who` may be the owner or a signer: name both.
    if (auto owner = s->chain->OwnerOf(*who); owner.ok() && *owner != Address20{} && *owner != *who) {
      out << "owner      " << AddressToChecksumHex(*owner) << "\n";
    } else if (auto signer = s->chain->SignerOf(*who); signer.ok() && *signer != Address20{}) {
      out << "signer     " << AddressToChecksumHex(*signer) << "\n";
    }
    out << "status     " << OperatorStatusName(info->status) << (info->slashed ? " (slashed)" : "") << "\n";
    out << "stake      " << FormatEther(info->stake) << "\n";
    out << "pending    " << FormatEther(info->pending_withdrawal);
    if (info->withdrawable_at_block) out << ", withdrawable at block " << info->withdrawable_at_block;
    out << "\nendpoint   " << info->endpoint << "\n";
    return kExitOk;
  }
  if (cmd == "set") {
    auto s = OpenChainSession(a, false);
    if (!s.ok()) return Fail(err, s.status());
    uint64_t block = 0;
    if (auto b = a.Option("--block")) {
      auto v = ParseIntOption(*b, "--block", 0, INT64_MAX);
      if (!v.ok()) return Usage(err, v.status().message());
      block = static_cast<uint64_t>(*v);
    } else {
      auto latest = s->rpc->BlockNumber();
      if (!latest.ok()) return Fail(err, latest.status());
      block = *latest;
    }
    auto set = s->chain->OperatorsAt(block);
    if (!set.ok()) return Fail(err, set.status());
    out << "operators at block " << block << ": " << set->size() << "\n";
    for (const consensus::WeightedOperator& op : *set) {
      out << "  " << AddressToChecksumHex(op.address) << "  " << FormatEther(op.stake) << "\n";
    }
    return kExitOk;
  }
  return Usage(err, "unknown operator command '" + cmd + "'");
}

// Evidence files (JSON):
//   {"kind": "equivocation", "attestations": [A1, A2]}
//   {"kind": "dispute", "accused": A, "certified": A, "certificate": ["0x<65 bytes>", ...]}
// where A is {"task_id", "result_root", "trace_root": 0x-hex32, "reference_block": N,
// "signature": 0x-hex65} (the certified attestation needs no signature of its own).
int RunEvidenceCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  auto parsed = ParseArgs(raw, OperatorArgSpec());
  if (!parsed.ok()) return Usage(err, parsed.status().message());
  const ParsedArgs& a = *parsed;
  if (a.positional.size() != 2 || a.positional[0] != "submit")
    return Usage(err, "usage: consensor evidence submit FILE");
  auto bytes = consensor::ReadFileBytes(a.positional[1], 4 << 20);
  if (!bytes.ok()) return Fail(err, bytes.status());
  auto j = nlohmann::json::parse(bytes->begin(), bytes->end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("kind") || !j["kind"].is_string()) {
    return Fail(err, InvalidArgument("evidence file '" + a.positional[1] + "' must be a JSON object with a \"kind\""));
  }
  const std::string kind = j["kind"].get<std::string>();
  auto s = OpenChainSession(a, true);
  if (!s.ok()) return Fail(err, s.status());
  auto submit = [&]() -> StatusOr<TxOutcome> {
    if (kind == "equivocation") {
      if (!j.contains("attestations") || !j["attestations"].is_array() || j["attestations"].size() != 2) {
        return InvalidArgument("equivocation evidence needs \"attestations\": [two signed attestations]");
      }
      ASSIGN_OR_RETURN(auto a1, AttestationFromJson(j["attestations"][0], "attestations[0]"));
      ASSIGN_OR_RETURN(auto s1, SignatureFromJson(j["attestations"][0].value("signature", nlohmann::json()),
                                                  "attestations[0].signature"));
      ASSIGN_OR_RETURN(auto a2, AttestationFromJson(j["attestations"][1], "attestations[1]"));
      ASSIGN_OR_RETURN(auto s2, SignatureFromJson(j["attestations"][1].value("signature", nlohmann::json()),
                                                  "attestations[1].signature"));
      return s->chain->SlashEquivocation(a1, s1, a2, s2);
    }
    if (kind == "dispute") {
      ASSIGN_OR_RETURN(auto accused, AttestationFromJson(j.value("accused", nlohmann::json()), "accused"));
      ASSIGN_OR_RETURN(auto accused_sig,
                       SignatureFromJson(j["accused"].value("signature", nlohmann::json()), "accused.signature"));
      ASSIGN_OR_RETURN(auto certified, AttestationFromJson(j.value("certified", nlohmann::json()), "certified"));
      if (!j.contains("certificate") || !j["certificate"].is_array() || j["certificate"].size() > 1024) {
        return InvalidArgument("dispute evidence needs \"certificate\": [up to 1024 signatures]");
      }
      std::vector<std::vector<uint8_t>> sigs;
      for (size_t i = 0; i < j["certificate"].size(); ++i) {
        ASSIGN_OR_RETURN(auto sig, SignatureFromJson(j["certificate"][i], "certificate[" + std::to_string(i) + "]"));
        sigs.push_back(std::move(sig));
      }
      return s->chain->SlashDispute(accused, accused_sig, certified, sigs);
    }
    return InvalidArgument("unknown evidence kind '" + kind + "' (equivocation or dispute)");
  };
  auto tx = submit();
  if (!tx.ok()) return Fail(err, tx.status().WithContext(kind + " evidence"));
  out << kind << " evidence accepted: operator slashed\n";
  PrintTx(out, "mined", *tx);
  return kExitOk;
}

}  // namespace consensor::node
