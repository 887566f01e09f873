// ONNX RNN, GRU and LSTM (docs/DETERMINISM.md 6.5): the unrolled import against a naive
// float64 reference written from the ONNX formulas, bit-identical at 1, 2 and 8 threads, and
// the errors for bad attributes and inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "executor/onnx/import.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "onnx/onnx_pb.h"
#include "tests/executor/onnx/onnx_model_builder.h"
#include "tests/executor/test_util.h"

namespace consensor::executor {
namespace {

using consensor::testing::MakeCpu;
using consensor::testing::RandomF32;

enum class Kind { kRnn, kGru, kLstm };

int64_t GatesOf(Kind k) { return k == Kind::kRnn ? 1 : k == Kind::kGru ? 3 : 4; }
const char* OpOf(Kind k) { return k == Kind::kRnn ? "RNN" : k == Kind::kGru ? "GRU" : "LSTM"; }

struct Case {
  std::string name;
  Kind kind;
  int64_t steps = 3, batch = 2, input = 3, hidden = 4;
  std::string direction = "forward";
  bool layout = false;  // batch-major
  bool bias = true, initial = false, peepholes = false;
  std::vector<int32_t> seq_lens = {};  // empty: absent
  bool seq_lens_at_run_time = false;
  std::vector<std::string> activations = {};
  std::vector<float> alphas = {}, betas = {};
  std::optional<float> clip = std::nullopt;
  int64_t linear_before_reset = 0, input_forget = 0;
};

int64_t Dirs(const Case& c) { return c.direction == "bidirectional" ? 2 : 1; }

struct Operands {
  Tensor x, w, r, b, h0, c0, p;
};

Operands MakeOperands(const Case& c, uint32_t seed) {
  const int64_t D = Dirs(c), G = GatesOf(c.kind), H = c.hidden;
  Operands o;
  o.x = RandomF32(c.layout ? Shape{c.batch, c.steps, c.input} : Shape{c.steps, c.batch, c.input}, seed, 2.0f);
  o.w = RandomF32({D, G * H, c.input}, seed + 1, 0.8f);
  o.r = RandomF32({D, G * H, H}, seed + 2, 0.8f);
  o.b = RandomF32({D, 2 * G * H}, seed + 3, 0.5f);
  const Shape state = c.layout ? Shape{c.batch, D, H} : Shape{D, c.batch, H};
  o.h0 = RandomF32(state, seed + 4);
  o.c0 = RandomF32(state, seed + 5);
  o.p = RandomF32({D, 3 * H}, seed + 6, 0.5f);
  return o;
}

void AddInitializer(onnx::GraphProto* g, const std::string& name, const Tensor& t) {
  auto* init = g->add_initializer();
  init->set_name(name);
  init->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : t.shape()) init->add_dims(d);
  init->set_raw_data(std::string(reinterpret_cast<const char*>(t.data()), t.num_elements() * sizeof(float)));
}

void AddOutput(onnx::GraphProto* g, const std::string& name) {
  auto* out = g->add_output();
  out->set_name(name);
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

onnx::AttributeProto* Attr(onnx::NodeProto* n, const std::string& name, onnx::AttributeProto::AttributeType type) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}

// The model: X (and, when asked, sequence_lens) are graph inputs; the rest initializers.
// Outputs Y, Y_h (and Y_c for LSTM).
std::vector<uint8_t> BuildModel(const Case& c, const Operands& o, int64_t opset = 14) {
  onnx::ModelProto m;
  auto* g = testing::StartOnnxModel(&m, opset);
  g->set_name("recurrent");
  testing::AddGraphInput(g, "X", onnx::TensorProto::FLOAT, o.x.shape());
  AddInitializer(g, "W", o.w);
  AddInitializer(g, "R", o.r);
  std::vector<std::string> inputs = {"X", "W", "R", c.bias ? "B" : "", "", c.initial ? "initial_h" : ""};
  if (c.bias) AddInitializer(g, "B", o.b);
  if (!c.seq_lens.empty()) {
    inputs[4] = "sequence_lens";
    if (c.seq_lens_at_run_time) {
      testing::AddGraphInput(g, "sequence_lens", onnx::TensorProto::INT32, {c.batch});
    } else {
      auto* t = g->add_initializer();
      t->set_name("sequence_lens");
      t->set_data_type(onnx::TensorProto::INT32);
      t->add_dims(c.batch);
      for (int32_t v : c.seq_lens) t->add_int32_data(v);
    }
  }
  if (c.initial) AddInitializer(g, "initial_h", o.h0);
  if (c.kind == Kind::kLstm) {
    inputs.push_back(c.initial ? "initial_c" : "");
    inputs.push_back(c.peepholes ? "P" : "");
    if (c.initial) AddInitializer(g, "initial_c", o.c0);
    if (c.peepholes) AddInitializer(g, "P", o.p);
  }
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  auto* n = g->add_node();
  n->set_op_type(OpOf(c.kind));
  n->set_name("cell");
  for (const auto& i : inputs) n->add_input(i);
  n->add_output("Y");
  n->add_output("Y_h");
  if (c.kind == Kind::kLstm) n->add_output("Y_c");
  Attr(n, "hidden_size", onnx::AttributeProto::INT)->set_i(c.hidden);
  if (c.direction != "forward") Attr(n, "direction", onnx::AttributeProto::STRING)->set_s(c.direction);
  if (c.layout) Attr(n, "layout", onnx::AttributeProto::INT)->set_i(1);
  if (!c.activations.empty()) {
    auto* a = Attr(n, "activations", onnx::AttributeProto::STRINGS);
    for (const auto& s : c.activations) a->add_strings(s);
  }
  if (!c.alphas.empty()) {
    auto* a = Attr(n, "activation_alpha", onnx::AttributeProto::FLOATS);
    for (float v : c.alphas) a->add_floats(v);
  }
  if (!c.betas.empty()) {
    auto* a = Attr(n, "activation_beta", onnx::AttributeProto::FLOATS);
    for (float v : c.betas) a->add_floats(v);
  }
  if (c.clip) Attr(n, "clip", onnx::AttributeProto::FLOAT)->set_f(*c.clip);
  if (c.linear_before_reset) Attr(n, "linear_before_reset", onnx::AttributeProto::INT)->set_i(c.linear_before_reset);
  if (c.input_forget) Attr(n, "input_forget", onnx::AttributeProto::INT)->set_i(c.input_forget);
  AddOutput(g, "Y");
  AddOutput(g, "Y_h");
  if (c.kind == Kind::kLstm) AddOutput(g, "Y_c");
  const std::string s = m.SerializeAsString();
  return {s.begin(), s.end()};
}

// --- the reference: the ONNX formulas in float64, one step at a time ---

struct RefAct {
  std::string name;
  double alpha, beta;
};

double Apply(const RefAct& a, double x) {
  const std::string& n = a.name;
  if (n == "Sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (n == "Tanh") return std::tanh(x);
  if (n == "Relu") return std::max(0.0, x);
  if (n == "Affine") return a.alpha * x + a.beta;
  if (n == "LeakyRelu") return x >= 0 ? x : a.alpha * x;
  if (n == "ThresholdedRelu") return x >= a.alpha ? x : 0.0;
  if (n == "ScaledTanh") return a.alpha * std::tanh(a.beta * x);
  if (n == "HardSigmoid") return std::min(std::max(a.alpha * x + a.beta, 0.0), 1.0);
  if (n == "Elu") return x >= 0 ? x : a.alpha * (std::exp(x) - 1.0);
  if (n == "Softsign") return x / (1.0 + std::fabs(x));
  if (n == "Softplus") return std::log(1.0 + std::exp(x));
  ADD_FAILURE() << "no reference for " << n;
  return 0;
}

// The activations of direction d with their alpha/beta, consumed in order by the ones that
// take them (defaults otherwise).
std::vector<RefAct> RefActivations(const Case& c) {
  std::vector<std::string> names = c.activations;
  const std::vector<std::string> defaults = c.kind == Kind::kRnn ? std::vector<std::string>{"Tanh"}
                                            : c.kind == Kind::kGru
                                                ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  if (names.empty()) names = defaults;
  size_t ai = 0, bi = 0;
  std::vector<RefAct> out;
  for (const auto& n : names) {
    RefAct a{n, 0, 0};
    const bool ua = n == "Affine" || n == "LeakyRelu" || n == "ThresholdedRelu" || n == "ScaledTanh" ||
                    n == "HardSigmoid" || n == "Elu";
    const bool ub = n == "Affine" || n == "ScaledTanh" || n == "HardSigmoid";
    const double da = n == "LeakyRelu" ? 0.01 : n == "HardSigmoid" ? 0.2 : 1.0;
    const double db = n == "HardSigmoid" ? 0.5 : n == "ScaledTanh" ? 1.0 : 0.0;
    a.alpha = ua && ai < c.alphas.size() ? c.alphas[ai++] : da;
    a.beta = ub && bi < c.betas.size() ? c.betas[bi++] : db;
    out.push_back(a);
  }
  // One set for a bidirectional layer serves both directions, with its alphas and betas.
  if (out.size() == defaults.size() && Dirs(c) == 2) {
    const auto once = out;
    out.insert(out.end(), once.begin(), once.end());
  }
  return out;
}

struct RefOut {
  std::vector<double> y, yh, yc;  // in the model's layout
};

RefOut Reference(const Case& c, const Operands& o) {
  const int64_t D = Dirs(c), G = GatesOf(c.kind), H = c.hidden, T = c.steps, B = c.batch, I = c.input;
  const std::vector<RefAct> acts = RefActivations(c);
  const size_t per_dir = acts.size() / static_cast<size_t>(D);
  auto X = [&](int64_t t, int64_t b, int64_t i) {
    return static_cast<double>(o.x.data_as<float>()[c.layout ? (b * T + t) * I + i : (t * B + b) * I + i]);
  };
  auto state_index = [&](int64_t d, int64_t b, int64_t j) {
    return c.layout ? (b * D + d) * H + j : (d * B + b) * H + j;
  };
  const float* w = o.w.data_as<float>();
  const float* r = o.r.data_as<float>();
  const float* bias = o.b.data_as<float>();
  const float* p = o.p.data_as<float>();
  auto clip = [&](double v) { return c.clip ? std::min(std::max(v, -double(*c.clip)), double(*c.clip)) : v; };
  RefOut out;
  out.y.assign(static_cast<size_t>(T * D * B * H), 0.0);
  out.yh.assign(static_cast<size_t>(D * B * H), 0.0);
  out.yc.assign(static_cast<size_t>(D * B * H), 0.0);
  for (int64_t d = 0; d < D; ++d) {
    const RefAct* act = &acts[static_cast<size_t>(d) * per_dir];
    const bool backwards = c.direction == "reverse" || d == 1;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = c.seq_lens.empty() ? T : c.seq_lens[static_cast<size_t>(b)];
      std::vector<double> h(H, 0.0), cs(H, 0.0);
      if (c.initial) {
        for (int64_t j = 0; j < H; ++j) {
          h[j] = o.h0.data_as<float>()[state_index(d, b, j)];
          cs[j] = o.c0.data_as<float>()[state_index(d, b, j)];
        }
      }
      for (int64_t k = 0; k < len; ++k) {
        const int64_t t = backwards ? len - 1 - k : k;
        // Gate pre-activations: x W^T + Wb + Rb, plus h R^T (GRU's h gate handled below).
        std::vector<double> xw(G * H, 0.0), hr(G * H, 0.0);
        for (int64_t gj = 0; gj < G * H; ++gj) {
          for (int64_t i = 0; i < I; ++i) xw[gj] += X(t, b, i) * w[(d * G * H + gj) * I + i];
          for (int64_t i = 0; i < H; ++i) hr[gj] += h[i] * r[(d * G * H + gj) * H + i];
          if (c.bias) {
            xw[gj] += bias[d * 2 * G * H + gj];
            hr[gj] += bias[d * 2 * G * H + G * H + gj];
          }
        }
        std::vector<double> hn(H), cn(H);
        if (c.kind == Kind::kRnn) {
          for (int64_t j = 0; j < H; ++j) hn[j] = Apply(act[0], clip(xw[j] + hr[j]));
        } else if (c.kind == Kind::kGru) {
          std::vector<double> z(H), rr(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = Apply(act[0], clip(xw[j] + hr[j]));
            rr[j] = Apply(act[0], clip(xw[H + j] + hr[H + j]));
          }
          for (int64_t j = 0; j < H; ++j) {
            double rec;
            if (c.linear_before_reset) {
              rec = rr[j] * hr[2 * H + j];  // (h Rh^T + Rbh) scaled by r
            } else {
              rec = 0.0;
              for (int64_t i = 0; i < H; ++i) rec += rr[i] * h[i] * r[(d * G * H + 2 * H + j) * H + i];
              if (c.bias) rec += bias[d * 2 * G * H + G * H + 2 * H + j];
            }
            const double cand = Apply(act[1], clip(xw[2 * H + j] + rec));
            hn[j] = (1.0 - z[j]) * cand + z[j] * h[j];
          }
        } else {
          for (int64_t j = 0; j < H; ++j) {
            const double pi = c.peepholes ? p[d * 3 * H + j] : 0.0;
            const double po = c.peepholes ? p[d * 3 * H + H + j] : 0.0;
            const double pf = c.peepholes ? p[d * 3 * H + 2 * H + j] : 0.0;
            const double ig = Apply(act[0], clip(xw[j] + hr[j] + pi * cs[j]));
            const double fg =
                c.input_forget ? 1.0 - ig : Apply(act[0], clip(xw[2 * H + j] + hr[2 * H + j] + pf * cs[j]));
            const double cand = Apply(act[1], clip(xw[3 * H + j] + hr[3 * H + j]));
            cn[j] = fg * cs[j] + ig * cand;
            const double og = Apply(act[0], clip(xw[H + j] + hr[H + j] + po * cn[j]));
            hn[j] = og * Apply(act[2], cn[j]);
          }
          cs = cn;
        }
        h = hn;
        for (int64_t j = 0; j < H; ++j) {
          const int64_t yi = c.layout ? ((b * T + t) * D + d) * H + j : ((t * D + d) * B + b) * H + j;
          out.y[yi] = h[j];
        }
      }
      for (int64_t j = 0; j < H; ++j) {
        out.yh[state_index(d, b, j)] = h[j];
        out.yc[state_index(d, b, j)] = cs[j];
      }
    }
  }
  return out;
}

void ExpectClose(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.num_elements(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got.data_as<float>()[i];
    ASSERT_NEAR(g, want[i], 2e-5 + 2e-5 * std::fabs(want[i])) << what << " element " << i;
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  {
    Case c{"rnn_forward_defaults", Kind::kRnn};
    c.bias = false;
    cases.push_back(c);
  }
  {
    Case c{"rnn_bidirectional_relu_initial", Kind::kRnn};
    c.direction = "bidirectional";
    c.activations = {"Relu", "LeakyRelu"};
    c.alphas = {0.1f};
    c.initial = true;
    cases.push_back(c);
  }
  {
    Case c{"rnn_reverse_layout1_seq_lens", Kind::kRnn};
    c.steps = 4;
    c.batch = 3;
    c.direction = "reverse";
    c.layout = true;
    c.seq_lens = {4, 1, 3};
    c.activations = {"Softsign"};
    cases.push_back(c);
  }
  {
    Case c{"gru_forward_defaults", Kind::kGru};
    cases.push_back(c);
  }
  {
    Case c{"gru_linear_before_reset_bidirectional", Kind::kGru};
    c.direction = "bidirectional";
    c.linear_before_reset = 1;
    c.initial = true;
    c.activations = {"HardSigmoid", "Tanh", "Sigmoid", "Softplus"};
    c.alphas = {0.3f};
    c.betas = {0.4f};
    cases.push_back(c);
  }
  {
    Case c{"gru_bidirectional_one_set_of_activations", Kind::kGru};
    c.direction = "bidirectional";
    c.activations = {"HardSigmoid", "LeakyRelu"};
    c.alphas = {0.25f, 0.05f};
    c.betas = {0.45f};
    cases.push_back(c);
  }
  {
    Case c{"gru_reverse_seq_lens_clip", Kind::kGru};
    c.steps = 5;
    c.batch = 3;
    c.direction = "reverse";
    c.seq_lens = {2, 5, 3};
    c.clip = 0.7f;
    cases.push_back(c);
  }
  {
    Case c{"lstm_forward_defaults", Kind::kLstm};
    cases.push_back(c);
  }
  {
    Case c{"lstm_bidirectional_peepholes_seq_lens", Kind::kLstm};
    c.steps = 4;
    c.batch = 3;
    c.direction = "bidirectional";
    c.peepholes = true;
    c.initial = true;
    c.seq_lens = {4, 2, 1};
    cases.push_back(c);
  }
  {
    Case c{"lstm_layout1_clip_activations", Kind::kLstm};
    c.layout = true;
    c.clip = 1.5f;
    c.activations = {"ScaledTanh", "Elu", "Affine"};
    c.alphas = {0.5f, 0.9f, 0.25f};
    c.betas = {1.2f, 0.1f};
    c.initial = true;
    cases.push_back(c);
  }
  {
    Case c{"lstm_input_forget_thresholded", Kind::kLstm};
    c.input_forget = 1;
    c.activations = {"Sigmoid", "ThresholdedRelu", "Tanh"};
    c.alphas = {0.2f};
    c.peepholes = true;
    cases.push_back(c);
  }
  {
    Case c{"lstm_bidirectional_seq_lens_at_run_time", Kind::kLstm};
    c.steps = 4;
    c.batch = 3;
    c.direction = "bidirectional";
    c.seq_lens = {3, 4, 1};
    c.seq_lens_at_run_time = true;
    cases.push_back(c);
  }
  return cases;
}

TEST(OnnxRecurrent, MatchesTheOnnxFormulasAndIsBitIdenticalAcrossThreads) {
  uint32_t seed = 1919;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const Operands o = MakeOperands(c, seed += 10);
    auto imported = ImportOnnx(BuildModel(c, o), {});
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    const RefOut want = Reference(c, o);
    std::map<std::string, Tensor> inputs = {{"X", o.x}};
    if (c.seq_lens_at_run_time) {
      inputs["sequence_lens"] = Tensor::FromVector<int32_t>(DType::kI32, {c.batch}, c.seq_lens);
    }
    MemoryBlobSource blobs;
    if (!imported->weights.empty()) blobs.Add(imported->weights);
    auto program = CompileGraph(imported->graph, &blobs, Limits{});
    ASSERT_TRUE(program.ok()) << program.status().message();
    std::vector<Tensor> first;
    for (int threads : {1, 2, 8}) {
      auto cpu = MakeCpu(threads);
      auto loaded = LoadedProgram::Load(*program, cpu.get());
      ASSERT_TRUE(loaded.ok()) << loaded.status().message();
      auto run = (*loaded)->Run(inputs);
      ASSERT_TRUE(run.ok()) << run.status().message();
      std::map<std::string, Tensor> by_name;
      for (const auto& out : run->outputs) by_name[out.name] = out.tensor;
      ASSERT_EQ(by_name.size(), c.kind == Kind::kLstm ? 3u : 2u);
      std::vector<Tensor> got = {by_name["Y"], by_name["Y_h"]};
      if (c.kind == Kind::kLstm) got.push_back(by_name["Y_c"]);
      if (threads == 1) {
        const int64_t D = Dirs(c);
        const Shape y_shape = c.layout ? Shape{c.batch, c.steps, D, c.hidden} : Shape{c.steps, D, c.batch, c.hidden};
        const Shape s_shape = c.layout ? Shape{c.batch, D, c.hidden} : Shape{D, c.batch, c.hidden};
        EXPECT_EQ(got[0].shape(), y_shape);
        EXPECT_EQ(got[1].shape(), s_shape);
        ExpectClose(got[0], want.y, "Y");
        ExpectClose(got[1], want.yh, "Y_h");
        if (c.kind == Kind::kLstm) ExpectClose(got[2], want.yc, "Y_c");
        first = got;
        continue;
      }
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].shape(), first[i].shape());
        EXPECT_EQ(0, std::memcmp(got[i].data(), first[i].data(), got[i].num_elements() * sizeof(float)))
            << "output " << i << " at " << threads << " threads";
      }
    }
  }
}

