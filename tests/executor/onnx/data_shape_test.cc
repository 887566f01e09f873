// ONNX NonMaxSuppression, NonZero and Unique, folded at import (docs/DETERMINISM.md 6.8c):
// each compared with a naive reference of the spec on random inputs with ties, -0 and NaN,
// the imported graph run at 1, 2 and 8 threads; and bad inputs refused with a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "executor/onnx/import.h"
#include "onnx/onnx_pb.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::MakeCpu;
using Ints = std::vector<int64_t>;

struct Input {
  std::string name;  // "" leaves an optional input out
  int32_t elem = onnx::TensorProto::FLOAT;
  Shape shape;
};

std::vector<uint8_t> BuildModel(const std::string& op, const std::vector<Input>& inputs, int outputs,
                                const std::map<std::string, int64_t>& attrs, int64_t opset) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* o = model.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  auto* g = model.mutable_graph();
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("node");
  for (const Input& in : inputs) {
    n->add_input(in.name);
    if (in.name.empty()) continue;
    auto* gi = g->add_input();
    gi->set_name(in.name);
    auto* tt = gi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(in.elem);
    for (int64_t d : in.shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  for (int i = 0; i < outputs; ++i) {
    n->add_output("out" + std::to_string(i));
    g->add_output()->set_name("out" + std::to_string(i));
  }
  for (const auto& [name, value] : attrs) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  std::string s = model.SerializeAsString();
  return {s.begin(), s.end()};
}

// Imports with every input bound (the values these ops need at import), then runs the graph
// at 1, 2 and 8 threads; every run must give the same outputs, which are returned.
StatusOr<std::vector<Tensor>> ImportAndRun(const std::vector<uint8_t>& model,
                                           const std::map<std::string, Tensor>& bound,
                                           const std::map<std::string, Tensor>& run_inputs = {}) {
  OnnxImportOptions options;
  options.constant_inputs = bound;
  for (const auto& [name, t] : run_inputs) options.input_shapes[name] = t.shape();
  ASSIGN_OR_RETURN(OnnxImport imported, ImportOnnx(model, options));
  MemoryBlobSource blobs;
  if (!imported.weights.empty()) blobs.Add(imported.weights);
  ASSIGN_OR_RETURN(Program p, CompileGraph(imported.graph, &blobs, Limits{}));
  std::vector<Tensor> first;
  for (int threads : {1, 2, 8}) {
    auto cpu = MakeCpu(threads);
    ASSIGN_OR_RETURN(auto loaded, LoadedProgram::Load(p, cpu.get()));
    ASSIGN_OR_RETURN(RunResult r, loaded->Run(run_inputs));
    std::vector<Tensor> outs;
    for (const auto& o : r.outputs) outs.push_back(o.tensor);
    if (first.empty()) {
      first = outs;
      continue;
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      if (TensorHash(outs[i]) != TensorHash(first[i])) return Internal("outputs differ between thread counts");
    }
  }
  return first;
}

Ints AsInts(const Tensor& t) {
  const int64_t* p = t.data_as<int64_t>();
  return Ints(p, p + t.num_elements());
}

Tensor I64Scalar1(int64_t v) { return Tensor::FromVector<int64_t>(DType::kI64, {1}, {v}); }
Tensor F32Scalar1(float v) { return Tensor::FromVector<float>(DType::kF32, {1}, {v}); }

// ---- NonMaxSuppression ----

// The spec's IoU test, written from the text (its own min/max and corner functions).
bool RefSuppresses(const float* a, const float* b, bool center, float thr) {
  auto corners = [center](const float* p, float out[4]) {  // x_min, x_max, y_min, y_max
    if (center) {
      const float hw = p[2] / 2.0f, hh = p[3] / 2.0f;
      out[0] = p[0] - hw, out[1] = p[0] + hw, out[2] = p[1] - hh, out[3] = p[1] + hh;
    } else {
      out[0] = p[1] >= p[3] ? p[3] : p[1], out[1] = p[1] >= p[3] ? p[1] : p[3];
      out[2] = p[0] >= p[2] ? p[2] : p[0], out[3] = p[0] >= p[2] ? p[0] : p[2];
    }
  };
  float ca[4], cb[4];
  corners(a, ca);
  corners(b, cb);
  auto mx = [](float p, float q) { return p < q ? q : p; };
  auto mn = [](float p, float q) { return q < p ? q : p; };
  const float w = mn(ca[1], cb[1]) - mx(ca[0], cb[0]);
  const float h = mn(ca[3], cb[3]) - mx(ca[2], cb[2]);
  if (!(mn(ca[1], cb[1]) > mx(ca[0], cb[0])) || !(mn(ca[3], cb[3]) > mx(ca[2], cb[2]))) return false;
  const float inter = w * h;
  const float area_a = (ca[1] - ca[0]) * (ca[3] - ca[2]);
  const float area_b = (cb[1] - cb[0]) * (cb[3] - cb[2]);
  const float uni = (area_a + area_b) - inter;
  if (!(inter > 0) || !(area_a > 0) || !(area_b > 0) || !(uni > 0)) return false;
  return inter / uni > thr;
}

// Repeatedly takes the best remaining candidate (score descending, ties by index, NaN last)
// instead of sorting first.
Ints RefNms(const Tensor& boxes, const Tensor& scores, int64_t max_out, float iou, const float* score_thr,
            bool center) {
  const int64_t B = boxes.shape()[0], N = boxes.shape()[1], C = scores.shape()[1];
  Ints out;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      const float* s = scores.data_as<float>() + (b * C + c) * N;
      std::vector<bool> used(N, false);
      Ints kept;
      while (static_cast<int64_t>(kept.size()) < std::min(max_out, N)) {
        int64_t best = -1;
        for (int64_t i = 0; i < N; ++i) {
          if (used[i] || (score_thr && !(s[i] > *score_thr))) continue;
          if (best < 0) {
            best = i;
          } else if (!std::isnan(s[i]) && (std::isnan(s[best]) || s[i] > s[best])) {
            best = i;
          }
        }
        if (best < 0) break;
        used[best] = true;
        bool suppressed = false;
        for (int64_t k : kept) {
          suppressed = suppressed || RefSuppresses(boxes.data_as<float>() + (b * N + best) * 4,
                                                   boxes.data_as<float>() + (b * N + k) * 4, center, iou);
        }
        if (!suppressed) kept.push_back(best);
      }
      for (int64_t k : kept) out.insert(out.end(), {b, c, k});
    }
  }
  return out;
}

