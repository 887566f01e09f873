// safetensors: the weights blob of an imported model, uploaded by clients (common/safetensors.h).
// Every entry of an index that parses must read back, and writing the tensors again must give a
// file that parses to the same entries.
#include "common/safetensors.h"
#include "tests/fuzz/fuzz_target.h"

using namespace consensor;

CNSR_FUZZ_TARGET(safetensors) {
  const std::span<const uint8_t> file(data, size);
  SafetensorsLimits limits;
  limits.max_header_bytes = 1 << 20;
  limits.max_tensors = 4096;
  auto index = ParseSafetensors(file, limits);
  if (!index.ok()) return 0;
  std::vector<Tensor> tensors;
  std::vector<std::pair<std::string, const Tensor*>> named;
  tensors.reserve(index->entries.size());
  for (const SafetensorsEntry& entry : index->entries) {
    CNSR_FUZZ_CHECK(index->Find(entry.name) == &entry);
    auto tensor = ReadSafetensorsTensor(file, *index, entry.name);
    if (!tensor.ok()) return 0;  // e.g. a bool byte that is not 0 or 1
    CNSR_FUZZ_CHECK(tensor->dtype() == entry.dtype && tensor->shape() == entry.shape);
    tensors.push_back(*std::move(tensor));
  }
  for (size_t i = 0; i < tensors.size(); ++i) named.emplace_back(index->entries[i].name, &tensors[i]);
  auto written = WriteSafetensors(named, index->metadata);
  if (!written.ok()) return 0;  // names or metadata the writer refuses (invalid UTF-8)
  auto again = ParseSafetensors(*written, limits);
  CNSR_FUZZ_CHECK(again.ok());
  CNSR_FUZZ_CHECK(again->entries.size() == index->entries.size() && again->metadata == index->metadata);
  return 0;
}

CNSR_FUZZ_SEEDS(safetensors) {
  std::vector<std::vector<uint8_t>> seeds;
  const Tensor w = Tensor::FromVector<float>(DType::kF32, {2, 2}, {1, 2, 3, 4});
  const Tensor b = Tensor::FromVector<int64_t>(DType::kI64, {2}, {-1, 5});
  const Tensor m = Tensor::FromVector<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  const Tensor q = Tensor::FromVector<int8_t>(DType::kI8, {1, 1, 2}, {-3, 9});
  const Tensor e(DType::kI32, {0});
  if (auto f = WriteSafetensors({{"weight", &w}, {"bias", &b}}); f.ok()) seeds.push_back(*f);
  if (auto f = WriteSafetensors({{"mask", &m}, {"q", &q}, {"empty", &e}}, {{"format", "pt"}}); f.ok()) {
    seeds.push_back(*f);
  }
  if (auto f = WriteSafetensors({}); f.ok()) seeds.push_back(*f);
  return seeds;
}
