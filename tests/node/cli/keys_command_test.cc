// `consensor keys`: new, import, list and inspect, run in-process against temporary directories
// with light KDF parameters.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "node/cli/keys_command.h"
#include "node/keys/keystore.h"

namespace consensor::node {
namespace {

namespace fs = std::filesystem;

// The private key whose address is below (from the web3 secret storage examples).
constexpr char kKeyHex[] = "7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d";
constexpr char kKeyAddress[] = "0x008AeEda4D805471dF9b2A5B0f38A0C3bCBA786b";

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result Keys(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = RunKeysCommand(args, out, err);
  return {code, out.str(), err.str()};
}

std::string Describe(const Result& r) {
  return "code " + std::to_string(r.code) + "\nout: " + r.out + "\nerr: " + r.err;
}

class KeysCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "keys_command_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    keystore_ = (fs::path(root_) / "nested" / "keystore").string();
    password_file_ = Write("password.txt", "hunter2\n");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::string Write(const std::string& name, const std::string& contents) {
    std::string p = (fs::path(root_) / name).string();
    std::ofstream(p, std::ios::binary) << contents;
    fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);  // secrets are private
    return p;
  }

  // `keys new` with light scrypt into keystore_; returns the printed keystore path.
  std::string NewKey(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"new", "--keystore", keystore_, "--password-file", password_file_, "--light-kdf"};
    args.insert(args.end(), extra.begin(), extra.end());
    Result r = Keys(args);
    EXPECT_EQ(r.code, 0) << Describe(r);
    return PrintedPath(r.out);
  }

  static std::string PrintedPath(const std::string& out) { return Field(out, "keystore: "); }
  static std::string PrintedAddress(const std::string& out) { return Field(out, "address: "); }
  // The rest of the line that starts with `label`.
  static std::string Field(const std::string& out, const std::string& label) {
    size_t at = out.find(label);
    if (at == std::string::npos || (at > 0 && out[at - 1] != '\n')) return "";
    at += label.size();
    return out.substr(at, out.find('\n', at) - at);
  }

  std::vector<std::string> KeystoreNames() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(keystore_, ec)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string root_, keystore_, password_file_;
};

// `pattern` with 'd' for a decimal digit and 'h' for a lowercase hex digit; other characters
// match themselves.
bool MatchesPattern(const std::string& text, const std::string& pattern) {
  if (text.size() != pattern.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool digit = c >= '0' && c <= '9';
    if (pattern[i] == 'd' ? !digit : pattern[i] == 'h' ? !(digit || (c >= 'a' && c <= 'f')) : c != pattern[i]) {
      return false;
    }
  }
  return true;
}

