// Compilation: a validated graph becomes a flat instruction list over one arena whose
// offsets come from a liveness-based memory planner. Peak memory is known before any
// kernel runs, and a program over the cap fails here with a clear error.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "common/tensor.h"
#include "executor/graph.h"
#include "executor/limits.h"
#include "executor/validate.h"
#include "kernels/op.h"

namespace consensor::executor {

// Where constants stored as blobs come from (a directory, the node's store, ...).
class BlobSource {
 public:
  virtual ~BlobSource() = default;
  // Returns the blob's bytes; implementations must verify the SHA-256.
  virtual StatusOr<std::vector<uint8_t>> Get(const Hash256& sha256) = 0;
};

// Blobs as files named by their lowercase hex SHA-256 in one directory.
class DirectoryBlobSource final : public BlobSource {
 public:
  explicit DirectoryBlobSource(std::string dir, int64_t max_blob_bytes = int64_t{4} << 30)
      : dir_(std::move(dir)), max_blob_bytes_(max_blob_bytes) {}
  StatusOr<std::vector<uint8_t>> Get(const Hash256& sha256) override;

 private:
  std::string dir_;
  int64_t max_blob_bytes_;
};

// Blobs held in memory (e.g. an imported model's weights before upload). Get returns a copy.
class MemoryBlobSource final : public BlobSource {
 public:
  Hash256 Add(std::vector<uint8_t> bytes);                             // returns its SHA-256
  StatusOr<std::vector<uint8_t>> Get(const Hash256& sha256) override;  // NOT_FOUND if absent
  bool Contains(const Hash256& sha256) const { return blobs_.count(sha256) != 0; }
  size_t size() const { return blobs_.size(); }

 private:
  std::map<Hash256, std::vector<uint8_t>> blobs_;
};

enum class BufferRole : uint8_t { kInput, kConstant, kIntermediate };

struct Buffer {
  DType dtype = DType::kInvalid;
  Shape shape;
  int64_t offset = 0;  // in the arena, 64-byte aligned
  int64_t bytes = 0;
  BufferRole role = BufferRole::kIntermediate;
  // The buffer whose memory this one shares (same offset and bytes, another shape), or -1. Set
  // for the output of an instruction that only relabels a shape (Instruction::alias); it names
  // the buffer that owns the memory, never another alias, and takes that buffer's role.
  int alias_of = -1;
};

struct Instruction {
  kernels::Op op;
  std::string op_name;
  std::string node_label;  // for error messages
  kernels::OpParams params;
  std::vector<int> inputs;  // buffer indices
  int output = -1;          // buffer index
  // Shapes the kernel sees (same bytes, possibly reinterpreted; see InferResult).
  std::vector<Shape> input_view_shapes;
  Shape output_view_shape;
  int64_t flops = 0;
  // In Program::fused_instructions only: the elementwise instructions fused into this one as
  // its epilogue (docs/DETERMINISM.md 3.1), the buffers they read besides the chain's own
  // values, and those buffers' shapes. `output` is then the last fused instruction's output.
  std::vector<kernels::EpilogueStep> epilogue;
  std::vector<int> epilogue_inputs;
  std::vector<Shape> epilogue_input_shapes;
  int fused_count = 1;  // instructions of the canonical list this one stands for
  // An op that keeps every byte where it is (a reshape, an identity, a transpose of unit dims,
  // ...: docs/DETERMINISM.md 3.2), whose output buffer shares its input's memory
  // (Buffer::alias_of): the bytes are already in place, so no kernel runs. It stays in both lists so that instruction i
  // is still trace leaf i and its output is hashed with its own shape.
  bool alias = false;
};

struct Program {
  Hash256 graph_id{};
  std::vector<Buffer> buffers;
  std::vector<Instruction> instructions;  // canonical order; the trace is over these
  // The same computation with chains of elementwise instructions fused into the instruction
  // that produces their input (docs/DETERMINISM.md 3.1), over the same buffers; empty when
  // nothing fuses. Same bits; run when the backend supports it and no trace is asked for.
  std::vector<Instruction> fused_instructions;
  std::vector<std::pair<std::string, int>> inputs;   // placeholder name -> buffer, sorted
  std::vector<std::pair<std::string, int>> outputs;  // output name -> buffer, sorted
  std::vector<std::pair<int, Tensor>> constants;     // buffer -> data to upload
  int64_t arena_bytes = 0;                           // planned peak
  int64_t total_flops = 0;
};

// Resolves blob constants through `blobs` (may be null when the graph has none). A constant
// whose BlobRef has an `entry` is that tensor inside a safetensors blob; each such blob is
// fetched and parsed once per call, and its bytes are dropped as soon as the last constant
// reading it has been copied out.
StatusOr<Program> Compile(const Graph& graph, const ValidatedGraph& validated, BlobSource* blobs, const Limits& limits);

// Validate + Compile.
StatusOr<Program> CompileGraph(const Graph& graph, BlobSource* blobs, const Limits& limits);

}  // namespace consensor::executor
