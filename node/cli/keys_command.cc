#include "node/cli/keys_command.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <ostream>

#include "common/file_io.h"
#include "common/sha256.h"
#include "node/cli/cli_args.h"

namespace consensor::node {
namespace {

namespace fs = std::filesystem;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr size_t kMaxKeyFileBytes = 4096;

constexpr char kUsage[] = R"(usage:
  consensor keys new [--keystore DIR] (--password-file F | --password-env VAR)
                     [--kdf scrypt|pbkdf2] [--light-kdf]
  consensor keys import KEYFILE [--keystore DIR] (--password-file F | --password-env VAR)
                     [--kdf scrypt|pbkdf2] [--light-kdf]
  consensor keys list [--keystore DIR]
  consensor keys inspect FILE (--password-file F | --password-env VAR) [--show-private]

KEYFILE holds a hex private key (optional 0x). The password is read from a file (one trailing
newline is stripped) or an environment variable. The keystore defaults to ~/.consensor/keystore.
--light-kdf uses cheap key derivation, for tests and devnets only.
)";

int Usage(std::ostream& err, const std::string& message) {
  err << "error: " << message << "\n\n" << kUsage;
  return kExitUsage;
}

int Help(std::ostream& out) {
  out << kUsage;
  return kExitOk;
}

int Fail(std::ostream& err, const Status& status) {
  err << "error: " << status.message() << "\n";
  return kExitFailure;
}

// Wipes a secret on every return path.
template <typename T>
struct Wiper {
  T& buf;
  ~Wiper() {
    if (!buf.empty()) OPENSSL_cleanse(&buf[0], buf.size() * sizeof(buf[0]));
  }
};

const std::vector<std::string> kPasswordOptions = {"--password-file", "--password-env"};

StatusOr<std::string> KeystoreDir(const ParsedArgs& a) {
  if (auto dir = a.Option("--keystore")) {
    if (dir->empty()) return InvalidArgument("--keystore needs a directory");
    return *dir;
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') return FailedPrecondition("$HOME is not set; pass --keystore DIR");
  return (fs::path(home) / ".consensor" / "keystore").string();
}

// Exactly one password source, each given at most once: a usage error otherwise.
std::optional<std::string> PasswordUsageProblem(const ParsedArgs& a) {
  const auto files = a.All("--password-file");
  const auto envs = a.All("--password-env");
  if (files.size() + envs.size() == 0) return "a password is required: give --password-file F or --password-env VAR";
  if (files.size() + envs.size() > 1) return "give only one of --password-file and --password-env, once";
  if ((!files.empty() && files[0].empty()) || (!envs.empty() && envs[0].empty())) {
    return "--password-file and --password-env need a non-empty value";
  }
  return std::nullopt;
}

StatusOr<std::string> Password(const ParsedArgs& a) {
  return ReadPassword(a.Option("--password-file").value_or(""), a.Option("--password-env").value_or(""));
}

// Returns false (with the usage problem) for an unknown --kdf.
std::optional<std::string> KdfFromArgs(const ParsedArgs& a, KdfParams& params) {
  params = a.HasFlag("--light-kdf") ? LightKdfParams() : KdfParams{};
  const std::string kdf = a.Option("--kdf").value_or("scrypt");
  if (kdf == "scrypt") {
    params.kdf = Kdf::kScrypt;
  } else if (kdf == "pbkdf2") {
    params.kdf = Kdf::kPbkdf2;
  } else {
    return "--kdf must be scrypt or pbkdf2, got '" + kdf + "'";
  }
  return std::nullopt;
}

// Creates DIR and any missing parents with mode 0700; an existing directory is left as it is.
Status EnsureDir(const std::string& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return OkStatus();
  fs::path partial;
  for (const fs::path& part : fs::path(dir)) {
    partial /= part;
    if (part.empty() || part == "/") continue;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return FailedPrecondition("cannot create keystore directory '" + partial.string() + "': " + std::strerror(errno));
    }
  }
  if (!fs::is_directory(dir, ec)) return FailedPrecondition("'" + dir + "' is not a directory");
  return OkStatus();
}

// Writes to a temporary file in the same directory and renames it into place, so a crash never
// leaves a truncated keystore under the final name.
Status WriteFileAtomically(const std::string& dir, const std::string& name, const std::string& contents) {
  const std::string final_path = (fs::path(dir) / name).string();
  std::error_code ec;
  if (fs::exists(final_path, ec)) return AlreadyExists("'" + final_path + "' already exists");
  std::string tmp = (fs::path(dir) / ("." + name + ".tmp-XXXXXX")).string();
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);  // created with mode 0600
  if (fd < 0) return FailedPrecondition("cannot create a file in '" + dir + "': " + std::strerror(errno));
  auto fail = [&](const std::string& what) {
    int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return FailedPrecondition(what + " '" + tmp + "': " + std::strerror(e));
  };
  if (::fchmod(fd, 0600) != 0) return fail("cannot set permissions on");
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("cannot sync");
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return FailedPrecondition("cannot close '" + tmp + "': " + std::strerror(e));
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return FailedPrecondition("cannot rename '" + tmp + "' to '" + final_path + "': " + std::strerror(e));
  }
  // Make the rename itself durable; failure here does not undo a complete write.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return OkStatus();
}

