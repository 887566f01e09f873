// Constants stored as entries of a safetensors container blob.
#include <gtest/gtest.h>

#include "common/safetensors.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::MakeCpu;

// Counts Get calls, to check a container is fetched once per Compile.
class CountingBlobSource final : public BlobSource {
 public:
  explicit CountingBlobSource(BlobSource* inner) : inner_(inner) {}
  StatusOr<std::vector<uint8_t>> Get(const Hash256& sha256) override {
    ++gets;
    return inner_->Get(sha256);
  }
  int gets = 0;

 private:
  BlobSource* inner_;
};

struct Weights {
  Tensor w = Tensor::FromVector<float>(DType::kF32, {3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::FromVector<float>(DType::kF32, {2}, {0.5f, -1.0f});
  Tensor steps = Tensor::FromVector<int32_t>(DType::kI32, {1}, {7});
};

std::vector<uint8_t> WeightsFile(const Weights& wt) {
  auto file =
      WriteSafetensors({{"layer.w", &wt.w}, {"steps", &wt.steps}, {"layer.b", &wt.b}}, {{"format", "consensor-test"}});
  EXPECT_TRUE(file.ok());
  return file.ok() ? *file : std::vector<uint8_t>{};
}

// y = x @ w + b with w and b read from the container.
Graph Mlp(const Hash256& sha) {
  Graph g;
  Value x = g.input("x", DType::kF32, {2, 3});
  Value w = g.constant_blob(sha, DType::kF32, {3, 2}, "w", "layer.w");
  Value b = g.constant_blob(sha, DType::kF32, {2}, "b", "layer.b");
  g.output("y", matmul(x, w) + b);
  return g;
}

// One constant read from the container, passed through.
Graph Single(const Hash256& sha, DType dtype, Shape shape, const std::string& entry) {
  Graph g;
  Value c = g.constant_blob(sha, dtype, std::move(shape), "c", entry);
  g.output("y", identity(c));
  return g;
}

TEST(ContainerBlobTest, ConstantsFromSafetensorsEntries) {
  Weights wt;
  MemoryBlobSource source;
  const Hash256 sha = source.Add(WeightsFile(wt));
  CountingBlobSource counting(&source);

  auto program = CompileGraph(Mlp(sha), &counting, {});
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  EXPECT_EQ(counting.gets, 1);  // one container, fetched and parsed once
  ASSERT_EQ(program->constants.size(), 2u);

  auto cpu = MakeCpu();
  ASSERT_NE(cpu, nullptr);
  auto loaded = LoadedProgram::Load(*program, cpu.get());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  Tensor x = Tensor::FromVector<float>(DType::kF32, {2, 3}, {1, 0, -1, 2, 1, 0.5f});
  auto result = (*loaded)->Run({{"x", x}});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->outputs.size(), 1u);
  const Tensor& y = result->outputs[0].tensor;
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  // Row 0: [1, 0, -1] @ w = [1 - 5, 2 - 6] = [-4, -4]; + b = [-3.5, -5].
  // Row 1: [2, 1, 0.5] @ w = [2 + 3 + 2.5, 4 + 4 + 3] = [7.5, 11]; + b = [8, 10].
  const float expected[] = {-3.5f, -5.0f, 8.0f, 10.0f};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.data_as<float>()[i], expected[i]) << i;

  // Same values as the graph with the weights inline.
  Graph inline_graph;
  Value xi = inline_graph.input("x", DType::kF32, {2, 3});
  inline_graph.output("y", matmul(xi, inline_graph.constant(wt.w, "w")) + inline_graph.constant(wt.b, "b"));
  auto inline_result = consensor::testing::CompileAndRun(inline_graph, {{"x", x}}, cpu.get());
  ASSERT_TRUE(inline_result.ok()) << inline_result.status().ToString();
  EXPECT_EQ(ToHex(inline_result->outputs[0].hash), ToHex(result->outputs[0].hash));
}

TEST(ContainerBlobTest, NonF32EntryAndRawBlobTogether) {
  Weights wt;
  MemoryBlobSource source;
  const Hash256 container = source.Add(WeightsFile(wt));
  // A raw blob alongside: the bytes of an i32[1] tensor.
  Tensor raw = Tensor::FromVector<int32_t>(DType::kI32, {1}, {35});
  const Hash256 raw_sha = source.Add(std::vector<uint8_t>(raw.bytes().begin(), raw.bytes().end()));
  Graph g;
  Value steps = g.constant_blob(container, DType::kI32, {1}, "steps", "steps");
  Value r = g.constant_blob(raw_sha, DType::kI32, {1}, "raw");
  g.output("y", steps + r);
  auto program = CompileGraph(g, &source, {});
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  auto cpu = MakeCpu();
  auto loaded = LoadedProgram::Load(*program, cpu.get());
  ASSERT_TRUE(loaded.ok());
  auto result = (*loaded)->Run({});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->outputs[0].tensor.data_as<int32_t>()[0], 42);
}

