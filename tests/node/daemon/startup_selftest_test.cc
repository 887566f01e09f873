// consensord's startup self-test: a backend that differs from the CPU reference by one bit
// stops startup, or moves every task to the CPU when fallback_cpu is set; the outcome is
// logged and exported as metrics.
#include "node/daemon/startup_selftest.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "node/telemetry/log.h"
#include "tests/faulty_backend.h"

namespace consensor::node {
namespace {

using testing::FaultyBackend;

// Sends the structured log to a file for one test.
class CapturedLog {
 public:
  CapturedLog() : path_(::testing::TempDir() + "/startup_selftest_" + std::to_string(::getpid()) + ".log") {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ConfigureLogging(LogLevel::kInfo, LogFormat::kLogfmt, fd_);
  }
  ~CapturedLog() {
    ConfigureLogging(LogLevel::kInfo, LogFormat::kLogfmt, 2);
    ::close(fd_);
    std::remove(path_.c_str());
  }
  std::string Text() const {
    std::ifstream f(path_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

 private:
  std::string path_;
  int fd_ = -1;
};

kernels::BackendOptions Configured() {
  kernels::BackendOptions o;
  o.name = "cuda";
  o.threads = 3;
  o.isa = "portable";
  return o;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(StartupSelfTest, AMatchingBackendIsKept) {
  CapturedLog log;
  MetricsRegistry registry;
  FaultyBackend faithful(kernels::Op::kNumOps, FaultyBackend::Fault::kFail);  // corrupts nothing
  auto options = SelfTestBackendAtStartup(faithful, Configured(), /*fallback_cpu=*/false, &registry);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->name, "cuda");
  const std::string metrics = registry.RenderPrometheusText();
  EXPECT_TRUE(Contains(metrics, "consensor_backend_selftest_ok{backend=\"faulty-cpu\"} 1")) << metrics;
  EXPECT_TRUE(Contains(metrics, "consensor_backend_selftest_seconds{backend=\"faulty-cpu\"}")) << metrics;
  EXPECT_TRUE(Contains(log.Text(), "msg=\"backend self-test passed\"")) << log.Text();
}

TEST(StartupSelfTest, AMismatchStopsStartupAndNamesTheOp) {
  CapturedLog log;
  MetricsRegistry registry;
  FaultyBackend faulty(kernels::Op::kLayerNorm, FaultyBackend::Fault::kFlipFirstCall);
  auto options = SelfTestBackendAtStartup(faulty, Configured(), /*fallback_cpu=*/false, &registry);
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), StatusCode::kFailedPrecondition);
  const std::string message = options.status().message();
  EXPECT_TRUE(Contains(message, "failed its startup self-test")) << message;
  EXPECT_TRUE(Contains(message, "graph normalization")) << message;
  EXPECT_TRUE(Contains(message, " layer_norm -> f32[")) << message;
  EXPECT_TRUE(Contains(message, "fallback_cpu")) << message;
  EXPECT_TRUE(Contains(registry.RenderPrometheusText(), "consensor_backend_selftest_ok{backend=\"faulty-cpu\"} 0"));
  EXPECT_TRUE(Contains(log.Text(), "level=error msg=\"backend self-test FAILED")) << log.Text();
}

TEST(StartupSelfTest, AMismatchWithFallbackRunsOnTheCpu) {
  CapturedLog log;
  MetricsRegistry registry;
  FaultyBackend failing(kernels::Op::kGather, FaultyBackend::Fault::kFail);
  auto options = SelfTestBackendAtStartup(failing, Configured(), /*fallback_cpu=*/true, &registry);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->name, "cpu");
  EXPECT_EQ(options->threads, 3);
  EXPECT_EQ(options->isa, "portable");
  EXPECT_TRUE(Contains(registry.RenderPrometheusText(), "consensor_backend_selftest_ok{backend=\"faulty-cpu\"} 0"));
  const std::string text = log.Text();
  EXPECT_TRUE(Contains(text, "injected launch failure")) << text;
  EXPECT_TRUE(Contains(text, "level=error msg=\"falling back to the CPU backend for every task")) << text;
}

}  // namespace
}  // namespace consensor::node
