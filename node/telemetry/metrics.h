// Prometheus metrics: counters, gauges and histograms, rendered in the text exposition
// format (version 0.0.4). Names carry the consensor_ prefix and _total/_seconds/_bytes
// suffixes; the registry rejects anything else so the naming stays consistent.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace consensor::node {

class Counter {
 public:
  void Increment(double by = 1.0);
  double Value() const;

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v);
  void Add(double by);
  double Value() const;

 private:
  std::atomic<double> value_{0.0};
};

// Cumulative buckets with fixed upper bounds, plus _sum and _count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v);
  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative_counts;  // same length as upper_bounds, then +Inf == count
    uint64_t count = 0;
    double sum = 0.0;
  };
  Snapshot Read() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> upper_bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  uint64_t count_ = 0;
  double sum_ = 0.0;
};

// Owns every metric. Registration happens at startup; lookups return stable pointers.
// A metric may have one label set (e.g. {"code","INVALID_ARGUMENT"}) per child.
class MetricsRegistry {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  MetricsRegistry();
  ~MetricsRegistry();  // out of line: Family is incomplete here
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Names must match consensor_[a-z0-9_]+ and counters must end in _total. Calling again with
  // the same name and labels returns the same object; the help text comes from the first call.
  Counter* AddCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge* AddGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram* AddHistogram(const std::string& name, const std::string& help, std::vector<double> upper_bounds,
                          const Labels& labels = {});

  // The whole exposition, "# HELP" and "# TYPE" once per family, families sorted by name.
  std::string RenderPrometheusText() const;

 private:
  struct Family;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Family>> families_;
  Family* GetFamily(const std::string& name, const std::string& help, const char* type);
};

// Bucket bounds for durations from 100 µs to ~100 s.
std::vector<double> DefaultSecondsBuckets();

}  // namespace consensor::node
