#include "node/engine/fault_injection.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "node/telemetry/log.h"

namespace consensor::node {

namespace {

constexpr std::array<std::string_view, 16> kNames = {"corrupt-output",
                                                     "equivocate",
                                                     "silent",
                                                     "crash-mid-task",
                                                     "downgrade-replicas",
                                                     "wrong-trace-root",
                                                     "slow",
                                                     "stale-reference",
                                                     "lazy-copy",
                                                     "withhold-reveal",
                                                     "trickle-blobs",
                                                     "corrupt-served-outputs",
                                                     "cannot-fetch",
                                                     "refuse-everywhere",
                                                     "crash-before-unsynced-record",
                                                     "lose-own-commitment"};
constexpr std::array<FaultMode, 16> kModes = {FaultMode::kCorruptOutput,
                                              FaultMode::kEquivocate,
                                              FaultMode::kSilent,
                                              FaultMode::kCrashMidTask,
                                              FaultMode::kDowngradeReplicas,
                                              FaultMode::kWrongTraceRoot,
                                              FaultMode::kSlow,
                                              FaultMode::kStaleReference,
                                              FaultMode::kLazyCopy,
                                              FaultMode::kWithholdReveal,
                                              FaultMode::kTrickleBlobs,
                                              FaultMode::kCorruptServedOutputs,
                                              FaultMode::kCannotFetch,
                                              FaultMode::kRefuseEverywhere,
                                              FaultMode::kCrashBeforeUnsyncedRecord,
                                              FaultMode::kLoseOwnCommitment};

// How many announced blob names refuse-everywhere remembers (the newest).
constexpr size_t kMaxAnnouncedBlobs = 64;

class Honest final : public FaultInjector {
 public:
  void BeforeAnnouncing(uint32_t*, uint32_t*) override {}
  uint64_t ReferenceBlock(uint64_t honest, uint64_t, uint64_t) override { return honest; }
  void BeforeAttesting(const std::string&) override {}
  void BeforeUnsyncedRecord(const std::string&) override {}
  bool LosesOwnCommitmentRecord(const std::string&) override { return false; }
  void AfterOwnCommitmentSent(const std::string&) override {}
  bool StaySilent(const std::string&) override { return false; }
  bool CopiesRevealedVotes() override { return false; }
  bool WithholdsReveal(const std::string&) override { return false; }
  bool StallsServedBlobs() override { return false; }
  void HoldsOutputs(const std::vector<std::string>&) override {}
  bool CorruptsServedBlob(const std::string&) override { return false; }
  bool FailsMemberFetches() override { return false; }
  bool RefusesAndFloodsPeers() override { return false; }
  void SawAnnouncedBlobs(const std::vector<std::string>&) override {}
  std::vector<std::string> AnnouncedBlobs() override { return {}; }
  std::vector<consensus::Attestation> ToSign(const std::string&, const consensus::Attestation& honest) override {
    return {honest};
  }
};

class Faulty final : public FaultInjector {
 public:
  Faulty(FaultMode mode, int64_t delay_ms) : mode_(mode), delay_ms_(delay_ms) {}

  void BeforeAnnouncing(uint32_t* replicas, uint32_t* quorum) override {
    if (mode_ != FaultMode::kDowngradeReplicas) return;
    Log(LogLevel::kWarn, "fault injection: announcing with one replica",
        {{"replicas", static_cast<int64_t>(*replicas)}, {"quorum", static_cast<int64_t>(*quorum)}});
    *replicas = 1;
    *quorum = 1;
  }

  uint64_t ReferenceBlock(uint64_t honest, uint64_t head, uint64_t max_reference_age) override {
    if (mode_ != FaultMode::kStaleReference || head < max_reference_age + 3) return honest;
    // Seed block ref + R + 1 = head - 1: mined, so the committee is known before announcing.
    const uint64_t stale = head - max_reference_age - 2;
    Log(LogLevel::kWarn, "fault injection: announcing with a reference block whose seed is mined",
        {{"reference_block", static_cast<int64_t>(stale)}, {"head", static_cast<int64_t>(head)}});
    return stale;
  }

  void BeforeAttesting(const std::string& task_id_hex) override {
    if (mode_ == FaultMode::kSlow) {
      // Called on the executor worker that ran the task, so the engine keeps running meanwhile.
      Log(LogLevel::kWarn, "fault injection: attesting late", {{"task", task_id_hex}, {"delay_ms", delay_ms_}});
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      return;
    }
    if (mode_ != FaultMode::kCrashMidTask) return;
    Log(LogLevel::kWarn, "fault injection: crashing before attesting", {{"task", task_id_hex}});
    std::_Exit(86);
  }

