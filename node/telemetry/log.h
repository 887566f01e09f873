// Structured logs for operators: one line per event, logfmt or JSON, with a level.
//   ts=2026-11-21T10:00:00.123Z level=info msg="task finished" task=5f2a... seconds=0.012
//   {"ts":"2026-11-21T10:00:00.123Z","level":"info","msg":"task finished","task":"5f2a...","seconds":0.012}
// Thread-safe; each line is written with a single write so lines never interleave.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "common/status.h"

namespace consensor::node {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class LogFormat { kLogfmt, kJson };

StatusOr<LogLevel> ParseLogLevel(std::string_view text);    // debug|info|warn|error
StatusOr<LogFormat> ParseLogFormat(std::string_view text);  // logfmt|json

// Where lines go: a file descriptor (default 2, stderr). Set once at startup.
void ConfigureLogging(LogLevel min_level, LogFormat format, int fd = 2);
bool LogEnabled(LogLevel level);

struct LogValue {
  std::variant<std::string, int64_t, double, bool> v;
  LogValue(std::string s) : v(std::move(s)) {}          // NOLINT
  LogValue(std::string_view s) : v(std::string(s)) {}   // NOLINT
  LogValue(const char* s) : v(std::string(s)) {}        // NOLINT
  LogValue(int64_t i) : v(i) {}                         // NOLINT
  LogValue(int i) : v(int64_t{i}) {}                    // NOLINT
  LogValue(uint64_t i) : v(static_cast<int64_t>(i)) {}  // NOLINT
  LogValue(double d) : v(d) {}                          // NOLINT
  LogValue(bool b) : v(b) {}                            // NOLINT
};
using LogField = std::pair<std::string_view, LogValue>;

void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields = {});

// Formats one line without writing it (exposed for tests).
std::string FormatLogLine(LogFormat format, std::string_view timestamp, LogLevel level, std::string_view msg,
                          std::initializer_list<LogField> fields);

}  // namespace consensor::node