TEST(OnnxRecurrent, StepsPastASequencesEndAreZeroAndYhHoldsTheLastValidStep) {
  Case c{"lens", Kind::kGru};
  c.steps = 4;
  c.batch = 2;
  c.direction = "bidirectional";
  c.seq_lens = {2, 4};
  const Operands o = MakeOperands(c, 77);
  auto imported = ImportOnnx(BuildModel(c, o), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  MemoryBlobSource blobs;
  if (!imported->weights.empty()) blobs.Add(imported->weights);
  auto program = CompileGraph(imported->graph, &blobs, Limits{});
  ASSERT_TRUE(program.ok()) << program.status().message();
  auto cpu = MakeCpu(1);
  auto loaded = LoadedProgram::Load(*program, cpu.get());
  ASSERT_TRUE(loaded.ok());
  auto run = (*loaded)->Run({{"X", o.x}});
  ASSERT_TRUE(run.ok()) << run.status().message();
  const Tensor& y = run->outputs[0].tensor;  // [T, D, B, H]
  const Tensor& yh = run->outputs[1].tensor;
  const int64_t H = c.hidden;
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t d = 0; d < 2; ++d) {
      for (int64_t j = 0; j < H; ++j) {
        const float v = y.data_as<float>()[((t * 2 + d) * 2 + 0) * H + j];
        if (t >= 2) {
          EXPECT_EQ(std::bit_cast<uint32_t>(v), 0u) << "t " << t << " d " << d;
        }
      }
    }
  }
  // Forward Y_h of batch 0 is Y at t = 1; reverse Y_h of batch 0 is Y at t = 0.
  for (int64_t j = 0; j < H; ++j) {
    EXPECT_EQ(std::bit_cast<uint32_t>(yh.data_as<float>()[(0 * 2 + 0) * H + j]),
              std::bit_cast<uint32_t>(y.data_as<float>()[((1 * 2 + 0) * 2 + 0) * H + j]));
    EXPECT_EQ(std::bit_cast<uint32_t>(yh.data_as<float>()[(1 * 2 + 0) * H + j]),
              std::bit_cast<uint32_t>(y.data_as<float>()[((0 * 2 + 1) * 2 + 0) * H + j]));
  }
}

