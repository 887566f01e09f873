#include "executor/onnx_context.h"

namespace consensor::executor::onnx_import {

const std::vector<OpConverter>& TensorConverters() {
  static const std::vector<OpConverter> table = {};
  return table;
}

}  // namespace consensor::executor::onnx_import
