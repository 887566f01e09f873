#include "node/telemetry/protobuf_log.h"

#include <chrono>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "node/telemetry/log.h"

namespace consensor::node {

bool LogLineBudget::Allow(int64_t now_ms, uint64_t* refused_before) {
  std::lock_guard<std::mutex> lock(mu_);
  if (window_start_ms_ == INT64_MIN || now_ms - window_start_ms_ >= window_ms_ || now_ms < window_start_ms_) {
    window_start_ms_ = now_ms;
    used_ = 0;
  }
  if (used_ >= lines_) {
    ++refused_;
    return false;
  }
  ++used_;
  *refused_before = refused_;
  refused_ = 0;
  return true;
}

namespace {

constexpr size_t kMaxMessageBytes = 256;  // the message may quote what the sender sent

LogLineBudget& ProtobufBudget() {
  static LogLineBudget budget(kProtobufLinesPerMinute, 60 * 1000);
  return budget;
}

void HandleProtobufLog(google::protobuf::LogLevel level, const char* filename, int line, const std::string& message) {
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  uint64_t refused = 0;
  if (!ProtobufBudget().Allow(now_ms, &refused)) return;
  const LogLevel ours = level >= google::protobuf::LOGLEVEL_ERROR ? LogLevel::kError : LogLevel::kWarn;
  Log(ours, "protobuf",
      {{"message", message.substr(0, kMaxMessageBytes)},
       {"source", std::string(filename ? filename : "") + ":" + std::to_string(line)},
       {"left_out_before", refused}});
}

}  // namespace

void RouteProtobufLogs() { google::protobuf::SetLogHandler(&HandleProtobufLog); }

}  // namespace consensor::node
