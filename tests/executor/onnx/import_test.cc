// ONNX import: models built here with onnx.proto, plus Debian's libonnx-testdata files for
// malformed-input checks. The full backend-test suite runs as the `onnx_conformance` ctest.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <tuple>

#include "common/file_io.h"
#include "common/safetensors.h"
#include "executor/onnx/import.h"
#include "executor/serialize.h"
#include "executor/validate.h"
#include "kernels/detmath.h"
#include "kernels/half.h"
#include "onnx/onnx_pb.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::MakeCpu;
using consensor::testing::RandomF32;

// --- a tiny builder for ONNX models ---

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17) {
    model_.set_ir_version(8);
    model_.set_producer_name("consensor-test");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
  }
  onnx::GraphProto* graph() { return model_.mutable_graph(); }

  // dims: -1 is a symbolic dimension named "batch".
  void Input(const std::string& name, int32_t elem, const std::vector<int64_t>& dims) {
    auto* in = graph()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0) dim->set_dim_param("batch");
      else dim->set_dim_value(d);
    }
  }
  void Output(const std::string& name) {
    auto* out = graph()->add_output();
    out->set_name(name);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  // An initializer with its name, ONNX data type and dims; the caller sets its data.
  onnx::TensorProto* Initializer(const std::string& name, int32_t data_type, const std::vector<int64_t>& dims) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(data_type);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  }
  void InitializerF32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
    Initializer(name, onnx::TensorProto::FLOAT, dims)
        ->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  }
  void InitializerI64(const std::string& name, const std::vector<int64_t>& values) {
    auto* t = Initializer(name, onnx::TensorProto::INT64, {static_cast<int64_t>(values.size())});
    for (int64_t v : values) t->add_int64_data(v);
  }
  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? outputs[0] + "_node" : name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  static void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  std::vector<uint8_t> Bytes() const {
    std::string s = model_.SerializeAsString();
    return {s.begin(), s.end()};
  }
  onnx::ModelProto model_;
};

std::vector<float> Values(const Tensor& t) { return {t.data_as<float>(), t.data_as<float>() + t.num_elements()}; }

StatusOr<RunResult> RunImported(const OnnxImport& imported, const std::map<std::string, Tensor>& inputs) {
  MemoryBlobSource blobs;
  if (!imported.weights.empty()) blobs.Add(imported.weights);
  ASSIGN_OR_RETURN(Program p, CompileGraph(imported.graph, &blobs, Limits{}));
  auto cpu = MakeCpu();
  ASSIGN_OR_RETURN(auto loaded, LoadedProgram::Load(p, cpu.get()));
  return loaded->Run(inputs);
}

// y = relu(Gemm(x, W, b, transB=1)): weights go to safetensors, transposed once at import.
ModelBuilder GemmModel(int64_t batch = 2) {
  ModelBuilder m;
  m.Input("x", onnx::TensorProto::FLOAT, {batch, 3});
  std::vector<float> w(4 * 3 * 30);  // large enough to leave the graph for the weights blob
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) - 3.0f;
  m.InitializerF32("W", {120, 3}, w);
  std::vector<float> b(120);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.25f * static_cast<float>(i % 5);
  m.InitializerF32("b", {120}, b);
  ModelBuilder::IntAttr(m.Node("Gemm", {"x", "W", "b"}, {"h"}, "fc"), "transB", 1);
  m.Node("Relu", {"h"}, {"y"});
  m.Output("y");
  return m;
}

TEST(OnnxImport, GemmReluMatchesDirectComputation) {
  ModelBuilder m = GemmModel();
  auto imported = ImportOnnx(m.Bytes(), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(imported->outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(imported->opset, 17);
  EXPECT_EQ(imported->producer, "consensor-test");

  // W^T was folded at import and lives in the safetensors blob; b (480 bytes) stays inline.
  ASSERT_FALSE(imported->weights.empty());
  EXPECT_EQ(imported->weights_sha256, Sha256Of(imported->weights));
  auto index = ParseSafetensors(imported->weights);
  ASSERT_TRUE(index.ok()) << index.status().message();
  ASSERT_EQ(index->entries.size(), 1u);
  EXPECT_EQ(index->entries[0].shape, (Shape{3, 120}));
  int blob_constants = 0;
  for (const auto& v : imported->graph.values()) {
    if (v.kind == ValueKind::kConstant && v.blob) {
      ++blob_constants;
      EXPECT_EQ(v.blob->sha256, imported->weights_sha256);
      EXPECT_NE(index->Find(v.blob->entry), nullptr) << v.blob->entry;
    }
  }
  EXPECT_EQ(blob_constants, 1);

  Tensor x = RandomF32({2, 3}, 7);
  auto r = RunImported(*imported, {{"x", x}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->outputs.size(), 1u);
  const auto y = Values(r->outputs[0].tensor);
  const float* xv = x.data_as<float>();
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 120; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < 3; ++k) acc = std::fma(xv[i * 3 + k], static_cast<float>((j * 3 + k) % 7) - 3.0f, acc);
      float want = std::max(acc + 0.25f * static_cast<float>(j % 5), 0.0f);
      EXPECT_EQ(y[i * 120 + j], want) << i << "," << j;
    }
  }
}

TEST(OnnxImport, SameModelSameGraphId) {
  auto a = ImportOnnx(GemmModel().Bytes(), {});
  auto b = ImportOnnx(GemmModel().Bytes(), {});
  ASSERT_TRUE(a.ok() && b.ok());
  auto va = Validate(a->graph, {});
  auto vb = Validate(b->graph, {});
  ASSERT_TRUE(va.ok() && vb.ok());
  EXPECT_EQ(va->id, vb->id);
  EXPECT_EQ(a->weights, b->weights);
  // And through serialization: the graph file round-trips to the same id.
  auto parsed = ParseGraph(SerializeGraph(a->graph), false, {});
  ASSERT_TRUE(parsed.ok());
  auto vp = Validate(*parsed, {});
  ASSERT_TRUE(vp.ok());
  EXPECT_EQ(vp->id, va->id);
}

// The pattern of onnxconverter-common's float16 conversion (IS-Net in
// @imgly/background-removal-data): the Cast of a graph input comes after the nodes that read it.
ModelBuilder CastLastModel(bool sorted) {
  ModelBuilder m;
  m.Input("x", onnx::TensorProto::FLOAT, {2, 3});
  auto cast = [&] { ModelBuilder::IntAttr(m.Node("Cast", {"x"}, {"xc"}, "cast"), "to", onnx::TensorProto::FLOAT); };
  if (sorted) cast();
  m.Node("Relu", {"xc"}, {"a"}, "relu");
  m.Node("Add", {"a", "xc"}, {"y"}, "add");
  if (!sorted) cast();
  m.Output("y");
  return m;
}

TEST(OnnxImport, NodesOutOfOrderAreImportedInTopologicalOrder) {
  auto sorted = ImportOnnx(CastLastModel(true).Bytes(), {});
  auto unsorted = ImportOnnx(CastLastModel(false).Bytes(), {});
  ASSERT_TRUE(sorted.ok()) << sorted.status().message();
  ASSERT_TRUE(unsorted.ok()) << unsorted.status().message();
  auto vs = Validate(sorted->graph, {});
  auto vu = Validate(unsorted->graph, {});
  ASSERT_TRUE(vs.ok() && vu.ok());
  EXPECT_EQ(vs->id, vu->id);  // the order is a function of the file alone, and a sorted file keeps its own
  Tensor x = RandomF32({2, 3}, 11);
  auto r = RunImported(*unsorted, {{"x", x}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto y = Values(r->outputs[0].tensor);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], std::max(x.data_as<float>()[i], 0.0f) + x.data_as<float>()[i]) << i;

  // A cycle never becomes ready: a clear error naming the value, not a hang.
  ModelBuilder cycle;
  cycle.Input("x", onnx::TensorProto::FLOAT, {2});
  cycle.Node("Add", {"x", "b"}, {"a"}, "first");
  cycle.Node("Relu", {"a"}, {"b"}, "second");
  cycle.Output("b");
  auto refused = ImportOnnx(cycle.Bytes(), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("node 'first' (Add) reads 'b', which no earlier node"), std::string::npos)
      << refused.status().message();
}

TEST(OnnxImport, ShapeArithmeticIsFoldedAtImport) {
  // y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): a PyTorch-style flatten.
  ModelBuilder m;
  m.Input("x", onnx::TensorProto::FLOAT, {2, 3, 4});
  m.InitializerI64("zero", {0});
  m.InitializerI64("minus_one", {-1});
  m.Node("Shape", {"x"}, {"s"});
  m.Node("Gather", {"s", "zero"}, {"n"});
  m.Node("Concat", {"n", "minus_one"}, {"target"})->add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  m.Node("Reshape", {"x", "target"}, {"y"});
  m.Output("y");
  auto imported = ImportOnnx(m.Bytes(), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->folded_nodes, 3);
  auto vg = Validate(imported->graph, {});
  ASSERT_TRUE(vg.ok());
  ASSERT_EQ(vg->order.size(), 1u);
  EXPECT_EQ(vg->order[0].schema->name, "reshape");
  EXPECT_EQ(vg->types[vg->outputs[0].second].shape, (Shape{2, 12}));
}

// Conv (2 groups, bias optional) -> BatchNormalization, on x [1, 4, 5, 6], W [6, 2, 3, 3].
ModelBuilder ConvBnModel(bool conv_bias, bool conv_output_too) {
  ModelBuilder m;
  m.Input("x", onnx::TensorProto::FLOAT, {1, 4, 5, 6});
  std::vector<float> w(6 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(static_cast<int>(i * 37 % 101) - 50);
  m.InitializerF32("W", {6, 2, 3, 3}, w);
  std::vector<std::string> conv_in = {"x", "W"};
  if (conv_bias) {
    m.InitializerF32("cb", {6}, {0.5f, -0.25f, 0.125f, 1.0f, -2.0f, 0.3f});
    conv_in.push_back("cb");
  }
  auto* conv = m.Node("Conv", conv_in, {"c"}, "conv");
  ModelBuilder::IntAttr(conv, "group", 2);
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  m.InitializerF32("scale", {6}, {1.5f, 0.7f, -0.3f, 2.0f, 0.9f, 1.1f});
  m.InitializerF32("shift", {6}, {0.1f, -0.2f, 0.3f, 0.0f, 1.0f, -1.5f});
  m.InitializerF32("mean", {6}, {0.05f, -0.4f, 0.2f, 1.0f, -0.7f, 0.0f});
  m.InitializerF32("var", {6}, {0.9f, 1.3f, 0.01f, 2.5f, 0.4f, 1.0f});
  m.Node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"y"}, "bn");
  m.Output("y");
  if (conv_output_too) m.Output("c");
  return m;
}

std::vector<std::string> OpsOf(const Graph& g) {
  auto v = Validate(g, {});
  EXPECT_TRUE(v.ok()) << v.status().message();
  std::vector<std::string> ops;
  if (v.ok()) {
    for (const auto& n : v->order) ops.emplace_back(n.schema->name);
  }
  return ops;
}

TEST(OnnxImport, BatchNormalizationIsFoldedIntoTheConvolution) {
  for (bool conv_bias : {false, true}) {
    SCOPED_TRACE(conv_bias ? "with a conv bias" : "without a conv bias");
    ModelBuilder m = ConvBnModel(conv_bias, false);
    auto imported = ImportOnnx(m.Bytes(), {});
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    EXPECT_EQ(OpsOf(imported->graph), std::vector<std::string>{"conv2d"});
    // Only the folded weights travel: the replaced conv and its weights are gone.
    EXPECT_EQ(imported->graph.nodes().size(), 1u);
    if (!imported->weights.empty()) {
      auto index = ParseSafetensors(imported->weights);
      ASSERT_TRUE(index.ok());
      EXPECT_EQ(index->entries.size(), 1u);
    }

    // The folding arithmetic of docs/ONNX.md, written out: f = scale / sqrt(var + eps);
    // W' = W * f; b' = ((b - mean) * f) + B; then the conv2d fma chain over (c, kh, kw).
    const float scale[6] = {1.5f, 0.7f, -0.3f, 2.0f, 0.9f, 1.1f}, shift[6] = {0.1f, -0.2f, 0.3f, 0.0f, 1.0f, -1.5f};
    const float mean[6] = {0.05f, -0.4f, 0.2f, 1.0f, -0.7f, 0.0f}, var[6] = {0.9f, 1.3f, 0.01f, 2.5f, 0.4f, 1.0f};
    const float cb[6] = {0.5f, -0.25f, 0.125f, 1.0f, -2.0f, 0.3f};
    Tensor x = RandomF32({1, 4, 5, 6}, 11);
    auto r = RunImported(*imported, {{"x", x}});
    ASSERT_TRUE(r.ok()) << r.status().message();
    const float* xv = x.data_as<float>();
    const float* y = r->outputs[0].tensor.data_as<float>();
    for (int f = 0; f < 6; ++f) {
      const float factor = scale[f] / std::sqrt(var[f] + 1e-5f);
      const float bias = (((conv_bias ? cb[f] : 0.0f) - mean[f]) * factor) + shift[f];
      const int g = f / 3;
      for (int oh = 0; oh < 5; ++oh) {
        for (int ow = 0; ow < 6; ++ow) {
          float acc = 0.0f;
          for (int c = 0; c < 2; ++c) {
            for (int kh = 0; kh < 3; ++kh) {
              for (int kw = 0; kw < 3; ++kw) {
                const int ih = oh - 1 + kh, iw = ow - 1 + kw;
                const float xin = (ih < 0 || ih >= 5 || iw < 0 || iw >= 6) ? 0.0f : xv[((g * 2 + c) * 5 + ih) * 6 + iw];
                const int wi = ((f * 2 + c) * 3 + kh) * 3 + kw;
                const float wv = 0.01f * static_cast<float>(static_cast<int>(wi * 37 % 101) - 50);
                acc = std::fma(xin, wv * factor, acc);
              }
            }
          }
          EXPECT_EQ(y[(f * 5 + oh) * 6 + ow], acc + bias) << f << "," << oh << "," << ow;
        }
      }
    }
  }
}

// A golden vector of an imported model: its graph id, and its result root on input `x` at 1, 2
// and 8 threads, portable and with the best ISA the CPU has.
void ExpectGoldenOnEveryCpu(const OnnxImport& imported, const Tensor& x, const std::string& want_id,
                            const std::string& want_root, const std::string& label) {
  auto v = Validate(imported.graph, {});
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(ToHex(v->id), want_id) << "graph id, " << label;
  MemoryBlobSource blobs;
  if (!imported.weights.empty()) blobs.Add(imported.weights);
  auto p = CompileGraph(imported.graph, &blobs, Limits{});
  ASSERT_TRUE(p.ok()) << p.status().message();
  for (int threads : {1, 2, 8}) {
    for (const char* isa : {"portable", "auto"}) {
      auto cpu = MakeCpu(threads, isa);
      auto loaded = LoadedProgram::Load(*p, cpu.get());
      ASSERT_TRUE(loaded.ok()) << loaded.status().message();
      auto r = (*loaded)->Run({{"x", x}});
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(ToHex(r->result_root), want_root) << "root, " << label << " " << isa << threads;
    }
  }
}

