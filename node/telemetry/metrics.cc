#include "node/telemetry/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <variant>

namespace consensor::node {
namespace {

// Metric names and labels are constants in our code, so a bad one is a programming error that
// should fail loudly at startup rather than produce an exposition Prometheus rejects.
[[noreturn]] void MetricsCheckFailed(const std::string& what) {
  std::fprintf(stderr, "FATAL: metrics registry: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void CheckName(const std::string& name, std::string_view type) {
  constexpr std::string_view kPrefix = "consensor_";
  bool ok = name.size() > kPrefix.size() && name.compare(0, kPrefix.size(), kPrefix) == 0;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) ok = false;
  }
  if (!ok) MetricsCheckFailed("metric name '" + name + "' must match consensor_[a-z0-9_]+");
  const bool total = EndsWith(name, "_total");
  if (type == "counter" && !total) MetricsCheckFailed("counter '" + name + "' must end in _total");
  if (type != "counter" && total) MetricsCheckFailed(std::string(type) + " '" + name + "' must not end in _total");
  if (type == "histogram" && (EndsWith(name, "_bucket") || EndsWith(name, "_sum") || EndsWith(name, "_count"))) {
    MetricsCheckFailed("histogram '" + name + "' must not end in _bucket, _sum or _count");
  }
}

void CheckLabels(const std::string& name, const MetricsRegistry::Labels& labels, bool histogram) {
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string& label = labels[i].first;
    bool ok = !label.empty() && !(label[0] >= '0' && label[0] <= '9') && label.rfind("__", 0) != 0;
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) ok = false;
    }
    if (!ok) MetricsCheckFailed("label name '" + label + "' of '" + name + "' is invalid");
    if (histogram && label == "le") MetricsCheckFailed("histogram '" + name + "' may not use the label 'le'");
    for (size_t j = 0; j < i; ++j) {
      if (labels[j].first == label) MetricsCheckFailed("label '" + label + "' repeated in '" + name + "'");
    }
  }
}

// Numbers as Prometheus (Go's ParseFloat) reads them: integers without an exponent while they
// are exact, otherwise the shortest round-trip form, and NaN / +Inf / -Inf.
std::string FormatNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  constexpr double kExactIntLimit = 9007199254740992.0;  // 2^53
  if (v == std::trunc(v) && std::fabs(v) <= kExactIntLimit) {
    return std::to_string(static_cast<int64_t>(v));
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general);
  if (res.ec != std::errc()) return "NaN";
  return std::string(buf, res.ptr);
}

std::string EscapeLabelValue(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"} with an optional extra label (le) last; empty when there are no labels.
std::string RenderLabels(const MetricsRegistry::Labels& labels, const char* extra_name = nullptr,
                         const std::string& extra_value = "") {
  if (labels.empty() && extra_name == nullptr) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k + "=\"" + EscapeLabelValue(v) + "\"";
  }
  if (extra_name != nullptr) {
    if (!first) out += ',';
    out += std::string(extra_name) + "=\"" + EscapeLabelValue(extra_value) + "\"";
  }
  out += '}';
  return out;
}

// Sorted, de-duplicated, finite bounds; +Inf is implicit.
std::vector<double> NormalizeBounds(std::vector<double> bounds) {
  bounds.erase(std::remove_if(bounds.begin(), bounds.end(), [](double b) { return !std::isfinite(b); }), bounds.end());
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  return bounds;
}

}  // namespace

void Counter::Increment(double by) {
  // Counters only go up; a negative or NaN increment would make rate() nonsense.
  if (!(by >= 0)) return;
  double cur = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(cur, cur + by, std::memory_order_relaxed)) {
  }
}

double Counter::Value() const { return value_.load(std::memory_order_relaxed); }

void Gauge::Set(double v) { value_.store(v, std::memory_order_relaxed); }

void Gauge::Add(double by) {
  double cur = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(cur, cur + by, std::memory_order_relaxed)) {
  }
}

