// RetentionSweeper against the real RocksDB store: what a sweep deletes, what it never deletes
// (pinned tasks' blobs), and a sweep cut short between its phases (as by kill -9) leaving a
// store whose every task still has its blobs.
#include "node/engine/retention_sweeper.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "node/engine/task_manager.h"
#include "node/storage/store.h"
#include "node/telemetry/metrics.h"
#include "node/telemetry/node_metrics.h"

namespace consensor::node {
namespace {

constexpr int64_t kHour = 3600 * 1000;
constexpr int64_t kNow = 1000 * kHour;

class RetentionSweeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "consensor_retention_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Open();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open() {
    store_.reset();
    auto s = OpenRocksDbStore(dir_ + "/db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  std::unique_ptr<RetentionSweeper> NewSweeper(int64_t max_bytes = 0) {
    RetentionOptions o;
    o.retain_ms = 24 * kHour;
    o.max_bytes = max_bytes;
    o.db_path = dir_ + "/db";
    o.now_unix_ms = [] { return kNow; };
    return std::make_unique<RetentionSweeper>(store_.get(), &guard_, nullptr, &metrics_, o);
  }
  std::string Blob(const std::string& content) {
    auto info =
        store_->PutBlob(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(content.data()), content.size()));
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return ToHex(info->sha256);
  }
  bool HasBlob(const std::string& hex) { return store_->BlobSize(*Hash256FromHex(hex)).ok(); }
  bool HasTask(const std::string& id) { return store_->GetTask(id).value().has_value(); }
  void PutTask(const std::string& id, v1::TaskState state, int64_t finished, const std::string& graph,
               const std::string& input, const std::string& output, bool certified, bool final) {
    v1::Task t;
    t.set_task_id(id);
    t.set_state(state);
    t.mutable_spec()->set_graph_sha256(graph);
    (*t.mutable_spec()->mutable_inputs())["x"] = input;
    t.set_created_unix_ms(finished - 1000);
    t.set_finished_unix_ms(finished);
    // As the task manager stores them: the result in its own record, not in the task's.
    std::optional<std::string> result;
    if (!output.empty()) {
      v1::TaskResult r;
      r.add_outputs()->set_blob_sha256(output);
      result = r.SerializeAsString();
    }
    if (certified) {
      t.mutable_consensus()->mutable_certificate()->set_task_id(id);
      t.mutable_consensus()->set_final(final);
    }
    ASSERT_TRUE(store_->PutTask(id, t.SerializeAsString(), result).ok());
  }
  // Every stored task names only stored blobs.
  void ExpectConsistent() {
    ASSERT_TRUE(store_
                    ->ForEachTask([&](const std::string& id, const std::string& record) -> Status {
                      v1::Task t;
                      EXPECT_TRUE(t.ParseFromString(record));
                      EXPECT_TRUE(HasBlob(t.spec().graph_sha256())) << id;
                      for (const auto& [name, hex] : t.spec().inputs()) EXPECT_TRUE(HasBlob(hex)) << id;
                      auto result = store_->GetResult(id);
                      EXPECT_TRUE(result.ok());
                      v1::TaskResult r;
                      if (result.ok() && result->has_value()) {
                        EXPECT_TRUE(r.ParseFromString(**result));
                      }
                      for (const auto& o : r.outputs()) EXPECT_TRUE(HasBlob(o.blob_sha256())) << id;
                      return OkStatus();
                    })
                    .ok());
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  BlobReferenceGuard guard_;
  MetricsRegistry metrics_;
};

TEST_F(RetentionSweeperTest, PinnedTasksKeepTheirBlobsAndExpiredOnesGo) {
  const std::string graph = Blob("graph bytes (not a parseable graph: no weights)");
  const std::string in1 = Blob("in1"), out1 = Blob("out1"), in2 = Blob("in2"), out2 = Blob("out2"), in3 = Blob("in3");
  const std::string in4 = Blob("in4"), out4 = Blob("out4");
  // Finished long ago, certified and final: expired.
  PutTask("final-old", v1::TASK_STATE_SUCCEEDED, kNow - 48 * kHour, graph, in1, out1, true, true);
  // Certified long ago but its challenge window is open: pinned.
  PutTask("in-window", v1::TASK_STATE_SUCCEEDED, kNow - 48 * kHour, graph, in2, out2, true, false);
  // Not finished: pinned.
  PutTask("queued", v1::TASK_STATE_QUEUED, kNow - 48 * kHour, graph, in3, "", false, false);
  // Finished recently: kept by age.
  PutTask("recent", v1::TASK_STATE_SUCCEEDED, kNow - kHour, graph, in4, out4, false, false);
  auto sweeper = NewSweeper();
  const std::string loose = Blob("uploaded after the node started, never used");
  auto plan = sweeper->SweepOnce();
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_FALSE(HasTask("final-old"));
  EXPECT_FALSE(store_->GetResult("final-old").value().has_value());
  EXPECT_FALSE(HasBlob(in1));
  EXPECT_FALSE(HasBlob(out1));
  for (const char* id : {"in-window", "queued", "recent"}) EXPECT_TRUE(HasTask(id)) << id;
  for (const std::string& b : {graph, in2, out2, in3, in4, out4}) EXPECT_TRUE(HasBlob(b)) << b;
  // The unreferenced upload survives its first sweep (grace), not its second.
  EXPECT_TRUE(HasBlob(loose));
  ASSERT_TRUE(sweeper->SweepOnce().ok());
  EXPECT_FALSE(HasBlob(loose));
  ExpectConsistent();
  const Store::Stats stats = store_->GetStats();
  EXPECT_EQ(stats.task_count, 3);
  EXPECT_GT(stats.task_bytes, 0);
  EXPECT_GT(stats.result_bytes, 0);
  const std::string text = metrics_.RenderPrometheusText();
  EXPECT_NE(text.find("consensor_retention_deleted_tasks_total 1"), std::string::npos) << text;
  EXPECT_NE(text.find("consensor_retention_deleted_blobs_total 3"), std::string::npos) << text;
  EXPECT_NE(text.find("consensor_storage_bytes{category=\"blobs\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("consensor_storage_bytes{category=\"other\"}"), std::string::npos) << text;

  // Once final, the in-window task goes too; the queued task's blobs stay whatever happens.
  PutTask("in-window", v1::TASK_STATE_SUCCEEDED, kNow - 48 * kHour, graph, in2, out2, true, true);
  ASSERT_TRUE(sweeper->SweepOnce().ok());
  EXPECT_FALSE(HasTask("in-window"));
  EXPECT_FALSE(HasBlob(out2));
  EXPECT_TRUE(HasBlob(in3));
  EXPECT_TRUE(HasBlob(graph));
  ExpectConsistent();
}

TEST_F(RetentionSweeperTest, OverTheQuotaTheOldestFinishedTasksGoFirst) {
  const std::string graph = Blob("g");
  std::vector<std::string> outputs;
  for (int i = 0; i < 6; ++i) {
    outputs.push_back(Blob(std::string(100000, static_cast<char>('a' + i))));
    // Finished an hour apart, all within the age limit: only the quota can delete them.
    PutTask("t" + std::to_string(i), v1::TASK_STATE_SUCCEEDED, kNow - (10 - i) * kHour, graph, graph, outputs.back(),
            false, false);
  }
  // About 602 kB stored; a quota of 520 kB sweeps (over 468 kB) down to 416 kB: the two oldest go.
  auto sweeper = NewSweeper(/*max_bytes=*/520000);
  auto plan = sweeper->SweepOnce();
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->delete_tasks, (std::vector<std::string>{"t0", "t1"}));
  EXPECT_FALSE(HasBlob(outputs[0]));
  EXPECT_FALSE(HasBlob(outputs[1]));
  for (int i = 2; i < 6; ++i) EXPECT_TRUE(HasBlob(outputs[static_cast<size_t>(i)])) << i;
  EXPECT_TRUE(HasBlob(graph));
  const Store::Stats stats = store_->GetStats();
  EXPECT_LE(stats.blob_bytes + stats.task_bytes + stats.result_bytes, 416000);
  ExpectConsistent();
}

TEST_F(RetentionSweeperTest, SweepCutShortBetweenPhasesLeavesAConsistentStoreAndTheNextOneFinishes) {
  const std::string graph = Blob("g");
  const std::string in1 = Blob("in1"), out1 = Blob("out1"), in2 = Blob("in2");
  PutTask("old", v1::TASK_STATE_FAILED, kNow - 48 * kHour, graph, in1, out1, false, false);
  PutTask("queued", v1::TASK_STATE_QUEUED, kNow, graph, in2, "", false, false);
  {
    auto sweeper = NewSweeper();
    sweeper->SetBetweenPhasesHookForTesting([] { return Aborted("killed mid-sweep"); });
    auto plan = sweeper->SweepOnce();
    EXPECT_EQ(plan.status().code(), StatusCode::kAborted);
  }
  EXPECT_FALSE(HasTask("old"));
  EXPECT_TRUE(HasBlob(in1));  // not yet deleted: garbage, but nothing points at a missing blob
  Open();                     // restart
  ExpectConsistent();
  EXPECT_TRUE(HasTask("queued"));
  // The restarted node's first sweep collects them: they were stored before it started.
  auto sweeper = NewSweeper();
  ASSERT_TRUE(sweeper->SweepOnce().ok());
  EXPECT_FALSE(HasBlob(in1));
  EXPECT_FALSE(HasBlob(out1));
  EXPECT_TRUE(HasBlob(in2));
  EXPECT_TRUE(HasBlob(graph));
  ExpectConsistent();
}

// A client that uploads content the node already holds unreferenced (an earlier task's input,
// say) gets a whole sweep interval again before its task must name it, also when a sweep that
// planned the content's deletion is under way (docs/NODE.md, "Disk budget and retention").
TEST_F(RetentionSweeperTest, ContentStoredAgainGetsItsGraceAgain) {
  const std::string content = "uploaded, unreferenced, then uploaded again";
  auto sweeper = NewSweeper();
  const std::string loose = Blob(content);
  ASSERT_TRUE(sweeper->SweepOnce().ok());
  EXPECT_TRUE(HasBlob(loose));  // its first grace
  Blob(content);
  ASSERT_TRUE(sweeper->SweepOnce().ok());
  EXPECT_TRUE(HasBlob(loose)) << "stored again: its grace starts over";
  // This sweep plans the deletion; the content is stored again before the blob phase.
  sweeper->SetBetweenPhasesHookForTesting([&] {
    Blob(content);
    return OkStatus();
  });
  auto plan = sweeper->SweepOnce();
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->delete_blobs.size(), 1u);
  EXPECT_TRUE(HasBlob(loose)) << "stored again after the plan: kept";
  sweeper->SetBetweenPhasesHookForTesting(nullptr);
  ASSERT_TRUE(sweeper->SweepOnce().ok());
  EXPECT_TRUE(HasBlob(loose));
  ASSERT_TRUE(sweeper->SweepOnce().ok());
  EXPECT_FALSE(HasBlob(loose));
  EXPECT_NE(metrics_.RenderPrometheusText().find("consensor_retention_deleted_blobs_total 1"), std::string::npos);
}

