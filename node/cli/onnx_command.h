// `consensor import` (ONNX model -> graph file + safetensors weights) and
// `consensor onnx-test` (runs ONNX backend test cases, such as Debian's libonnx-testdata).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace consensor::node {

int RunImportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunOnnxTestCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace consensor::node
