// The chain RPC over https, against a real anvil behind a real TLS proxy
// (tests/functional/tls_rpc_proxy.py on Debian's python3) with a CA and server certificates the
// test makes with the openssl CLI: the CLI and consensord work with the CA given, a certificate
// that does not verify (unknown CA, wrong address) is a clear error and not a crash or a hang,
// URL user info goes out as HTTP Basic authorization, and no output or log ever shows the
// URL's user info, path or query (hosted RPCs keep their API keys there).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "node/chain/head_subscription.h"
#include "tests/functional/anvil_harness.h"
#include "tests/test_paths.h"

namespace consensor {
namespace {

namespace fs = std::filesystem;
using testing_support::AnvilProcess;
using testing_support::CommandResult;
using testing_support::RunCommand;

constexpr char kUser[] = "alice";
constexpr char kPassword[] = "secret-pw";  // contains "secret"

// The secrets of the test URLs: none of them may appear in any output.
void ExpectNoSecrets(const std::string& text) {
  EXPECT_EQ(text.find("secret"), std::string::npos) << text;
  EXPECT_EQ(text.find("key123"), std::string::npos) << text;
  EXPECT_EQ(text.find("SECRET"), std::string::npos) << text;
}

// A loopback port nothing listens on: bound, read, closed.
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return 1;  // port 1: nothing listens there either
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// The TLS proxy in front of anvil, as a real process.
class TlsProxy {
 public:
  ~TlsProxy() { Stop(); }
  // Returns "" or what went wrong.
  std::string Start(const std::string& dir, const std::string& name, const std::string& cert, const std::string& key,
                    const std::string& upstream) {
    port_file_ = dir + "/" + name + ".port";
    log_ = dir + "/" + name + ".log";
    pid_ = testing_support::SpawnWithLog(
        {"/usr/bin/python3", testing_support::SourceDir() + "/tests/functional/tls_rpc_proxy.py", "--cert", cert,
         "--key", key, "--upstream", upstream, "--port-file", port_file_, "--require-basic",
         std::string(kUser) + ":" + kPassword},
        log_, /*append=*/false);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      std::string port = testing_support::ReadWholeFile(port_file_);
      if (!port.empty() && port.back() == '\n') {
        port_ = port.substr(0, port.size() - 1);
        return "";
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return "the TLS proxy exited: " + testing_support::ReadWholeFile(log_);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "the TLS proxy did not start: " + testing_support::ReadWholeFile(log_);
  }
  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  const std::string& port() const { return port_; }

 private:
  pid_t pid_ = -1;
  std::string port_file_, log_, port_;
};

class HttpsRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("consensor-https-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    anvil_ = std::make_unique<AnvilProcess>((dir_ / "anvil.log").string());
    ASSERT_TRUE(anvil_->Start()) << anvil_->Log();
    deployment_rel_ = "deployments/test-https-" + std::to_string(getpid()) + ".json";
    deployment_ = testing_support::SourceDir() + "/contracts/" + deployment_rel_;
    CommandResult deploy = testing_support::DeployContracts(anvil_->url(), deployment_rel_);
    ASSERT_EQ(deploy.exit_code, 0) << deploy.out;

    // A CA, a server certificate for 127.0.0.1 and localhost, and one for another name only.
    ASSERT_NO_FATAL_FAILURE(OpenSsl("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
                                    Path("ca.key") + " -out " + Path("ca.pem") +
                                    " -days 2 -subj /CN=consensor-test-ca -addext basicConstraints=critical,CA:TRUE"
                                    " -addext keyUsage=critical,keyCertSign"));
    ASSERT_NO_FATAL_FAILURE(Issue("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"));
    ASSERT_NO_FATAL_FAILURE(Issue("other", "subjectAltName=DNS:rpc.invalid"));
    std::string started = proxy_.Start(dir_.string(), "proxy", Path("server.pem"), Path("server.key"), anvil_->url());
    ASSERT_EQ(started, "");
    started = other_proxy_.Start(dir_.string(), "other", Path("other.pem"), Path("other.key"), anvil_->url());
    ASSERT_EQ(started, "");
  }
  void TearDown() override {
    proxy_.Stop();
    other_proxy_.Stop();
    anvil_.reset();
    fs::remove(deployment_);
    fs::remove_all(dir_);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  void OpenSsl(const std::string& args) {
    CommandResult r = RunCommand("openssl", args);
    ASSERT_EQ(r.exit_code, 0) << "openssl " << args << "\n" << r.out;
  }
  // A certificate for `name`.key signed by the test CA, with the given extension line.
  void Issue(const std::string& name, const std::string& san) {
    std::ofstream(Path(name + ".ext")) << san << "\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n";
    ASSERT_NO_FATAL_FAILURE(OpenSsl("req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
                                    Path(name + ".key") + " -out " + Path(name + ".csr") + " -subj /CN=" + name));
    ASSERT_NO_FATAL_FAILURE(OpenSsl("x509 -req -in " + Path(name + ".csr") + " -CA " + Path("ca.pem") + " -CAkey " +
                                    Path("ca.key") + " -CAcreateserial -out " + Path(name + ".pem") + " -days 2" +
                                    " -extfile " + Path(name + ".ext")));
  }
  // https://alice:secret-pw@HOST:PORT/key123?apikey=SECRET
  static std::string SecretUrl(const std::string& host_port) {
    return std::string("https://") + kUser + ":" + kPassword + "@" + host_port + "/key123?apikey=SECRET";
  }
  // `consensor operator status` for anvil's account 0 (not registered) through `url`.
  CommandResult Status(const std::string& url, const std::string& extra = "") {
    return RunCommand(testing_support::CliBinary(), "operator status --address " +
                                                        std::string(testing_support::kAnvilAddress0) + " --rpc '" +
                                                        url + "' --deployment " + deployment_ + " " + extra);
  }

  fs::path dir_;
  std::unique_ptr<AnvilProcess> anvil_;
  std::string deployment_rel_, deployment_;
  TlsProxy proxy_, other_proxy_;
};

TEST_F(HttpsRpcTest, CliWorksOverHttpsWithTheCaFile) {
  const std::string ca = " --rpc-ca-file " + Path("ca.pem");
  CommandResult ok = Status(SecretUrl("127.0.0.1:" + proxy_.port()), ca);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("status     unregistered"), std::string::npos) << ok.out;
  ExpectNoSecrets(ok.out);