void ExpectError(const StatusOr<Program>& p, StatusCode code, const std::vector<std::string>& substrings) {
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), code) << p.status().ToString();
  for (const std::string& s : substrings) {
    EXPECT_NE(p.status().message().find(s), std::string::npos) << "missing '" << s << "' in: " << p.status().message();
  }
}

TEST(ContainerBlobTest, MissingEntry) {
  MemoryBlobSource source;
  const Hash256 sha = source.Add(WeightsFile(Weights()));
  ExpectError(CompileGraph(Single(sha, DType::kF32, {2}, "layer.c"), &source, {}), StatusCode::kNotFound,
              {"constant 'c'", "'layer.c'"});
}

TEST(ContainerBlobTest, DTypeMismatch) {
  MemoryBlobSource source;
  const Hash256 sha = source.Add(WeightsFile(Weights()));
  ExpectError(CompileGraph(Single(sha, DType::kI32, {2}, "layer.b"), &source, {}), StatusCode::kInvalidArgument,
              {"constant 'c'", "'layer.b'", "declared i32[2]", "entry is f32[2]"});
}

TEST(ContainerBlobTest, ShapeMismatch) {
  MemoryBlobSource source;
  const Hash256 sha = source.Add(WeightsFile(Weights()));
  ExpectError(CompileGraph(Single(sha, DType::kF32, {2, 3}, "layer.w"), &source, {}), StatusCode::kInvalidArgument,
              {"constant 'c'", "'layer.w'", "declared f32[2, 3]", "entry is f32[3, 2]"});
  // Same element count, different shape: still rejected.
  ExpectError(CompileGraph(Single(sha, DType::kF32, {6}, "layer.w"), &source, {}), StatusCode::kInvalidArgument,
              {"entry is f32[3, 2]"});
}

TEST(ContainerBlobTest, BlobNotSafetensors) {
  MemoryBlobSource source;
  // Length 5, then text that is not a JSON object.
  const Hash256 sha = source.Add({5, 0, 0, 0, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'});
  ExpectError(CompileGraph(Single(sha, DType::kF32, {2}, "layer.b"), &source, {}), StatusCode::kInvalidArgument,
              {"constant 'c'", "not a valid safetensors file", "does not start with '{'"});
  // Too short to hold the length field.
  const Hash256 tiny = source.Add({1, 2, 3});
  ExpectError(CompileGraph(Single(tiny, DType::kF32, {2}, "layer.b"), &source, {}), StatusCode::kInvalidArgument,
              {"not a valid safetensors file", "too short"});
  // A header length over the reader's cap keeps its code.
  const Hash256 huge = source.Add({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  ExpectError(CompileGraph(Single(huge, DType::kF32, {2}, "layer.b"), &source, {}), StatusCode::kResourceExhausted,
              {"not a valid safetensors file", "exceeds the limit"});
  // Bool entry with a bad byte: the data is checked when copied out.
  Tensor flags = Tensor::FromVector<uint8_t>(DType::kBool, {2}, {1, 0});
  auto file = WriteSafetensors({{"flags", &flags}});
  ASSERT_TRUE(file.ok());
  file->back() = 3;
  const Hash256 bad = source.Add(*file);
  ExpectError(CompileGraph(Single(bad, DType::kBool, {2}, "flags"), &source, {}), StatusCode::kInvalidArgument,
              {"constant 'c'", "bool element 1"});
}

TEST(ContainerBlobTest, BlobMissingFromSource) {
  MemoryBlobSource source;
  const Hash256 sha = Sha256Of(std::string_view("not stored"));
  ExpectError(CompileGraph(Single(sha, DType::kF32, {2}, "layer.b"), &source, {}), StatusCode::kNotFound,
              {"constant 'c'", ToHex(sha)});
  ExpectError(CompileGraph(Single(sha, DType::kF32, {2}, "layer.b"), nullptr, {}), StatusCode::kFailedPrecondition,
              {"constant 'c'", "no blob source"});
}

TEST(ContainerBlobTest, MemoryBlobSource) {
  MemoryBlobSource source;
  const Hash256 sha = source.Add({1, 2, 3});
  EXPECT_EQ(ToHex(sha), ToHex(Sha256Of(std::string_view("\x01\x02\x03"))));
  auto got = source.Get(sha);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(source.Get(Hash256{}).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace consensor::executor
