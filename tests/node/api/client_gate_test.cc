// Client identities and budgets (node/api/client_gate.h): the keys file's checks, key
// authentication, and each budget with a clock the test moves.
#include "node/api/client_gate.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "node/api/api_key.h"

namespace consensor::node {
namespace {

namespace fs = std::filesystem;

class ClientGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("consensor-gate-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WriteKeys(const std::string& text, mode_t mode = 0600) {
    const std::string path = (dir_ / "clients.toml").string();
    std::ofstream(path, std::ios::trunc) << text;
    chmod(path.c_str(), mode);
    return path;
  }
  ClientGate MakeGate(ClientsConfig config, std::vector<ClientEntry> clients) {
    return ClientGate(std::move(config), std::move(clients), &metrics_, nullptr, [this] { return now_; });
  }

  fs::path dir_;
  MetricsRegistry metrics_;
  std::chrono::steady_clock::time_point now_{};
};

std::string Entry(const std::string& name, const std::string& key, const std::string& extra = "") {
  return "[[client]]\nname = \"" + name + "\"\nkey_sha256 = \"" + ToHex(ApiKeyHash(key)) + "\"\n" + extra;
}

TEST_F(ClientGateTest, KeysFileIsCheckedAndDefaultsFillTheBudgets) {
  ClientBudgets defaults;
  defaults.max_watches = 3;
  defaults.flops_per_minute = 1000;
  auto clients =
      LoadClientKeysFile(WriteKeys(Entry("alice", "ka", "max_watches = 1\n") + Entry("bob", "kb")), defaults);
  ASSERT_TRUE(clients.ok()) << clients.status().ToString();
  ASSERT_EQ(clients->size(), 2u);
  EXPECT_EQ((*clients)[0].name, "alice");
  EXPECT_EQ((*clients)[0].budgets.max_watches, 1);
  EXPECT_EQ((*clients)[0].budgets.flops_per_minute, 1000);
  EXPECT_EQ((*clients)[1].budgets.max_watches, 3);

  auto refused = [&](const std::string& text, const std::string& expected, mode_t mode = 0600) {
    auto r = LoadClientKeysFile(WriteKeys(text, mode), defaults);
    EXPECT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(expected), std::string::npos) << r.status().message();
  };
  refused(Entry("alice", "ka"), "must not be readable or writable by other users", 0644);
  refused(Entry("alice", "ka"), "chmod 600", 0606);
  refused("[[client]\nname = \"x\"", "clients.toml:");
  refused("[[client]]\nname = \"alice\"\nkey_sha256 = \"abc\"\n", "key_sha256 must be 64 hex digits");
  refused("[[client]]\nname = \"alice\"\n", "key_sha256 is missing");
  refused(Entry("bad name", "ka"), "name must be 1 to 64");
  refused(Entry("anonymous", "ka"), "not 'anonymous'");
  refused(Entry("alice", "ka") + Entry("alice", "kb"), "used twice");
  refused(Entry("alice", "ka") + Entry("bob", "ka"), "the same key as client 'alice'");
  refused(Entry("alice", "ka", "max_watches = -1\n"), "max_watches must be a non-negative integer");
  // A float out of int64's range (found by the client_keys fuzz target: UBSan saw toml++ cast it).
  refused(Entry("alice", "ka", "max_tasks_in_flight = 418e24\n"), "max_tasks_in_flight must be a non-negative integer");
  refused(Entry("alice", "ka", "max_watches = 2.0\n"), "max_watches must be a non-negative integer");
  refused(Entry("alice", "ka", "max_wathces = 1\n"), "unknown key 'max_wathces'");
  refused("[server]\nx = 1\n", "unknown key 'server'");
  EXPECT_EQ(LoadClientKeysFile((dir_ / "missing.toml").string(), defaults).status().code(), StatusCode::kNotFound);
}

