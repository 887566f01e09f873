#include "node/telemetry/log.h"
#include "consensor/v1/node.pb.h"
#include "node/telemetry/protobuf_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace consensor::node {
namespace {

constexpr std::string_view kTs = "2026-11-21T10:00:00.123Z";

TEST(LogFormatTest, LogfmtBasic) {
  EXPECT_EQ(FormatLogLine(LogFormat::kLogfmt, kTs, LogLevel::kInfo, "task finished",
                          {{"task", "5f2a"}, {"seconds", 0.012}, {"n", 42}, {"ok", true}}),
            "ts=2026-11-21T10:00:00.123Z level=info msg=\"task finished\" task=5f2a seconds=0.012 n=42 ok=true");
}

TEST(LogFormatTest, LogfmtBareAndQuotedValues) {
  EXPECT_EQ(FormatLogLine(LogFormat::kLogfmt, kTs, LogLevel::kWarn, "started", {}),
            "ts=2026-11-21T10:00:00.123Z level=warn msg=started");
  const std::string line = FormatLogLine(LogFormat::kLogfmt, kTs, LogLevel::kError, "x",
                                         {{"empty", ""},
                                          {"eq", "a=b"},
                                          {"quote", "say \"hi\""},
                                          {"backslash", "C:\\dir"},
                                          {"newline", "a\nb\r\tc"},
                                          {"ctl", std::string("a\x01z")},
                                          {"utf8", "héllo"}});
  EXPECT_EQ(line,
            "ts=2026-11-21T10:00:00.123Z level=error msg=x empty=\"\" eq=\"a=b\" quote=\"say \\\"hi\\\"\" "
            "backslash=\"C:\\\\dir\" newline=\"a\\nb\\r\\tc\" ctl=\"a\\u0001z\" utf8=héllo");
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(LogFormatTest, LogfmtBadKeysAreSanitized) {
  EXPECT_EQ(FormatLogLine(LogFormat::kLogfmt, kTs, LogLevel::kDebug, "m", {{"a b=c", 1}, {"", 2}}),
            "ts=2026-11-21T10:00:00.123Z level=debug msg=m a_b_c=1 _=2");
}

TEST(LogFormatTest, JsonBasic) {
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, kTs, LogLevel::kInfo, "task finished",
                          {{"task", "5f2a"}, {"seconds", 0.012}, {"n", int64_t{-7}}, {"ok", false}}),
            "{\"ts\":\"2026-11-21T10:00:00.123Z\",\"level\":\"info\",\"msg\":\"task finished\",\"task\":\"5f2a\","
            "\"seconds\":0.012,\"n\":-7,\"ok\":false}");
}

TEST(LogFormatTest, JsonEscaping) {
  const std::string line = FormatLogLine(LogFormat::kJson, kTs, LogLevel::kInfo, "q\"b\\n\nt\t",
                                         {{"ctl", std::string("\x01\x1f\x7f", 3)}, {"k\"ey", "v"}});
  EXPECT_EQ(line,
            "{\"ts\":\"2026-11-21T10:00:00.123Z\",\"level\":\"info\",\"msg\":\"q\\\"b\\\\n\\nt\\t\","
            "\"ctl\":\"\\u0001\\u001f\\u007f\",\"k\\\"ey\":\"v\"}");
}

TEST(LogFormatTest, JsonInvalidUtf8IsReplaced) {
  // Valid multi-byte text passes through; a lone continuation byte, a truncated sequence, an
  // overlong encoding and a surrogate each become U+FFFD.
  const std::string bad =
      std::string("ok \xC3\xA9 ") + "\x80" + "|" + "\xE2\x82" + "|" + "\xC0\xAF" + "|" + "\xED\xA0\x80";
  const std::string line = FormatLogLine(LogFormat::kJson, kTs, LogLevel::kInfo, "m", {{"v", bad}});
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(line, "{\"ts\":\"2026-11-21T10:00:00.123Z\",\"level\":\"info\",\"msg\":\"m\",\"v\":\"ok \xC3\xA9 " + r +
                      "|" + r + r + "|" + r + r + "|" + r + r + r + "\"}");
  // And in logfmt the replaced value is quoted.
  const std::string lf = FormatLogLine(LogFormat::kLogfmt, kTs, LogLevel::kInfo, "m", {{"v", std::string("\xff")}});
  EXPECT_EQ(lf, "ts=2026-11-21T10:00:00.123Z level=info msg=m v=\"" + r + "\"");
}

TEST(LogFormatTest, Doubles) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, kTs, LogLevel::kInfo, "m",
                          {{"a", 0.1 + 0.2}, {"b", 1e21}, {"c", nan}, {"d", inf}, {"e", -inf}, {"f", 3.0}}),
            "{\"ts\":\"2026-11-21T10:00:00.123Z\",\"level\":\"info\",\"msg\":\"m\",\"a\":0.30000000000000004,"
            "\"b\":1e+21,\"c\":\"NaN\",\"d\":\"+Inf\",\"e\":\"-Inf\",\"f\":3}");
  EXPECT_EQ(FormatLogLine(LogFormat::kLogfmt, kTs, LogLevel::kInfo, "m", {{"c", nan}, {"d", -inf}, {"e", 2.5}}),
            "ts=2026-11-21T10:00:00.123Z level=info msg=m c=NaN d=-Inf e=2.5");
  EXPECT_EQ(FormatLogLine(LogFormat::kLogfmt, kTs, LogLevel::kInfo, "m", {{"u", uint64_t{18}}}),
            "ts=2026-11-21T10:00:00.123Z level=info msg=m u=18");
}

