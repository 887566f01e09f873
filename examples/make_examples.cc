// Regenerates the example graphs shipped in examples/ (the files are committed; run this
// only when the example itself changes):  build/examples/make_examples examples
#include <cstdio>
#include <random>
#include <string>

#include "common/npy.h"
#include "executor/graph.h"
#include "executor/serialize.h"

using namespace consensor;
using namespace consensor::executor;

namespace {

Tensor Gaussian(const Shape& shape, float stddev, std::mt19937& rng) {
  Tensor t(DType::kF32, shape);
  std::normal_distribution<float> dist(0.0f, stddev);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data_as<float>()[i] = dist(rng);
  return t;
}

// A two-layer classifier head: logits = softmax(layer_norm(gelu(x W1 + b1)) W2 + b2).
Graph Mlp(std::mt19937& rng) {
  Graph g;
  Value x = g.input("x", DType::kF32, {8, 64});
  Value w1 = g.constant(Gaussian({64, 128}, 0.125f, rng), "w1");
  Value b1 = g.constant(Gaussian({128}, 0.01f, rng), "b1");
  Value gamma = g.constant(Gaussian({128}, 0.1f, rng), "ln_scale");
  Value beta = g.constant(Gaussian({128}, 0.1f, rng), "ln_bias");
  Value w2 = g.constant(Gaussian({128, 10}, 0.09f, rng), "w2");
  Value b2 = g.constant(Gaussian({10}, 0.01f, rng), "b2");
  Value h = gelu(matmul(x, w1) + b1);
  h = layer_norm(h, gamma, beta, -1, 1e-5f);
  Value logits = matmul(h, w2) + b2;
  g.output("probs", softmax(logits, -1));
  g.output("class", argmax(logits, -1));
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_examples OUT_DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  std::mt19937 rng(20261121);
  Status s = SaveGraphFile(dir + "/mlp.cgraph", Mlp(rng));
  if (s.ok()) s = WriteNpyFile(dir + "/mlp_x.npy", Gaussian({8, 64}, 1.0f, rng));
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