// Golden vector of the folding (docs/ONNX.md): the graph id of the folded Conv+BN model
// (which pins the folded weight and bias bits) and its result root on a fixed input, on
// every CPU configuration. Changes only when the folding arithmetic changes on purpose.
TEST(OnnxImport, FoldedBatchNormalizationGolden) {
  const char* kWant[2][2] = {
      {"e5900425e6c5010f4a4dcf18d29c6822cec820f94f86aa7886ca85d0a8abd4bd",
       "1ff7e9b166c2809a1032e2f99c5fe42d42968c0ed6a7693d92501c32168056e1"},
      {"5a834bb5d0e317f6b1e3c4a27f78a5b54bf6be2e7a277fd3544ccdab1f666398",
       "6054bca0d1bbc6ba5c1e3da07be6f6dfa26125464a5feb964985a02c8414f1e9"},
  };
  for (bool conv_bias : {false, true}) {
    auto imported = ImportOnnx(ConvBnModel(conv_bias, false).Bytes(), {});
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    ExpectGoldenOnEveryCpu(*imported, RandomF32({1, 4, 5, 6}, 11), kWant[conv_bias][0], kWant[conv_bias][1],
                           "conv_bias=" + std::to_string(conv_bias));
  }
}

// ConvBnModel in a 16-bit type `t`: x, W, the conv bias and (unless params_f32) the four
// BatchNormalization parameters are `t`, holding the 16-bit roundings of ConvBnModel's values.
ModelBuilder HalfConvBnModel(DType t, bool conv_bias, bool params_f32) {
  const int32_t elem = t == DType::kF16 ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::BFLOAT16;
  auto narrow = [&](float v) { return t == DType::kF16 ? half::F32ToF16(v) : half::F32ToBF16(v); };
  ModelBuilder m;
  m.Input("x", elem, {1, 4, 5, 6});
  auto init = [&](const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v, bool wide) {
    if (wide) {
      m.InitializerF32(name, dims, v);
      return;
    }
    auto* i = m.Initializer(name, elem, dims);
    std::vector<uint16_t> h;
    for (float f : v) h.push_back(narrow(f));
    i->set_raw_data(std::string(reinterpret_cast<const char*>(h.data()), h.size() * 2));
  };
  std::vector<float> w(6 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(static_cast<int>(i * 37 % 101) - 50);
  init("W", {6, 2, 3, 3}, w, false);
  std::vector<std::string> conv_in = {"x", "W"};
  if (conv_bias) {
    init("cb", {6}, {0.5f, -0.25f, 0.125f, 1.0f, -2.0f, 0.3f}, false);
    conv_in.push_back("cb");
  }
  auto* conv = m.Node("Conv", conv_in, {"c"}, "conv");
  ModelBuilder::IntAttr(conv, "group", 2);
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  init("scale", {6}, {1.5f, 0.7f, -0.3f, 2.0f, 0.9f, 1.1f}, params_f32);
  init("shift", {6}, {0.1f, -0.2f, 0.3f, 0.0f, 1.0f, -1.5f}, params_f32);
  init("mean", {6}, {0.05f, -0.4f, 0.2f, 1.0f, -0.7f, 0.0f}, params_f32);
  init("var", {6}, {0.9f, 1.3f, 0.01f, 2.5f, 0.4f, 1.0f}, params_f32);
  m.Node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"y"}, "bn");
  m.Output("y");
  return m;
}

Tensor HalfInput(DType t, uint32_t seed) {
  Tensor x = RandomF32({1, 4, 5, 6}, seed);
  std::vector<uint16_t> h;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const float v = x.data_as<float>()[i];
    h.push_back(t == DType::kF16 ? half::F32ToF16(v) : half::F32ToBF16(v));
  }
  return Tensor::FromVector<uint16_t>(t, {1, 4, 5, 6}, h);
}

// DETERMINISM.md 6.1, "BatchNormalization after a 16-bit convolution": one 16-bit conv2d whose
// weights and bias are the f32 fold of the widened values, rounded once to the conv's type.
TEST(OnnxImport, HalfBatchNormalizationIsFoldedIntoTheHalfConvolution) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    auto narrow = [&](float v) { return t == DType::kF16 ? half::F32ToF16(v) : half::F32ToBF16(v); };
    auto widen = [&](uint16_t h) { return t == DType::kF16 ? half::F16ToF32(h) : half::BF16ToF32(h); };
    auto round = [&](float v) { return widen(narrow(v)); };
    for (bool conv_bias : {false, true}) {
      for (bool params_f32 : {false, true}) {
        SCOPED_TRACE(std::string(DTypeName(t)) + (conv_bias ? " with a conv bias" : " without a conv bias") +
                     (params_f32 ? ", f32 parameters" : ", 16-bit parameters"));
        auto imported = ImportOnnx(HalfConvBnModel(t, conv_bias, params_f32).Bytes(), {});
        ASSERT_TRUE(imported.ok()) << imported.status().message();
        EXPECT_EQ(OpsOf(imported->graph), std::vector<std::string>{"conv2d"});
        const float scale[6] = {1.5f, 0.7f, -0.3f, 2.0f, 0.9f, 1.1f};
        const float shift[6] = {0.1f, -0.2f, 0.3f, 0.0f, 1.0f, -1.5f};
        const float mean[6] = {0.05f, -0.4f, 0.2f, 1.0f, -0.7f, 0.0f}, var[6] = {0.9f, 1.3f, 0.01f, 2.5f, 0.4f, 1.0f};
        const float cb[6] = {0.5f, -0.25f, 0.125f, 1.0f, -2.0f, 0.3f};
        auto param = [&](float v) { return params_f32 ? v : round(v); };
        const Tensor x = HalfInput(t, 11);
        auto r = RunImported(*imported, {{"x", x}});
        ASSERT_TRUE(r.ok()) << r.status().message();
        ASSERT_EQ(r->outputs[0].tensor.dtype(), t);
        const uint16_t* xv = x.data_as<uint16_t>();
        const uint16_t* y = r->outputs[0].tensor.data_as<uint16_t>();
        for (int f = 0; f < 6; ++f) {
          const float factor = param(scale[f]) / std::sqrt(param(var[f]) + 1e-5f);
          const float b = round((((conv_bias ? round(cb[f]) : 0.0f) - param(mean[f])) * factor) + param(shift[f]));
          const int g = f / 3;
          for (int oh = 0; oh < 5; ++oh) {
            for (int ow = 0; ow < 6; ++ow) {
              float acc = 0.0f;
              for (int c = 0; c < 2; ++c) {
                for (int kh = 0; kh < 3; ++kh) {
                  for (int kw = 0; kw < 3; ++kw) {
                    const int ih = oh - 1 + kh, iw = ow - 1 + kw;
                    const float xin =
                        (ih < 0 || ih >= 5 || iw < 0 || iw >= 6) ? 0.0f : widen(xv[((g * 2 + c) * 5 + ih) * 6 + iw]);
                    const int wi = ((f * 2 + c) * 3 + kh) * 3 + kw;
                    const float wv = round(0.01f * static_cast<float>(static_cast<int>(wi * 37 % 101) - 50));
                    acc = std::fma(xin, round(wv * factor), acc);
                  }
                }
              }
              ASSERT_EQ(y[(f * 5 + oh) * 6 + ow], narrow(acc + b)) << f << "," << oh << "," << ow;
            }
          }
        }
      }
    }
  }
}

// Golden vector of the 16-bit folding: graph id (the folded f16 weight and bias bits) and
// result root on a fixed input, on every CPU configuration.
TEST(OnnxImport, FoldedHalfBatchNormalizationGolden) {
  const char* kWant[2][2] = {
      {"8e6e0774297f81aa5b31407422fe8b05ca1c039916b81fc04903c890f10d3bb5",
       "a2b60e4e2a8342797ede081b968ddc2fe73d6019a4268c362f6c5224a55eca67"},
      {"2b47df35da55b5914a1612bf99a3d999355fb72f80955adbfc1c68f58c0f0878",
       "a59ac4557dd714e4046093494515ceb2d6e21cf0b6412ffa51c9f71eee773de4"},
  };
  for (int ti = 0; ti < 2; ++ti) {
    const DType t = ti == 0 ? DType::kF16 : DType::kBF16;
    auto imported = ImportOnnx(HalfConvBnModel(t, true, false).Bytes(), {});
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    ExpectGoldenOnEveryCpu(*imported, HalfInput(t, 11), kWant[ti][0], kWant[ti][1], std::string(DTypeName(t)));
  }
}

TEST(OnnxImport, BatchNormalizationStaysUnfoldedWhenTheConvOutputIsAlsoRead) {
  ModelBuilder m = ConvBnModel(true, true);
  auto imported = ImportOnnx(m.Bytes(), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  const auto ops = OpsOf(imported->graph);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "conv2d"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "sub"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "mul"), 1);
}

// Conv [1, 2, 4, 5] -> [1, 3, 4, 5] (3x3, pads 1), then Mul and Add by constants `scale`
// and `shift` of the given shapes (Mul's constant comes first, as PaddleOCR exports it).
ModelBuilder ConvScaleShiftModel(bool conv_bias, const std::vector<int64_t>& scale_shape,
                                 const std::vector<float>& scale, const std::vector<int64_t>& shift_shape,
                                 const std::vector<float>& shift) {
  ModelBuilder m;
  m.Input("x", onnx::TensorProto::FLOAT, {1, 2, 4, 5});
  std::vector<float> w(3 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.03f * static_cast<float>(static_cast<int>(i * 29 % 53) - 26);
  m.InitializerF32("W", {3, 2, 3, 3}, w);
  std::vector<std::string> conv_in = {"x", "W"};
  if (conv_bias) {
    m.InitializerF32("cb", {3}, {0.75f, -0.5f, 0.2f});
    conv_in.push_back("cb");
  }
  auto* pads = m.Node("Conv", conv_in, {"c"}, "conv")->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  m.InitializerF32("scale", scale_shape, scale);
  m.InitializerF32("shift", shift_shape, shift);
  m.Node("Mul", {"scale", "c"}, {"s"});
  m.Node("Add", {"s", "shift"}, {"y"});
  m.Output("y");
  return m;
}

TEST(OnnxImport, ConstantScaleAndShiftAreFoldedIntoTheConvolution) {
  struct Case {
    bool conv_bias;
    std::vector<int64_t> scale_shape;
    std::vector<float> scale;
    std::vector<int64_t> shift_shape;
    std::vector<float> shift;
  };
  const Case cases[] = {
      {false, {1}, {1.7f}, {1, 3, 1, 1}, {0.1f, -0.3f, 2.5f}},  // scalar scale, per-channel shift
      {true, {3, 1, 1}, {0.9f, -1.1f, 0.6f}, {}, {-0.35f}},     // per-channel scale, rank-0 shift
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.conv_bias ? "with a conv bias" : "without a conv bias");
    auto imported =
        ImportOnnx(ConvScaleShiftModel(k.conv_bias, k.scale_shape, k.scale, k.shift_shape, k.shift).Bytes(), {});
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    EXPECT_EQ(OpsOf(imported->graph), std::vector<std::string>{"conv2d"});
    EXPECT_EQ(imported->graph.nodes().size(), 1u);
    Tensor x = RandomF32({1, 2, 4, 5}, 5);
    auto r = RunImported(*imported, {{"x", x}});
    ASSERT_TRUE(r.ok()) << r.status().message();
    const float* xv = x.data_as<float>();
    const float* y = r->outputs[0].tensor.data_as<float>();
    const float cb[3] = {0.75f, -0.5f, 0.2f};
    for (int f = 0; f < 3; ++f) {
      // DETERMINISM.md 6.1: W' = W * s[f]; b' = b * s[f] (no bias: none); then b'' = b' + t[f]
      // (no bias: t[f]).
      const float s = k.scale.size() == 1 ? k.scale[0] : k.scale[f];
      const float t = k.shift.size() == 1 ? k.shift[0] : k.shift[f];
      const float bias = k.conv_bias ? (cb[f] * s) + t : t;
      for (int oh = 0; oh < 4; ++oh) {
        for (int ow = 0; ow < 5; ++ow) {
          float acc = 0.0f;
          for (int c = 0; c < 2; ++c) {
            for (int kh = 0; kh < 3; ++kh) {
              for (int kw = 0; kw < 3; ++kw) {
                const int ih = oh - 1 + kh, iw = ow - 1 + kw;
                const float xin = (ih < 0 || ih >= 4 || iw < 0 || iw >= 5) ? 0.0f : xv[(c * 4 + ih) * 5 + iw];
                const int wi = ((f * 2 + c) * 3 + kh) * 3 + kw;
                const float wv = 0.03f * static_cast<float>(static_cast<int>(wi * 29 % 53) - 26);
                acc = std::fma(xin, wv * s, acc);
              }
            }
          }
          EXPECT_EQ(y[(f * 4 + oh) * 5 + ow], acc + bias) << f << "," << oh << "," << ow;
        }
      }
    }
  }
}

TEST(OnnxImport, ScaleThatVariesOverSpaceIsNotFolded) {
  // A constant [1, 1, 1, 5] varies along the width: it is no per-channel scale.
  auto imported =
      ImportOnnx(ConvScaleShiftModel(true, {1, 1, 1, 5}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f}, {1}, {0.5f}).Bytes(), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(OpsOf(imported->graph), (std::vector<std::string>{"conv2d", "mul", "add"}));
}

TEST(OnnxImport, SymbolicDimensionsNeedAShape) {
  ModelBuilder m = GemmModel(-1);
  auto missing = ImportOnnx(m.Bytes(), {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("'batch'"), std::string::npos) << missing.status().message();

  OnnxImportOptions options;
  options.input_shapes["x"] = {5, 3};
  auto given = ImportOnnx(m.Bytes(), options);
  ASSERT_TRUE(given.ok()) << given.status().message();
  auto r = RunImported(*given, {{"x", RandomF32({5, 3}, 1)}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->outputs[0].tensor.shape(), (Shape{5, 120}));

  options.input_shapes["x"] = {5, 4};  // contradicts the fixed dim 3
  auto wrong = ImportOnnx(m.Bytes(), options);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("fixed to 3"), std::string::npos) << wrong.status().message();

  options.input_shapes = {{"nope", {1}}};
  auto unknown = ImportOnnx(m.Bytes(), options);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no input named 'nope'"), std::string::npos);
}

TEST(OnnxImport, UnsupportedThingsAreNamed) {
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {2});
    m.Node("Bernoulli", {"x"}, {"y"}, "the_node");
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("unsupported op Bernoulli in node 'the_node'"), std::string::npos)
        << r.status().message();
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {2});
    ModelBuilder::IntAttr(m.Node("Relu", {"x"}, {"y"}, "r1"), "mystery", 1);
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("attribute 'mystery' in node 'r1' (Relu)"), std::string::npos)
        << r.status().message();
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::COMPLEX128, {2});
    m.Node("Relu", {"x"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("unsupported dtype COMPLEX128 for input 'x'"), std::string::npos)
        << r.status().message();
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {1, 1, 4, 4});
    auto* n = m.Node("MaxPool", {"x"}, {"y"}, "pool3d");
    auto* a = n->add_attribute();
    a->set_name("kernel_shape");
    a->set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < 2; ++i) a->add_ints(2);
    auto* pad = n->add_attribute();
    pad->set_name("auto_pad");
    pad->set_type(onnx::AttributeProto::STRING);
    pad->set_s("SIDEWAYS");
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("auto_pad 'SIDEWAYS'"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("'pool3d' (MaxPool)"), std::string::npos) << r.status().message();
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {2});
    m.Node("Relu", {"x"}, {"y"});
    m.Output("y");
    auto* op = m.model_.add_opset_import();
    op->set_domain("com.microsoft");
    op->set_version(1);
    m.graph()->mutable_node(0)->set_domain("com.microsoft");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("com.microsoft.Relu"), std::string::npos) << r.status().message();
  }
}