// An upload under way when a sweep starts and committed after it is not collected by the next
// sweep: its grace counts from the commit.
TEST_F(RetentionSweeperTest, AnUploadThatStraddlesASweepsStartGetsTheNextSweepsGrace) {
  auto sweeper = NewSweeper();
  ASSERT_TRUE(sweeper->SweepOnce().ok());
  auto w = store_->NewBlobWriter(std::nullopt, 1 << 20);
  ASSERT_TRUE(w.ok());
  const std::string content = "a slow upload";
  ASSERT_TRUE(
      (*w)->Append(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(content.data()), content.size())).ok());
  ASSERT_TRUE(sweeper->SweepOnce().ok());  // starts while the upload is under way
  auto committed = (*w)->Commit();
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  const std::string blob = ToHex(committed->sha256);
  ASSERT_TRUE(sweeper->SweepOnce().ok());
  EXPECT_TRUE(HasBlob(blob)) << "the first sweep after its commit collected it";
  ASSERT_TRUE(sweeper->SweepOnce().ok());
  EXPECT_FALSE(HasBlob(blob));
}

// Through the task manager (as the node wires it): a task that is pinned by the time the sweep
// reaches it stays, with its blobs.
TEST_F(RetentionSweeperTest, TaskManagerDeletesOnlyUnpinnedTasks) {
  NodeMetrics node_metrics(&metrics_);
  TaskManager tasks(store_.get(), &node_metrics, TaskManagerOptions{});
  const std::string pinned_key(32, 'p'), done_key(32, 'd');
  const std::string graph = Blob("g"), in1 = Blob("in1");
  PutTask(pinned_key, v1::TASK_STATE_QUEUED, kNow - 48 * kHour, graph, in1, "", false, false);
  PutTask(done_key, v1::TASK_STATE_FAILED, kNow - 48 * kHour, graph, in1, "", false, false);
  EXPECT_EQ(tasks.DeleteUnpinned(pinned_key).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(tasks.DeleteUnpinned(done_key).ok());
  EXPECT_TRUE(tasks.DeleteUnpinned(done_key).ok());  // already gone
  EXPECT_EQ(tasks.DeleteUnpinned("short").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasTask(pinned_key));
  EXPECT_FALSE(HasTask(done_key));

  // A plan made while the task was finished, carried out after it was requeued (pinned again).
  PutTask(done_key, v1::TASK_STATE_FAILED, kNow - 48 * kHour, graph, Blob("in2"), "", false, false);
  auto sweeper = NewSweeper();
  sweeper->SetTaskDeleter([&](const std::string& key) {
    if (key == done_key) PutTask(done_key, v1::TASK_STATE_QUEUED, kNow, graph, Blob("in2"), "", false, false);
    return tasks.DeleteUnpinned(key);
  });
  ASSERT_TRUE(sweeper->SweepOnce().ok());
  EXPECT_TRUE(HasTask(done_key));
  EXPECT_TRUE(HasBlob(Blob("in2")));
  ExpectConsistent();
}

TEST_F(RetentionSweeperTest, PinningFollowsTheTaskState) {
  v1::Task t;
  t.set_state(v1::TASK_STATE_QUEUED);
  EXPECT_TRUE(IsRetentionPinned(t));
  t.set_state(v1::TASK_STATE_RUNNING);
  EXPECT_TRUE(IsRetentionPinned(t));
  t.set_state(v1::TASK_STATE_CERTIFYING);
  EXPECT_TRUE(IsRetentionPinned(t));
  t.set_state(v1::TASK_STATE_FAILED);
  EXPECT_FALSE(IsRetentionPinned(t));
  t.set_state(v1::TASK_STATE_SUCCEEDED);
  EXPECT_FALSE(IsRetentionPinned(t));  // local mode: nothing to dispute
  t.mutable_consensus()->mutable_certificate()->set_task_id("x");
  EXPECT_TRUE(IsRetentionPinned(t));  // challenge window open
  t.mutable_consensus()->set_final(true);
  EXPECT_FALSE(IsRetentionPinned(t));
  t.mutable_consensus()->clear_certificate();
  t.mutable_consensus()->set_final(false);
  t.mutable_consensus()->set_disputed(true);
  EXPECT_TRUE(IsRetentionPinned(t));
}

}  // namespace
}  // namespace consensor::node
