// Pieces of hand-built ONNX models shared by the importer's op tests.
#ifndef CONSENSOR_TESTS_EXECUTOR_ONNX_ONNX_MODEL_BUILDER_H_
#define CONSENSOR_TESTS_EXECUTOR_ONNX_ONNX_MODEL_BUILDER_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "executor/onnx/import.h"
#include "onnx/onnx_pb.h"

namespace consensor::testing {

// Starts `model` as IR version 8 importing the default domain at `opset`; returns its graph.
inline onnx::GraphProto* StartOnnxModel(onnx::ModelProto* model, int64_t opset) {
  model->set_ir_version(8);
  auto* import = model->add_opset_import();
  import->set_domain("");
  import->set_version(opset);
  return model->mutable_graph();
}

// A graph input of ONNX element type `elem` with fixed dims.
inline void AddGraphInput(onnx::GraphProto* g, const std::string& name, int32_t elem, const Shape& dims) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
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
