// Starts real consensord processes for functional tests: each with its own datadir and a
// port the kernel picks (--listen 127.0.0.1:0; the daemon writes the bound address to
// <datadir>/rpc.addr). Output goes to <datadir>/consensord.log, shown when a test fails.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/tensor.h"
#include "tests/test_paths.h"

namespace consensor::testing_support {

inline std::string DaemonBinary() { return testing_support::BinaryDir() + "/node/consensord"; }
inline std::string CliBinary() { return testing_support::BinaryDir() + "/node/consensor"; }

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `binary args` through the shell and collects its output.
inline CommandResult RunCommand(const std::string& binary, const std::string& args) {
  std::string cmd = binary + " " + args + " 2>&1";
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Uniform f32 values in [-1, 1), reproducible from the seed.
inline Tensor RandomF32(Shape shape, uint32_t seed) {
  Tensor t(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data_as<float>()[i] = d(rng);
  return t;
}

// fork + exec with stdout and stderr going to `log_path`; returns the child's pid.
inline pid_t SpawnWithLog(std::vector<std::string> args, const std::string& log_path, bool append) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

class DaemonProcess {
 public:
  DaemonProcess(std::string datadir, std::vector<std::string> extra_args)
      : datadir_(std::move(datadir)), extra_args_(std::move(extra_args)) {}
  ~DaemonProcess() { Kill(SIGKILL); }

  // Spawns the daemon. Does not wait for it to be ready.
  void Spawn() {
    std::filesystem::create_directories(datadir_);
    std::filesystem::remove(datadir_ + "/rpc.addr");
    std::vector<std::string> args = {DaemonBinary(), "--datadir",   datadir_, "--listen",
                                     "127.0.0.1:0",  "--log-level", "debug"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    pid_ = SpawnWithLog(args, datadir_ + "/consensord.log", /*append=*/true);
  }

  // Waits until the daemon has written its address (it is serving) or has exited.
  bool WaitReady(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      std::string addr = ReadWholeFile(datadir_ + "/rpc.addr");
      if (!addr.empty() && addr.back() == '\n') {
        address_ = addr.substr(0, addr.size() - 1);
        return true;
      }
      if (Exited()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  bool Start() {
    Spawn();
    return WaitReady();
  }

  // True once the process has exited; the exit code is then in exit_code().
  bool Exited() {
    if (pid_ <= 0) return true;
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid_ = -1;
      return true;
    }
    return false;
  }

  // Sends `signal` and waits for the exit. Returns the exit code (128+signal when killed).
  int Kill(int signal, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    if (pid_ <= 0) return exit_code_;
    kill(pid_, signal);
    auto until = std::chrono::steady_clock::now() + timeout;
    while (!Exited()) {
      if (std::chrono::steady_clock::now() > until) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
        exit_code_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return exit_code_;
  }

  int WaitExit(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (!Exited() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return pid_ <= 0 ? exit_code_ : -1;
  }

  const std::string& address() const { return address_; }
  const std::string& datadir() const { return datadir_; }
  std::string Log() const { return ReadWholeFile(datadir_ + "/consensord.log"); }
  pid_t pid() const { return pid_; }

 private:
  std::string datadir_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
  std::string address_;
};

// A plain HTTP/1.1 GET on loopback: {status, body}; status -1 when nothing answered.
inline std::pair<int, std::string> HttpGetOnce(const std::string& address, const std::string& path) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return {-1, ""};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return {-1, ""};
  }
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
  close(fd);
  if (response.size() < 12) return {-1, response};
  size_t body = response.find("\r\n\r\n");
  return {std::stoi(response.substr(9, 3)), body == std::string::npos ? "" : response.substr(body + 4)};
}

// A loaded CI machine can refuse or cut a loopback connection now and then; a request that got
// no HTTP answer at all is tried again (an answer, whatever its status, is returned as is).
inline std::pair<int, std::string> HttpGet(const std::string& address, const std::string& path) {
  std::pair<int, std::string> r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = HttpGetOnce(address, path);
    if (r.first != -1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return r;
}

}  // namespace consensor::testing_support
