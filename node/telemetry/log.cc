#include "node/telemetry/log.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <mutex>

namespace consensor::node {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kLogfmt)};
std::atomic<int> g_fd{2};
std::mutex g_write_mu;  // serializes writers so a partial write can be finished before the next line

std::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "unknown";
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are not one
// (overlong forms, surrogates and code points above U+10FFFF are rejected).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  size_t len;
  uint32_t min_cp;
  uint32_t cp;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, min_cp = 0x80, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, min_cp = 0x800, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, min_cp = 0x10000, cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

void AppendHexEscape(std::string* out, unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\u%04x", c);
  out->append(buf);
}

// A double-quoted string: \" \\ \n \r \t (and \b \f in JSON) and \u00XX for other control
// characters; invalid UTF-8 bytes become U+FFFD. The result is always valid JSON, and a logfmt
// value never spans lines, whatever bytes a client sent.
void AppendQuoted(std::string* out, std::string_view s, bool json) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t len = Utf8SequenceLength(s, i);
      if (len == 0) {
        out->append(kReplacementChar);
        ++i;
      } else {
        out->append(s.substr(i, len));
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (json && c == '\b') {
          out->append("\\b");
        } else if (json && c == '\f') {
          out->append("\\f");
        } else if (c < 0x20 || c == 0x7F) {
          AppendHexEscape(out, c);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

void AppendJsonString(std::string* out, std::string_view s) { AppendQuoted(out, s, /*json=*/true); }

bool LogfmtNeedsQuotes(std::string_view s) {
  if (s.empty()) return true;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c <= 0x20 || c == '=' || c == '"' || c == '\\' || c == 0x7F) return true;
    if (c >= 0x80) {
      const size_t len = Utf8SequenceLength(s, i);
      if (len == 0) return true;  // replaced below, and the replacement is written quoted
      i += len;
      continue;
    }
    ++i;
  }
  return false;
}

// logfmt value: bare when it is a simple token, otherwise quoted.
void AppendLogfmtValue(std::string* out, std::string_view s) {
  if (!LogfmtNeedsQuotes(s)) {
    out->append(s);
    return;
  }
  AppendQuoted(out, s, /*json=*/false);
}

// Keys come from code, but a stray space or '=' would make the line unparseable: replace.
void AppendLogfmtKey(std::string* out, std::string_view key) {
  if (key.empty()) {
    out->push_back('_');
    return;
  }
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    out->push_back((c <= 0x20 || c >= 0x7F || c == '=' || c == '"' || c == '\\') ? '_' : ch);
  }
}

// Shortest text that reads back to the same double; "NaN", "+Inf", "-Inf" otherwise.
std::string FormatDouble(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::general);
  if (res.ec != std::errc()) return "NaN";  // cannot happen with 64 bytes
  return std::string(buf, res.ptr);
}

void AppendValue(std::string* out, LogFormat format, const LogValue& value) {
  const bool json = format == LogFormat::kJson;
  if (const auto* s = std::get_if<std::string>(&value.v)) {
    json ? AppendJsonString(out, *s) : AppendLogfmtValue(out, *s);
  } else if (const auto* i = std::get_if<int64_t>(&value.v)) {
    out->append(std::to_string(*i));
  } else if (const auto* d = std::get_if<double>(&value.v)) {
    const std::string text = FormatDouble(*d);
    // JSON has no NaN or infinity literals; a string keeps the document valid.
    if (json && !std::isfinite(*d)) {
      AppendJsonString(out, text);
    } else {
      out->append(text);
    }
  } else if (const auto* b = std::get_if<bool>(&value.v)) {
    out->append(*b ? "true" : "false");
  }
}

std::string NowTimestamp() {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm {};
  gmtime_r(&ts.tv_sec, &tm);
  char buf[96];  // sized for any int values, which silences -Wformat-truncation
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ts.tv_nsec / 1000000));
  return buf;
}

}  // namespace

StatusOr<LogLevel> ParseLogLevel(std::string_view text) {
  if (text == "debug") return LogLevel::kDebug;
  if (text == "info") return LogLevel::kInfo;
  if (text == "warn") return LogLevel::kWarn;
  if (text == "error") return LogLevel::kError;
  return InvalidArgument("unknown log level '" + std::string(text) + "' (expected debug, info, warn or error)");
}

StatusOr<LogFormat> ParseLogFormat(std::string_view text) {
  if (text == "logfmt") return LogFormat::kLogfmt;
  if (text == "json") return LogFormat::kJson;
  return InvalidArgument("unknown log format '" + std::string(text) + "' (expected logfmt or json)");
}

void ConfigureLogging(LogLevel min_level, LogFormat format, int fd) {
  std::lock_guard<std::mutex> lock(g_write_mu);
  g_min_level.store(static_cast<int>(min_level), std::memory_order_relaxed);
  g_format.store(static_cast<int>(format), std::memory_order_relaxed);
  g_fd.store(fd, std::memory_order_relaxed);
}

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_min_level.load(std::memory_order_relaxed); }

std::string FormatLogLine(LogFormat format, std::string_view timestamp, LogLevel level, std::string_view msg,
                          std::initializer_list<LogField> fields) {
  std::string out;
  out.reserve(64 + msg.size() + 24 * fields.size());
  if (format == LogFormat::kJson) {
    out.append("{\"ts\":");
    AppendJsonString(&out, timestamp);
    out.append(",\"level\":");
    AppendJsonString(&out, LevelName(level));
    out.append(",\"msg\":");
    AppendJsonString(&out, msg);
    for (const auto& [key, value] : fields) {
      out.push_back(',');
      AppendJsonString(&out, key);
      out.push_back(':');
      AppendValue(&out, format, value);
    }
    out.push_back('}');
  } else {
    out.append("ts=");
    AppendLogfmtValue(&out, timestamp);
    out.append(" level=");
    out.append(LevelName(level));
    out.append(" msg=");
    AppendLogfmtValue(&out, msg);
    for (const auto& [key, value] : fields) {
      out.push_back(' ');
      AppendLogfmtKey(&out, key);
      out.push_back('=');
      AppendValue(&out, format, value);
    }
  }
  return out;
}

void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields) {
  if (!LogEnabled(level)) return;
  const auto format = static_cast<LogFormat>(g_format.load(std::memory_order_relaxed));
  std::string line = FormatLogLine(format, NowTimestamp(), level, msg, fields);
  line.push_back('\n');

  std::lock_guard<std::mutex> lock(g_write_mu);
  const int fd = g_fd.load(std::memory_order_relaxed);
  // Normally one write(2) per line; the loop only finishes a short write (pipe full, signal).
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = ::write(fd, line.data() + off, line.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;  // nowhere to report a failed log write; drop the line rather than block or crash
    }
  }
}

}  // namespace consensor::node
