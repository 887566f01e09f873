#include "node/cli/client_key_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ostream>

#include "node/api/api_key.h"
#include "node/cli/cli_args.h"

namespace consensor::node {

namespace {

constexpr char kUsage[] = R"(usage: consensor client-key new --name NAME [--out FILE]

Makes a client API key (32 random bytes) for a node whose operator requires keys
(clients.auth = "keys"). Prints the key, or with --out writes it to FILE (created with
mode 0600; it must not exist yet), and prints the [[client]] entry to append to the node's
clients.keys_file: the name and the key's SHA-256, never the key. The client passes the key
with --api-key-file FILE or $CONSENSOR_API_KEY. NAME is 1 to 64 of [A-Za-z0-9_.-].
)";

int Usage(std::ostream& err, const std::string& message) {
  err << "consensor client-key: " << message << "\n\n" << kUsage;
  return 2;
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "anonymous") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

// O_EXCL: an existing key file is never overwritten.
Status WriteNewPrivateFile(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return FailedPrecondition("cannot create " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return FailedPrecondition("cannot write " + path + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return FailedPrecondition("cannot write " + path);
  return OkStatus();
}

}  // namespace

int RunClientKeyCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ArgSpec spec;
  spec.value_options = {"--name", "--out"};
  spec.flags = {"--help"};
  auto a = ParseArgs(args, spec);
  if (!a.ok()) return Usage(err, a.status().message());
  if (a->HasFlag("--help")) {
    out << kUsage;
    return 0;
  }
  if (a->positional.size() != 1 || a->positional[0] != "new") return Usage(err, "expected `client-key new`");
  const std::string name = a->Option("--name").value_or("");
  if (!ValidName(name)) return Usage(err, "--name must be 1 to 64 of [A-Za-z0-9_.-] (and not 'anonymous')");
  auto key = NewApiKey();
  if (!key.ok()) {
    err << "error: " << key.status().message() << "\n";
    return 1;
  }
  const std::string entry = "[[client]]\nname = \"" + name + "\"\nkey_sha256 = \"" + ToHex(ApiKeyHash(*key)) + "\"\n";
  if (auto file = a->Option("--out")) {
    if (Status s = WriteNewPrivateFile(*file, *key + "\n"); !s.ok()) {
      err << "error: " << s.message() << "\n";
      return 1;
    }
    out << "key written to " << *file << " (mode 0600); give it to the client (--api-key-file)\n";
  } else {
    out << "key: " << *key << "\n";
    out << "(shown once; the node keeps only its hash)\n";
  }
  out << "\nappend to the node's clients.keys_file (budgets optional, see docs/NODE.md):\n\n" << entry;
  return 0;
}

}  // namespace consensor::node
