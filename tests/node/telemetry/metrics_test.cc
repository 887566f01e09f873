#include "node/telemetry/metrics.h"

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace consensor::node {
namespace {

TEST(MetricsTest, CounterAndGauge) {
  Counter c;
  c.Increment();
  c.Increment(2.5);
  c.Increment(-1);  // ignored: counters never go down
  c.Increment(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(c.Value(), 3.5);
  Gauge g;
  g.Set(10);
  g.Add(-3);
  g.Add(0.5);
  EXPECT_EQ(g.Value(), 7.5);
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndInclusive) {
  Histogram h({1, 0.5, 2, 2, std::numeric_limits<double>::infinity()});  // unsorted, duplicate, +Inf
  h.Observe(0.5);                                                        // le=0.5 is inclusive
  h.Observe(0.7);
  h.Observe(2);
  h.Observe(100);
  h.Observe(std::numeric_limits<double>::quiet_NaN());  // dropped
  const Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.upper_bounds, (std::vector<double>{0.5, 1, 2}));
  EXPECT_EQ(s.cumulative_counts, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.sum, 103.2);
}

TEST(MetricsTest, RenderGolden) {
  MetricsRegistry r;
  r.AddGauge("consensor_queue_depth", "Tasks waiting to execute.")->Set(3);
  Counter* ok = r.AddCounter("consensor_rpc_requests_total", "RPCs handled, by method and code.",
                             {{"method", "SubmitTask"}, {"code", "OK"}});
  Counter* bad = r.AddCounter("consensor_rpc_requests_total", "ignored: help comes from the first call",
                              {{"method", "SubmitTask"}, {"code", "INVALID_ARGUMENT"}});
  ok->Increment(5);
  bad->Increment();
  // Same name and labels returns the same object.
  EXPECT_EQ(r.AddCounter("consensor_rpc_requests_total", "", {{"method", "SubmitTask"}, {"code", "OK"}}), ok);
  Histogram* h =
      r.AddHistogram("consensor_task_execution_seconds", "Wall time of one task execution.", {0.0001, 0.5, 1, 2.5});
  h->Observe(0.25);
  h->Observe(0.75);
  h->Observe(7);
  r.AddCounter("consensor_blob_bytes_total", "Bytes of blobs uploaded.\nSecond line \\ backslash.")
      ->Increment(12345678901.0);
  r.AddGauge("consensor_weird_labels", "Label escaping.", {{"path", "a\"b\\c\nd"}})->Set(-0.5);

  EXPECT_EQ(r.RenderPrometheusText(),
            "# HELP consensor_blob_bytes_total Bytes of blobs uploaded.\\nSecond line \\\\ backslash.\n"
            "# TYPE consensor_blob_bytes_total counter\n"
            "consensor_blob_bytes_total 12345678901\n"
            "# HELP consensor_queue_depth Tasks waiting to execute.\n"
            "# TYPE consensor_queue_depth gauge\n"
            "consensor_queue_depth 3\n"
            "# HELP consensor_rpc_requests_total RPCs handled, by method and code.\n"
            "# TYPE consensor_rpc_requests_total counter\n"
            "consensor_rpc_requests_total{method=\"SubmitTask\",code=\"INVALID_ARGUMENT\"} 1\n"
            "consensor_rpc_requests_total{method=\"SubmitTask\",code=\"OK\"} 5\n"
            "# HELP consensor_task_execution_seconds Wall time of one task execution.\n"
            "# TYPE consensor_task_execution_seconds histogram\n"
            "consensor_task_execution_seconds_bucket{le=\"0.0001\"} 0\n"
            "consensor_task_execution_seconds_bucket{le=\"0.5\"} 1\n"
            "consensor_task_execution_seconds_bucket{le=\"1\"} 2\n"
            "consensor_task_execution_seconds_bucket{le=\"2.5\"} 2\n"
            "consensor_task_execution_seconds_bucket{le=\"+Inf\"} 3\n"
            "consensor_task_execution_seconds_sum 8\n"
            "consensor_task_execution_seconds_count 3\n"
            "# HELP consensor_weird_labels Label escaping.\n"
            "# TYPE consensor_weird_labels gauge\n"
            "consensor_weird_labels{path=\"a\\\"b\\\\c\\nd\"} -0.5\n");
}

TEST(MetricsTest, RenderSpecialNumbersAndLabeledHistogram) {
  MetricsRegistry r;
  r.AddGauge("consensor_a", "a")->Set(std::numeric_limits<double>::quiet_NaN());
  r.AddGauge("consensor_b", "b")->Set(-std::numeric_limits<double>::infinity());
  r.AddGauge("consensor_c", "c")->Set(1e300);
  r.AddGauge("consensor_d", "d")->Set(0.1);
  Histogram* h = r.AddHistogram("consensor_e_seconds", "e", {1}, {{"backend", "cpu"}});
  h->Observe(0.5);
  const std::string text = r.RenderPrometheusText();
  EXPECT_NE(text.find("consensor_a NaN\n"), std::string::npos) << text;
  EXPECT_NE(text.find("consensor_b -Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("consensor_c 1e+300\n"), std::string::npos) << text;
  EXPECT_NE(text.find("consensor_d 0.1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("consensor_e_seconds_bucket{backend=\"cpu\",le=\"1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("consensor_e_seconds_bucket{backend=\"cpu\",le=\"+Inf\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("consensor_e_seconds_sum{backend=\"cpu\"} 0.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("consensor_e_seconds_count{backend=\"cpu\"} 1\n"), std::string::npos) << text;
}

TEST(MetricsTest, DefaultSecondsBuckets) {
  const std::vector<double> b = DefaultSecondsBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.front(), 0.0001);
  EXPECT_GE(b.back(), 100.0);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
}

TEST(MetricsDeathTest, BadNamesAbort) {
  MetricsRegistry r;
  EXPECT_DEATH(r.AddCounter("consensor_tasks", "no _total"), "must end in _total");
  EXPECT_DEATH(r.AddGauge("tasks_running", "no prefix"), "consensor_");
  EXPECT_DEATH(r.AddGauge("consensor_Tasks", "upper case"), "consensor_");
  EXPECT_DEATH(r.AddGauge("consensor_x_total", "gauge named like a counter"), "must not end in _total");
  EXPECT_DEATH(r.AddCounter("consensor_x_total", "bad label", {{"bad-label", "v"}}), "label");
  EXPECT_DEATH(r.AddHistogram("consensor_h_seconds", "le label", {1}, {{"le", "1"}}), "le");
  r.AddGauge("consensor_g", "g");
  EXPECT_DEATH(r.AddHistogram("consensor_g", "type clash", {1}), "registered as gauge");
}

TEST(MetricsTest, ConcurrentUpdatesAndRendering) {
  MetricsRegistry r;
  Counter* c = r.AddCounter("consensor_ops_total", "ops");
  Gauge* g = r.AddGauge("consensor_level", "level");
  Histogram* h = r.AddHistogram("consensor_op_seconds", "op", DefaultSecondsBuckets());
  constexpr int kThreads = 4;
  constexpr int kIters = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        c->Increment();
        g->Add(1);
        g->Add(-1);
        h->Observe(0.001 * (i % 10));
        // Registration and rendering race with updates, too.
        if (i % 1000 == 0) {
          r.AddCounter("consensor_labeled_total", "l", {{"t", std::to_string(t)}})->Increment();
          (void)r.RenderPrometheusText();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(c->Value(), kThreads * kIters);
  EXPECT_EQ(g->Value(), 0);
  EXPECT_EQ(h->Read().count, static_cast<uint64_t>(kThreads * kIters));
  const std::string text = r.RenderPrometheusText();
  EXPECT_NE(text.find("consensor_ops_total 20000\n"), std::string::npos);
  EXPECT_NE(text.find("consensor_op_seconds_count 20000\n"), std::string::npos);
  EXPECT_NE(text.find("consensor_labeled_total{t=\"3\"} 5\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace consensor::node