  void BeforeUnsyncedRecord(const std::string& task_id_hex) override {
    if (mode_ != FaultMode::kCrashBeforeUnsyncedRecord) return;
    Log(LogLevel::kWarn, "fault injection: crashing before an unsynced record write", {{"task", task_id_hex}});
    std::_Exit(88);
  }
  bool LosesOwnCommitmentRecord(const std::string& task_id_hex) override {
    if (mode_ != FaultMode::kLoseOwnCommitment) return false;
    Log(LogLevel::kWarn, "fault injection: sending the commitment without its record", {{"task", task_id_hex}});
    return true;
  }
  void AfterOwnCommitmentSent(const std::string& task_id_hex) override {
    if (mode_ != FaultMode::kLoseOwnCommitment) return;
    // Gossip pushes from its own threads: a second for the commitment to reach the peers.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    Log(LogLevel::kWarn, "fault injection: crashing after the commitment went out", {{"task", task_id_hex}});
    std::_Exit(89);
  }

  bool StaySilent(const std::string& task_id_hex) override {
    if (mode_ == FaultMode::kLazyCopy) return true;  // it signs only what it copies
    if (mode_ != FaultMode::kSilent && mode_ != FaultMode::kRefuseEverywhere) return false;
    Log(LogLevel::kWarn, "fault injection: staying silent", {{"task", task_id_hex}});
    return true;
  }
  bool CopiesRevealedVotes() override { return mode_ == FaultMode::kLazyCopy; }
  bool WithholdsReveal(const std::string& task_id_hex) override {
    if (mode_ != FaultMode::kWithholdReveal) return false;
    Log(LogLevel::kWarn, "fault injection: withholding the reveal", {{"task", task_id_hex}});
    return true;
  }
  bool StallsServedBlobs() override { return mode_ == FaultMode::kTrickleBlobs; }
  void HoldsOutputs(const std::vector<std::string>& blob_sha256_hex) override {
    if (mode_ != FaultMode::kCorruptServedOutputs) return;
    std::lock_guard<std::mutex> lock(mu_);
    outputs_.insert(blob_sha256_hex.begin(), blob_sha256_hex.end());
  }
  bool CorruptsServedBlob(const std::string& blob_sha256_hex) override {
    if (mode_ == FaultMode::kRefuseEverywhere) return true;  // garbage, whatever is asked for
    if (mode_ != FaultMode::kCorruptServedOutputs) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (!outputs_.count(blob_sha256_hex)) return false;
    Log(LogLevel::kWarn, "fault injection: serving a corrupted output", {{"blob", blob_sha256_hex}});
    return true;
  }
  bool FailsMemberFetches() override { return mode_ == FaultMode::kCannotFetch; }
  bool RefusesAndFloodsPeers() override { return mode_ == FaultMode::kRefuseEverywhere; }
  void SawAnnouncedBlobs(const std::vector<std::string>& blob_sha256_hex) override {
    if (mode_ != FaultMode::kRefuseEverywhere) return;
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& blob : blob_sha256_hex) {
      if (std::find(announced_.begin(), announced_.end(), blob) != announced_.end()) continue;
      announced_.push_back(blob);
      if (announced_.size() > kMaxAnnouncedBlobs) announced_.pop_front();
    }
  }
  std::vector<std::string> AnnouncedBlobs() override {
    std::lock_guard<std::mutex> lock(mu_);
    return {announced_.begin(), announced_.end()};
  }

  std::vector<consensus::Attestation> ToSign(const std::string& task_id_hex,
                                             const consensus::Attestation& honest) override {
    std::vector<consensus::Attestation> out = {honest};
    if (mode_ == FaultMode::kCorruptOutput) {
      // One flipped bit of the output: a different result root than honest members compute.
      out[0].result_root[31] ^= 1;
      Log(LogLevel::kWarn, "fault injection: signing a corrupted result", {{"task", task_id_hex}});
    } else if (mode_ == FaultMode::kWrongTraceRoot) {
      // The right result with a made-up trace: cheap to sign, no execution trace behind it.
      out[0].trace_root[0] ^= 0x5a;
      Log(LogLevel::kWarn, "fault injection: signing a wrong trace root", {{"task", task_id_hex}});
    } else if (mode_ == FaultMode::kEquivocate) {
      consensus::Attestation other = honest;
      other.result_root[0] ^= 0x80;
      out.push_back(other);
      Log(LogLevel::kWarn, "fault injection: signing two results", {{"task", task_id_hex}});
    }
    return out;
  }

 private:
  const FaultMode mode_;
  const int64_t delay_ms_;
  std::mutex mu_;
  std::set<std::string> outputs_;      // corrupt-served-outputs: the output blobs it holds
  std::deque<std::string> announced_;  // refuse-everywhere: blobs named by announcements, newest last
};

}  // namespace

std::span<const std::string_view> FaultModeNames() { return kNames; }

StatusOr<FaultMode> ParseFaultMode(std::string_view name) {
  if (name.empty()) return FaultMode::kNone;
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return kModes[i];
  }
  std::string list;
  for (std::string_view n : kNames) list += (list.empty() ? "" : ", ") + std::string(n);
  return InvalidArgument("unknown fault mode '" + std::string(name.substr(0, 64)) + "' (one of " + list + ")");
}

std::unique_ptr<FaultInjector> NewFaultInjector(FaultMode mode, int64_t delay_ms) {
  if (mode == FaultMode::kNone) return std::make_unique<Honest>();
  return std::make_unique<Faulty>(mode, delay_ms);
}

}  // namespace consensor::node