std::vector<uint8_t> NmsModel(int64_t center, bool with_score_threshold) {
  std::vector<Input> in = {{"boxes", onnx::TensorProto::FLOAT, {}},
                           {"scores", onnx::TensorProto::FLOAT, {}},
                           {"max", onnx::TensorProto::INT64, {1}},
                           {"iou", onnx::TensorProto::FLOAT, {1}}};
  if (with_score_threshold) in.push_back({"thr", onnx::TensorProto::FLOAT, {1}});
  return BuildModel("NonMaxSuppression", in, 1, {{"center_point_box", center}}, 11);
}

TEST(OnnxDataShape, NonMaxSuppressionMatchesTheSpec) {
  std::mt19937 rng(19);
  std::uniform_int_distribution<int> coord(0, 12), size(0, 6), score(0, 7);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t B = 1 + trial % 2, C = 1 + trial % 3, N = 3 + trial % 11;
    const bool center = trial % 2 == 1, with_thr = trial % 3 != 0;
    std::vector<float> bx, sc;
    for (int64_t i = 0; i < B * N; ++i) {
      // Coordinates on a 1/4 grid (exact, many overlaps and equal boxes); corners in either
      // order; some zero-size boxes.
      const float a = coord(rng) / 4.0f, b = coord(rng) / 4.0f, w = size(rng) / 4.0f, h = size(rng) / 4.0f;
      if (center) {
        bx.insert(bx.end(), {a, b, w, h});
      } else if (i % 3 == 0) {
        bx.insert(bx.end(), {b + h, a + w, b, a});
      } else {
        bx.insert(bx.end(), {b, a, b + h, a + w});
      }
    }
    for (int64_t i = 0; i < B * C * N; ++i) {
      const int v = score(rng);
      sc.push_back(v == 7 ? std::numeric_limits<float>::quiet_NaN() : (v == 0 && i % 2 ? -0.0f : v / 8.0f));
    }
    const Tensor boxes = Tensor::FromVector<float>(DType::kF32, {B, N, 4}, bx);
    const Tensor scores = Tensor::FromVector<float>(DType::kF32, {B, C, N}, sc);
    const int64_t max_out = trial % 5 == 4 ? 2 : N;
    const float iou = (trial % 4) / 4.0f, thr = 0.25f;
    std::map<std::string, Tensor> bound = {
        {"boxes", boxes}, {"scores", scores}, {"max", I64Scalar1(max_out)}, {"iou", F32Scalar1(iou)}};
    if (with_thr) bound.emplace("thr", F32Scalar1(thr));
    auto got = ImportAndRun(NmsModel(center, with_thr), bound);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const Ints want = RefNms(boxes, scores, max_out, iou, with_thr ? &thr : nullptr, center);
    ASSERT_EQ((*got)[0].dtype(), DType::kI64);
    ASSERT_EQ((*got)[0].shape(), (Shape{static_cast<int64_t>(want.size()) / 3, 3})) << "trial " << trial;
    EXPECT_EQ(AsInts((*got)[0]), want) << "trial " << trial;
  }
}

