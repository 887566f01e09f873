// The fault-injection seam (node/engine/fault_injection.h): the config names, and what each
// injector answers. The engine's use of it is tested in consensus_engine_test.cc.
#include "node/engine/fault_injection.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace consensor::node {
namespace {

consensus::Attestation Honest() {
  consensus::Attestation a;
  a.task_id[0] = 0x11;
  a.result_root[0] = 0x22;
  a.result_root[31] = 0x33;
  a.trace_root[0] = 0x44;
  a.reference_block = 7;
  return a;
}

TEST(FaultInjectionTest, StaleReferencePicksABlockWhoseSeedIsMined) {
  auto honest = NewFaultInjector(FaultMode::kNone);
  auto stale = NewFaultInjector(FaultMode::kStaleReference);
  EXPECT_EQ(honest->ReferenceBlock(94, 100, 8), 94u);
  // Seed block 90 + 8 + 1 = 99 < head 100.
  EXPECT_EQ(stale->ReferenceBlock(94, 100, 8), 90u);
  EXPECT_EQ(stale->ReferenceBlock(1, 5, 8), 1u);  // too young a chain: honest
}

TEST(FaultInjectionTest, ConfigNamesParseToTheirModes) {
  EXPECT_EQ(std::vector<std::string_view>(FaultModeNames().begin(), FaultModeNames().end()),
            (std::vector<std::string_view>{
                "corrupt-output", "equivocate", "silent", "crash-mid-task", "downgrade-replicas", "wrong-trace-root",
                "slow", "stale-reference", "lazy-copy", "withhold-reveal", "trickle-blobs", "corrupt-served-outputs",
                "cannot-fetch", "refuse-everywhere", "crash-before-unsynced-record", "lose-own-commitment"}));
  EXPECT_EQ(*ParseFaultMode("crash-before-unsynced-record"), FaultMode::kCrashBeforeUnsyncedRecord);
  EXPECT_EQ(*ParseFaultMode("lose-own-commitment"), FaultMode::kLoseOwnCommitment);
  EXPECT_EQ(*ParseFaultMode("refuse-everywhere"), FaultMode::kRefuseEverywhere);
  EXPECT_EQ(*ParseFaultMode("corrupt-served-outputs"), FaultMode::kCorruptServedOutputs);
  EXPECT_EQ(*ParseFaultMode("cannot-fetch"), FaultMode::kCannotFetch);
  EXPECT_EQ(*ParseFaultMode("stale-reference"), FaultMode::kStaleReference);
  EXPECT_EQ(*ParseFaultMode(""), FaultMode::kNone);
  EXPECT_EQ(*ParseFaultMode("corrupt-output"), FaultMode::kCorruptOutput);
  EXPECT_EQ(*ParseFaultMode("equivocate"), FaultMode::kEquivocate);
  EXPECT_EQ(*ParseFaultMode("silent"), FaultMode::kSilent);
  EXPECT_EQ(*ParseFaultMode("crash-mid-task"), FaultMode::kCrashMidTask);
  EXPECT_EQ(*ParseFaultMode("downgrade-replicas"), FaultMode::kDowngradeReplicas);
  EXPECT_EQ(*ParseFaultMode("wrong-trace-root"), FaultMode::kWrongTraceRoot);
  EXPECT_EQ(*ParseFaultMode("slow"), FaultMode::kSlow);
  EXPECT_EQ(*ParseFaultMode("lazy-copy"), FaultMode::kLazyCopy);
  EXPECT_EQ(*ParseFaultMode("withhold-reveal"), FaultMode::kWithholdReveal);
  auto bad = ParseFaultMode("Silent");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      bad.status().message(),
      "unknown fault mode 'Silent' (one of corrupt-output, equivocate, silent, crash-mid-task, "
      "downgrade-replicas, wrong-trace-root, slow, stale-reference, lazy-copy, withhold-reveal, "
      "trickle-blobs, corrupt-served-outputs, cannot-fetch, refuse-everywhere, crash-before-unsynced-record, lose-own-commitment)");
}

// refuse-everywhere: silent, garbage for every blob, refuses and floods peers, and remembers
// the newest announced blob names (bounded); the honest injector does none of it.
TEST(FaultInjectionTest, RefuseEverywhereIsSilentServesGarbageAndRemembersAnnouncedBlobs) {
  auto refuser = NewFaultInjector(FaultMode::kRefuseEverywhere);
  EXPECT_TRUE(refuser->StaySilent("t"));
  EXPECT_TRUE(refuser->CorruptsServedBlob("any"));
  EXPECT_TRUE(refuser->RefusesAndFloodsPeers());
  EXPECT_FALSE(refuser->StallsServedBlobs());
  std::vector<std::string> named;
  for (int i = 0; i < 100; ++i) named.push_back("blob" + std::to_string(i));
  refuser->SawAnnouncedBlobs(named);
  refuser->SawAnnouncedBlobs({"blob99", "blob50"});  // known ones are not added twice
  std::vector<std::string> kept = refuser->AnnouncedBlobs();
  ASSERT_EQ(kept.size(), 64u);
  EXPECT_EQ(kept.front(), "blob36");
  EXPECT_EQ(kept.back(), "blob99");
  auto honest = NewFaultInjector(FaultMode::kNone);
  EXPECT_FALSE(honest->RefusesAndFloodsPeers());
  EXPECT_FALSE(honest->CorruptsServedBlob("any"));
  honest->SawAnnouncedBlobs(named);
  EXPECT_TRUE(honest->AnnouncedBlobs().empty());
  EXPECT_FALSE(NewFaultInjector(FaultMode::kSilent)->RefusesAndFloodsPeers());
  EXPECT_TRUE(NewFaultInjector(FaultMode::kSilent)->AnnouncedBlobs().empty());
}

