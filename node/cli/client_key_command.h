// `consensor client-key new --name NAME [--out FILE]`: a client API key for a node that requires
// keys (clients.auth = "keys"). The key goes to the client; its SHA-256 goes to the node's keys
// file, which never holds the key itself.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace consensor::node {

// `args` is everything after `consensor client-key`. 0 on success, 1 on failure, 2 on a usage error.
int RunClientKeyCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace consensor::node