TEST(OnnxImport, MalformedModelsAreRejected) {
  EXPECT_EQ(ImportOnnx(std::vector<uint8_t>{0xff, 0xff, 0xff, 0x01}, {}).status().code(), StatusCode::kInvalidArgument);
  {
    // A node reading a name nothing defines.
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {2});
    m.Node("Add", {"x", "ghost"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("'ghost'"), std::string::npos);
  }
  {
    // Raw data shorter than the dims say.
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {2});
    m.InitializerF32("w", {4}, {1, 2});
    m.Node("Add", {"x", "w"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("tensor 'w' has 8 bytes of data, expected 16"), std::string::npos)
        << r.status().message();
  }
  {
    // Weights in an external file.
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {2});
    m.InitializerF32("w", {2}, {1, 2});
    auto* w = m.graph()->mutable_initializer(0);
    w->clear_raw_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = w->add_external_data();
    e->set_key("location");
    e->set_value("../../etc/passwd");
    m.Node("Add", {"x", "w"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("external file"), std::string::npos);
  }
  {
    // An output nothing produces, and a duplicated output.
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {2});
    m.Node("Relu", {"x"}, {"y"});
    m.Output("z");
    EXPECT_FALSE(ImportOnnx(m.Bytes(), {}).ok());
    ModelBuilder d;
    d.Input("x", onnx::TensorProto::FLOAT, {2});
    d.Node("Relu", {"x"}, {"y"});
    d.Output("y");
    d.Output("y");
    EXPECT_FALSE(ImportOnnx(d.Bytes(), {}).ok());
  }
  {
    // A shape beyond the element cap is refused before anything is allocated.
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {1 << 20, 1 << 20});
    m.Node("Relu", {"x"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  }
  {
    // A Reshape whose target is computed at run time cannot be imported.
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {2, 3});
    m.Input("shape", onnx::TensorProto::INT64, {2});
    m.Node("Reshape", {"x", "shape"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("computed at run time"), std::string::npos) << r.status().message();
    // Binding it at import makes it a constant.
    OnnxImportOptions options;
    options.constant_inputs["shape"] = Tensor::FromVector<int64_t>(DType::kI64, {2}, {3, 2});
    auto bound = ImportOnnx(m.Bytes(), options);
    ASSERT_TRUE(bound.ok()) << bound.status().message();
    EXPECT_EQ(bound->inputs, std::vector<std::string>{"x"});
    // With known values (a test case), the integer input is bound and the float one fed.
    EXPECT_TRUE(NeedsValueAtImport(r.status()));
    auto for_values = ImportOnnxForValues(
        m.Bytes(), {{"x", RandomF32({2, 3}, 3)}, {"shape", Tensor::FromVector<int64_t>(DType::kI64, {2}, {3, 2})}});
    ASSERT_TRUE(for_values.ok()) << for_values.status().message();
    EXPECT_EQ(for_values->bound.size(), 1u);
    EXPECT_TRUE(for_values->bound.count("shape"));
    EXPECT_EQ(for_values->run_inputs.size(), 1u);
    EXPECT_TRUE(for_values->run_inputs.count("x"));
  }
}

// If: a branch graph as an attribute of `node`.
onnx::GraphProto* IfBranch(onnx::NodeProto* node, const std::string& name) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return a->mutable_g();
}

// y = If(k == 16000, then: Relu(x) * 2 (a branch initializer), else: Neg(x)), as Silero VAD
// switches on its sample rate. Only a condition known at import is imported.
ModelBuilder SampleRateIfModel() {
  ModelBuilder m;
  m.Input("x", onnx::TensorProto::FLOAT, {4});
  m.Input("k", onnx::TensorProto::INT64, {});
  auto* rate = m.Initializer("rate", onnx::TensorProto::INT64, {});
  rate->add_int64_data(16000);
  m.Node("Equal", {"k", "rate"}, {"is16k"});
  auto* node = m.Node("If", {"is16k"}, {"y"}, "switch");
  onnx::GraphProto* then_branch = IfBranch(node, "then_branch");
  auto* two = then_branch->add_initializer();
  two->set_name("two");
  two->set_data_type(onnx::TensorProto::FLOAT);
  two->add_float_data(2.0f);
  auto* relu = then_branch->add_node();
  relu->set_op_type("Relu");
  relu->add_input("x");  // a value of the enclosing graph
  relu->add_output("r");
  auto* mul = then_branch->add_node();
  mul->set_op_type("Mul");
  mul->add_input("r");
  mul->add_input("two");
  mul->add_output("then_y");
  then_branch->add_output()->set_name("then_y");
  onnx::GraphProto* else_branch = IfBranch(node, "else_branch");
  auto* neg = else_branch->add_node();
  neg->set_op_type("Neg");
  neg->add_input("x");
  neg->add_output("else_y");
  else_branch->add_output()->set_name("else_y");
  m.Output("y");
  return m;
}

TEST(OnnxImport, IfWithAConditionKnownAtImportTakesItsBranch) {
  ModelBuilder m = SampleRateIfModel();
  const Tensor x = Tensor::FromVector<float>(DType::kF32, {4}, {-1.5f, 0.0f, 0.5f, 3.0f});
  for (const auto& [k, want] : std::vector<std::pair<int64_t, std::vector<float>>>{
           {16000, {0.0f, 0.0f, 1.0f, 6.0f}}, {8000, {1.5f, -0.0f, -0.5f, -3.0f}}}) {
    OnnxImportOptions options;
    options.constant_inputs["k"] = Tensor::FromVector<int64_t>(DType::kI64, {}, {k});
    auto imported = ImportOnnx(m.Bytes(), options);
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    EXPECT_EQ(imported->inputs, std::vector<std::string>{"x"});
    auto r = RunImported(*imported, {{"x", x}});
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->outputs.size(), 1u);
    const auto y = Values(r->outputs[0].tensor);
    ASSERT_EQ(y.size(), want.size());
    for (size_t i = 0; i < y.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(want[i])) << "k " << k << " i " << i;
    }
  }
}

// DETERMINISM.md 6.1: a condition computed at run time runs both branches and selects with
// `where`; the result is bit for bit the branch the condition names.
TEST(OnnxImport, IfWithARunTimeConditionRunsBothBranchesAndSelects) {
  auto imported = ImportOnnx(SampleRateIfModel().Bytes(), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->inputs, (std::vector<std::string>{"x", "k"}));
  const Tensor x = Tensor::FromVector<float>(DType::kF32, {4}, {-1.5f, 0.0f, 0.5f, 3.0f});
  for (const auto& [k, want] : std::vector<std::pair<int64_t, std::vector<float>>>{
           {16000, {0.0f, 0.0f, 1.0f, 6.0f}}, {8000, {1.5f, -0.0f, -0.5f, -3.0f}}}) {
    auto r = RunImported(*imported, {{"x", x}, {"k", Tensor::FromVector<int64_t>(DType::kI64, {}, {k})}});
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto y = Values(r->outputs[0].tensor);
    ASSERT_EQ(y.size(), want.size());
    for (size_t i = 0; i < y.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(want[i])) << "k " << k << " i " << i;
    }
  }
  // The branch not taken may divide by zero: its infinities are discarded by the select.
  ModelBuilder m = SampleRateIfModel();
  auto* neg = m.graph()->mutable_node(1)->mutable_attribute(1)->mutable_g()->mutable_node(0);
  neg->set_op_type("Div");
  neg->add_input("x");  // x / x: NaN at x = 0
  auto divided = ImportOnnx(m.Bytes(), {});
  ASSERT_TRUE(divided.ok()) << divided.status().message();
  auto r = RunImported(*divided, {{"x", x}, {"k", Tensor::FromVector<int64_t>(DType::kI64, {}, {16000})}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r->outputs[0].tensor), (std::vector<float>{0.0f, 0.0f, 1.0f, 6.0f}));
}

TEST(OnnxImport, IfRefusesARunTimeConditionItCannotSelectAndMalformedBranches) {
  {
    // The branches' outputs differ in shape: refused, naming the If and both shapes.
    ModelBuilder m = SampleRateIfModel();
    auto* else_graph = m.graph()->mutable_node(1)->mutable_attribute(1)->mutable_g();
    auto* shape = else_graph->add_initializer();
    shape->set_name("two_by_two");
    shape->set_data_type(onnx::TensorProto::INT64);
    shape->add_dims(2);
    shape->add_int64_data(2);
    shape->add_int64_data(2);
    auto* reshape = else_graph->add_node();
    reshape->set_op_type("Reshape");
    reshape->add_input("else_y");
    reshape->add_input("two_by_two");
    reshape->add_output("else_2x2");
    else_graph->mutable_output(0)->set_name("else_2x2");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("If in node 'switch'"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("f32[4] in the then branch but f32[2, 2]"), std::string::npos)
        << r.status().message();
    // A test case with known values binds the integer input and imports it.
    EXPECT_TRUE(NeedsValueAtImport(r.status()));
  }
  {
    // A branch that gathers at run-time indices could fail the task on the path not taken.
    ModelBuilder m = SampleRateIfModel();
    m.Input("i", onnx::TensorProto::INT64, {4});
    auto* else_graph = m.graph()->mutable_node(1)->mutable_attribute(1)->mutable_g();
    auto* gather = else_graph->add_node();
    gather->set_op_type("Gather");
    gather->add_input("x");
    gather->add_input("i");
    gather->add_output("picked");
    else_graph->mutable_output(0)->set_name("picked");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("run-time indices"), std::string::npos) << r.status().message();
  }
  auto bound = [] {
    OnnxImportOptions options;
    options.constant_inputs["k"] = Tensor::FromVector<int64_t>(DType::kI64, {}, {16000});
    return options;
  };
  {
    // The branch taken names an output that nothing produces.
    ModelBuilder m = SampleRateIfModel();
    m.graph()->mutable_node(1)->mutable_attribute(0)->mutable_g()->mutable_output(0)->set_name("nowhere");
    auto r = ImportOnnx(m.Bytes(), bound());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  }
  {
    // A branch without the graph it needs.
    ModelBuilder m = SampleRateIfModel();
    m.graph()->mutable_node(1)->mutable_attribute()->DeleteSubrange(0, 1);
    auto r = ImportOnnx(m.Bytes(), bound());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("no then_branch"), std::string::npos) << r.status().message();
  }
  {
    // A condition that is not a bool.
    ModelBuilder m = SampleRateIfModel();
    m.graph()->mutable_node(1)->set_input(0, "k");
    auto r = ImportOnnx(m.Bytes(), bound());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("must be a bool"), std::string::npos) << r.status().message();
  }
  {
    // Branches nested past the cap are refused, not recursed into without bound.
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {1});
    auto* t = m.Initializer("yes", onnx::TensorProto::BOOL, {});
    t->add_int32_data(1);
    onnx::GraphProto* g = m.graph();
    for (int depth = 0; depth < 20; ++depth) {  // protobuf parses up to ~33
      auto* node = g->add_node();
      node->set_op_type("If");
      node->add_input("yes");
      node->add_output("y" + std::to_string(depth));
      IfBranch(node, "else_branch")->add_output()->set_name("x");
      g = IfBranch(node, "then_branch");
      g->add_output()->set_name("y" + std::to_string(depth + 1));
    }
    auto* last = g->add_node();
    last->set_op_type("Relu");
    last->add_input("x");
    last->add_output("y20");
    m.Output("y0");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("nested over"), std::string::npos) << r.status().message();
  }
}

// Random corruption of real models never crashes the importer (ASan/UBSan run this too).
TEST(OnnxImport, CorruptedModelsNeverCrash) {
  std::vector<std::vector<uint8_t>> seeds = {GemmModel().Bytes()};
  const std::filesystem::path data = "/usr/share/libonnx-testdata/data";
  for (const char* t : {"node/test_conv_with_strides_padding", "node/test_layer_normalization_4d_axis1",
                        "pytorch-converted/test_BatchNorm2d_eval", "node/test_slice_neg_steps"}) {
    auto bytes = ReadFileBytes((data / t / "model.onnx").string(), 1 << 20);
    if (bytes.ok()) seeds.push_back(std::move(bytes).value());
  }
  std::mt19937 rng(1234);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> bytes = seeds[i % seeds.size()];
    switch (rng() % 3) {
      case 0: bytes.resize(rng() % (bytes.size() + 1)); break;
      case 1:
        for (int k = 0; k < 4; ++k) bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      default: bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng()); break;
    }
    OnnxImportOptions options;
    options.limits.max_elements_per_tensor = 1 << 20;
    auto r = ImportOnnx(bytes, options);
    if (r.ok()) ++ok;
  }
  SUCCEED() << ok << " of 3000 corrupted models still imported";
}

TEST(OnnxImport, TensorFilesFromTheTestSuite) {
  auto bytes = ReadFileBytes("/usr/share/libonnx-testdata/data/node/test_abs/test_data_set_0/input_0.pb", 1 << 20);
  if (!bytes.ok()) GTEST_SKIP() << "libonnx-testdata is not installed";
  auto t = ParseOnnxTensor(*bytes, {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kF32);
  EXPECT_EQ(t->shape(), (Shape{3, 4, 5}));
  bytes->resize(bytes->size() / 2);
  EXPECT_FALSE(ParseOnnxTensor(*bytes, {}).ok());
}

// Found by the onnx fuzz target: an empty tensor (a dim of 0) whose other dims are huge. It has 0
// elements, but multiplying its dims overflowed (UBSan) before the zero was reached.
TEST(OnnxImport, EmptyTensorWithAHugeDimIsRefused) {
  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(int64_t{1} << 61);
  p.add_dims(3);
  p.add_dims(0);
  std::string bytes;
  ASSERT_TRUE(p.SerializeToString(&bytes));
  auto t = ParseOnnxTensor(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), {});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kResourceExhausted) << t.status().ToString();
  EXPECT_NE(t.status().message().find("has a dimension of 2305843009213693952"), std::string::npos)
      << t.status().message();
  EXPECT_EQ(NumElements({int64_t{1} << 61, 3, 0}), 0);  // and the product no longer overflows
}