TEST(FaultInjectionTest, TheHonestInjectorChangesNothing) {
  auto honest = NewFaultInjector(FaultMode::kNone);
  honest->BeforeAttesting("t");  // returns
  EXPECT_FALSE(honest->StaySilent("t"));
  EXPECT_FALSE(honest->WithholdsReveal("t"));
  EXPECT_FALSE(honest->CopiesRevealedVotes());
  EXPECT_TRUE(NewFaultInjector(FaultMode::kWithholdReveal)->WithholdsReveal("t"));
  EXPECT_FALSE(NewFaultInjector(FaultMode::kWithholdReveal)->StaySilent("t"));
  EXPECT_FALSE(NewFaultInjector(FaultMode::kEquivocate)->WithholdsReveal("t"));
  EXPECT_EQ(*ParseFaultMode("trickle-blobs"), FaultMode::kTrickleBlobs);
  EXPECT_TRUE(NewFaultInjector(FaultMode::kTrickleBlobs)->StallsServedBlobs());
  EXPECT_FALSE(honest->StallsServedBlobs());
  EXPECT_FALSE(NewFaultInjector(FaultMode::kSlow)->StallsServedBlobs());
  const std::vector<consensus::Attestation> signed_ = honest->ToSign("t", Honest());
  ASSERT_EQ(signed_.size(), 1u);
  EXPECT_EQ(signed_[0].result_root, Honest().result_root);
  EXPECT_EQ(signed_[0].trace_root, Honest().trace_root);
}

TEST(FaultInjectionTest, EachModeMisbehavesAtItsOwnPointOnly) {
  auto corrupt = NewFaultInjector(FaultMode::kCorruptOutput);
  corrupt->BeforeAttesting("t");
  EXPECT_FALSE(corrupt->StaySilent("t"));
  std::vector<consensus::Attestation> out = corrupt->ToSign("t", Honest());
  ASSERT_EQ(out.size(), 1u);
  consensus::Attestation flipped = Honest();
  flipped.result_root[31] ^= 1;
  EXPECT_EQ(out[0].result_root, flipped.result_root);
  EXPECT_EQ(out[0].trace_root, Honest().trace_root);
  EXPECT_EQ(out[0].task_id, Honest().task_id);

  auto equivocate = NewFaultInjector(FaultMode::kEquivocate);
  EXPECT_FALSE(equivocate->StaySilent("t"));
  out = equivocate->ToSign("t", Honest());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].result_root, Honest().result_root);
  consensus::Attestation other = Honest();
  other.result_root[0] ^= 0x80;
  EXPECT_EQ(out[1].result_root, other.result_root);

  auto silent = NewFaultInjector(FaultMode::kSilent);
  silent->BeforeAttesting("t");
  EXPECT_TRUE(silent->StaySilent("t"));

  // Slow only waits before attesting (here 0 ms), then signs the honest attestation.
  auto slow = NewFaultInjector(FaultMode::kSlow, 0);
  slow->BeforeAttesting("t");
  EXPECT_FALSE(slow->StaySilent("t"));
  out = slow->ToSign("t", Honest());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].result_root, Honest().result_root);
  EXPECT_EQ(out[0].trace_root, Honest().trace_root);

  auto crash = NewFaultInjector(FaultMode::kCrashMidTask);
  EXPECT_FALSE(crash->StaySilent("t"));
  EXPECT_EQ(crash->ToSign("t", Honest()).size(), 1u);

  // Only the downgrading entry node touches replication, and it signs honestly.
  for (FaultMode mode : {FaultMode::kNone, FaultMode::kCorruptOutput, FaultMode::kSilent}) {
    uint32_t replicas = 5, quorum = 3;
    NewFaultInjector(mode)->BeforeAnnouncing(&replicas, &quorum);
    EXPECT_EQ(replicas, 5u);
    EXPECT_EQ(quorum, 3u);
  }
  auto trace = NewFaultInjector(FaultMode::kWrongTraceRoot);
  out = trace->ToSign("t", Honest());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].result_root, Honest().result_root);
  EXPECT_NE(out[0].trace_root, Honest().trace_root);

  auto downgrade = NewFaultInjector(FaultMode::kDowngradeReplicas);
  uint32_t replicas = 5, quorum = 3;
  downgrade->BeforeAnnouncing(&replicas, &quorum);
  EXPECT_EQ(replicas, 1u);
  EXPECT_EQ(quorum, 1u);
  EXPECT_FALSE(downgrade->StaySilent("t"));
  EXPECT_EQ(downgrade->ToSign("t", Honest())[0].result_root, Honest().result_root);
}

TEST(FaultInjectionTest, CrashMidTaskExitsWithCode86) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto crash = NewFaultInjector(FaultMode::kCrashMidTask);
  EXPECT_EXIT(crash->BeforeAttesting("t"), ::testing::ExitedWithCode(86), "crashing before attesting");
}

}  // namespace
}  // namespace consensor::node
