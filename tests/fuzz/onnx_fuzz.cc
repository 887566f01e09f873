// ONNX models (executor/onnx/import.h): `consensor submit model.onnx` imports a model it was
// handed, and `consensor onnx-test` reads the test suite's tensor files. Import folds constant
// subgraphs with the CPU executor, so the limits here are those of a small node: no input can
// make the import allocate or compute without bound. A model that imports must validate, and
// its weights blob must be a safetensors file the compiler can read.
#include "common/safetensors.h"
#include "executor/onnx/import.h"
#include "executor/validate.h"
#include "tests/fuzz/fuzz_target.h"

using namespace consensor;
using namespace consensor::executor;

CNSR_FUZZ_TARGET(onnx) {
  const std::span<const uint8_t> bytes(data, size);
  OnnxImportOptions options;
  options.limits.max_graph_file_bytes = 1 << 20;
  options.limits.max_elements_per_tensor = 1 << 16;
  options.limits.max_total_bytes = 16 << 20;
  options.limits.max_ops = 1000;
  options.limits.max_flops = 100000000;
  options.max_model_bytes = 1 << 20;
  (void)ReadOnnxModelInfo(bytes);
  (void)ParseOnnxTensor(bytes, options.limits);
  auto imported = ImportOnnx(bytes, options);
  if (!imported.ok()) return 0;
  auto validated = Validate(imported->graph, options.limits);
  if (!validated.ok()) {
    std::fprintf(stderr, "imported graph does not validate: %s\n", validated.status().ToString().c_str());
  }
  CNSR_FUZZ_CHECK(validated.ok());
  if (!imported->weights.empty()) {
    CNSR_FUZZ_CHECK(Sha256Of(imported->weights) == imported->weights_sha256);
    CNSR_FUZZ_CHECK(ParseSafetensors(imported->weights).ok());
  }
  return 0;
}