TEST_F(ClientGateTest, KeysAreRequiredWhenConfiguredAndCheckedAlways) {
  auto clients = LoadClientKeysFile(WriteKeys(Entry("alice", "secret-a")), ClientBudgets{});
  ASSERT_TRUE(clients.ok());
  ClientsConfig keys;
  keys.auth = "keys";
  ClientGate gate = MakeGate(keys, *clients);
  std::string error;
  EXPECT_FALSE(gate.Authenticate(std::nullopt, "ipv4:10.0.0.1:5000", &error));
  EXPECT_NE(error.find("requires an API key"), std::string::npos) << error;
  EXPECT_FALSE(gate.Authenticate("Bearer secret-b", "ipv4:10.0.0.1:5000", &error));
  EXPECT_NE(error.find("not known"), std::string::npos) << error;
  EXPECT_FALSE(gate.Authenticate("secret-a", "ipv4:10.0.0.1:5000", &error));
  EXPECT_NE(error.find("Bearer"), std::string::npos) << error;
  auto who = gate.Authenticate("Bearer secret-a", "ipv4:10.0.0.1:5000", &error);
  ASSERT_TRUE(who);
  EXPECT_EQ(who->id, "alice");
  EXPECT_EQ(who->label, "alice");
  EXPECT_TRUE(gate.Authenticate("bearer secret-a", "ipv4:10.0.0.1:5000", &error));

  // Open mode: no key is an anonymous caller keyed on its IP; a wrong key is still refused.
  ClientGate open = MakeGate(ClientsConfig{}, *clients);
  auto anon = open.Authenticate(std::nullopt, "ipv4:10.0.0.1:5000", &error);
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->id, "ip:10.0.0.1");
  EXPECT_EQ(anon->label, "anonymous");
  auto v6 = open.Authenticate(std::nullopt, "ipv6:[::1]:5000", &error);
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->id, "ip:[::1]");
  EXPECT_FALSE(open.Authenticate("Bearer nope", "ipv4:10.0.0.1:5000", &error));
  EXPECT_TRUE(open.Authenticate("Bearer secret-a", "ipv4:10.0.0.1:5000", &error));
}

TEST_F(ClientGateTest, SubmissionRateIsATokenBucketPerClient) {
  ClientsConfig config;
  config.defaults.submissions_per_second = 2;
  config.defaults.submission_burst = 3;
  ClientGate gate = MakeGate(config, {});
  std::string error;
  auto a = *gate.Authenticate(std::nullopt, "ipv4:10.0.0.1:1", &error);
  auto b = *gate.Authenticate(std::nullopt, "ipv4:10.0.0.2:1", &error);
  auto never = [](const std::string&) { return false; };
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(gate.AdmitSubmission(a, 0, never).ok()) << i;
  Status over = gate.AdmitSubmission(a, 0, never);
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("submissions_per_second"), std::string::npos) << over.message();
  EXPECT_TRUE(gate.AdmitSubmission(b, 0, never).ok());  // another caller has its own bucket
  now_ += std::chrono::milliseconds(500);               // one token back
  EXPECT_TRUE(gate.AdmitSubmission(a, 0, never).ok());
  EXPECT_FALSE(gate.AdmitSubmission(a, 0, never).ok());
  // A caller over its rate is refused before its graph is compiled to count FLOPs.
  ClientIdentity metered = a;
  metered.budgets.flops_per_minute = 1000;
  int counted = 0;
  int64_t taken = -1;
  auto count = [&counted]() -> StatusOr<int64_t> {
    ++counted;
    return int64_t{10};
  };
  EXPECT_FALSE(gate.AdmitSubmission(metered, count, never, &taken).ok());
  EXPECT_EQ(counted, 0);
  EXPECT_EQ(taken, 0);
  now_ += std::chrono::seconds(100);  // the bucket holds the burst, no more
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(gate.AdmitSubmission(a, 0, never).ok()) << i;
  EXPECT_FALSE(gate.AdmitSubmission(a, 0, never).ok());
}