TEST(OnnxDataShape, NonMaxSuppressionEdgeCases) {
  // Two equal boxes with equal scores: the lower index is kept. No max input: nothing selected.
  const Tensor boxes = Tensor::FromVector<float>(DType::kF32, {1, 2, 4}, {0, 0, 1, 1, 0, 0, 1, 1});
  const Tensor scores = Tensor::FromVector<float>(DType::kF32, {1, 1, 2}, {0.5f, 0.5f});
  auto kept = ImportAndRun(NmsModel(0, false),
                           {{"boxes", boxes}, {"scores", scores}, {"max", I64Scalar1(5)}, {"iou", F32Scalar1(0.5f)}});
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(AsInts((*kept)[0]), (Ints{0, 0, 0}));
  auto none = ImportAndRun(
      BuildModel("NonMaxSuppression",
                 {{"boxes", onnx::TensorProto::FLOAT, {}}, {"scores", onnx::TensorProto::FLOAT, {}}}, 1, {}, 11),
      {{"boxes", boxes}, {"scores", scores}});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ((*none)[0].shape(), (Shape{0, 3}));
  // IoU exactly at the threshold does not suppress (strictly greater): box 1 lies inside box 0
  // with half its area, IoU = 1 / 2.
  const Tensor nested = Tensor::FromVector<float>(DType::kF32, {1, 2, 4}, {0, 0, 1, 2, 0, 1, 1, 2});
  for (float iou : {0.5f, 0.4999f}) {
    auto r = ImportAndRun(NmsModel(0, false),
                          {{"boxes", nested}, {"scores", scores}, {"max", I64Scalar1(5)}, {"iou", F32Scalar1(iou)}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(AsInts((*r)[0]), iou == 0.5f ? (Ints{0, 0, 0, 0, 0, 1}) : (Ints{0, 0, 0})) << iou;
  }
  // No boxes at all.
  auto empty = ImportAndRun(NmsModel(0, false), {{"boxes", Tensor(DType::kF32, {1, 0, 4})},
                                                 {"scores", Tensor(DType::kF32, {1, 3, 0})},
                                                 {"max", I64Scalar1(5)},
                                                 {"iou", F32Scalar1(0.5f)}});
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ((*empty)[0].shape(), (Shape{0, 3}));
  // A negative max counts as 0.
  auto negative = ImportAndRun(
      NmsModel(0, false), {{"boxes", boxes}, {"scores", scores}, {"max", I64Scalar1(-3)}, {"iou", F32Scalar1(0.5f)}});
  ASSERT_TRUE(negative.ok()) << negative.status().ToString();
  EXPECT_EQ((*negative)[0].shape(), (Shape{0, 3}));
}

TEST(OnnxDataShape, NonMaxSuppressionRefusesBadInputs) {
  const Tensor boxes = Tensor::FromVector<float>(DType::kF32, {1, 2, 4}, {0, 0, 1, 1, 0, 0, 1, 1});
  const Tensor scores = Tensor::FromVector<float>(DType::kF32, {1, 1, 2}, {0.5f, 0.4f});
  std::map<std::string, Tensor> ok = {
      {"boxes", boxes}, {"scores", scores}, {"max", I64Scalar1(1)}, {"iou", F32Scalar1(0.5f)}};
  // Boxes computed at run time: the "computed at run time" refusal that --bind resolves.
  auto run_time = ImportAndRun(NmsModel(0, false), {{"scores", scores}, {"max", I64Scalar1(1)}, {"iou", F32Scalar1(0)}},
                               {{"boxes", boxes}});
  ASSERT_FALSE(run_time.ok());
  EXPECT_TRUE(NeedsValueAtImport(run_time.status())) << run_time.status().ToString();
  EXPECT_NE(run_time.status().message().find("boxes"), std::string::npos);

  auto bad = [&](std::map<std::string, Tensor> inputs, int64_t center, StatusCode code, const std::string& text) {
    auto r = ImportAndRun(NmsModel(center, false), inputs);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().ToString();
  };
  bad(ok, 2, StatusCode::kInvalidArgument, "center_point_box must be 0 or 1");
  auto m = ok;
  m["iou"] = F32Scalar1(1.5f);
  bad(m, 0, StatusCode::kInvalidArgument, "iou_threshold must be in [0, 1]");
  m["iou"] = F32Scalar1(std::numeric_limits<float>::quiet_NaN());
  bad(m, 0, StatusCode::kInvalidArgument, "iou_threshold must be in [0, 1]");
  m = ok;
  m["boxes"] = Tensor::FromVector<float>(DType::kF32, {1, 2, 3}, {0, 0, 1, 1, 0, 0});
  bad(m, 0, StatusCode::kInvalidArgument, "boxes must be [batches, boxes, 4]");
  m = ok;
  m["scores"] = Tensor::FromVector<float>(DType::kF32, {1, 1, 3}, {0.5f, 0.4f, 0.3f});
  bad(m, 0, StatusCode::kInvalidArgument, "scores must be [1, classes, 2]");
  m = ok;
  m["max"] = Tensor::FromVector<int64_t>(DType::kI64, {2}, {1, 2});
  bad(m, 0, StatusCode::kInvalidArgument, "max_output_boxes_per_class must be one integer");
  m = ok;
  m["boxes"] = Tensor(DType::kF16, {1, 2, 4});
  bad(m, 0, StatusCode::kUnimplemented, "boxes and scores must be float32");
  // 2^14 boxes, all kept, in 8 classes: 2^31 IoU tests, refused before any work.
  m = ok;
  m["boxes"] = Tensor(DType::kF32, {1, 16384, 4});
  m["scores"] = Tensor(DType::kF32, {1, 8, 16384});
  m["max"] = I64Scalar1(20000);
  bad(m, 0, StatusCode::kInvalidArgument, "exceeds 2^30");
}

// ---- NonZero ----

TEST(OnnxDataShape, NonZeroListsCoordinatesInRowMajorOrder) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pick(0, 4);
  std::vector<float> xf;
  std::vector<int32_t> xi;
  for (int i = 0; i < 3 * 4 * 5; ++i) {
    const int v = pick(rng);
    xf.push_back(v == 0 ? 0.0f : v == 1 ? -0.0f : v == 2 ? std::numeric_limits<float>::quiet_NaN() : v * 0.5f);
    xi.push_back(v < 2 ? 0 : v - 3);
  }
  const Shape shape = {3, 4, 5};
  for (bool is_float : {true, false}) {
    const Tensor x = is_float ? Tensor::FromVector<float>(DType::kF32, shape, xf)
                              : Tensor::FromVector<int32_t>(DType::kI32, shape, xi);
    auto got = ImportAndRun(
        BuildModel("NonZero", {{"x", is_float ? onnx::TensorProto::FLOAT : onnx::TensorProto::INT32, {}}}, 1, {}, 13),
        {{"x", x}});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    std::vector<Ints> rows(3);
    for (int64_t a = 0; a < 3; ++a) {
      for (int64_t b = 0; b < 4; ++b) {
        for (int64_t c = 0; c < 5; ++c) {
          const int64_t i = (a * 4 + b) * 5 + c;
          if (is_float ? xf[i] != 0.0f || std::isnan(xf[i]) : xi[i] != 0) {
            rows[0].push_back(a), rows[1].push_back(b), rows[2].push_back(c);
          }
        }
      }
    }
    Ints want;
    for (const Ints& r : rows) want.insert(want.end(), r.begin(), r.end());
    EXPECT_EQ((*got)[0].shape(), (Shape{3, static_cast<int64_t>(rows[0].size())}));
    EXPECT_EQ(AsInts((*got)[0]), want);
  }
}

TEST(OnnxDataShape, NonZeroRefusesRankZeroAndRunTimeInputs) {
  auto model = BuildModel("NonZero", {{"x", onnx::TensorProto::FLOAT, {}}}, 1, {}, 13);
  auto scalar = ImportAndRun(model, {{"x", Tensor::FromVector<float>(DType::kF32, {}, {1.0f})}});
  ASSERT_FALSE(scalar.ok());
  EXPECT_EQ(scalar.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(scalar.status().message().find("rank-0"), std::string::npos) << scalar.status().ToString();
  auto run_time = ImportAndRun(model, {}, {{"x", Tensor::FromVector<float>(DType::kF32, {2}, {1.0f, 0.0f})}});
  ASSERT_FALSE(run_time.ok());
  EXPECT_TRUE(NeedsValueAtImport(run_time.status())) << run_time.status().ToString();
}

// ---- Unique ----

// The spec's order on f32 elements: -0 == +0, NaNs equal and above every number.
int RefCompare(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) == std::isnan(b) ? 0 : (std::isnan(a) ? 1 : -1);
  return a < b ? -1 : a > b ? 1 : 0;
}

struct UniqueRef {
  std::vector<float> y;
  Ints indices, inverse, counts;
};

// Unique items by first occurrence (a quadratic scan), then, when sorted, an insertion sort
// of those items: an order built differently from the importer's stable sort of all items.
UniqueRef RefUnique(const std::vector<float>& x, int64_t outer, int64_t n, int64_t inner, bool sorted) {
  auto cmp = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t e = 0; e < inner; ++e) {
        const int c = RefCompare(x[(o * n + a) * inner + e], x[(o * n + b) * inner + e]);
        if (c != 0) return c;
      }
    }
    return 0;
  };
  Ints uniq;  // first occurrences
  for (int64_t j = 0; j < n; ++j) {
    bool seen = false;
    for (int64_t u : uniq) seen = seen || cmp(u, j) == 0;
    if (!seen) uniq.push_back(j);
  }
  if (sorted) {
    for (size_t i = 1; i < uniq.size(); ++i) {
      for (size_t k = i; k > 0 && cmp(uniq[k - 1], uniq[k]) > 0; --k) std::swap(uniq[k - 1], uniq[k]);
    }
  }
  UniqueRef r;
  r.indices = uniq;
  r.counts.assign(uniq.size(), 0);
  for (int64_t j = 0; j < n; ++j) {
    for (size_t u = 0; u < uniq.size(); ++u) {
      if (cmp(uniq[u], j) == 0) {
        r.inverse.push_back(static_cast<int64_t>(u));
        ++r.counts[u];
      }
    }
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t u : uniq) {
      for (int64_t e = 0; e < inner; ++e) r.y.push_back(x[(o * n + u) * inner + e]);
    }
  }
  return r;
}

