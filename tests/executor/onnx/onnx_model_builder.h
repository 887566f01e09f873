// Pieces of hand-built ONNX models shared by the importer's op tests, and one way to import,
// compile and run them on the CPU.
#ifndef CONSENSOR_TESTS_EXECUTOR_ONNX_ONNX_MODEL_BUILDER_H_
#define CONSENSOR_TESTS_EXECUTOR_ONNX_ONNX_MODEL_BUILDER_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "common/tensor.h"
#include "executor/onnx/import.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "onnx/onnx_pb.h"
#include "tests/executor/test_util.h"

namespace consensor::testing {

// Starts `model` as IR version 8 importing the default domain at `opset`; returns its graph.
inline onnx::GraphProto* StartOnnxModel(onnx::ModelProto* model, int64_t opset) {
  model->set_ir_version(8);
  auto* import = model->add_opset_import();
  import->set_domain("");
  import->set_version(opset);
  return model->mutable_graph();
}

// A graph input of ONNX element type `elem` with fixed dims (no shape at all when `dims` is
// empty); returns its tensor type.
inline onnx::TypeProto_Tensor* AddGraphInput(onnx::GraphProto* g, const std::string& name, int32_t elem,
                                             const Shape& dims) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  return tt;
}

// A graph input of a one-node model: its ONNX element type and fixed dims.
struct OnnxInput {
  std::string name;
  int32_t elem = onnx::TensorProto::FLOAT;
  Shape shape;
};

// An attribute of a one-node model.
using OnnxAttr = std::variant<int64_t, float, std::string, std::vector<int64_t>>;

// A model of one node `op` named 'node' with output 'y', at `opset`. Every input is a graph
// input with its shape declared (even a scalar's), so tests can bind any of them at import.
// `out_elem` 0 leaves the output's type undeclared (the importer does not read it).
inline std::vector<uint8_t> OneNodeModel(const std::string& op, const std::vector<OnnxInput>& inputs,
                                         const std::map<std::string, OnnxAttr>& attrs, int64_t opset,
                                         int32_t out_elem = 0) {
  onnx::ModelProto model;
  onnx::GraphProto* g = StartOnnxModel(&model, opset);
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("node");
  for (const OnnxInput& in : inputs) {
    AddGraphInput(g, in.name, in.elem, in.shape)->mutable_shape();  // declared, even for a scalar
    n->add_input(in.name);
  }
  for (const auto& [name, value] : attrs) {
    auto* a = n->add_attribute();
    a->set_name(name);
    if (const auto* i = std::get_if<int64_t>(&value)) {
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(*i);
    } else if (const auto* f = std::get_if<float>(&value)) {
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(*f);
    } else if (const auto* s = std::get_if<std::string>(&value)) {
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(*s);
    } else {
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : std::get<std::vector<int64_t>>(value)) a->add_ints(v);
    }
  }
  n->add_output("y");
  auto* out = g->add_output();
  out->set_name("y");
  if (out_elem != 0) out->mutable_type()->mutable_tensor_type()->set_elem_type(out_elem);
  std::string s = model.SerializeAsString();
  return {s.begin(), s.end()};
}

// Imports `model` with `options` and compiles it, with the weights the import split off served
// from memory.
inline StatusOr<executor::Program> ImportAndCompileOnnx(const std::vector<uint8_t>& model,
                                                        const executor::OnnxImportOptions& options = {}) {
  ASSIGN_OR_RETURN(executor::OnnxImport imported, executor::ImportOnnx(model, options));
  executor::MemoryBlobSource blobs;
  if (!imported.weights.empty()) blobs.Add(imported.weights);
  return executor::CompileGraph(imported.graph, &blobs, executor::Limits{});
}

// Loads `program` on a CPU backend with `threads` threads and runs it once on `inputs`.
inline StatusOr<executor::RunResult> RunOnCpu(const executor::Program& program,
                                              const std::map<std::string, Tensor>& inputs, int threads) {
  auto cpu = MakeCpu(threads);
  ASSIGN_OR_RETURN(auto loaded, executor::LoadedProgram::Load(program, cpu.get()));
  return loaded->Run(inputs);
}

// Imports `model` with `bound` fixed at import (as `consensor import --bind`) and the shapes of
// `inputs` given (as the CLI gives them from .npy files), compiles it once and runs it on the
// CPU at each thread count in `threads`: the first output of each run, in that order.
inline StatusOr<std::vector<Tensor>> RunOnnxAtThreads(const std::vector<uint8_t>& model,
                                                      const std::map<std::string, Tensor>& inputs,
                                                      const std::vector<int>& threads,
                                                      const std::map<std::string, Tensor>& bound = {}) {
  executor::OnnxImportOptions options;
  for (const auto& [name, t] : inputs) options.input_shapes[name] = t.shape();
  options.constant_inputs = bound;
  ASSIGN_OR_RETURN(executor::Program program, ImportAndCompileOnnx(model, options));
  std::vector<Tensor> out;
  for (int t : threads) {
    ASSIGN_OR_RETURN(executor::RunResult r, RunOnCpu(program, inputs, t));
    out.push_back(r.outputs.at(0).tensor);
  }
  return out;
}

// RunOnnxAtThreads at one thread count.
inline StatusOr<Tensor> RunOnnxModel(const std::vector<uint8_t>& model, const std::map<std::string, Tensor>& inputs,
                                     int threads = 1, const std::map<std::string, Tensor>& bound = {}) {
  ASSIGN_OR_RETURN(std::vector<Tensor> out, RunOnnxAtThreads(model, inputs, {threads}, bound));
  return out[0];
}

// Import must fail with `code`, naming the node ('node') and saying `phrase`.
inline void ExpectRefusedAtImport(const std::vector<uint8_t>& model, StatusCode code, const std::string& node,
                                  const std::string& phrase) {
  auto r = executor::ImportOnnx(model, {});
  ASSERT_FALSE(r.ok()) << phrase;
  EXPECT_EQ(r.status().code(), code) << r.status().message();
  EXPECT_NE(r.status().message().find("'" + node + "'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(phrase), std::string::npos) << r.status().message();
}

}  // namespace consensor::testing

#endif  // CONSENSOR_TESTS_EXECUTOR_ONNX_ONNX_MODEL_BUILDER_H_