TEST_F(ClientGateTest, FlopsPerMinuteAndTasksInFlight) {
  ClientsConfig config;
  config.defaults.flops_per_minute = 600;
  config.defaults.max_tasks_in_flight = 2;
  ClientGate gate = MakeGate(config, {});
  std::string error;
  auto a = *gate.Authenticate(std::nullopt, "ipv4:10.0.0.1:1", &error);
  std::set<std::string> done;
  auto finished = [&](const std::string& id) { return done.count(id) > 0; };

  Status too_big = gate.AdmitSubmission(a, 601, finished);
  EXPECT_EQ(too_big.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.message().find("more than client 'anonymous' may use in a minute"), std::string::npos);
  ASSERT_TRUE(gate.AdmitSubmission(a, 400, finished).ok());
  gate.TaskAccepted(a, "t1");
  Status flops = gate.AdmitSubmission(a, 400, finished);
  EXPECT_EQ(flops.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(flops.message().find("flops_per_minute"), std::string::npos) << flops.message();
  now_ += std::chrono::seconds(20);  // 200 FLOPs back: 400 now
  ASSERT_TRUE(gate.AdmitSubmission(a, 400, finished).ok());
  gate.TaskAccepted(a, "t2");
  now_ += std::chrono::seconds(60);
  Status in_flight = gate.AdmitSubmission(a, 10, finished);
  EXPECT_EQ(in_flight.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(in_flight.message().find("max_tasks_in_flight"), std::string::npos) << in_flight.message();
  done.insert("t1");
  ASSERT_TRUE(gate.AdmitSubmission(a, 10, finished).ok());
  // A submission refused later on (by the node) gets its FLOPs back.
  gate.RefundFlops(a, 10);
  gate.TaskAccepted(a, "t3");
  EXPECT_FALSE(gate.AdmitSubmission(a, 10, finished).ok());  // t2 and t3 in flight
}

TEST_F(ClientGateTest, WatchStreamsAreCappedAndGivenBack) {
  ClientsConfig config;
  config.defaults.max_watches = 2;
  ClientGate gate = MakeGate(config, {});
  std::string error;
  auto a = *gate.Authenticate(std::nullopt, "ipv4:10.0.0.1:1", &error);
  auto b = *gate.Authenticate(std::nullopt, "ipv4:10.0.0.2:1", &error);
  auto w1 = gate.OpenWatch(a);
  auto w2 = gate.OpenWatch(a);
  ASSERT_TRUE(w1.ok() && w2.ok());
  auto w3 = gate.OpenWatch(a);
  EXPECT_EQ(w3.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(w3.status().message().find("max_watches"), std::string::npos);
  EXPECT_TRUE(gate.OpenWatch(b).ok());
  w1->Release();
  EXPECT_TRUE(gate.OpenWatch(a).ok());
  gate.UpdateGauges();
  const std::string text = metrics_.RenderPrometheusText();
  EXPECT_NE(text.find("consensor_client_refusals_total{client=\"anonymous\",budget=\"max_watches\"} 1"),
            std::string::npos)
      << text;
}

// Issue 18: outputs a non-member fetches from their holders for a client, per minute, per client.
TEST_F(ClientGateTest, OutputFetchesPerMinuteIsATokenBucketPerClient) {
  ClientsConfig config;
  config.defaults.output_fetches_per_minute = 2;
  ClientGate gate = MakeGate(config, {});
  std::string error;
  auto a = *gate.Authenticate(std::nullopt, "ipv4:10.0.0.1:1", &error);
  auto b = *gate.Authenticate(std::nullopt, "ipv4:10.0.0.2:1", &error);
  EXPECT_TRUE(gate.AdmitOutputFetch(a).ok());
  EXPECT_TRUE(gate.AdmitOutputFetch(a).ok());
  Status over = gate.AdmitOutputFetch(a);
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("output_fetches_per_minute = 2"), std::string::npos) << over.message();
  EXPECT_TRUE(gate.AdmitOutputFetch(b).ok()) << "another client has its own bucket";
  now_ += std::chrono::seconds(30);  // one fetch back
  EXPECT_TRUE(gate.AdmitOutputFetch(a).ok());
  EXPECT_FALSE(gate.AdmitOutputFetch(a).ok());
  const std::string text = metrics_.RenderPrometheusText();
  EXPECT_NE(text.find("consensor_client_refusals_total{client=\"anonymous\",budget=\"output_fetches_per_minute\"} 2"),
            std::string::npos)
      << text;
  // No budget: never refused.
  ClientGate open = MakeGate(ClientsConfig{}, {});
  auto c = *open.Authenticate(std::nullopt, "ipv4:10.0.0.3:1", &error);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(open.AdmitOutputFetch(c).ok());
  // A keys-file entry sets it.
  auto clients = LoadClientKeysFile(WriteKeys(Entry("alice", "ka", "output_fetches_per_minute = 7\n")), {});
  ASSERT_TRUE(clients.ok()) << clients.status().ToString();
  EXPECT_EQ((*clients)[0].budgets.output_fetches_per_minute, 7);
}

TEST(ApiKeyTest, NewKeysAreRandomAndHashedAsTheirBytes) {
  auto a = NewApiKey();
  auto b = NewApiKey();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->size(), 5u + 64u);
  EXPECT_EQ(a->rfind("cnsr_", 0), 0u);
  EXPECT_EQ(ApiKeyHash("abc"), Sha256Of(std::string_view("abc")));
}

}  // namespace
}  // namespace consensor::node