  // A host name: SNI and the certificate's DNS name; the CA file from the environment.
  CommandResult by_name =
      RunCommand("CONSENSOR_RPC_CA_FILE=" + Path("ca.pem") + " " + testing_support::CliBinary(),
                 "operator status --address " + std::string(testing_support::kAnvilAddress0) + " --rpc '" +
                     SecretUrl("localhost:" + proxy_.port()) + "' --deployment " + deployment_);
  EXPECT_EQ(by_name.exit_code, 0) << by_name.out;
  ExpectNoSecrets(by_name.out);

  // Without the user info the proxy refuses: the credentials went out as Basic authorization.
  CommandResult anonymous = Status("https://127.0.0.1:" + proxy_.port() + "/key123?apikey=SECRET", ca);
  EXPECT_EQ(anonymous.exit_code, 1) << anonymous.out;
  EXPECT_NE(anonymous.out.find("answered HTTP 401"), std::string::npos) << anonymous.out;
  ExpectNoSecrets(anonymous.out);
}

TEST_F(HttpsRpcTest, CertificateThatDoesNotVerifyIsAClearError) {
  // The system store does not know the test CA.
  CommandResult unknown_ca = Status(SecretUrl("127.0.0.1:" + proxy_.port()));
  EXPECT_EQ(unknown_ca.exit_code, 1) << unknown_ca.out;
  EXPECT_NE(unknown_ca.out.find("the TLS certificate of the RPC at https://***@127.0.0.1:" + proxy_.port() +
                                "/*** does not verify"),
            std::string::npos)
      << unknown_ca.out;
  EXPECT_NE(unknown_ca.out.find("--rpc-ca-file"), std::string::npos) << unknown_ca.out;
  ExpectNoSecrets(unknown_ca.out);

  // The right CA, but the certificate names another host.
  CommandResult wrong_host = Status(SecretUrl("127.0.0.1:" + other_proxy_.port()), "--rpc-ca-file " + Path("ca.pem"));
  EXPECT_EQ(wrong_host.exit_code, 1) << wrong_host.out;
  EXPECT_NE(wrong_host.out.find("does not verify: IP address mismatch"), std::string::npos) << wrong_host.out;
  ExpectNoSecrets(wrong_host.out);
  CommandResult wrong_name = Status(SecretUrl("localhost:" + other_proxy_.port()), "--rpc-ca-file " + Path("ca.pem"));
  EXPECT_EQ(wrong_name.exit_code, 1) << wrong_name.out;
  EXPECT_NE(wrong_name.out.find("does not verify: hostname mismatch"), std::string::npos) << wrong_name.out;

  // https to a plain-HTTP node: a failed handshake, not a hang.
  const std::string anvil_host_port = anvil_->url().substr(std::string("http://").size());
  CommandResult plain = Status("https://" + anvil_host_port, "--rpc-ca-file " + Path("ca.pem"));
  EXPECT_EQ(plain.exit_code, 1) << plain.out;
  EXPECT_NE(plain.out.find("TLS handshake with the RPC at https://" + anvil_host_port + " failed"), std::string::npos)
      << plain.out;

  // A CA file that cannot be read.
  CommandResult no_file = Status(SecretUrl("127.0.0.1:" + proxy_.port()), "--rpc-ca-file " + Path("missing.pem"));
  EXPECT_EQ(no_file.exit_code, 1) << no_file.out;
  EXPECT_NE(no_file.out.find("cannot load the RPC CA file"), std::string::npos) << no_file.out;

  // The head subscription (chain.rpc_ws) over wss verifies like https: with the test CA the TLS
  // handshake passes and the proxy then declines the WebSocket upgrade (it only forwards POSTs);
  // an unknown CA or another host's certificate fails the handshake. No failure names a secret.
  auto first_wss_failure = [&](const std::string& host_port, const std::string& ca_file) {
    node::HeadSubscriptionOptions options;
    options.url = std::string("wss://") + kUser + ":" + kPassword + "@" + host_port + "/key123?apikey=SECRET";
    options.ca_file = ca_file;
    options.min_backoff = std::chrono::milliseconds(10);
    options.max_backoff = std::chrono::milliseconds(50);
    auto sub = node::HeadSubscription::Start(options, [](uint64_t) {});
    if (!sub.ok()) return sub.status();
    for (int i = 0; i < 600 && (*sub)->failures() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    consensor::Status failure = (*sub)->last_failure();
    (*sub)->Shutdown();
    EXPECT_EQ((*sub)->heads(), 0u);
    return failure;
  };
  consensor::Status verified = first_wss_failure("127.0.0.1:" + proxy_.port(), Path("ca.pem"));
  EXPECT_EQ(verified.code(), consensor::StatusCode::kUnavailable) << verified.ToString();
  EXPECT_NE(verified.message().find("the WebSocket handshake with the RPC at wss://***@127.0.0.1:" + proxy_.port()),
            std::string::npos)
      << verified.ToString();
  ExpectNoSecrets(verified.ToString());
  consensor::Status unknown = first_wss_failure("127.0.0.1:" + proxy_.port(), "");
  EXPECT_EQ(unknown.code(), consensor::StatusCode::kFailedPrecondition) << unknown.ToString();
  EXPECT_NE(unknown.message().find("does not verify"), std::string::npos) << unknown.ToString();
  ExpectNoSecrets(unknown.ToString());
  consensor::Status wrong = first_wss_failure("127.0.0.1:" + other_proxy_.port(), Path("ca.pem"));
  EXPECT_NE(wrong.message().find("does not verify: IP address mismatch"), std::string::npos) << wrong.ToString();
  ExpectNoSecrets(wrong.ToString());
}

TEST_F(HttpsRpcTest, UnreachableRpcLeaksNoCredentials) {
  const std::string closed = "127.0.0.1:" + std::to_string(ClosedPort());
  for (const std::string& url : {SecretUrl(closed), "http://alice:secret-pw@" + closed + "/key123?apikey=SECRET"}) {
    CommandResult r = Status(url, "--rpc-ca-file " + Path("ca.pem"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("://***@" + closed + "/***"), std::string::npos) << r.out;
    ExpectNoSecrets(r.out);
  }
  // A malformed URL is not echoed either.
  CommandResult bad = Status("https://alice:secret-pw@" + closed + "/key123?apikey=SECRET x");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  ExpectNoSecrets(bad.out);
}

// consensord in network mode with the operator key of anvil account 0 (not registered).
class HttpsDaemonTest : public HttpsRpcTest {
 protected:
  void SetUp() override {
    HttpsRpcTest::SetUp();
    if (HasFatalFailure()) return;
    std::ofstream(Path("password")) << "https-test-password\n";
    fs::permissions(Path("password"), fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
    std::ofstream(Path("key.hex")) << testing_support::kAnvilKey0 << "\n";
    fs::create_directories(Path("keystore"));
    CommandResult imported =
        RunCommand(testing_support::CliBinary(), "keys import " + Path("key.hex") + " --keystore " + Path("keystore") +
                                                     " --password-file " + Path("password") + " --light-kdf");
    ASSERT_EQ(imported.exit_code, 0) << imported.out;
    for (const auto& e : fs::directory_iterator(Path("keystore"))) keystore_ = e.path().string();
  }
  std::vector<std::string> NetworkArgs(const std::string& url) {
    return {"--keystore", keystore_,      "--password-file", Path("password"),      "--chain-rpc",
            url,          "--deployment", deployment_,       "--chain-rpc-ca-file", Path("ca.pem")};
  }
  std::string keystore_;
};

TEST_F(HttpsDaemonTest, NodeJoinsOverHttpsAndLogsNoCredentials) {
  const std::string url = SecretUrl("127.0.0.1:" + proxy_.port());
  testing_support::DaemonProcess node(Path("node"), NetworkArgs(url));
  ASSERT_TRUE(node.Start()) << node.Log();
  EXPECT_EQ(node.Kill(SIGTERM), 0) << node.Log();
  const std::string log = node.Log();
  EXPECT_NE(log.find("https://***@127.0.0.1:" + proxy_.port() + "/***"), std::string::npos) << log;
  ExpectNoSecrets(log);
}

TEST_F(HttpsDaemonTest, UnreachableChainLogsNoCredentials) {
  const std::string closed = "127.0.0.1:" + std::to_string(ClosedPort());
  testing_support::DaemonProcess node(Path("node"), NetworkArgs(SecretUrl(closed)));
  node.Spawn();
  EXPECT_FALSE(node.WaitReady());
  EXPECT_NE(node.WaitExit(), 0);
  const std::string log = node.Log();
  EXPECT_NE(log.find("https://***@" + closed + "/***"), std::string::npos) << log;
  ExpectNoSecrets(log);

  // A certificate that does not verify stops the node with the reason, too.
  testing_support::DaemonProcess strict(Path("strict"),
                                        {"--keystore", keystore_, "--password-file", Path("password"), "--chain-rpc",
                                         SecretUrl("127.0.0.1:" + proxy_.port()), "--deployment", deployment_});
  strict.Spawn();
  EXPECT_FALSE(strict.WaitReady());
  EXPECT_NE(strict.WaitExit(), 0);
  const std::string strict_log = strict.Log();
  EXPECT_NE(strict_log.find("does not verify"), std::string::npos) << strict_log;
  ExpectNoSecrets(strict_log);
}

}  // namespace
}  // namespace consensor