TEST(LogParseTest, Levels) {
  EXPECT_EQ(*ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(*ParseLogLevel("warn"), LogLevel::kWarn);
  EXPECT_EQ(*ParseLogLevel("error"), LogLevel::kError);
  auto bad = ParseLogLevel("verbose");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("verbose"), std::string::npos);
  EXPECT_FALSE(ParseLogLevel("").ok());
  EXPECT_FALSE(ParseLogLevel("INFO").ok());
}

TEST(LogParseTest, Formats) {
  EXPECT_EQ(*ParseLogFormat("logfmt"), LogFormat::kLogfmt);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  auto bad = ParseLogFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("xml"), std::string::npos);
}

// Captures log output through a pipe and restores stderr logging afterwards.
class LogPipeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::pipe2(fds_, O_CLOEXEC | O_NONBLOCK), 0); }
  void TearDown() override {
    ConfigureLogging(LogLevel::kInfo, LogFormat::kLogfmt, 2);
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  std::string Drain() {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fds_[0], buf, sizeof(buf));
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  int fds_[2] = {-1, -1};
};

TEST_F(LogPipeTest, LevelFiltering) {
  ConfigureLogging(LogLevel::kWarn, LogFormat::kLogfmt, fds_[1]);
  EXPECT_FALSE(LogEnabled(LogLevel::kDebug));
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kWarn));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
  Log(LogLevel::kDebug, "hidden debug");
  Log(LogLevel::kInfo, "hidden info");
  Log(LogLevel::kWarn, "shown warn", {{"k", 1}});
  Log(LogLevel::kError, "shown error");
  const std::string out = Drain();
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
  const size_t warn = out.find("level=warn msg=\"shown warn\" k=1\n");
  const size_t error = out.find("level=error msg=\"shown error\"\n");
  EXPECT_NE(warn, std::string::npos) << out;
  EXPECT_NE(error, std::string::npos) << out;
  EXPECT_LT(warn, error);
  // Timestamp shape: ts=YYYY-MM-DDTHH:MM:SS.mmmZ at the start of each line.
  ASSERT_GE(out.size(), 28u);
  const std::string ts = out.substr(3, 24);
  EXPECT_EQ(out.substr(0, 3), "ts=");
  EXPECT_EQ(ts[4], '-');
  EXPECT_EQ(ts[10], 'T');
  EXPECT_EQ(ts[19], '.');
  EXPECT_EQ(ts[23], 'Z');
}

TEST_F(LogPipeTest, JsonLinesFromManyThreads) {
  ConfigureLogging(LogLevel::kDebug, LogFormat::kJson, fds_[1]);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 50; ++i) Log(LogLevel::kDebug, "tick", {{"thread", t}, {"i", i}});
    });
  }
  for (auto& th : threads) th.join();
  const std::string out = Drain();
  // Every line is whole: 200 lines, each a complete object.
  size_t lines = 0;
  size_t start = 0;
  while (start < out.size()) {
    const size_t end = out.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    const std::string line = out.substr(start, end - start);
    EXPECT_EQ(line.front(), '{');
    EXPECT_EQ(line.back(), '}');
    EXPECT_NE(line.find("\"level\":\"debug\",\"msg\":\"tick\""), std::string::npos) << line;
    ++lines;
    start = end + 1;
  }
  EXPECT_EQ(lines, 200u);
}

}  // namespace
TEST(LogLineBudgetTest, AFixedWindowOfLinesThenACountOfTheRest) {
  LogLineBudget budget(2, 1000);
  uint64_t refused = 99;
  EXPECT_TRUE(budget.Allow(0, &refused));
  EXPECT_EQ(refused, 0u);
  EXPECT_TRUE(budget.Allow(10, &refused));
  EXPECT_FALSE(budget.Allow(20, &refused));
  EXPECT_FALSE(budget.Allow(999, &refused));
  EXPECT_TRUE(budget.Allow(1000, &refused));  // a new window
  EXPECT_EQ(refused, 2u);                     // and the two it left out
  EXPECT_TRUE(budget.Allow(1001, &refused));
  EXPECT_EQ(refused, 0u);
  EXPECT_TRUE(budget.Allow(5, &refused));  // a clock that goes back starts a new window too
}

// A peer or client that sends strings with invalid UTF-8 makes libprotobuf log each one: routed
// into the structured log, a flood of them yields at most kProtobufLinesPerMinute lines.
TEST_F(LogPipeTest, ProtobufParseErrorsFromHostileBytesAreRateLimited) {
  ConfigureLogging(LogLevel::kInfo, LogFormat::kLogfmt, fds_[1]);
  RouteProtobufLogs();
  const std::string invalid_utf8 = std::string("\x0a\x02\xff\xfe", 4);  // task_id = FF FE
  for (int i = 0; i < 200; ++i) {
    v1::GetTaskRequest request;
    EXPECT_FALSE(request.ParseFromString(invalid_utf8));
  }
  const std::string out = Drain();
  size_t lines = 0;
  for (size_t at = out.find("msg=protobuf"); at != std::string::npos; at = out.find("msg=protobuf", at + 1)) ++lines;
  EXPECT_GE(lines, 1u) << out;
  EXPECT_LE(lines, static_cast<size_t>(kProtobufLinesPerMinute)) << out;
  EXPECT_NE(out.find("invalid UTF-8"), std::string::npos) << out;
}

}  // namespace consensor::node