// Found by the onnx fuzz target: an op given an axis of a scalar indexed its empty shape
// (ArgMax: UBSan, a null reference; opset-18 Pad with axes: a write past its pads). A scalar
// has no axis: each is refused by name.
TEST(OnnxImport, AnAxisOfAScalarIsRefused) {
  struct Case {
    std::string what;
    ModelBuilder model;
  };
  std::vector<Case> cases;
  for (const char* op : {"ArgMax", "ArgMin"}) {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {});
    ModelBuilder::IntAttr(m.Node(op, {"x"}, {"y"}), "axis", 0);
    m.Output("y");
    cases.push_back({op, m});
  }
  {
    ModelBuilder m(13);
    m.Input("x", onnx::TensorProto::FLOAT, {});
    m.InitializerI64("axes", {0});
    m.Node("Squeeze", {"x", "axes"}, {"y"});
    m.Output("y");
    cases.push_back({"Squeeze", m});
  }
  {
    ModelBuilder m(18);
    m.Input("x", onnx::TensorProto::FLOAT, {});
    m.InitializerI64("pads", {1, 1});
    m.InitializerI64("axes", {0});
    m.Node("Pad", {"x", "pads", "", "axes"}, {"y"});
    m.Output("y");
    cases.push_back({"Pad", m});
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {});
    m.Initializer("cond", onnx::TensorProto::BOOL, {1})->add_int32_data(1);
    ModelBuilder::IntAttr(m.Node("Compress", {"x", "cond"}, {"y"}), "axis", 0);
    m.Output("y");
    cases.push_back({"Compress", m});
  }
  {
    ModelBuilder m;
    m.InitializerF32("x", {}, {1.0f});
    ModelBuilder::IntAttr(m.Node("Unique", {"x"}, {"y"}), "axis", 0);
    m.Output("y");
    cases.push_back({"Unique", m});
  }
  for (const Case& c : cases) {
    auto imported = ImportOnnx(c.model.Bytes(), {});
    ASSERT_FALSE(imported.ok()) << c.what;
    EXPECT_EQ(imported.status().code(), StatusCode::kInvalidArgument) << c.what << ": " << imported.status().ToString();
    EXPECT_TRUE(imported.status().message().find("scalar") != std::string::npos ||
                imported.status().message().find("rank 1 or more") != std::string::npos)
        << c.what << ": " << imported.status().ToString();
  }
}

// --- issue 19's simpler ops: values, and hostile inputs refused with a named error ---

StatusOr<Tensor> RunOne(const ModelBuilder& m, const std::map<std::string, Tensor>& inputs) {
  ASSIGN_OR_RETURN(OnnxImport imported, ImportOnnx(m.Bytes(), {}));
  ASSIGN_OR_RETURN(RunResult r, RunImported(imported, inputs));
  if (r.outputs.size() != 1) return Internal("expected one output");
  return r.outputs[0].tensor;
}

TEST(OnnxImport, ModKeepsTheDividendsOrTheDivisorsSign) {
  for (int64_t fmod_mode : {0, 1}) {
    ModelBuilder m;
    m.Input("a", onnx::TensorProto::INT64, {6});
    m.Input("b", onnx::TensorProto::INT64, {6});
    ModelBuilder::IntAttr(m.Node("Mod", {"a", "b"}, {"y"}), "fmod", fmod_mode);
    m.Output("y");
    Tensor a = Tensor::FromVector<int64_t>(DType::kI64, {6}, {7, -7, 7, -7, 6, 5});
    Tensor b = Tensor::FromVector<int64_t>(DType::kI64, {6}, {3, 3, -3, -3, 3, 0});
    auto y = RunOne(m, {{"a", a}, {"b", b}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    const int64_t* v = y->data_as<int64_t>();
    // Python's % for fmod = 0, C's for fmod = 1; a zero divisor gives the dividend.
    const std::vector<int64_t> want =
        fmod_mode == 0 ? std::vector<int64_t>{1, 2, -2, -1, 0, 5} : std::vector<int64_t>{1, -1, 1, -1, 0, 5};
    EXPECT_EQ(std::vector<int64_t>(v, v + 6), want) << "fmod " << fmod_mode;
  }
  for (int64_t fmod_mode : {0, 2}) {
    ModelBuilder m;
    m.Input("a", onnx::TensorProto::FLOAT, {2});
    m.Input("b", onnx::TensorProto::FLOAT, {2});
    ModelBuilder::IntAttr(m.Node("Mod", {"a", "b"}, {"y"}), "fmod", fmod_mode);
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  }
}

// UINT8, INT16 and UINT16 initializers in int32_data and UINT32 / UINT64 in uint64_data (as
// ONNX stores them), Cast to each, and a count that does not match the shape refused.
TEST(OnnxImport, UnsignedAndInt16TensorsImportAndCast) {
  struct Case {
    int32_t onnx_type;
    DType dtype;
  };
  for (const Case& c : {Case{onnx::TensorProto::UINT8, DType::kU8}, Case{onnx::TensorProto::INT16, DType::kI16},
                        Case{onnx::TensorProto::UINT16, DType::kU16}, Case{onnx::TensorProto::UINT32, DType::kU32},
                        Case{onnx::TensorProto::UINT64, DType::kU64}}) {
    SCOPED_TRACE(std::string(DTypeName(c.dtype)));
    const bool wide = c.dtype == DType::kU32 || c.dtype == DType::kU64;
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {4});
    auto* w = m.Initializer("w", c.onnx_type, {4});
    // 2, 5, the type's largest value (or -1 for INT16) and 0.
    const uint64_t top = c.dtype == DType::kU8    ? 255
                         : c.dtype == DType::kU16 ? 65535
                         : c.dtype == DType::kU32 ? 4294967295u
                                                  : ~uint64_t{0};
    for (uint64_t v : {uint64_t{2}, uint64_t{5}, top, uint64_t{0}}) {
      if (wide) w->add_uint64_data(v);
      else w->add_int32_data(c.dtype == DType::kI16 && v == top ? -1 : static_cast<int32_t>(v));
    }
    // y = Cast(x, to = the type) + w: the cast truncates toward zero and saturates.
    ModelBuilder::IntAttr(m.Node("Cast", {"x"}, {"xc"}), "to", c.onnx_type);
    m.Node("Add", {"xc", "w"}, {"y"});
    m.Output("y");
    Tensor x = Tensor::FromVector<float>(DType::kF32, {4}, {3.9f, -1.0f, 1.0f, 1e30f});
    auto y = RunOne(m, {{"x", x}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    ASSERT_EQ(y->dtype(), c.dtype);
    std::vector<uint64_t> got;
    for (int i = 0; i < 4; ++i) {
      uint64_t v = 0;
      std::memcpy(&v, y->data() + i * DTypeSize(c.dtype), static_cast<size_t>(DTypeSize(c.dtype)));
      got.push_back(v);
    }
    const uint64_t mask = DTypeSize(c.dtype) == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * DTypeSize(c.dtype))) - 1;
    // i16: -1.0 casts to -1 (0xFFFF), 1e30 saturates to 32767; unsigned: -1.0 gives 0, 1e30 the maximum.
    const uint64_t neg_one = c.dtype == DType::kI16 ? 0xFFFF : 0;
    const uint64_t sat = c.dtype == DType::kI16 ? 32767 : top;
    const uint64_t w2 = c.dtype == DType::kI16 ? 0xFFFF : top;
    EXPECT_EQ(got, (std::vector<uint64_t>{5, (neg_one + 5) & mask, (1 + w2) & mask, sat}));
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::UINT32, {2});
    auto* w = m.Initializer("w", onnx::TensorProto::UINT32, {2});
    w->add_uint64_data(1);  // one value for two elements
    m.Node("Add", {"x", "w"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("has 1 values, expected 2"), std::string::npos) << r.status().message();
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::UINT16, {3});
    auto* w = m.Initializer("w", onnx::TensorProto::UINT16, {3});
    w->set_raw_data(std::string(5, '\0'));  // 3 elements need 6 bytes
    m.Node("Add", {"x", "w"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("has 5 bytes of data, expected 6"), std::string::npos) << r.status().message();
  }
}

// DOUBLE: initializers in double_data and raw_data, Cast both ways, f64 Softmax lowered to
// its spelled-out sequence, a wrong count refused, and an op without f64 refused by name.
TEST(OnnxImport, DoubleTensorsImportComputeAndCast) {
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {3});
    auto* w = m.Initializer("w", onnx::TensorProto::DOUBLE, {3});
    for (double v : {0.1, -2.5, 1e300}) w->add_double_data(v);
    ModelBuilder::IntAttr(m.Node("Cast", {"x"}, {"xd"}), "to", onnx::TensorProto::DOUBLE);
    m.Node("Mul", {"xd", "w"}, {"p"});
    m.Node("Softmax", {"p"}, {"s"});
    ModelBuilder::IntAttr(m.Node("Cast", {"p"}, {"y"}), "to", onnx::TensorProto::FLOAT);
    m.Output("y");
    m.Output("s");
    Tensor x = Tensor::FromVector<float>(DType::kF32, {3}, {3.0f, 0.5f, 1.0f});
    auto imported = ImportOnnx(m.Bytes(), {});
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    auto r = RunImported(*imported, {{"x", x}});
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->outputs.size(), 2u);
    const Tensor& s = r->outputs[0].tensor;  // outputs in name order: s, y
    const Tensor& y = r->outputs[1].tensor;
    ASSERT_EQ(y.dtype(), DType::kF32);
    // 3 * 0.1 in binary64, then rounded once to f32; 1e300 overflows f32 to +inf.
    EXPECT_EQ(y.data_as<float>()[0], static_cast<float>(3.0 * 0.1));
    EXPECT_EQ(y.data_as<float>()[1], -1.25f);
    EXPECT_EQ(y.data_as<float>()[2], INFINITY);
    // Softmax over [0.3, -1.25, 1e300]: the max takes everything.
    ASSERT_EQ(s.dtype(), DType::kF64);
    EXPECT_EQ(s.data_as<double>()[0], 0.0);
    EXPECT_EQ(s.data_as<double>()[2], 1.0);
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::DOUBLE, {2});
    auto* w = m.Initializer("w", onnx::TensorProto::DOUBLE, {2});
    w->set_raw_data(std::string(12, '\0'));  // 2 elements need 16 bytes
    m.Node("Add", {"x", "w"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("has 12 bytes of data, expected 16"), std::string::npos)
        << r.status().message();
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::DOUBLE, {2});
    auto* w = m.Initializer("w", onnx::TensorProto::DOUBLE, {2});
    w->add_double_data(1.0);  // one value for two elements
    m.Node("Add", {"x", "w"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("has 1 values, expected 2"), std::string::npos) << r.status().message();
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::DOUBLE, {1, 1, 4, 4});
    auto* n = m.Node("MaxPool", {"x"}, {"y"}, "pool64");
    auto* a = n->add_attribute();
    a->set_name("kernel_shape");
    a->set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < 2; ++i) a->add_ints(2);
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("f64"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("pool64"), std::string::npos) << r.status().message();
  }
}

// FLOAT16 and BFLOAT16 (DETERMINISM.md 1.3, 1.4): initializers as int32_data bit patterns
// and raw_data, computed through f32 and rounded once per op, cast both ways; bad bit
// patterns and sizes refused; an op without a 16-bit lowering refused by dtype and node.
TEST(OnnxImport, HalfTensorsImportComputeAndCast) {
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT16, {3});
    auto* w = m.Initializer("w", onnx::TensorProto::FLOAT16, {3});
    for (int32_t bits : {0x3E00, 0xC000, 0x7BFF}) w->add_int32_data(bits);  // 1.5, -2, 65504
    auto* b = m.Initializer("b", onnx::TensorProto::BFLOAT16, {3});
    b->set_raw_data(std::string("\x80\x3F\x00\x40\x40\x40", 6));  // 1, 2, 3
    m.Node("Mul", {"x", "w"}, {"p"});                             // f16: 1 * 1.5, 0.5 * -2, 2 * 65504 = inf
    ModelBuilder::IntAttr(m.Node("Cast", {"p"}, {"y"}), "to", onnx::TensorProto::FLOAT);
    ModelBuilder::IntAttr(m.Node("Cast", {"x"}, {"xb"}), "to", onnx::TensorProto::BFLOAT16);
    m.Node("MatMul", {"xb", "b"}, {"d"});  // 1 + 1 + 6 in f32, rounded once to bf16
    m.Output("y");
    m.Output("d");
    Tensor x = Tensor::FromVector<uint16_t>(DType::kF16, {3}, {0x3C00, 0x3800, 0x4000});  // 1, 0.5, 2
    auto imported = ImportOnnx(m.Bytes(), {});
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    auto r = RunImported(*imported, {{"x", x}});
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->outputs.size(), 2u);
    const Tensor& d = r->outputs[0].tensor;  // name order: d, y
    const Tensor& y = r->outputs[1].tensor;
    ASSERT_EQ(y.dtype(), DType::kF32);
    EXPECT_EQ(y.data_as<float>()[0], 1.5f);
    EXPECT_EQ(y.data_as<float>()[1], -1.0f);
    EXPECT_EQ(y.data_as<float>()[2], INFINITY);  // 131008 rounds to f16 inf
    ASSERT_EQ(d.dtype(), DType::kBF16);
    ASSERT_EQ(d.num_elements(), 1);
    EXPECT_EQ(d.data_as<uint16_t>()[0], 0x4100u);  // 8
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT16, {2});
    auto* w = m.Initializer("w", onnx::TensorProto::FLOAT16, {2});
    w->add_int32_data(0x3C00);
    w->add_int32_data(70000);  // not a 16-bit pattern
    m.Node("Add", {"x", "w"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("int32_data value 70000"), std::string::npos) << r.status().message();
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::BFLOAT16, {2});
    auto* w = m.Initializer("w", onnx::TensorProto::BFLOAT16, {2});
    w->set_raw_data(std::string(3, '\0'));
    m.Node("Add", {"x", "w"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("has 3 bytes of data, expected 4"), std::string::npos) << r.status().message();
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT16, {1, 1, 2, 2});
    auto* w = m.Initializer("w", onnx::TensorProto::FLOAT16, {1, 1, 1, 1});
    w->add_int32_data(0x3C00);
    m.Node("ConvTranspose", {"x", "w"}, {"y"}, "deconv16");
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("f16"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("deconv16"), std::string::npos) << r.status().message();
  }
}