// Reads a small file, refusing more than `cap` bytes; the contents may be secret, so partial
// buffers are wiped.
StatusOr<std::string> ReadSecretFile(const std::string& path, size_t cap) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    std::string msg = "cannot open '" + path + "': " + std::strerror(e);
    return e == ENOENT ? NotFound(msg) : FailedPrecondition(msg);
  }
  std::string data;
  data.reserve(cap + 1);
  char buf[512];
  Status status;
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = FailedPrecondition("cannot read '" + path + "': " + std::strerror(errno));
      break;
    }
    if (n == 0) break;
    if (data.size() + static_cast<size_t>(n) > cap) {
      status = InvalidArgument("'" + path + "' is larger than " + std::to_string(cap) + " bytes");
      break;
    }
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  OPENSSL_cleanse(buf, sizeof(buf));
  if (!status.ok()) {
    OPENSSL_cleanse(data.data(), data.size());
    return status;
  }
  return data;
}

// A hex private key, optionally 0x-prefixed, surrounded by optional whitespace. The text is
// never echoed in errors.
StatusOr<Secp256k1Secret> ParseHexSecret(const std::string& text, const std::string& path) {
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  size_t begin = 0, end = text.size();
  while (begin < end && is_space(text[begin])) ++begin;
  while (end > begin && is_space(text[end - 1])) --end;
  std::string_view hex(text.data() + begin, end - begin);
  if (hex.size() >= 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) hex.remove_prefix(2);
  if (hex.size() != 64) {
    return InvalidArgument("'" + path + "' must hold a private key of 64 hex digits (got " +
                           std::to_string(hex.size()) + " characters)");
  }
  StatusOr<Hash256> bytes = Hash256FromHex(hex);
  if (!bytes.ok()) return InvalidArgument("'" + path + "' holds a non-hex character");
  Secp256k1Secret key = *bytes;
  OPENSSL_cleanse(bytes->data(), bytes->size());
  return key;
}

struct KeystoreEntry {
  std::string name;
  std::string path;
  Address20 address{};
};

bool Ignored(const std::string& name) {
  // Editors' backups and our own temporary files, as geth skips them.
  return name.empty() || name[0] == '.' || name.back() == '~';
}

// Every keystore in DIR sorted by file name; files that are not keystores produce warnings.
StatusOr<std::vector<KeystoreEntry>> ScanKeystores(const std::string& dir, std::vector<std::string>& warnings) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return NotFound("keystore directory '" + dir + "' does not exist");
  if (!fs::is_directory(dir, ec)) return FailedPrecondition("'" + dir + "' is not a directory");
  std::vector<KeystoreEntry> entries;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return FailedPrecondition("cannot list '" + dir + "': " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return FailedPrecondition("cannot list '" + dir + "': " + ec.message());
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (Ignored(name) || !it->is_regular_file(type_ec)) continue;
    const std::string path = it->path().string();
    StatusOr<std::string> text = ReadKeystoreFile(path);
    StatusOr<Address20> address = text.ok() ? KeystoreAddress(*text) : StatusOr<Address20>(text.status());
    if (!address.ok()) {
      warnings.push_back("skipping '" + path + "': " + address.status().message());
      continue;
    }
    entries.push_back({name, path, *address});
  }
  if (ec) return FailedPrecondition("cannot list '" + dir + "': " + ec.message());
  std::sort(entries.begin(), entries.end(),
            [](const KeystoreEntry& a, const KeystoreEntry& b) { return a.name < b.name; });
  return entries;
}

