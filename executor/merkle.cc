#include "executor/merkle.h"

#include <algorithm>

namespace consensor::executor {

Hash256 MerkleRoot(std::vector<Hash256> level) {
  if (level.empty()) return Sha256Of(std::string_view());
  while (level.size() > 1) {
    std::vector<Hash256> next;
    next.reserve((level.size() + 1) / 2);
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      Sha256 h;
      h.UpdateU8(0x01);
      h.Update(level[i]);
      h.Update(level[i + 1]);
      next.push_back(h.Finish());
    }
    if (level.size() % 2 == 1) next.push_back(level.back());
    level = std::move(next);
  }
  return level[0];
}

Hash256 TraceLeaf(uint32_t index, const Hash256& tensor_hash) {
  Sha256 h;
  h.UpdateU8(0x00);
  h.UpdateU32(index);
  h.Update(tensor_hash);
  return h.Finish();
}

Hash256 OutputLeaf(const std::string& name, const Hash256& tensor_hash) {
  Sha256 h;
  h.UpdateU8(0x00);
  h.UpdateU32(static_cast<uint32_t>(name.size()));
  h.Update(name);
  h.Update(tensor_hash);
  return h.Finish();
}

Hash256 ResultRoot(std::vector<std::pair<std::string, Hash256>> outputs) {
  std::sort(outputs.begin(), outputs.end());
  std::vector<Hash256> leaves;
  for (const auto& [name, hash] : outputs) leaves.push_back(OutputLeaf(name, hash));
  return MerkleRoot(std::move(leaves));
}

}  // namespace consensor::executor