double Gauge::Value() const { return value_.load(std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(NormalizeBounds(std::move(upper_bounds))), counts_(upper_bounds_.size(), 0) {}

void Histogram::Observe(double v) {
  if (std::isnan(v)) return;  // a NaN would poison _sum forever
  // Buckets are "less than or equal": the first bound >= v.
  const size_t idx =
      static_cast<size_t>(std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), v) - upper_bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  if (idx < counts_.size()) ++counts_[idx];
  ++count_;
  sum_ += v;
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snap;
  snap.upper_bounds = upper_bounds_;
  snap.cumulative_counts.resize(upper_bounds_.size());
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t running = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    running += counts_[i];
    snap.cumulative_counts[i] = running;
  }
  snap.count = count_;
  snap.sum = sum_;
  return snap;
}

struct MetricsRegistry::Family {
  std::string name;
  std::string help;
  std::string type;  // counter | gauge | histogram
  using Child = std::variant<std::unique_ptr<Counter>, std::unique_ptr<Gauge>, std::unique_ptr<Histogram>>;
  std::map<Labels, Child> children;  // ordered, so the rendering is stable
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Family* MetricsRegistry::GetFamily(const std::string& name, const std::string& help,
                                                    const char* type) {
  auto it = families_.find(name);
  if (it != families_.end()) {
    if (it->second->type != type) {
      MetricsCheckFailed("'" + name + "' registered as " + it->second->type + " and as " + type);
    }
    return it->second.get();
  }
  CheckName(name, type);
  auto family = std::make_unique<Family>();
  family->name = name;
  family->help = help;
  family->type = type;
  Family* raw = family.get();
  families_.emplace(name, std::move(family));
  return raw;
}

Counter* MetricsRegistry::AddCounter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family* family = GetFamily(name, help, "counter");
  CheckLabels(name, labels, false);
  auto it = family->children.find(labels);
  if (it == family->children.end()) it = family->children.emplace(labels, std::make_unique<Counter>()).first;
  return std::get<std::unique_ptr<Counter>>(it->second).get();
}

Gauge* MetricsRegistry::AddGauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family* family = GetFamily(name, help, "gauge");
  CheckLabels(name, labels, false);
  auto it = family->children.find(labels);
  if (it == family->children.end()) it = family->children.emplace(labels, std::make_unique<Gauge>()).first;
  return std::get<std::unique_ptr<Gauge>>(it->second).get();
}

Histogram* MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                         std::vector<double> upper_bounds, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family* family = GetFamily(name, help, "histogram");
  CheckLabels(name, labels, true);
  auto it = family->children.find(labels);
  if (it == family->children.end()) {
    it = family->children.emplace(labels, std::make_unique<Histogram>(std::move(upper_bounds))).first;
  }
  return std::get<std::unique_ptr<Histogram>>(it->second).get();
}

std::string MetricsRegistry::RenderPrometheusText() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, family] : families_) {
    out += "# HELP " + name + " " + EscapeHelp(family->help) + "\n";
    out += "# TYPE " + name + " " + family->type + "\n";
    for (const auto& [labels, child] : family->children) {
      if (const auto* c = std::get_if<std::unique_ptr<Counter>>(&child)) {
        out += name + RenderLabels(labels) + " " + FormatNumber((*c)->Value()) + "\n";
      } else if (const auto* g = std::get_if<std::unique_ptr<Gauge>>(&child)) {
        out += name + RenderLabels(labels) + " " + FormatNumber((*g)->Value()) + "\n";
      } else if (const auto* h = std::get_if<std::unique_ptr<Histogram>>(&child)) {
        const Histogram::Snapshot snap = (*h)->Read();
        for (size_t i = 0; i < snap.upper_bounds.size(); ++i) {
          out += name + "_bucket" + RenderLabels(labels, "le", FormatNumber(snap.upper_bounds[i])) + " " +
                 std::to_string(snap.cumulative_counts[i]) + "\n";
        }
        out += name + "_bucket" + RenderLabels(labels, "le", "+Inf") + " " + std::to_string(snap.count) + "\n";
        out += name + "_sum" + RenderLabels(labels) + " " + FormatNumber(snap.sum) + "\n";
        out += name + "_count" + RenderLabels(labels) + " " + std::to_string(snap.count) + "\n";
      }
    }
  }
  return out;
}

std::vector<double> DefaultSecondsBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100};
}

}  // namespace consensor::node