TEST(OnnxDataShape, UniqueMatchesTheSpec) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> pick(0, 5);
  const Shape shape = {3, 6, 2};
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<float> x;
    for (int i = 0; i < 36; ++i) {
      const int v = pick(rng) % (trial < 6 ? 6 : 2);  // later trials: few values, many equal slices
      x.push_back(v == 0 ? 0.0f : v == 1 ? -0.0f : v == 2 ? std::numeric_limits<float>::quiet_NaN() : v - 4.0f);
    }
    const bool sorted = trial % 2 == 0;
    const int axis_choice = trial % 3;  // none, 1, -3 (== 0)
    std::map<std::string, int64_t> attrs = {{"sorted", sorted ? 1 : 0}};
    int64_t outer = 1, n = 36, inner = 1;
    if (axis_choice == 1) attrs["axis"] = 1, outer = 3, n = 6, inner = 2;
    if (axis_choice == 2) attrs["axis"] = -3, outer = 1, n = 3, inner = 12;
    auto got = ImportAndRun(BuildModel("Unique", {{"x", onnx::TensorProto::FLOAT, {}}}, 4, attrs, 11),
                            {{"x", Tensor::FromVector<float>(DType::kF32, shape, x)}});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const UniqueRef want = RefUnique(x, outer, n, inner, sorted);
    ASSERT_EQ(got->size(), 4u);
    const Tensor& y = (*got)[0];
    ASSERT_EQ(y.num_elements(), static_cast<int64_t>(want.y.size())) << "trial " << trial;
    EXPECT_EQ(std::memcmp(y.data(), want.y.data(), want.y.size() * 4), 0) << "trial " << trial << ": bits of Y";
    EXPECT_EQ(AsInts((*got)[1]), want.indices) << "trial " << trial;
    EXPECT_EQ(AsInts((*got)[2]), want.inverse) << "trial " << trial;
    EXPECT_EQ(AsInts((*got)[3]), want.counts) << "trial " << trial;
  }
}

