// Whole-file reads and writes with the error messages every command and the daemon share.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace consensor {

// Reads a whole file, refusing files larger than max_bytes.
StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path, int64_t max_bytes);
Status WriteFileAtomic(const std::string& path, std::span<const uint8_t> bytes);
// Creates a directory and any missing parents (mkdir -p); an existing directory is fine.
Status CreateDirectories(const std::string& path);

}  // namespace consensor
