// A client's graph blob, as a node takes it (executor/serialize.h, validate.h, program.h):
// decode -> validate and infer shapes -> compile with the memory planner, and for graphs small
// enough a run on the CPU backend with every input zero. Limits are those of a small node, so
// an input can never make the target allocate or compute without bound.
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "executor/validate.h"
#include "kernels/backend_factory.h"
#include "tests/fuzz/fuzz_target.h"

using namespace consensor;
using namespace consensor::executor;

namespace {

constexpr int64_t kMaxRunArenaBytes = 1 << 20;
constexpr int64_t kMaxRunFlops = 1 << 20;

kernels::Backend* Cpu() {
  static std::unique_ptr<kernels::Backend> cpu = [] {
    auto backend = kernels::CreateBackend(kernels::BackendOptions{});
    CNSR_FUZZ_CHECK(backend.ok());
    return std::move(*backend);
  }();
  return cpu.get();
}

}  // namespace

CNSR_FUZZ_TARGET(graph) {
  Limits limits;
  limits.max_graph_file_bytes = 1 << 20;
  limits.max_elements_per_tensor = 1 << 16;
  limits.max_total_bytes = 16 << 20;
  limits.max_ops = 1000;
  limits.max_flops = 100000000;
  auto graph = ParseGraph(std::span<const uint8_t>(data, size), /*text_format=*/false, limits);
  if (!graph.ok()) return 0;
  auto validated = Validate(*graph, limits);
  if (!validated.ok()) return 0;
  // Re-serializing a valid graph must give the same graph id.
  auto reparsed = ParseGraph(SerializeGraph(*graph), false, limits);
  CNSR_FUZZ_CHECK(reparsed.ok());
  auto revalidated = Validate(*reparsed, limits);
  CNSR_FUZZ_CHECK(revalidated.ok() && revalidated->id == validated->id);

  MemoryBlobSource no_blobs;  // a blob constant that is not held is NOT_FOUND
  auto program = Compile(*graph, *validated, &no_blobs, limits);
  if (!program.ok()) return 0;
  CNSR_FUZZ_CHECK(program->arena_bytes <= limits.max_total_bytes);
  if (program->arena_bytes > kMaxRunArenaBytes || program->total_flops > kMaxRunFlops) return 0;

  auto loaded = LoadedProgram::Load(*program, Cpu());
  if (!loaded.ok()) return 0;
  std::map<std::string, Tensor> inputs;
  for (const auto& [name, buffer] : program->inputs) {
    const Buffer& b = program->buffers[static_cast<size_t>(buffer)];
    inputs.emplace(name, Tensor(b.dtype, b.shape));
  }
  RunOptions options;
  options.trace = true;
  auto result = (*loaded)->Run(inputs, options);
  if (result.ok()) CNSR_FUZZ_CHECK(result->trace.size() == program->instructions.size());
  return 0;
}