// DETERMINISM.md 6.8b: activations and normalizations whose lowerings have f32 constants take
// f16/bf16 inputs through f32: each output is the f32 model's output on the exactly widened
// inputs, rounded once. The same model is built in FLOAT and in the 16-bit type and compared.
TEST(OnnxImport, HalfActivationsAndNormalizationsComputeThroughF32) {
  const Shape xs = {2, 3, 2, 4};
  std::vector<float> xv;
  for (int i = 0; i < 48; ++i) xv.push_back(static_cast<float>((i * 37) % 23 - 11) * 0.37f);
  const std::vector<float> scale = {0.5f, -1.25f, 2.0f}, bias = {0.1f, 0.2f, -0.3f};
  const std::vector<float> mean = {0.25f, -0.5f, 1.0f}, var = {1.5f, 0.75f, 3.0f}, slope = {0.2f, 0.3f, 0.4f};
  for (DType t : {DType::kF16, DType::kBF16}) {
    auto narrow = [&](float v) { return t == DType::kF16 ? half::F32ToF16(v) : half::F32ToBF16(v); };
    auto widen = [&](uint16_t h) { return t == DType::kF16 ? half::F16ToF32(h) : half::BF16ToF32(h); };
    // The 16-bit model's values, and the same values (exactly) for the f32 model.
    auto as_half = [&](const std::vector<float>& v) {
      std::vector<uint16_t> h;
      for (float f : v) h.push_back(narrow(f));
      return h;
    };
    auto as_wide = [&](const std::vector<float>& v) {
      std::vector<float> w;
      for (float f : v) w.push_back(widen(narrow(f)));
      return w;
    };
    auto build = [&](bool half_model) {
      const int32_t elem = !half_model        ? onnx::TensorProto::FLOAT
                           : t == DType::kF16 ? onnx::TensorProto::FLOAT16
                                              : onnx::TensorProto::BFLOAT16;
      ModelBuilder m;
      m.Input("x", elem, {xs[0], xs[1], xs[2], xs[3]});
      auto init = [&](const std::string& name, const std::vector<float>& v, Shape dims) {
        auto* i = m.Initializer(name, elem, dims);
        if (half_model) {
          const std::vector<uint16_t> h = as_half(v);
          i->set_raw_data(std::string(reinterpret_cast<const char*>(h.data()), h.size() * 2));
        } else {
          const std::vector<float> w = as_wide(v);
          i->set_raw_data(std::string(reinterpret_cast<const char*>(w.data()), w.size() * 4));
        }
      };
      init("scale", scale, {3});
      init("bias", bias, {3});
      init("mean", mean, {3});
      init("var", var, {3});
      init("slope", slope, {3, 1, 1});
      auto* alpha = m.Node("LeakyRelu", {"x"}, {"leaky"})->add_attribute();
      alpha->set_name("alpha");
      alpha->set_type(onnx::AttributeProto::FLOAT);
      alpha->set_f(0.1f);
      m.Node("Elu", {"x"}, {"elu"});
      m.Node("HardSigmoid", {"x"}, {"hsig"});
      m.Node("HardSwish", {"x"}, {"hswish"});
      m.Node("Softplus", {"x"}, {"softplus"});
      m.Node("PRelu", {"x", "slope"}, {"prelu"});
      m.Node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"bn"});
      m.Node("InstanceNormalization", {"x", "scale", "bias"}, {"inorm"});
      ModelBuilder::IntAttr(m.Node("LRN", {"x"}, {"lrn"}), "size", 3);
      m.Node("IsNaN", {"x"}, {"isnan"});
      for (const char* out : {"leaky", "elu", "hsig", "hswish", "softplus", "prelu", "bn", "inorm", "lrn", "isnan"})
        m.Output(out);
      return m;
    };
    auto half_import = ImportOnnx(build(true).Bytes(), {});
    ASSERT_TRUE(half_import.ok()) << half_import.status().message();
    auto f32_import = ImportOnnx(build(false).Bytes(), {});
    ASSERT_TRUE(f32_import.ok()) << f32_import.status().message();
    const std::vector<uint16_t> xh = as_half(xv);
    auto got = RunImported(*half_import, {{"x", Tensor::FromVector<uint16_t>(t, xs, xh)}});
    ASSERT_TRUE(got.ok()) << got.status().message();
    auto ref = RunImported(*f32_import, {{"x", Tensor::FromVector<float>(DType::kF32, xs, as_wide(xv))}});
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    ASSERT_EQ(got->outputs.size(), ref->outputs.size());
    for (size_t o = 0; o < got->outputs.size(); ++o) {
      const Tensor& g = got->outputs[o].tensor;
      const Tensor& r = ref->outputs[o].tensor;
      const std::string& name = got->outputs[o].name;
      ASSERT_EQ(g.shape(), r.shape()) << name;
      if (r.dtype() == DType::kBool) {
        EXPECT_EQ(g.dtype(), DType::kBool) << name;
        EXPECT_TRUE(std::equal(g.data(), g.data() + g.byte_size(), r.data())) << name;
        continue;
      }
      ASSERT_EQ(g.dtype(), t) << name;
      for (int64_t i = 0; i < g.num_elements(); ++i) {
        ASSERT_EQ(g.data_as<uint16_t>()[i], narrow(r.data_as<float>()[i])) << DTypeName(t) << " " << name << " " << i;
      }
    }
  }
}

TEST(OnnxImport, TriluNeedsAKnownKAndAMatrix) {
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {2, 3});
    m.InitializerI64("k", {-1});
    m.Node("Trilu", {"x", "k"}, {"y"});  // upper by default: j - i >= -1
    m.Output("y");
    Tensor x = Tensor::FromVector<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
    auto y = RunOne(m, {{"x", x}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_EQ(Values(*y), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {2, 3});
    m.Input("k", onnx::TensorProto::INT64, {});
    m.Node("Trilu", {"x", "k"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("computed at run time"), std::string::npos) << r.status().message();
  }
  {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {4});
    m.Node("Trilu", {"x"}, {"y"});
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  }
}