// Encrypts `secret` and writes it into the keystore directory; prints the address and path.
int StoreKey(const Secp256k1Secret& secret, const std::string& password, const KdfParams& params,
             const std::string& dir, std::ostream& out, std::ostream& err) {
  StatusOr<Address20> address = AddressFromSecret(secret);
  if (!address.ok()) return Fail(err, address.status());
  StatusOr<std::string> json = EncryptKeystore(secret, password, params);
  if (!json.ok()) return Fail(err, json.status());
  const std::string name = KeystoreFileName(*address, std::chrono::system_clock::now());
  Status written = WriteFileAtomically(dir, name, *json);
  if (!written.ok()) return Fail(err, written);
  out << "address: " << AddressToChecksumHex(*address) << "\n";
  out << "keystore: " << (fs::path(dir) / name).string() << "\n";
  return kExitOk;
}

// Shared by new and import. The Check/Prepare helpers return an exit code when the command must
// stop.
struct StoreOptions {
  std::string dir;
  std::string password;
  KdfParams params;
};

// Usage checks only, so a bad command line fails with exit 2 before any file is touched.
std::optional<int> CheckStoreUsage(const ParsedArgs& a, StoreOptions& opts, std::ostream& err) {
  if (auto problem = PasswordUsageProblem(a)) return Usage(err, *problem);
  if (auto problem = KdfFromArgs(a, opts.params)) return Usage(err, *problem);
  return std::nullopt;
}

std::optional<int> PrepareStore(const ParsedArgs& a, StoreOptions& opts, std::ostream& err) {
  StatusOr<std::string> dir = KeystoreDir(a);
  if (!dir.ok()) return Fail(err, dir.status());
  opts.dir = *dir;
  StatusOr<std::string> password = Password(a);
  if (!password.ok()) return Fail(err, password.status());
  opts.password = *password;
  OPENSSL_cleanse(password->data(), password->size());
  if (opts.password.empty()) err << "warning: the password is empty; anyone with the file can use the key\n";
  if (a.HasFlag("--light-kdf"))
    err << "warning: --light-kdf keystores are cheap to brute-force; use them for tests only\n";
  Status made = EnsureDir(opts.dir);
  if (!made.ok()) return Fail(err, made);
  return std::nullopt;
}

const ArgSpec kStoreSpec{{"--keystore", "--password-file", "--password-env", "--kdf"}, {"--light-kdf", "--help"}};

int CmdNew(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  StatusOr<ParsedArgs> parsed = ParseArgs(args, kStoreSpec);
  if (!parsed.ok()) return Usage(err, parsed.status().message());
  const ParsedArgs& a = *parsed;
  if (a.HasFlag("--help")) return Help(out);
  if (!a.positional.empty()) return Usage(err, "keys new takes no arguments, got '" + a.positional[0] + "'");
  StoreOptions opts;
  Wiper<std::string> wipe_password{opts.password};
  if (auto code = CheckStoreUsage(a, opts, err)) return *code;
  if (auto code = PrepareStore(a, opts, err)) return *code;
  StatusOr<Secp256k1Secret> secret = GenerateSecretKey();
  if (!secret.ok()) return Fail(err, secret.status());
  Wiper<Secp256k1Secret> wipe_secret{*secret};
  return StoreKey(*secret, opts.password, opts.params, opts.dir, out, err);
}

int CmdImport(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  StatusOr<ParsedArgs> parsed = ParseArgs(args, kStoreSpec);
  if (!parsed.ok()) return Usage(err, parsed.status().message());
  const ParsedArgs& a = *parsed;
  if (a.HasFlag("--help")) return Help(out);
  if (a.positional.size() != 1) return Usage(err, "keys import takes exactly one KEYFILE argument");
  const std::string& key_file = a.positional[0];
  StoreOptions opts;
  Wiper<std::string> wipe_password{opts.password};
  if (auto code = CheckStoreUsage(a, opts, err)) return *code;

  StatusOr<std::string> text = ReadSecretFile(key_file, kMaxKeyFileBytes);
  if (!text.ok()) return Fail(err, text.status());
  Wiper<std::string> wipe_text{*text};
  StatusOr<Secp256k1Secret> secret = ParseHexSecret(*text, key_file);
  if (!secret.ok()) return Fail(err, secret.status());
  Wiper<Secp256k1Secret> wipe_secret{*secret};
  StatusOr<Address20> address = AddressFromSecret(*secret);
  if (!address.ok()) return Fail(err, address.status().WithContext("'" + key_file + "'"));

  if (auto code = PrepareStore(a, opts, err)) return *code;
  std::vector<std::string> warnings;
  StatusOr<std::vector<KeystoreEntry>> existing = ScanKeystores(opts.dir, warnings);
  if (!existing.ok()) return Fail(err, existing.status());
  for (const KeystoreEntry& e : *existing) {
    if (e.address == *address) {
      return Fail(err,
                  AlreadyExists("a keystore for " + AddressToChecksumHex(*address) + " already exists: " + e.path));
    }
  }
  return StoreKey(*secret, opts.password, opts.params, opts.dir, out, err);
}