TEST(OnnxDataShape, UniqueOrdersIntegersAndRefusesBadAttributes) {
  // u64 above 2^63 orders above small values; i8 negatives below zero.
  const Tensor big = Tensor::FromVector<uint64_t>(DType::kU64, {4}, {uint64_t{1} << 63, 5, 5, 0});
  auto got = ImportAndRun(BuildModel("Unique", {{"x", onnx::TensorProto::UINT64, {}}}, 4, {}, 11), {{"x", big}});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const uint64_t* y = (*got)[0].data_as<uint64_t>();
  ASSERT_EQ((*got)[0].num_elements(), 3);
  EXPECT_EQ(y[0], 0u);
  EXPECT_EQ(y[1], 5u);
  EXPECT_EQ(y[2], uint64_t{1} << 63);
  EXPECT_EQ(AsInts((*got)[3]), (Ints{1, 2, 1}));
  const Tensor small = Tensor::FromVector<int8_t>(DType::kI8, {3}, {3, -2, 3});
  got = ImportAndRun(BuildModel("Unique", {{"x", onnx::TensorProto::INT8, {}}}, 1, {}, 11), {{"x", small}});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].data_as<int8_t>()[0], -2);

  // Empty inputs: no items, or items of no elements (all equal).
  got = ImportAndRun(BuildModel("Unique", {{"x", onnx::TensorProto::FLOAT, {}}}, 4, {}, 11),
                     {{"x", Tensor(DType::kF32, {0})}});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].shape(), (Shape{0}));
  got = ImportAndRun(BuildModel("Unique", {{"x", onnx::TensorProto::FLOAT, {}}}, 4, {{"axis", 0}}, 11),
                     {{"x", Tensor(DType::kF32, {3, 0})}});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].shape(), (Shape{1, 0}));
  EXPECT_EQ(AsInts((*got)[3]), (Ints{3}));
  auto bad =
      ImportAndRun(BuildModel("Unique", {{"x", onnx::TensorProto::INT8, {}}}, 1, {{"sorted", 2}}, 11), {{"x", small}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().ToString();
  bad = ImportAndRun(BuildModel("Unique", {{"x", onnx::TensorProto::INT8, {}}}, 1, {{"axis", 1}}, 11), {{"x", small}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().ToString();
  bad = ImportAndRun(BuildModel("Unique", {{"x", onnx::TensorProto::INT8, {}}}, 1, {}, 11), {}, {{"x", small}});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(NeedsValueAtImport(bad.status())) << bad.status().ToString();
}

}  // namespace
}  // namespace consensor::executor
