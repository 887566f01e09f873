// Client API keys (docs/NODE.md, "Clients"): a client sends its key as `authorization: Bearer
// <key>` metadata; the node keeps only the key's SHA-256 in its keys file, never the key.
#pragma once

#include <string>
#include <string_view>

#include "common/sha256.h"
#include "common/status.h"

namespace consensor::node {

// "cnsr_" and 64 hex digits of 32 bytes from the OS's CSPRNG.
StatusOr<std::string> NewApiKey();

// What the keys file stores for a key: SHA-256 of its exact bytes.
Hash256 ApiKeyHash(std::string_view key);

// The key from a file (surrounding whitespace trimmed) or from $CONSENSOR_API_KEY; the CLI never
// takes the key itself on its command line, where `ps` would show it. Empty when neither is set.
// INVALID_ARGUMENT for an empty or oversized key, or a file that cannot be read.
StatusOr<std::string> ReadApiKey(const std::string& key_file);

}  // namespace consensor::node