bool IsChecksumAddress(const std::string& text) {
  auto a = AddressFromHex(text);
  return text.size() == 42 && a.ok() && AddressToChecksumHex(*a) == text;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// ------------------------------------------------------------------------------------------
// keys new

TEST_F(KeysCommandTest, NewCreatesKeystore) {
  Result r = Keys({"new", "--keystore", keystore_, "--password-file", password_file_, "--light-kdf"});
  ASSERT_EQ(r.code, 0) << Describe(r);
  const std::string address = PrintedAddress(r.out);
  const std::string path = PrintedPath(r.out);
  ASSERT_FALSE(address.empty()) << r.out;
  ASSERT_FALSE(path.empty()) << r.out;

  // Named like geth, under the keystore directory, mode 0600 in a 0700 directory.
  EXPECT_EQ(fs::path(path).parent_path(), fs::path(keystore_));
  const std::string name = fs::path(path).filename().string();
  EXPECT_TRUE(MatchesPattern(name, "UTC--dddd-dd-ddTdd-dd-dd.dddddddddZ--" + std::string(40, 'h'))) << name;
  EXPECT_TRUE(IsChecksumAddress(address)) << address;
  std::string lower = address.substr(2);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  EXPECT_EQ(name.substr(name.size() - 40), lower);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(keystore_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(KeystoreNames().size(), 1u);  // no temporary file left behind

  // The file decrypts with the password from the file (newline stripped) to the printed address.
  auto key = DecryptKeystoreFile(path, "hunter2");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(AddressToChecksumHex(key->address), address);
  auto doc = nlohmann::json::parse(ReadAll(path));
  EXPECT_EQ(doc["crypto"]["kdf"], "scrypt");
  EXPECT_EQ(doc["crypto"]["kdfparams"]["n"], 4096);
}

TEST_F(KeysCommandTest, NewWithPbkdf2AndPasswordFromEnvironment) {
  ASSERT_EQ(setenv("KEYS_COMMAND_TEST_PW", "from-env", 1), 0);
  Result r = Keys(
      {"new", "--keystore", keystore_, "--password-env", "KEYS_COMMAND_TEST_PW", "--kdf", "pbkdf2", "--light-kdf"});
  unsetenv("KEYS_COMMAND_TEST_PW");
  ASSERT_EQ(r.code, 0) << Describe(r);
  const std::string path = PrintedPath(r.out);
  auto doc = nlohmann::json::parse(ReadAll(path));
  EXPECT_EQ(doc["crypto"]["kdf"], "pbkdf2");
  EXPECT_TRUE(DecryptKeystoreFile(path, "from-env").ok());
  EXPECT_EQ(DecryptKeystoreFile(path, "hunter2").status().code(), StatusCode::kPermissionDenied);
}

TEST_F(KeysCommandTest, NewTwiceMakesDistinctKeys) {
  const std::string a = NewKey();
  const std::string b = NewKey();
  EXPECT_NE(a, b);
  EXPECT_EQ(KeystoreNames().size(), 2u);
}

TEST_F(KeysCommandTest, NewDefaultsToHomeKeystore) {
  const char* old_home = std::getenv("HOME");
  std::optional<std::string> saved = old_home ? std::optional<std::string>(old_home) : std::nullopt;
  ASSERT_EQ(setenv("HOME", root_.c_str(), 1), 0);
  Result r = Keys({"new", "--password-file", password_file_, "--light-kdf"});
  Result listed = Keys({"list"});
  unsetenv("HOME");
  Result no_home = Keys({"list"});
  if (saved) setenv("HOME", saved->c_str(), 1);

  ASSERT_EQ(r.code, 0) << Describe(r);
  const fs::path expected_dir = fs::path(root_) / ".consensor" / "keystore";
  EXPECT_EQ(fs::path(PrintedPath(r.out)).parent_path(), expected_dir);
  struct stat st {};
  ASSERT_EQ(stat(expected_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(listed.code, 0) << Describe(listed);
  EXPECT_NE(listed.out.find(PrintedAddress(r.out)), std::string::npos);
  EXPECT_EQ(no_home.code, 1) << Describe(no_home);
  EXPECT_NE(no_home.err.find("HOME"), std::string::npos);
}

TEST_F(KeysCommandTest, NewUsageErrors) {
  const std::string pw = password_file_;
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"new", "--keystore", keystore_}, "password is required"},
      {{"new", "--keystore", keystore_, "--password-file", pw, "--password-env", "X"}, "only one"},
      {{"new", "--keystore", keystore_, "--password-file", pw, "--password-file", pw}, "only one"},
      {{"new", "--keystore", keystore_, "--password-file="}, "non-empty"},
      {{"new", "--keystore", keystore_, "--password", "hunter2"}, "unknown option"},
      {{"new", "--keystore", keystore_, "--private-key", kKeyHex}, "unknown option"},
      {{"new", "--keystore", keystore_, "--password-file", pw, "--kdf", "argon2"}, "--kdf"},
      {{"new", "--keystore", keystore_, "--password-file", pw, "extra"}, "no arguments"},
      {{"new", "--keystore"}, "needs a value"},
  };
  for (const Case& c : cases) {
    Result r = Keys(c.args);
    EXPECT_EQ(r.code, 2) << Describe(r);
    EXPECT_NE(r.err.find("error: "), std::string::npos) << Describe(r);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << Describe(r);
    EXPECT_NE(r.err.find("usage:"), std::string::npos) << Describe(r);
  }
  EXPECT_FALSE(fs::exists(keystore_));  // nothing created on a usage error
}

TEST_F(KeysCommandTest, NewFailures) {
  unsetenv("KEYS_COMMAND_TEST_UNSET");
  Result r = Keys({"new", "--keystore", keystore_, "--password-env", "KEYS_COMMAND_TEST_UNSET", "--light-kdf"});
  EXPECT_EQ(r.code, 1) << Describe(r);
  EXPECT_NE(r.err.find("KEYS_COMMAND_TEST_UNSET"), std::string::npos);

  r = Keys({"new", "--keystore", keystore_, "--password-file", root_ + "/missing", "--light-kdf"});
  EXPECT_EQ(r.code, 1) << Describe(r);
  EXPECT_NE(r.err.find("error: "), std::string::npos);

  // The keystore path is an existing file.
  const std::string file = Write("not_a_dir", "x");
  r = Keys({"new", "--keystore", file, "--password-file", password_file_, "--light-kdf"});
  EXPECT_EQ(r.code, 1) << Describe(r);
}

// ------------------------------------------------------------------------------------------
// keys import

TEST_F(KeysCommandTest, ImportHexKey) {
  const std::string key_file = Write("key.hex", std::string("  0x") + kKeyHex + "\r\n\n");
  Result r = Keys({"import", key_file, "--keystore", keystore_, "--password-file", password_file_, "--light-kdf"});
  ASSERT_EQ(r.code, 0) << Describe(r);
  EXPECT_EQ(PrintedAddress(r.out), kKeyAddress);
  auto key = DecryptKeystoreFile(PrintedPath(r.out), "hunter2");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(ToHex(key->secret), kKeyHex);

  // The same key again, even without 0x, is refused.
  const std::string again = Write("key2.hex", kKeyHex);
  r = Keys({"import", again, "--keystore", keystore_, "--password-file", password_file_, "--light-kdf"});
  EXPECT_EQ(r.code, 1) << Describe(r);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  EXPECT_EQ(KeystoreNames().size(), 1u);
}

TEST_F(KeysCommandTest, ImportRejectsBadKeys) {
  const std::string bad_hex = std::string(kKeyHex).substr(0, 63) + "g";
  for (const std::string& contents :
       {bad_hex, std::string(kKeyHex).substr(0, 62), std::string(kKeyHex) + "00", std::string(64, '0'),
        std::string("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"), std::string(""),
        std::string("0x"), std::string(10000, 'a')}) {
    const std::string key_file = Write("bad.hex", contents);
    Result r = Keys({"import", key_file, "--keystore", keystore_, "--password-file", password_file_, "--light-kdf"});
    EXPECT_EQ(r.code, 1) << contents.substr(0, 70) << "\n" << Describe(r);
    EXPECT_NE(r.err.find("error: "), std::string::npos);
    // Key material is never echoed back.
    if (contents.size() >= 60) {
      EXPECT_EQ(r.err.find(contents.substr(0, 60)), std::string::npos) << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(keystore_) && !KeystoreNames().empty());

  Result missing = Keys({"import", root_ + "/nope", "--keystore", keystore_, "--password-file", password_file_});
  EXPECT_EQ(missing.code, 1) << Describe(missing);
}

TEST_F(KeysCommandTest, ImportUsageErrors) {
  const std::string key_file = Write("key.hex", kKeyHex);
  EXPECT_EQ(Keys({"import", "--keystore", keystore_, "--password-file", password_file_}).code, 2);
  EXPECT_EQ(Keys({"import", key_file, key_file, "--keystore", keystore_, "--password-file", password_file_}).code, 2);
  EXPECT_EQ(Keys({"import", key_file, "--keystore", keystore_}).code, 2);
  EXPECT_EQ(Keys({"import", key_file, "--keystore", keystore_, "--password-env", "A", "--password-file", "B"}).code, 2);
  EXPECT_EQ(Keys({"import", key_file, "--password-file", password_file_, "--kdf", "md5"}).code, 2);
  EXPECT_FALSE(fs::exists(keystore_));
}

// ------------------------------------------------------------------------------------------
// keys list

TEST_F(KeysCommandTest, ListSortedWithWarnings) {
  const std::string a = NewKey();
  const std::string b = NewKey({"--kdf", "pbkdf2"});
  // Not keystores: junk is warned about; hidden files, backups and directories are skipped.
  std::ofstream(fs::path(keystore_) / "junk.json") << "{not json";
  std::ofstream(fs::path(keystore_) / "other.json") << R"({"version": 3})";
  std::ofstream(fs::path(keystore_) / ".hidden") << "x";
  std::ofstream(fs::path(keystore_) / "backup~") << "x";
  fs::create_directory(fs::path(keystore_) / "subdir");

  Result r = Keys({"list", "--keystore", keystore_});
  ASSERT_EQ(r.code, 0) << Describe(r);
  std::istringstream lines(r.out);
  std::vector<std::string> got;
  for (std::string line; std::getline(lines, line);) got.push_back(line);
  ASSERT_EQ(got.size(), 2u) << r.out;
  std::vector<std::string> paths = {a, b};
  std::sort(paths.begin(), paths.end());
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_GT(got[i].size(), 44u) << got[i];
    EXPECT_TRUE(IsChecksumAddress(got[i].substr(0, 42))) << got[i];
    EXPECT_EQ(got[i].substr(42, 2), "  ") << got[i];
    EXPECT_EQ(got[i].substr(44), paths[i]);
    auto text = ReadKeystoreFile(paths[i]);
    ASSERT_TRUE(text.ok());
    auto address = KeystoreAddress(*text);
    ASSERT_TRUE(address.ok());
    EXPECT_EQ(got[i].substr(0, 42), AddressToChecksumHex(*address));
  }
  EXPECT_NE(r.err.find("warning: skipping '" + (fs::path(keystore_) / "junk.json").string()), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("other.json"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(".hidden"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("backup~"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("subdir"), std::string::npos) << r.err;
}

TEST_F(KeysCommandTest, ListEmptyAndMissing) {
  fs::create_directories(keystore_);
  Result empty = Keys({"list", "--keystore", keystore_});
  EXPECT_EQ(empty.code, 0) << Describe(empty);
  EXPECT_EQ(empty.out, "");
  Result missing = Keys({"list", "--keystore", root_ + "/does-not-exist"});
  EXPECT_EQ(missing.code, 1) << Describe(missing);
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos);
  EXPECT_EQ(Keys({"list", "--keystore", keystore_, "extra"}).code, 2);
  EXPECT_EQ(Keys({"list", "--password-file", password_file_}).code, 2);
}

// ------------------------------------------------------------------------------------------
// keys inspect

TEST_F(KeysCommandTest, Inspect) {
  const std::string key_file = Write("key.hex", kKeyHex);
  Result imported =
      Keys({"import", key_file, "--keystore", keystore_, "--password-file", password_file_, "--light-kdf"});
  ASSERT_EQ(imported.code, 0) << Describe(imported);
  const std::string path = PrintedPath(imported.out);

  Result r = Keys({"inspect", path, "--password-file", password_file_});
  ASSERT_EQ(r.code, 0) << Describe(r);
  EXPECT_EQ(r.out, std::string("address: ") + kKeyAddress + "\n");

  r = Keys({"inspect", path, "--password-file", password_file_, "--show-private"});
  ASSERT_EQ(r.code, 0) << Describe(r);
  EXPECT_NE(r.out.find(std::string("private key: 0x") + kKeyHex), std::string::npos) << r.out;

  const std::string wrong = Write("wrong.txt", "hunter3");
  r = Keys({"inspect", path, "--password-file", wrong});
  EXPECT_EQ(r.code, 1) << Describe(r);
  EXPECT_NE(r.err.find("wrong password"), std::string::npos) << r.err;
  EXPECT_EQ(Keys({"inspect", path}).code, 2);
  EXPECT_EQ(Keys({"inspect", "--password-file", password_file_}).code, 2);
  EXPECT_EQ(Keys({"inspect", root_ + "/missing.json", "--password-file", password_file_}).code, 1);
}

// ------------------------------------------------------------------------------------------
// Dispatch and file names

TEST(KeysCommandDispatchTest, HelpAndUnknown) {
  Result help = Keys({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("keys new"), std::string::npos);
  EXPECT_EQ(Keys({"new", "--help"}).code, 0);
  Result none = Keys({});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("usage:"), std::string::npos);
  Result unknown = Keys({"delete"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("delete"), std::string::npos);
}

TEST(KeysCommandDispatchTest, KeystoreFileName) {
  auto address = AddressFromHex("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed");
  ASSERT_TRUE(address.ok());
  const std::chrono::system_clock::time_point t{std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(1614834367) + std::chrono::nanoseconds(123456789))};
  EXPECT_EQ(KeystoreFileName(*address, t),
            "UTC--2021-03-04T05-06-07.123456789Z--5aaeb6053f3e94c9b9a09f33669435e7ef1beaed");
  const std::chrono::system_clock::time_point epoch{};
  EXPECT_EQ(KeystoreFileName(*address, epoch),
            "UTC--1970-01-01T00-00-00.000000000Z--5aaeb6053f3e94c9b9a09f33669435e7ef1beaed");
}

}  // namespace
}  // namespace consensor::node