TEST(OnnxRecurrent, OptionalOutputsCanBeLeftOut) {
  Case c{"only_yc", Kind::kLstm};
  const Operands o = MakeOperands(c, 5);
  std::vector<uint8_t> bytes = BuildModel(c, o);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  auto* n = m.mutable_graph()->mutable_node(0);
  n->set_output(0, "");
  n->set_output(1, "");
  m.mutable_graph()->mutable_output()->DeleteSubrange(0, 2);
  const std::string s = m.SerializeAsString();
  auto imported = ImportOnnx(std::vector<uint8_t>(s.begin(), s.end()), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_EQ(imported->outputs, std::vector<std::string>{"Y_c"});
}

struct Bad {
  std::string name;
  Case c;
  std::string expect;  // a fragment of the message
  std::function<void(onnx::ModelProto&)> edit = nullptr;
};

TEST(OnnxRecurrent, BadAttributesAndInputsGetClearErrors) {
  auto attr_edit = [](const std::string& name, auto set) {
    return [name, set](onnx::ModelProto& m) {
      auto* n = m.mutable_graph()->mutable_node(0);
      onnx::AttributeProto* a = nullptr;
      for (auto& at : *n->mutable_attribute()) {
        if (at.name() == name) a = &at;
      }
      if (!a) {
        a = n->add_attribute();
        a->set_name(name);
      }
      set(a);
    };
  };
  Case lstm{"lstm", Kind::kLstm};
  Case gru{"gru", Kind::kGru};
  Case rnn{"rnn", Kind::kRnn};
  Case unknown_act = rnn;
  unknown_act.activations = {"Gelu"};
  Case wrong_count = gru;
  wrong_count.activations = {"Sigmoid", "Tanh", "Tanh"};
  Case extra_alpha = rnn;
  extra_alpha.activations = {"LeakyRelu"};
  extra_alpha.alphas = {0.1f, 0.2f};
  Case zero_len = lstm;
  zero_len.seq_lens = {0, 3};
  Case long_len = lstm;
  long_len.seq_lens = {4, 3};
  Case bad_clip = gru;
  bad_clip.clip = -1.0f;
  const std::vector<Bad> bads = {
      {"unknown activation", unknown_act, "activation 'Gelu'"},
      {"activation count", wrong_count, "'activations' has 3 entries, expected 2"},
      {"extra alpha", extra_alpha, "more values"},
      {"zero length", zero_len, "sequence_lens holds 0"},
      {"length past the sequence", long_len, "sequence_lens holds 4"},
      {"negative clip", bad_clip, "'clip' must be positive"},
      {"direction", rnn, "'direction' is 'sideways'",
       attr_edit("direction",
                 [](onnx::AttributeProto* a) {
                   a->set_type(onnx::AttributeProto::STRING);
                   a->set_s("sideways");
                 })},
      {"hidden_size", rnn, "'hidden_size' is 5",
       attr_edit("hidden_size", [](onnx::AttributeProto* a) { a->set_i(5); })},
      {"layout", rnn, "'layout' must be 0 or 1",
       attr_edit("layout",
                 [](onnx::AttributeProto* a) {
                   a->set_type(onnx::AttributeProto::INT);
                   a->set_i(2);
                 })},
      {"linear_before_reset on LSTM", lstm, "attribute 'linear_before_reset'",
       attr_edit("linear_before_reset",
                 [](onnx::AttributeProto* a) {
                   a->set_type(onnx::AttributeProto::INT);
                   a->set_i(1);
                 })},
      {"unknown attribute", gru, "attribute 'foo'",
       attr_edit("foo",
                 [](onnx::AttributeProto* a) {
                   a->set_type(onnx::AttributeProto::INT);
                   a->set_i(1);
                 })},
      {"W shape", lstm, "W has shape",
       [](onnx::ModelProto& m) {
         auto* w = m.mutable_graph()->mutable_initializer(0);
         w->set_dims(1, w->dims(1) - 1);
         w->set_raw_data(w->raw_data().substr(0, w->raw_data().size() - 3 * sizeof(float)));
       }},
      {"B shape", gru, "B has shape",
       [](onnx::ModelProto& m) {
         auto* b = m.mutable_graph()->mutable_initializer(2);
         b->set_dims(1, b->dims(1) / 2);
         b->set_raw_data(b->raw_data().substr(0, b->raw_data().size() / 2));
       }},
      {"missing R", rnn, "", [](onnx::ModelProto& m) { m.mutable_graph()->mutable_node(0)->set_input(2, ""); }},
  };
  for (const Bad& bad : bads) {
    SCOPED_TRACE(bad.name);
    const Operands o = MakeOperands(bad.c, 3);
    std::vector<uint8_t> bytes = BuildModel(bad.c, o);
    if (bad.edit) {
      onnx::ModelProto m;
      ASSERT_TRUE(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
      bad.edit(m);
      const std::string s = m.SerializeAsString();
      bytes.assign(s.begin(), s.end());
    }
    auto imported = ImportOnnx(bytes, {});
    ASSERT_FALSE(imported.ok());
    EXPECT_NE(imported.status().message().find("node 'cell'"), std::string::npos) << imported.status().message();
    EXPECT_NE(imported.status().message().find(bad.expect), std::string::npos) << imported.status().message();
  }
}

// Lengths known only at run time cannot be checked at import: a length past the sequence
// makes the backward direction's row gather fail (a run-time error, never a read out of
// bounds), and a length of 0 leaves the state at its initial value with zero outputs.
TEST(OnnxRecurrent, BadLengthsAtRunTimeFailCleanly) {
  Case c{"run_time_lens", Kind::kRnn};
  c.steps = 3;
  c.batch = 2;
  c.direction = "bidirectional";
  c.initial = true;
  c.seq_lens = {3, 3};
  c.seq_lens_at_run_time = true;
  const Operands o = MakeOperands(c, 31);
  auto imported = ImportOnnx(BuildModel(c, o), {});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  MemoryBlobSource blobs;
  if (!imported->weights.empty()) blobs.Add(imported->weights);
  auto program = CompileGraph(imported->graph, &blobs, Limits{});
  ASSERT_TRUE(program.ok()) << program.status().message();
  auto cpu = MakeCpu(2);
  auto loaded = LoadedProgram::Load(*program, cpu.get());
  ASSERT_TRUE(loaded.ok());
  auto lens = [](std::vector<int32_t> v) { return Tensor::FromVector<int32_t>(DType::kI32, {2}, v); };
  auto too_long = (*loaded)->Run({{"X", o.x}, {"sequence_lens", lens({3, 4})}});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("out of range"), std::string::npos) << too_long.status().message();

  auto empty = (*loaded)->Run({{"X", o.x}, {"sequence_lens", lens({0, 3})}});
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  const Tensor& y = empty->outputs[0].tensor;   // [T, D, B, H]
  const Tensor& yh = empty->outputs[1].tensor;  // [D, B, H]
  const int64_t H = c.hidden;
  for (int64_t t = 0; t < 3; ++t) {
    for (int64_t d = 0; d < 2; ++d) {
      for (int64_t j = 0; j < H; ++j) EXPECT_EQ(y.data_as<float>()[((t * 2 + d) * 2 + 0) * H + j], 0.0f);
    }
  }
  for (int64_t d = 0; d < 2; ++d) {
    for (int64_t j = 0; j < H; ++j) {
      EXPECT_EQ(yh.data_as<float>()[(d * 2 + 0) * H + j], o.h0.data_as<float>()[(d * 2 + 0) * H + j]);
    }
  }
}

TEST(OnnxRecurrent, UnrollingIsCapped) {
  Case c{"long", Kind::kRnn};
  c.steps = 2049;
  c.batch = 1;
  c.input = 1;
  c.hidden = 1;
  c.direction = "bidirectional";
  const Operands o = MakeOperands(c, 9);
  auto imported = ImportOnnx(BuildModel(c, o), {});
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("exceeds the cap of 4096 unrolled steps"), std::string::npos)
      << imported.status().message();
  // The op budget too: 400 RNN steps need more ops than a max_ops of 1000 allows.
  c.steps = 400;
  c.direction = "forward";
  OnnxImportOptions small;
  small.limits.max_ops = 1000;
  imported = ImportOnnx(BuildModel(c, MakeOperands(c, 9)), small);
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("max_ops"), std::string::npos) << imported.status().message();
}

TEST(OnnxRecurrent, AreListedAsSupported) {
  const auto ops = SupportedOnnxOps();
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
  }
}

}  // namespace
}  // namespace consensor::executor
