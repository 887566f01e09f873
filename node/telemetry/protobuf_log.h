// libprotobuf writes a line to stderr for each string field with invalid UTF-8 it parses, and
// those bytes come from peers and clients: unrouted, one hostile sender floods the operator's
// log. RouteProtobufLogs sends libprotobuf's lines to the node's structured log instead, at
// most kProtobufLinesPerMinute of them a minute; the next line that goes out says how many
// were left out.
#pragma once

#include <cstdint>
#include <mutex>

namespace consensor::node {

inline constexpr int kProtobufLinesPerMinute = 10;

// Installs the handler for the whole process (libprotobuf has one). Call once at startup.
void RouteProtobufLogs();

// A fixed-window budget of lines: Allow says whether a line may go out now, and on yes how many
// were refused since the last one that went out. Thread-safe.
class LogLineBudget {
 public:
  LogLineBudget(int lines_per_window, int64_t window_ms) : lines_(lines_per_window), window_ms_(window_ms) {}
  bool Allow(int64_t now_ms, uint64_t* refused_before);

 private:
  std::mutex mu_;
  const int lines_;
  const int64_t window_ms_;
  int64_t window_start_ms_ = INT64_MIN;
  int used_ = 0;
  uint64_t refused_ = 0;
};

}  // namespace consensor::node