TEST(OnnxImport, OneHotRefusesHostileDepthsAndValues) {
  auto model = [](const std::vector<int64_t>& depth, int64_t values_size) {
    ModelBuilder m;
    m.Input("i", onnx::TensorProto::INT64, {3});
    m.InitializerI64("depth", depth);
    std::vector<float> values(static_cast<size_t>(values_size), 0.0f);
    for (size_t k = 0; k < values.size(); ++k) values[k] = static_cast<float>(k) + 2.0f;
    m.InitializerF32("values", {values_size}, values);
    m.Node("OneHot", {"i", "depth", "values"}, {"y"});
    m.Output("y");
    return m;
  };
  for (int64_t depth : {int64_t{0}, int64_t{-3}, int64_t{1} << 40, std::numeric_limits<int64_t>::max()}) {
    auto r = ImportOnnx(model({depth}, 2).Bytes(), {});
    ASSERT_FALSE(r.ok()) << depth;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  }
  auto r = ImportOnnx(model({3}, 3).Bytes(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("values must have shape [2]"), std::string::npos) << r.status().message();
  // In range, negative, and out of range (an all-off row).
  Tensor i = Tensor::FromVector<int64_t>(DType::kI64, {3}, {1, -1, 5});
  auto y = RunOne(model({3}, 2), {{"i", i}});
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ(y->shape(), (Shape{3, 3}));
  EXPECT_EQ(Values(*y), (std::vector<float>{2, 3, 2, 2, 2, 3, 2, 2, 2}));
}

TEST(OnnxImport, HardmaxMarksTheFirstMaximum) {
  ModelBuilder m;
  m.Input("x", onnx::TensorProto::FLOAT, {2, 3});
  m.Node("Hardmax", {"x"}, {"y"});
  m.Output("y");
  Tensor x = Tensor::FromVector<float>(DType::kF32, {2, 3}, {1, 5, 5, -1, -2, -1});
  auto y = RunOne(m, {{"x", x}});
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ(Values(*y), (std::vector<float>{0, 1, 0, 1, 0, 0}));
}

TEST(OnnxImport, InstanceNormalizationChecksItsOperands) {
  ModelBuilder m;
  m.Input("x", onnx::TensorProto::FLOAT, {1, 2, 4});
  m.InitializerF32("scale", {3}, {1, 1, 1});
  m.InitializerF32("B", {2}, {0, 0});
  m.Node("InstanceNormalization", {"x", "scale", "B"}, {"y"});
  m.Output("y");
  auto r = ImportOnnx(m.Bytes(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("scale and B must have shape [C]"), std::string::npos) << r.status().message();
}

TEST(OnnxImport, GatherElementsRefusesOutOfRangeIndicesAtRunTime) {
  ModelBuilder m;
  m.Input("x", onnx::TensorProto::FLOAT, {2, 3});
  m.Input("i", onnx::TensorProto::INT64, {2, 2});
  ModelBuilder::IntAttr(m.Node("GatherElements", {"x", "i"}, {"y"}), "axis", 1);
  m.Output("y");
  Tensor x = Tensor::FromVector<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto y = RunOne(m, {{"x", x}, {"i", Tensor::FromVector<int64_t>(DType::kI64, {2, 2}, {2, -3, -1, 0})}});
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ(Values(*y), (std::vector<float>{3, 1, 6, 4}));
  // 3 on an axis of 3 would be the next row's first element in the flat data: refused.
  for (int64_t bad :
       {int64_t{3}, int64_t{-4}, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    auto r = RunOne(m, {{"x", x}, {"i", Tensor::FromVector<int64_t>(DType::kI64, {2, 2}, {0, 0, bad, 0})}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("out of range"), std::string::npos) << r.status().message();
  }
  ModelBuilder wrong_rank;
  wrong_rank.Input("x", onnx::TensorProto::FLOAT, {2, 3});
  wrong_rank.Input("i", onnx::TensorProto::INT64, {2});
  wrong_rank.Node("GatherElements", {"x", "i"}, {"y"});
  wrong_rank.Output("y");
  auto r = ImportOnnx(wrong_rank.Bytes(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
}

TEST(OnnxImport, GatherNdFetchesTuplesAndRefusesBadOnes) {
  auto model = [](int64_t batch_dims, const std::vector<int64_t>& index_dims) {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {2, 2, 2});
    m.Input("i", onnx::TensorProto::INT64, index_dims);
    ModelBuilder::IntAttr(m.Node("GatherND", {"x", "i"}, {"y"}), "batch_dims", batch_dims);
    m.Output("y");
    return m;
  };
  Tensor x = Tensor::FromVector<float>(DType::kF32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  {
    auto y =
        RunOne(model(0, {2, 2}), {{"x", x}, {"i", Tensor::FromVector<int64_t>(DType::kI64, {2, 2}, {1, 0, -1, -1})}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_EQ(y->shape(), (Shape{2, 2}));
    EXPECT_EQ(Values(*y), (std::vector<float>{4, 5, 6, 7}));
  }
  {
    // batch_dims 1: tuple t of batch b indexes x[b].
    auto y = RunOne(model(1, {2, 1, 2}),
                    {{"x", x}, {"i", Tensor::FromVector<int64_t>(DType::kI64, {2, 1, 2}, {0, 1, 1, 0})}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_EQ(Values(*y), (std::vector<float>{1, 6}));
  }
  // One bad component refuses the tuple, even when the flat row number would exist.
  for (int64_t bad : {int64_t{2}, int64_t{-3}, std::numeric_limits<int64_t>::min()}) {
    auto r = RunOne(model(0, {1, 3}), {{"x", x}, {"i", Tensor::FromVector<int64_t>(DType::kI64, {1, 3}, {0, bad, 0})}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("out of range"), std::string::npos) << r.status().message();
  }
  for (int64_t batch_dims : {int64_t{-1}, int64_t{2}, std::numeric_limits<int64_t>::max()}) {
    auto r = ImportOnnx(model(batch_dims, {2, 2}).Bytes(), {});
    ASSERT_FALSE(r.ok()) << batch_dims;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  }
  auto too_long = ImportOnnx(model(0, {1, 4}).Bytes(), {});
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument) << too_long.status().message();
}

TEST(OnnxImport, LrnRefusesHostileSizes) {
  for (int64_t size : {int64_t{0}, int64_t{-1}, int64_t{1} << 40, std::numeric_limits<int64_t>::max()}) {
    ModelBuilder m;
    m.Input("x", onnx::TensorProto::FLOAT, {1, 4, 2, 2});
    ModelBuilder::IntAttr(m.Node("LRN", {"x"}, {"y"}), "size", size);
    m.Output("y");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok()) << size;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  }
}

TEST(OnnxImport, EyeLikeIsAConstantAndRefusesBadInputs) {
  auto model = [](const std::vector<int64_t>& dims, int64_t k, std::optional<int64_t> dtype) {
    ModelBuilder m(9);
    m.Input("x", onnx::TensorProto::INT32, dims);
    auto* n = m.Node("EyeLike", {"x"}, {"y"}, "eye");
    ModelBuilder::IntAttr(n, "k", k);
    if (dtype) ModelBuilder::IntAttr(n, "dtype", *dtype);
    m.Output("y");
    return m;
  };
  auto imported = ImportOnnx(model({3, 4}, -1, onnx::TensorProto::FLOAT).Bytes(), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  auto r = RunImported(*imported, {{"x", Tensor(DType::kI32, {3, 4})}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].tensor.dtype(), DType::kF32);
  EXPECT_EQ(Values(r->outputs[0].tensor), (std::vector<float>{0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0}));
  // k far outside the matrix: all zeros, no overflow.
  for (int64_t k : {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    auto far = ImportOnnx(model({2, 2}, k, std::nullopt).Bytes(), {});
    EXPECT_TRUE(far.ok()) << k << ": " << far.status().message();
  }
  auto rank3 = ImportOnnx(model({2, 2, 2}, 0, std::nullopt).Bytes(), {});
  ASSERT_FALSE(rank3.ok());
  EXPECT_EQ(rank3.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rank3.status().message().find("'eye'"), std::string::npos) << rank3.status().message();
  for (int64_t dtype : {int64_t{-1}, int64_t{8}, int64_t{1} << 40}) {
    auto bad = ImportOnnx(model({2, 2}, 0, dtype).Bytes(), {});
    ASSERT_FALSE(bad.ok()) << dtype;
    EXPECT_NE(bad.status().message().find("dtype"), std::string::npos) << bad.status().message();
  }
}

// --- Resize and Upsample (docs/DETERMINISM.md 6.2) ---

void StringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

// The spec's taps along one axis, written out directly from DETERMINISM.md 6.2 for the
// modes these tests use: (indices, f32 weights) for output index i.
struct RefTaps {
  std::vector<int64_t> index;
  std::vector<float> weight;
};
RefTaps ReferenceTaps(const std::string& mode, const std::string& coords, double a, bool exclude, int64_t i, int64_t n,
                      double s) {
  const double x = static_cast<double>(i);
  const double length = s * static_cast<double>(n);
  double c = 0;
  if (coords == "half_pixel") c = (x + 0.5) / s - 0.5;
  if (coords == "align_corners") c = length == 1.0 ? 0.0 : (x * static_cast<double>(n - 1)) / (length - 1.0);
  if (coords == "asymmetric") c = x / s;
  auto clamp = [n](int64_t j) { return std::min(std::max(j, int64_t{0}), n - 1); };
  RefTaps t;
  if (mode == "nearest") {  // round_prefer_floor
    const double f = std::floor(c);
    t.index = {clamp(static_cast<int64_t>(f) + (c - f > 0.5 ? 1 : 0))};
    t.weight = {1.0f};
    return t;
  }
  const int64_t left = static_cast<int64_t>(std::ceil(c)) - 1;
  const double r = c - static_cast<double>(left);
  std::vector<double> w;
  int64_t first = left;
  if (mode == "linear") {
    w = {1.0 - r, r};
  } else {
    first = left - 1;
    const double t0 = r + 1.0, u = 1.0 - r, v = u + 1.0;
    w = {(((a * t0) - (5.0 * a)) * t0 + (8.0 * a)) * t0 - (4.0 * a), ((((a + 2.0) * r) - (a + 3.0)) * r) * r + 1.0,
         ((((a + 2.0) * u) - (a + 3.0)) * u) * u + 1.0, (((a * v) - (5.0 * a)) * v + (8.0 * a)) * v - (4.0 * a)};
  }
  double total = 0;
  for (size_t k = 0; k < w.size(); ++k) {
    const int64_t j = first + static_cast<int64_t>(k);
    if (exclude && (j < 0 || j >= n)) w[k] = 0;
    total += w[k];
    t.index.push_back(clamp(j));
  }
  for (double wk : w) t.weight.push_back(static_cast<float>(exclude ? wk / total : wk));
  return t;
}

// Resizes a [1, 1, H, W] plane per the spec: the W axis of every row first, then the H axis,
// each output the chain y = t0 * w0; y = y + tk * wk.
std::vector<float> ReferenceResize2d(const std::vector<float>& in, int64_t h, int64_t w, int64_t oh, int64_t ow,
                                     double sh, double sw, const std::string& mode, const std::string& coords, double a,
                                     bool exclude) {
  auto chain = [](const RefTaps& t, auto&& value) {
    float y = value(t.index[0]) * t.weight[0];
    for (size_t k = 1; k < t.index.size(); ++k) y = y + value(t.index[k]) * t.weight[k];
    return y;
  };
  std::vector<float> rows(static_cast<size_t>(h * ow));
  for (int64_t r = 0; r < h; ++r) {
    for (int64_t j = 0; j < ow; ++j) {
      RefTaps t = ReferenceTaps(mode, coords, a, exclude, j, w, sw);
      rows[static_cast<size_t>(r * ow + j)] = chain(t, [&](int64_t k) { return in[static_cast<size_t>(r * w + k)]; });
    }
  }
  std::vector<float> out(static_cast<size_t>(oh * ow));
  for (int64_t i = 0; i < oh; ++i) {
    for (int64_t j = 0; j < ow; ++j) {
      RefTaps t = ReferenceTaps(mode, coords, a, exclude, i, h, sh);
      out[static_cast<size_t>(i * ow + j)] = chain(t, [&](int64_t k) { return rows[static_cast<size_t>(k * ow + j)]; });
    }
  }
  return out;
}

ModelBuilder ResizeModel(const std::vector<int64_t>& in_shape, const std::vector<float>& scales,
                         const std::vector<std::pair<std::string, std::string>>& strings,
                         int32_t elem = onnx::TensorProto::FLOAT) {
  ModelBuilder m(13);
  m.Input("x", elem, in_shape);
  m.InitializerF32("scales", {static_cast<int64_t>(scales.size())}, scales);
  auto* n = m.Node("Resize", {"x", "", "scales"}, {"y"});
  for (const auto& [k, v] : strings) StringAttr(n, k, v);
  m.Output("y");
  return m;
}

TEST(OnnxImport, ResizeGivesTheSpecsBitsForEveryMode) {
  struct Case {
    std::string mode, coords;
    float a;
    bool exclude;
    std::vector<float> scales;
  };
  const std::vector<Case> cases = {
      {"nearest", "half_pixel", -0.75f, false, {1, 1, 2.0f, 3.0f}},
      {"linear", "half_pixel", -0.75f, false, {1, 1, 2.0f, 0.6f}},
      {"linear", "align_corners", -0.75f, false, {1, 1, 0.6f, 1.7f}},
      {"linear", "asymmetric", -0.75f, false, {1, 1, 1.5f, 2.5f}},
      {"cubic", "half_pixel", -0.75f, false, {1, 1, 0.8f, 2.0f}},
      {"cubic", "align_corners", -0.5f, true, {1, 1, 2.0f, 0.8f}},
      {"cubic", "asymmetric", -0.5f, true, {1, 1, 1.3f, 1.9f}},
  };
  const int64_t h = 5, w = 7;
  const std::vector<float> x = Values(RandomF32({1, 1, h, w}, 19, 3.0f));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mode + " " + c.coords);
    ModelBuilder m =
        ResizeModel({1, 1, h, w}, c.scales, {{"mode", c.mode}, {"coordinate_transformation_mode", c.coords}});
    auto* node = m.graph()->mutable_node(0);
    FloatAttr(node, "cubic_coeff_a", c.a);
    ModelBuilder::IntAttr(node, "exclude_outside", c.exclude ? 1 : 0);
    auto y = RunOne(m, {{"x", Tensor::FromVector<float>(DType::kF32, {1, 1, h, w}, x)}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    const double sh = static_cast<double>(c.scales[2]), sw = static_cast<double>(c.scales[3]);
    const auto oh = static_cast<int64_t>(std::floor(static_cast<double>(h) * sh));
    const auto ow = static_cast<int64_t>(std::floor(static_cast<double>(w) * sw));
    ASSERT_EQ(y->shape(), (Shape{1, 1, oh, ow}));
    const std::vector<float> want = ReferenceResize2d(x, h, w, oh, ow, sh, sw, c.mode, c.coords, c.a, c.exclude);
    const std::vector<float> got = Values(*y);
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(want[k]))
          << k << ": " << got[k] << " vs " << want[k];
    }
  }
}

TEST(OnnxImport, ResizeNearestModesCopyAnyDtype) {
  // sizes [1, 9] from [1, 4] (s = 2.25) on i32: every nearest_mode and coordinate mode copies bits.
  struct Case {
    std::string coords, nearest;
    std::vector<int32_t> want;
  };
  const std::vector<Case> cases = {
      {"asymmetric", "floor", {10, 10, 10, 11, 11, 12, 12, 13, 13}},
      {"asymmetric", "ceil", {10, 11, 11, 12, 12, 13, 13, 13, 13}},
      {"asymmetric", "round_prefer_floor", {10, 10, 11, 11, 12, 12, 13, 13, 13}},
      {"asymmetric", "round_prefer_ceil", {10, 10, 11, 11, 12, 12, 13, 13, 13}},
      {"half_pixel", "round_prefer_ceil", {10, 10, 11, 11, 12, 12, 12, 13, 13}},      // 1.5 -> 2
      {"align_corners", "round_prefer_floor", {10, 10, 11, 11, 11, 12, 12, 13, 13}},  // 1.5 -> 1
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.coords + " " + c.nearest);
    ModelBuilder m(13);
    m.Input("x", onnx::TensorProto::INT32, {1, 4});
    m.InitializerI64("sizes", {1, 9});
    auto* n = m.Node("Resize", {"x", "", "", "sizes"}, {"y"});
    StringAttr(n, "coordinate_transformation_mode", c.coords);
    StringAttr(n, "nearest_mode", c.nearest);
    m.Output("y");
    auto y = RunOne(m, {{"x", Tensor::FromVector<int32_t>(DType::kI32, {1, 4}, {10, 11, 12, 13})}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    ASSERT_EQ(y->dtype(), DType::kI32);
    EXPECT_EQ(std::vector<int32_t>(y->data_as<int32_t>(), y->data_as<int32_t>() + 9), c.want);
  }
}

TEST(OnnxImport, ResizeCropAndResizeExtrapolatesExactly) {
  ModelBuilder m(13);
  m.Input("x", onnx::TensorProto::FLOAT, {1, 1, 2, 2});
  m.InitializerF32("roi", {8}, {0, 0, -1.0f, 0.0f, 1, 1, 1.0f, 2.0f});
  m.InitializerI64("sizes", {1, 1, 3, 3});
  auto* n = m.Node("Resize", {"x", "roi", "", "sizes"}, {"y"});
  StringAttr(n, "mode", "linear");
  StringAttr(n, "coordinate_transformation_mode", "tf_crop_and_resize");
  FloatAttr(n, "extrapolation_value", 7.5f);
  m.Output("y");
  auto y = RunOne(m, {{"x", Tensor::FromVector<float>(DType::kF32, {1, 1, 2, 2}, {1, 2, 3, 4})}});
  ASSERT_TRUE(y.ok()) << y.status().message();
  // Rows at source -1, 0, 1; columns at 0, 1, 2: row 0 and column 2 lie outside.
  EXPECT_EQ(Values(*y), (std::vector<float>{7.5f, 7.5f, 7.5f, 1, 2, 7.5f, 3, 4, 7.5f}));
}

TEST(OnnxImport, UpsampleRepeatsNearestAndInterpolatesLinear) {
  for (int64_t opset : {7, 9}) {
    ModelBuilder m(opset);
    m.Input("x", onnx::TensorProto::FLOAT, {1, 2});
    onnx::NodeProto* n = nullptr;
    if (opset == 7) {
      n = m.Node("Upsample", {"x"}, {"y"});
      auto* a = n->add_attribute();
      a->set_name("scales");
      a->set_type(onnx::AttributeProto::FLOATS);
      a->add_floats(1.0f);
      a->add_floats(2.0f);
    } else {
      m.InitializerF32("scales", {2}, {1.0f, 2.0f});
      n = m.Node("Upsample", {"x", "scales"}, {"y"});
    }
    StringAttr(n, "mode", "linear");
    m.Output("y");
    auto y = RunOne(m, {{"x", Tensor::FromVector<float>(DType::kF32, {1, 2}, {1, 3})}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_EQ(Values(*y), (std::vector<float>{1, 2, 3, 3})) << opset;  // asymmetric: 0, 0.5, 1, 1.5 -> edge
  }
}

TEST(OnnxImport, ResizeRefusesBadScalesSizesAndAttributes) {
  auto expect_code = [](const ModelBuilder& m, StatusCode code, const std::string& text) {
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), code) << r.status().message();
    EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().message();
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {0.0f, -2.0f, inf, std::nanf("")}) {
    expect_code(ResizeModel({1, 4}, {1.0f, bad}, {}), StatusCode::kInvalidArgument, "finite and positive");
  }
  expect_code(ResizeModel({1, 4}, {1.0f, 1e30f}, {}), StatusCode::kInvalidArgument, "element cap");
  expect_code(ResizeModel({1, 4}, {1.0f, 2.0f, 2.0f}, {}), StatusCode::kInvalidArgument, "one value per dim");
  expect_code(ResizeModel({1, 4}, {1, 2}, {{"mode", "bicubic"}}), StatusCode::kInvalidArgument, "unknown mode");
  expect_code(ResizeModel({1, 4}, {1, 2}, {{"coordinate_transformation_mode", "tf_half_pixel_for_nn"}}),
              StatusCode::kInvalidArgument, "coordinate_transformation_mode");
  expect_code(ResizeModel({1, 4}, {1, 2}, {{"nearest_mode", "nearest"}}), StatusCode::kInvalidArgument, "nearest_mode");
  expect_code(ResizeModel({1, 4}, {1, 2}, {{"mode", "linear"}}, onnx::TensorProto::INT32), StatusCode::kUnimplemented,
              "unsupported dtype");
  expect_code(ResizeModel({1, 4}, {1, 2}, {{"coordinate_transformation_mode", "tf_crop_and_resize"}}),
              StatusCode::kInvalidArgument, "roi");
  {
    ModelBuilder m = ResizeModel({1, 4}, {1, 2}, {});
    ModelBuilder::IntAttr(m.graph()->mutable_node(0), "exclude_outside", 2);
    expect_code(m, StatusCode::kInvalidArgument, "exclude_outside");
  }
  {  // an extreme but finite cubic_coeff_a: the weights (below 0.2 * |a| + 1) still fit f32
    ModelBuilder m = ResizeModel({1, 4}, {1, 2}, {{"mode", "cubic"}});
    FloatAttr(m.graph()->mutable_node(0), "cubic_coeff_a", -3e38f);
    ModelBuilder::IntAttr(m.graph()->mutable_node(0), "exclude_outside", 1);
    auto y = RunOne(m, {{"x", Tensor::FromVector<float>(DType::kF32, {1, 4}, {1, 2, 3, 4})}});
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_EQ(y->shape(), (Shape{1, 8}));
    ModelBuilder bad = ResizeModel({1, 4}, {1, 2}, {{"mode", "cubic"}});
    FloatAttr(bad.graph()->mutable_node(0), "cubic_coeff_a", std::numeric_limits<float>::infinity());
    expect_code(bad, StatusCode::kInvalidArgument, "cubic_coeff_a must be finite");
  }
  {
    ModelBuilder m = ResizeModel({1, 4}, {1, 2}, {});
    ModelBuilder::IntAttr(m.graph()->mutable_node(0), "antialias", 1);
    expect_code(m, StatusCode::kUnimplemented, "antialias");
  }
  {  // scales computed at run time: the import says so (consensor import --bind fixes it)
    ModelBuilder m(13);
    m.Input("x", onnx::TensorProto::FLOAT, {1, 4});
    m.Input("scales", onnx::TensorProto::FLOAT, {2});
    m.Node("Resize", {"x", "", "scales"}, {"y"});
    m.Output("y");
    expect_code(m, StatusCode::kUnimplemented, "computed at run time");
  }
  {  // both scales and sizes; negative sizes; an empty axis grown
    ModelBuilder m(13);
    m.Input("x", onnx::TensorProto::FLOAT, {1, 4});
    m.InitializerF32("scales", {2}, {1, 2});
    m.InitializerI64("sizes", {1, 8});
    m.Node("Resize", {"x", "", "scales", "sizes"}, {"y"});
    m.Output("y");
    expect_code(m, StatusCode::kInvalidArgument, "exactly one of scales and sizes");
  }
  for (const auto& [shape, sizes, text] :
       std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::string>>{
           {{1, 4}, {1, -8}, "negative"},
           {{1, 0}, {1, 3}, "empty axis"},
           {{1, 4}, {1, int64_t{1} << 40}, "element cap"},
           {{1, 4}, {1}, "one value per dim"}}) {
    ModelBuilder m(13);
    m.Input("x", onnx::TensorProto::FLOAT, shape);
    m.InitializerI64("sizes", sizes);
    m.Node("Resize", {"x", "", "", "sizes"}, {"y"});
    m.Output("y");
    expect_code(m, StatusCode::kInvalidArgument, text);
  }
  for (float bad_roi : {inf, 1e30f}) {
    ModelBuilder m(13);
    m.Input("x", onnx::TensorProto::FLOAT, {1, 4});
    m.InitializerF32("roi", {4}, {0, 0, 1, bad_roi});
    m.InitializerI64("sizes", {1, 3});
    StringAttr(m.Node("Resize", {"x", "roi", "", "sizes"}, {"y"}), "coordinate_transformation_mode",
               "tf_crop_and_resize");
    m.Output("y");
    expect_code(m, StatusCode::kInvalidArgument, "roi");
  }
  {  // Upsample only enlarges
    ModelBuilder m(9);
    m.Input("x", onnx::TensorProto::FLOAT, {1, 4});
    m.InitializerF32("scales", {2}, {1.0f, 0.5f});
    m.Node("Upsample", {"x", "scales"}, {"y"});
    m.Output("y");
    expect_code(m, StatusCode::kInvalidArgument, "at least 1");
  }
}

// --- ConvTranspose and TopK ---

void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

struct ConvTransposeCase {
  std::string name = "";
  Shape x, w;  // x [N, C, D...], w [C, F/group, K...]
  int64_t group = 1;
  std::vector<int64_t> strides = {}, dilations = {}, pads = {}, output_padding = {}, output_shape = {};
  std::string auto_pad = "";  // empty: not set
  bool bias = true;
};

ModelBuilder ConvTransposeModel(const ConvTransposeCase& c, const std::vector<float>& w, const std::vector<float>& b) {
  ModelBuilder m;
  m.Input("x", onnx::TensorProto::FLOAT, c.x);
  m.InitializerF32("W", c.w, w);
  std::vector<std::string> inputs = {"x", "W"};
  if (c.bias) {
    m.InitializerF32("B", {static_cast<int64_t>(b.size())}, b);
    inputs.push_back("B");
  }
  auto* n = m.Node("ConvTranspose", inputs, {"y"}, "deconv");
  if (c.group != 1) ModelBuilder::IntAttr(n, "group", c.group);
  if (!c.strides.empty()) IntsAttr(n, "strides", c.strides);
  if (!c.dilations.empty()) IntsAttr(n, "dilations", c.dilations);
  if (!c.pads.empty()) IntsAttr(n, "pads", c.pads);
  if (!c.output_padding.empty()) IntsAttr(n, "output_padding", c.output_padding);
  if (!c.output_shape.empty()) IntsAttr(n, "output_shape", c.output_shape);
  if (!c.auto_pad.empty()) StringAttr(n, "auto_pad", c.auto_pad);
  m.Output("y");
  return m;
}

// The spec (DETERMINISM.md 4.4 conv_transpose), written out directly: per output element,
// acc = +0.0, then fma over (input channel of the group ascending, kernel position from
// the last to the first in row-major order) of x at t / s when o + pad_begin - k * d = t is
// a multiple of s inside the input, else +0.0; then + bias. Pads are the resolved ones.
std::vector<float> ConvTransposeReference(const ConvTransposeCase& c, const std::vector<int64_t>& pads,
                                          const Shape& y_shape, const Tensor& x, const std::vector<float>& w,
                                          const std::vector<float>& b) {
  const size_t sp = c.x.size() - 2;
  auto at = [](const std::vector<int64_t>& v, size_t i, int64_t def) { return v.empty() ? def : v[i]; };
  const int64_t cg = c.x[1] / c.group, fg = c.w[1], f_total = fg * c.group;
  int64_t out_spatial = 1, k_total = 1, in_spatial = 1;
  for (size_t i = 0; i < sp; ++i) {
    out_spatial *= y_shape[2 + i];
    k_total *= c.w[2 + i];
    in_spatial *= c.x[2 + i];
  }
  std::vector<float> y(static_cast<size_t>(c.x[0] * f_total * out_spatial));
  const float* xv = x.data_as<float>();
  for (int64_t n = 0; n < c.x[0]; ++n) {
    for (int64_t f = 0; f < f_total; ++f) {
      const int64_t g = f / fg, fl = f % fg;
      for (int64_t o = 0; o < out_spatial; ++o) {
        std::vector<int64_t> oc(sp);
        for (size_t i = sp, r = o; i-- > 0;) {
          oc[i] = static_cast<int64_t>(r) % y_shape[2 + i];
          r /= y_shape[2 + i];
        }
        float acc = 0.0f;
        for (int64_t ci = 0; ci < cg; ++ci) {
          const int64_t cin = g * cg + ci;
          for (int64_t kk = k_total - 1; kk >= 0; --kk) {
            std::vector<int64_t> kc(sp);
            for (size_t i = sp, r = kk; i-- > 0;) {
              kc[i] = static_cast<int64_t>(r) % c.w[2 + i];
              r /= c.w[2 + i];
            }
            bool inside = true;
            int64_t xi = 0;
            for (size_t i = 0; i < sp; ++i) {
              const int64_t s = at(c.strides, i, 1), d = at(c.dilations, i, 1);
              const int64_t t = oc[i] + pads[i] - kc[i] * d;
              if (t < 0 || t % s != 0 || t / s >= c.x[2 + i]) inside = false;
              xi = xi * c.x[2 + i] + (inside ? t / s : 0);
            }
            const float v = inside ? xv[(n * c.x[1] + cin) * in_spatial + xi] : 0.0f;
            acc = std::fma(v, w[static_cast<size_t>((cin * fg + fl) * k_total + kk)], acc);
          }
        }
        if (c.bias) acc = acc + b[static_cast<size_t>(f)];
        if (std::isnan(acc)) acc = std::bit_cast<float>(0x7FC00000u);
        y[static_cast<size_t>((n * f_total + f) * out_spatial + o)] = acc;
      }
    }
  }
  return y;
}

TEST(OnnxImport, ConvTransposeIsTheSpecsGatherAtEveryThreadCount) {
  // pads are the resolved ones the reference uses (after auto_pad / output_shape).
  const std::vector<std::pair<ConvTransposeCase, std::vector<int64_t>>> cases = {
      {{"1d", {2, 3, 5}, {3, 2, 3}, 1, {2}, {2}, {1, 0}, {1}, {}, "", true}, {1, 0}},
      {{"2d_groups", {1, 4, 5, 3}, {4, 3, 3, 2}, 2, {2, 3}, {1, 2}, {1, 0, 2, 1}, {1, 0}, {}, "", true}, {1, 0, 2, 1}},
      {{"2d_depthwise_no_bias", {2, 3, 4, 4}, {3, 1, 3, 3}, 3, {2, 2}, {}, {}, {}, {}, "", false}, {0, 0, 0, 0}},
      {{"3d", {1, 2, 3, 4, 3}, {2, 2, 2, 3, 2}, 1, {2, 1, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {1, 0, 0}, {}, "", true},
       {0, 1, 1, 1, 0, 0}},
      // output_shape one larger than natural (7 -> 8, 9 -> 10): a negative end pad.
      {{"output_shape", {1, 1, 3, 3}, {1, 2, 3, 3}, 1, {3, 2}, {}, {}, {}, {10, 8}, "", true}, {0, 0, -1, -1}},
      // SAME_LOWER: output = input * stride, odd total padding first.
      {{"same_lower", {1, 2, 3, 4}, {2, 2, 3, 3}, 1, {2, 2}, {}, {}, {}, {}, "SAME_LOWER", true}, {1, 1, 0, 0}},
      {{"valid", {1, 2, 3, 4}, {2, 1, 2, 3}, 1, {1, 2}, {}, {5, 5, 5, 5}, {}, {}, "VALID", true}, {0, 0, 0, 0}},
      // Pads larger than the kernel span: the stuffed input is cut.
      {{"big_pads", {1, 1, 6, 5}, {1, 1, 2, 2}, 1, {2, 2}, {}, {3, 2, 2, 3}, {}, {}, "", true}, {3, 2, 2, 3}},
  };
  uint32_t seed = 1900;
  for (const auto& [c, pads] : cases) {
    int64_t w_count = 1;
    for (int64_t d : c.w) w_count *= d;
    const Tensor wt = RandomF32(c.w, ++seed);
    std::vector<float> w(wt.data_as<float>(), wt.data_as<float>() + w_count);
    // A -0 and an infinite weight: stuffed zeros and padding are fma terms, not skipped.
    w[1] = -0.0f;
    if (c.name == "2d_groups") w[w.size() - 1] = INFINITY;
    const int64_t f = c.w[1] * c.group;
    const Tensor bt = RandomF32({f}, ++seed);
    const std::vector<float> b(bt.data_as<float>(), bt.data_as<float>() + f);
    const Tensor x = RandomF32(c.x, ++seed);
    ModelBuilder m = ConvTransposeModel(c, w, b);
    auto imported = ImportOnnx(m.Bytes(), {});
    ASSERT_TRUE(imported.ok()) << c.name << ": " << imported.status().message();
    Shape y_shape = {c.x[0], f};
    const size_t sp = c.x.size() - 2;
    for (size_t i = 0; i < sp; ++i) {
      const int64_t s = c.strides.empty() ? 1 : c.strides[i], d = c.dilations.empty() ? 1 : c.dilations[i];
      const int64_t op = c.output_padding.empty() ? 0 : c.output_padding[i];
      y_shape.push_back(s * (c.x[2 + i] - 1) + op + (c.w[2 + i] - 1) * d + 1 - pads[i] - pads[i + sp]);
    }
    const std::vector<float> want = ConvTransposeReference(c, pads, y_shape, x, w, b);
    MemoryBlobSource blobs;
    if (!imported->weights.empty()) blobs.Add(imported->weights);
    auto program = CompileGraph(imported->graph, &blobs, Limits{});
    ASSERT_TRUE(program.ok()) << program.status().message();
    for (int threads : {1, 2, 8}) {
      auto cpu = MakeCpu(threads);
      auto loaded = LoadedProgram::Load(*program, cpu.get());
      ASSERT_TRUE(loaded.ok()) << loaded.status().message();
      auto r = (*loaded)->Run({{"x", x}});
      ASSERT_TRUE(r.ok()) << c.name << ": " << r.status().message();
      const Tensor& y = r->outputs[0].tensor;
      ASSERT_EQ(y.shape(), y_shape) << c.name;
      ASSERT_EQ(0, std::memcmp(y.data_as<float>(), want.data(), want.size() * sizeof(float)))
          << c.name << " at " << threads << " threads";
    }
  }
}

TEST(OnnxImport, ConvTransposeRefusesBadAttributes) {
  struct Bad {
    ConvTransposeCase c;
    StatusCode code;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {{"group", {1, 4, 3, 3}, {4, 1, 2, 2}, 3}, StatusCode::kInvalidArgument, "divisible by group"},
      {{"channels", {1, 4, 3, 3}, {2, 1, 2, 2}}, StatusCode::kInvalidArgument, "divisible by group"},
      {{"stride0", {1, 1, 3, 3}, {1, 1, 2, 2}, 1, {0, 1}}, StatusCode::kInvalidArgument, "strides and dilations"},
      {{"huge_stride", {1, 1, 3, 3}, {1, 1, 2, 2}, 1, {int64_t{1} << 40, 1}},
       StatusCode::kInvalidArgument,
       "strides and dilations"},
      {{"strides_len", {1, 1, 3, 3}, {1, 1, 2, 2}, 1, {2}}, StatusCode::kInvalidArgument, "must have 2 values"},
      {{"output_padding", {1, 1, 3, 3}, {1, 1, 2, 2}, 1, {2, 2}, {}, {}, {2, 0}},
       StatusCode::kInvalidArgument,
       "output_padding"},
      {{"negative_pads", {1, 1, 3, 3}, {1, 1, 2, 2}, 1, {}, {}, {-1, 0, 0, 0}}, StatusCode::kInvalidArgument, "pads"},
      {{"huge_pads", {1, 1, 3, 3}, {1, 1, 2, 2}, 1, {}, {}, {int64_t{1} << 62, 0, 0, 0}},
       StatusCode::kInvalidArgument,
       "pads"},
      {{"empty", {1, 1, 3, 3}, {1, 1, 2, 2}, 1, {}, {}, {2, 0, 2, 0}}, StatusCode::kInvalidArgument, "empty output"},
      {{"output_shape_len", {1, 1, 3, 3}, {1, 1, 2, 2}, 1, {}, {}, {}, {}, {5}},
       StatusCode::kInvalidArgument,
       "output_shape"},
      {{"output_shape_zero", {1, 1, 3, 3}, {1, 1, 2, 2}, 1, {}, {}, {}, {}, {0, 4}},
       StatusCode::kInvalidArgument,
       "output_shape"},
      {{"auto_pad", {1, 1, 3, 3}, {1, 1, 2, 2}, 1, {}, {}, {}, {}, {}, "SIDEWAYS"},
       StatusCode::kUnimplemented,
       "auto_pad"},
      {{"4d", {1, 1, 2, 2, 2, 2}, {1, 1, 1, 1, 1, 1}}, StatusCode::kUnimplemented, "spatial dims"},
      {{"rank", {1, 1, 3, 3}, {1, 1, 2}}, StatusCode::kInvalidArgument, "same rank"},
      {{"no_outputs", {1, 2, 3, 3}, {2, 0, 2, 2}}, StatusCode::kInvalidArgument, "no output channels"},
  };
  for (const Bad& b : bad) {
    int64_t w_count = 1, f = b.c.w.size() > 1 ? b.c.w[1] * b.c.group : 1;
    for (int64_t d : b.c.w) w_count *= d;
    ConvTransposeCase c = b.c;
    c.bias = false;
    auto r = ImportOnnx(ConvTransposeModel(c, std::vector<float>(static_cast<size_t>(w_count), 1.0f),
                                           std::vector<float>(static_cast<size_t>(f), 0.0f))
                            .Bytes(),
                        {});
    ASSERT_FALSE(r.ok()) << b.c.name;
    EXPECT_EQ(r.status().code(), b.code) << b.c.name << ": " << r.status().message();
    EXPECT_NE(r.status().message().find(b.message), std::string::npos) << b.c.name << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("deconv"), std::string::npos) << r.status().message();
  }
}

ModelBuilder TopKModel(const Shape& x_shape, int32_t elem, int64_t k, int64_t axis, int64_t largest) {
  ModelBuilder m;
  m.Input("x", elem, x_shape);
  m.InitializerI64("K", {k});
  auto* n = m.Node("TopK", {"x", "K"}, {"values", "indices"}, "topk");
  ModelBuilder::IntAttr(n, "axis", axis);
  ModelBuilder::IntAttr(n, "largest", largest);
  m.Output("values");
  m.Output("indices");
  return m;
}

TEST(OnnxImport, TopKKeepsTheLowerIndexFirstAndPutsNaNAboveInfinity) {
  const float nan = std::bit_cast<float>(0x7FC00001u);
  Tensor x = Tensor::FromVector<float>(DType::kF32, {2, 5}, {3, -0.0f, 3, nan, 0.0f, 1, 2, 2, -INFINITY, 2});
  for (int64_t largest : {1, 0}) {
    auto imported = ImportOnnx(TopKModel({2, 5}, onnx::TensorProto::FLOAT, 3, -1, largest).Bytes(), {});
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    for (int threads : {1, 2, 8}) {
      MemoryBlobSource blobs;
      if (!imported->weights.empty()) blobs.Add(imported->weights);
      auto program = CompileGraph(imported->graph, &blobs, Limits{});
      ASSERT_TRUE(program.ok()) << program.status().message();
      auto cpu = MakeCpu(threads);
      auto loaded = LoadedProgram::Load(*program, cpu.get());
      ASSERT_TRUE(loaded.ok());
      auto r = (*loaded)->Run({{"x", x}});
      ASSERT_TRUE(r.ok()) << r.status().message();
      ASSERT_EQ(r->outputs.size(), 2u);
      const Tensor& idx = r->outputs[0].name == "indices" ? r->outputs[0].tensor : r->outputs[1].tensor;
      const Tensor& val = r->outputs[0].name == "indices" ? r->outputs[1].tensor : r->outputs[0].tensor;
      std::vector<int64_t> got(idx.data_as<int64_t>(), idx.data_as<int64_t>() + idx.num_elements());
      std::vector<uint32_t> bits(static_cast<size_t>(val.num_elements()));
      std::memcpy(bits.data(), val.data(), bits.size() * 4);
      if (largest) {
        EXPECT_EQ(got, (std::vector<int64_t>{3, 0, 2, 1, 2, 4}));
        // Values are copied bits: the NaN keeps its payload.
        EXPECT_EQ(bits[0], 0x7FC00001u);
        EXPECT_EQ(val.data_as<float>()[1], 3.0f);
      } else {
        EXPECT_EQ(got, (std::vector<int64_t>{1, 4, 0, 3, 0, 1}));
        EXPECT_EQ(bits[0], 0x80000000u);  // -0 first: it ties with +0 and comes earlier
        EXPECT_EQ(val.data_as<float>()[3], -INFINITY);
      }
    }
  }
  // Integers along a middle axis.
  auto y = ImportOnnx(TopKModel({2, 4, 3}, onnx::TensorProto::INT64, 2, 1, 1).Bytes(), {});
  ASSERT_TRUE(y.ok()) << y.status().message();
  Tensor xi = Tensor::FromVector<int64_t>(DType::kI64, {2, 4, 3},
                                          {5, 1, 9, 7, 1, 9, 5, 3, 0, 7, 2, 9, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3});
  auto r = RunImported(*y, {{"x", xi}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const auto& out : r->outputs) {
    std::vector<int64_t> got(out.tensor.data_as<int64_t>(), out.tensor.data_as<int64_t>() + 12);
    if (out.name == "indices") {
      EXPECT_EQ(got, (std::vector<int64_t>{1, 2, 0, 3, 3, 1, 3, 3, 3, 2, 2, 2}));
    } else {
      EXPECT_EQ(got, (std::vector<int64_t>{7, 3, 9, 7, 2, 9, 3, 3, 3, 2, 2, 2}));
    }
  }
}

TEST(OnnxImport, TopKBeforeOpset10TakesKAsAnAttribute) {
  auto model = [](bool with_k) {
    ModelBuilder m(9);
    m.Input("x", onnx::TensorProto::FLOAT, {5});
    auto* n = m.Node("TopK", {"x"}, {"values", "indices"}, "topk");
    if (with_k) ModelBuilder::IntAttr(n, "k", 2);
    m.Output("values");
    return m;
  };
  auto y = RunOne(model(true), {{"x", Tensor::FromVector<float>(DType::kF32, {5}, {1, 4, 2, 4, 3})}});
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ(Values(*y), (std::vector<float>{4, 4}));
  auto r = ImportOnnx(model(false).Bytes(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("attribute k is required"), std::string::npos) << r.status().message();
}

TEST(OnnxImport, TopKRefusesBadK) {
  for (int64_t k : {int64_t{-1}, int64_t{6}, std::numeric_limits<int64_t>::max()}) {
    auto r = ImportOnnx(TopKModel({2, 5}, onnx::TensorProto::FLOAT, k, 1, 1).Bytes(), {});
    ASSERT_FALSE(r.ok()) << k;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
    EXPECT_NE(r.status().message().find("K = "), std::string::npos) << r.status().message();
  }
  {
    auto r = ImportOnnx(TopKModel({2, 5}, onnx::TensorProto::FLOAT, 2, 2, 1).Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  }
  {
    auto r = ImportOnnx(TopKModel({2, 5}, onnx::TensorProto::FLOAT, 2, 1, 2).Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("largest"), std::string::npos) << r.status().message();
  }
  {
    ModelBuilder m;  // K known only at run time
    m.Input("x", onnx::TensorProto::FLOAT, {2, 5});
    m.Input("K", onnx::TensorProto::INT64, {1});
    m.Node("TopK", {"x", "K"}, {"values", "indices"}, "topk");
    m.Output("values");
    auto r = ImportOnnx(m.Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("computed at run time"), std::string::npos) << r.status().message();
  }
  {
    auto r = ImportOnnx(TopKModel({2, 5}, onnx::TensorProto::BOOL, 2, 1, 1).Bytes(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented) << r.status().message();
  }
}

// --- inverse trigonometric and hyperbolic ops, windows, integer Pow (issue 19) ---

TEST(OnnxImport, InverseTrigAndHyperbolicAreDetmathOps) {
  struct Case {
    const char* onnx_op;
    float (*f)(float);
  };
  const Case cases[] = {{"Asin", detmath::asin},   {"Acos", detmath::acos},  {"Atan", detmath::atan},
                        {"Sinh", detmath::sinh},   {"Cosh", detmath::cosh},  {"Asinh", detmath::asinh},
                        {"Acosh", detmath::acosh}, {"Atanh", detmath::atanh}};
  const std::vector<float> xs = {-2.0f, -1.0f, -0.3f, -0.0f, 0.0f, 0.5f, 1.0f, 1.5f, 30.0f, 1e30f};
  const int64_t n = static_cast<int64_t>(xs.size());
  for (const Case& c : cases) {
    ModelBuilder m(9);
    m.Input("x", onnx::TensorProto::FLOAT, {n});
    m.Node(c.onnx_op, {"x"}, {"y"});
    m.Output("y");
    auto y = RunOne(m, {{"x", Tensor::FromVector<float>(DType::kF32, {n}, xs)}});
    ASSERT_TRUE(y.ok()) << c.onnx_op << ": " << y.status().message();
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(y->data_as<float>()[i]), std::bit_cast<uint32_t>(c.f(xs[i])))
          << c.onnx_op << "(" << xs[i] << ")";
    }
    ModelBuilder bad(9);
    bad.Input("x", onnx::TensorProto::INT32, {n});
    bad.Node(c.onnx_op, {"x"}, {"y"});
    bad.Output("y");
    auto r = ImportOnnx(bad.Bytes(), {});
    ASSERT_FALSE(r.ok()) << c.onnx_op;
    EXPECT_NE(r.status().message().find("i32"), std::string::npos) << r.status().message();
  }
}

// A window model whose size is a scalar initializer (or a graph input when size < 0).
ModelBuilder WindowModel(const std::string& op, int64_t size, std::optional<int64_t> periodic,
                         std::optional<int64_t> output_datatype, int32_t size_type = onnx::TensorProto::INT64) {
  ModelBuilder m(17);
  if (size_type == onnx::TensorProto::INT64) {
    auto* t = m.Initializer("size", onnx::TensorProto::INT64, {});
    t->add_int64_data(size);
  } else {
    m.Input("size", size_type, {});
  }
  auto* n = m.Node(op, {"size"}, {"y"}, "window");
  if (periodic) ModelBuilder::IntAttr(n, "periodic", *periodic);
  if (output_datatype) ModelBuilder::IntAttr(n, "output_datatype", *output_datatype);
  m.Output("y");
  return m;
}

TEST(OnnxImport, WindowsAreFoldedWithDetmathCos) {
  struct Case {
    const char* op;
    double a0, a1, a2;  // the double-precision reference (ONNX's formula)
    float f0, f1, f2;   // the spec's f32 constants
  };
  const Case cases[] = {{"HannWindow", 0.5, 0.5, 0.0, 0.5f, 0.5f, 0.0f},
                        {"HammingWindow", 25.0 / 46.0, 21.0 / 46.0, 0.0, 0x1.1642c8p-1f, 0x1.d37a70p-2f, 0.0f},
                        {"BlackmanWindow", 0.42, 0.5, 0.08, 0x1.ae147ap-2f, 0.5f, 0x1.47ae14p-4f}};
  for (const Case& c : cases) {
    for (int64_t periodic : {0, 1}) {
      const int64_t size = 10;
      auto imported = ImportOnnx(WindowModel(c.op, size, periodic, std::nullopt).Bytes(), {});
      ASSERT_TRUE(imported.ok()) << c.op << ": " << imported.status().message();
      auto r = RunImported(*imported, {});
      ASSERT_TRUE(r.ok()) << r.status().message();
      const Tensor& y = r->outputs[0].tensor;
      ASSERT_EQ(y.num_elements(), size);
      const double big_n = static_cast<double>(periodic ? size : size - 1);
      for (int64_t i = 0; i < size; ++i) {
        const double x = 2.0 * M_PI * static_cast<double>(i) / big_n;
        const double want = c.a0 - c.a1 * std::cos(x) + c.a2 * std::cos(2.0 * x);
        EXPECT_NEAR(y.data_as<float>()[i], want, 3e-7) << c.op << " periodic " << periodic << " n " << i;
        // The spec's exact sequence.
        const float nf = static_cast<float>(i), nn = static_cast<float>(big_n);
        const float c1 = detmath::cos((0x1.921fb6p+2f * nf) / nn), c2 = detmath::cos((0x1.921fb6p+3f * nf) / nn);
        const float spec = (c.f0 - c.f1 * c1) + c.f2 * c2;
        EXPECT_EQ(std::bit_cast<uint32_t>(y.data_as<float>()[i]), std::bit_cast<uint32_t>(spec)) << c.op << " " << i;
      }
    }
  }
  // Integer output_datatype: the f32 window cast (truncated), so a Hann window of ints is 0
  // except its middle 1; size 0 gives an empty window.
  auto ints = RunImported(*ImportOnnx(WindowModel("HannWindow", 4, 1, onnx::TensorProto::INT32).Bytes(), {}), {});
  ASSERT_TRUE(ints.ok()) << ints.status().message();
  EXPECT_EQ(ints->outputs[0].tensor.dtype(), DType::kI32);
  const int32_t* iv = ints->outputs[0].tensor.data_as<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(iv, iv + 4), (std::vector<int32_t>{0, 0, 1, 0}));
  auto empty = RunImported(*ImportOnnx(WindowModel("HammingWindow", 0, 0, std::nullopt).Bytes(), {}), {});
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_EQ(empty->outputs[0].tensor.num_elements(), 0);
}

TEST(OnnxImport, WindowsRefuseBadSizesAndTypes) {
  for (int64_t size : {int64_t{-1}, (int64_t{1} << 24) + 1, std::numeric_limits<int64_t>::min()}) {
    auto r = ImportOnnx(WindowModel("BlackmanWindow", size, 1, std::nullopt).Bytes(), {});
    ASSERT_FALSE(r.ok()) << size;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
    EXPECT_NE(r.status().message().find("size"), std::string::npos) << r.status().message();
  }
  // A size known only at run time cannot be folded.
  auto runtime = ImportOnnx(WindowModel("HannWindow", 0, 1, std::nullopt, onnx::TensorProto::INT32).Bytes(), {});
  ASSERT_FALSE(runtime.ok());
  EXPECT_NE(runtime.status().message().find("size"), std::string::npos) << runtime.status().message();
  // No size at all.
  ModelBuilder none(17);
  none.Node("HannWindow", {}, {"y"}, "window");
  none.Output("y");
  auto missing = ImportOnnx(none.Bytes(), {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument) << missing.status().message();
  // A float size is not a size.
  auto fsize = ImportOnnx(WindowModel("HannWindow", 0, 1, std::nullopt, onnx::TensorProto::FLOAT).Bytes(), {});
  ASSERT_FALSE(fsize.ok());
  // Unsupported or unknown output types.
  for (int64_t dtype : {int64_t{onnx::TensorProto::DOUBLE}, int64_t{-3}, int64_t{1} << 40}) {
    auto bad = ImportOnnx(WindowModel("HannWindow", 8, 1, dtype).Bytes(), {});
    ASSERT_FALSE(bad.ok()) << dtype;
    EXPECT_NE(bad.status().message().find("output_datatype"), std::string::npos) << bad.status().message();
  }
}

TEST(OnnxImport, PowWithAnIntegerBase) {
  auto model = [](int32_t base_type, int32_t exp_type) {
    ModelBuilder m(15);
    m.Input("x", base_type, {5});
    m.Input("e", exp_type, {5});
    m.Node("Pow", {"x", "e"}, {"y"});
    m.Output("y");
    return m;
  };
  const Tensor x32 = Tensor::FromVector<int32_t>(DType::kI32, {5}, {2, -3, 7, 1, 0});
  const Tensor x64 = Tensor::FromVector<int64_t>(DType::kI64, {5}, {2, -3, 7, 1, 0});
  // Same dtype: exact, wrapping, negative exponents truncate 1 / x^|e|.
  auto same = RunOne(model(onnx::TensorProto::INT32, onnx::TensorProto::INT32),
                     {{"x", x32}, {"e", Tensor::FromVector<int32_t>(DType::kI32, {5}, {31, 3, 12, -4, 0})}});
  ASSERT_TRUE(same.ok()) << same.status().message();
  const int32_t* s = same->data_as<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(s, s + 5),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -27, 956385313 /* 7^12 mod 2^32 */, 1, 1}));
  // A wider integer exponent: computed in i64, cast back.
  auto wide =
      RunOne(model(onnx::TensorProto::INT32, onnx::TensorProto::INT64),
             {{"x", x32}, {"e", Tensor::FromVector<int64_t>(DType::kI64, {5}, {int64_t{1} << 33, 3, 2, 5, -1})}});
  ASSERT_TRUE(wide.ok()) << wide.status().message();
  EXPECT_EQ(wide->dtype(), DType::kI32);
  const int32_t* w = wide->data_as<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(w, w + 5), (std::vector<int32_t>{0, -27, 49, 1, 0}));
  // A float exponent: f32 pow, truncated back to the base's dtype.
  auto fl = RunOne(model(onnx::TensorProto::INT64, onnx::TensorProto::FLOAT),
                   {{"x", x64}, {"e", Tensor::FromVector<float>(DType::kF32, {5}, {10.0f, 3.0f, 0.5f, 2.5f, -1.0f})}});
  ASSERT_TRUE(fl.ok()) << fl.status().message();
  EXPECT_EQ(fl->dtype(), DType::kI64);
  const int64_t* f = fl->data_as<int64_t>();
  // 7^0.5 = 2.64 -> 2; 0^-1 = +inf saturates.
  EXPECT_EQ(std::vector<int64_t>(f, f + 5),
            (std::vector<int64_t>{1024, -27, 2, 1, std::numeric_limits<int64_t>::max()}));
  // A bool base or a double exponent is refused with the dtype named.
  auto b = ImportOnnx(model(onnx::TensorProto::BOOL, onnx::TensorProto::BOOL).Bytes(), {});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("base"), std::string::npos) << b.status().message();
}

TEST(OnnxImport, SupportedOpsCoverTheIssueList) {
  const auto ops = SupportedOnnxOps();
  for (const char* op : {"Gemm",
                         "MatMul",
                         "Add",
                         "Erf",
                         "Softmax",
                         "Conv",
                         "BatchNormalization",
                         "MaxPool",
                         "AveragePool",
                         "GlobalAveragePool",
                         "LayerNormalization",
                         "ReduceMean",
                         "Sub",
                         "Pow",
                         "Sqrt",
                         "Div",
                         "Floor",
                         "Ceil",
                         "Round",
                         "Mod",
                         "Trilu",
                         "OneHot",
                         "Hardmax",
                         "InstanceNormalization",
                         "GatherElements",
                         "GatherND",
                         "LRN",
                         "Resize",
                         "Upsample",
                         "ConvTranspose",
                         "TopK",
                         "Asin",
                         "Acos",
                         "Atan",
                         "Sinh",
                         "Cosh",
                         "Asinh",
                         "Acosh",
                         "Atanh",
                         "HannWindow",
                         "HammingWindow",
                         "BlackmanWindow"}) {
    EXPECT_TRUE(std::binary_search(ops.begin(), ops.end(), op)) << op;
  }
}

}  // namespace
}  // namespace consensor::executor
