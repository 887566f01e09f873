// Merkle roots over tensor hashes (docs/DETERMINISM.md section 2).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/sha256.h"

namespace consensor::executor {

// Root of the tree over already-computed leaf hashes.
Hash256 MerkleRoot(std::vector<Hash256> leaves);
// Leaf for trace entry i: SHA-256(0x00 || u32 LE i || tensor hash).
Hash256 TraceLeaf(uint32_t index, const Hash256& tensor_hash);
// Leaf for a named output: SHA-256(0x00 || u32 LE len || name || tensor hash).
Hash256 OutputLeaf(const std::string& name, const Hash256& tensor_hash);
// Result root over (name, tensor hash) pairs; sorts by name.
Hash256 ResultRoot(std::vector<std::pair<std::string, Hash256>> outputs);

}  // namespace consensor::executor