int CmdList(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  StatusOr<ParsedArgs> parsed = ParseArgs(args, ArgSpec{{"--keystore"}, {"--help"}});
  if (!parsed.ok()) return Usage(err, parsed.status().message());
  const ParsedArgs& a = *parsed;
  if (a.HasFlag("--help")) return Help(out);
  if (!a.positional.empty()) return Usage(err, "keys list takes no arguments, got '" + a.positional[0] + "'");
  StatusOr<std::string> dir = KeystoreDir(a);
  if (!dir.ok()) return Fail(err, dir.status());
  std::vector<std::string> warnings;
  StatusOr<std::vector<KeystoreEntry>> entries = ScanKeystores(*dir, warnings);
  if (!entries.ok()) return Fail(err, entries.status());
  for (const std::string& w : warnings) err << "warning: " << w << "\n";
  for (const KeystoreEntry& e : *entries) out << AddressToChecksumHex(e.address) << "  " << e.path << "\n";
  if (entries->empty()) err << "no keystores in '" << *dir << "'\n";
  return kExitOk;
}

int CmdInspect(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  StatusOr<ParsedArgs> parsed =
      ParseArgs(args, ArgSpec{{"--password-file", "--password-env"}, {"--show-private", "--help"}});
  if (!parsed.ok()) return Usage(err, parsed.status().message());
  const ParsedArgs& a = *parsed;
  if (a.HasFlag("--help")) return Help(out);
  if (a.positional.size() != 1) return Usage(err, "keys inspect takes exactly one FILE argument");
  if (auto problem = PasswordUsageProblem(a)) return Usage(err, *problem);
  StatusOr<std::string> password = Password(a);
  if (!password.ok()) return Fail(err, password.status());
  Wiper<std::string> wipe_password{*password};
  StatusOr<DecryptedKey> key = DecryptKeystoreFile(a.positional[0], *password);
  if (!key.ok()) return Fail(err, key.status());
  Wiper<Secp256k1Secret> wipe_secret{key->secret};
  out << "address: " << AddressToChecksumHex(key->address) << "\n";
  if (a.HasFlag("--show-private")) {
    std::string hex = ToHex(key->secret);
    Wiper<std::string> wipe_hex{hex};
    out << "private key: 0x" << hex << "\n";
  }
  return kExitOk;
}

int Dispatch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) return Usage(err, "keys needs a subcommand");
  const std::string& sub = args[0];
  if (sub == "--help" || sub == "-h" || sub == "help") return Help(out);
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "new") return CmdNew(rest, out, err);
  if (sub == "import") return CmdImport(rest, out, err);
  if (sub == "list") return CmdList(rest, out, err);
  if (sub == "inspect") return CmdInspect(rest, out, err);
  return Usage(err, "unknown keys subcommand '" + sub + "'");
}

}  // namespace

std::string KeystoreFileName(const Address20& address, std::chrono::system_clock::time_point time) {
  using namespace std::chrono;
  const auto since_epoch = time.time_since_epoch();
  auto secs = duration_cast<seconds>(since_epoch);
  auto nanos = duration_cast<nanoseconds>(since_epoch - secs);
  if (nanos.count() < 0) {  // before 1970: keep the fraction positive
    secs -= seconds(1);
    nanos += seconds(1);
  }
  const std::time_t t = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "UTC--%04d-%02d-%02dT%02d-%02d-%02d.%09lldZ--", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(nanos.count()));
  return buf + ToHex(address);
}

int RunKeysCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // Library code below may throw (allocation, filesystem); nothing escapes the command.
  try {
    return Dispatch(args, out, err);
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace consensor::node
