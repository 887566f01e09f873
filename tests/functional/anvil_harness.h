// Starts a real anvil (Foundry's local chain, installed by scripts/setup.sh from npm into
// contracts/node_modules) on a port it picks itself, for chain-client functional tests.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/functional/daemon_harness.h"
#include "tests/test_paths.h"

namespace consensor::testing_support {

inline std::string AnvilBinary() {
  if (const char* env = std::getenv("CNSR_ANVIL"); env && *env) return env;
  return testing_support::SourceDir() + "/contracts/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil";
}

// anvil's first dev account (its well-known mnemonic): key and address.
inline constexpr char kAnvilKey0[] = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
inline constexpr char kAnvilAddress0[] = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";

class AnvilProcess {
 public:
  explicit AnvilProcess(std::string log_path) : log_path_(std::move(log_path)) {}
  ~AnvilProcess() { Stop(); }

  // Returns false when anvil is missing or does not come up within the timeout.
  bool Start(std::vector<std::string> extra_args = {}) {
    std::vector<std::string> args = {AnvilBinary(), "--host", "127.0.0.1", "--port", "0"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = SpawnWithLog(args, log_path_, /*append=*/false);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      std::string log = ReadWholeFile(log_path_);
      size_t at = log.find("Listening on ");
      size_t end = at == std::string::npos ? std::string::npos : log.find('\n', at);
      if (end != std::string::npos) {
        url_ = "http://" + log.substr(at + 13, end - at - 13);
        return true;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  const std::string& url() const { return url_; }
  std::string Log() const { return ReadWholeFile(log_path_); }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  std::string url_;
};

// An Ethereum JSON-RPC quantity ("0x1f"), e.g. the block count of anvil_mine.
inline std::string HexQuantity(uint64_t v) {
  char hex[24];
  snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(v));
  return hex;
}

// One of the Foundry tools installed next to anvil: "forge", "cast".
inline std::string FoundryTool(const std::string& name) {
  return testing_support::SourceDir() + "/contracts/node_modules/@foundry-rs/" + name + "-linux-amd64/bin/" + name;
}

// Deploys the AVS contracts to `rpc_url` with the project's forge script (deployer: anvil key
// 0), writing the deployment to contracts/<deployment_rel>. `env` is prepended to the command
// (deploy parameters such as "WITHDRAWAL_DELAY_BLOCKS=20").
inline CommandResult DeployContracts(const std::string& rpc_url, const std::string& deployment_rel,
                                     const std::string& env = "") {
  // flock: tests run in parallel, and forge's build cache is shared.
  return RunCommand("cd " + testing_support::SourceDir() + "/contracts && DEPLOYMENT_FILE=" + deployment_rel + " " +
                        env + " flock .forge.lock " + FoundryTool("forge"),
                    "script script/Deploy.s.sol --rpc-url " + rpc_url + " --broadcast --private-key 0x" + kAnvilKey0);
}

}  // namespace consensor::testing_support
