// `consensor keys ...`: create, import, list and inspect Ethereum v3 keystores for an
// operator. Passwords come from --password-file or --password-env only; no flag takes a password
// or a key, since flags end up in shell history and `ps`.
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

#include "node/keys/keystore.h"

namespace consensor::node {

// `args` is everything after `consensor keys`. Returns 0 on success, 1 when the operation
// fails ("error: ..." on err), 2 for a usage error (message and usage on err).
int RunKeysCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// geth's keystore file name: "UTC--2006-01-02T15-04-05.000000000Z--<40 lowercase hex digits>".
std::string KeystoreFileName(const Address20& address, std::chrono::system_clock::time_point time);

}  // namespace consensor::node
