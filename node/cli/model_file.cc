#include "node/cli/model_file.h"

#include "executor/serialize.h"
#include "node/cli/cli_args.h"

namespace consensor::node {

StatusOr<ModelFile> LoadModelFile(const std::string& path, const std::map<std::string, Shape>& input_shapes,
                                  const executor::Limits& limits,
                                  const std::map<std::string, Tensor>& constant_inputs) {
  ModelFile model;
  if (!executor::IsOnnxPath(path)) {
    ASSIGN_OR_RETURN(model.graph, executor::LoadGraphFile(path, limits));
    return model;
  }
  executor::OnnxImportOptions options;
  options.limits = limits;
  options.input_shapes = input_shapes;
  options.constant_inputs = constant_inputs;
  ASSIGN_OR_RETURN(executor::OnnxImport imported, executor::ImportOnnxFile(path, options));
  model.onnx_blobs = std::make_unique<executor::MemoryBlobSource>();
  if (!imported.weights.empty()) model.onnx_blobs->Add(imported.weights);
  model.graph = std::move(imported.graph);
  model.onnx = std::move(imported);
  return model;
}

StatusOr<std::map<std::string, Tensor>> ReadNpyFiles(const std::map<std::string, std::string>& files,
                                                     const NpyLimits& limits) {
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, file] : files) {
    auto t = ReadNpyFile(file, limits);
    if (!t.ok()) return t.status().WithContext("input '" + name + "' from '" + file + "'");
    tensors.emplace(name, std::move(t).value());
  }
  return tensors;
}

Status ParseShapeSpecs(const std::vector<std::string>& specs, std::map<std::string, Shape>* shapes) {
  for (const std::string& spec : specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--shape expects NAME=D0,D1,... (empty after '=' for a scalar), got '" + spec + "'");
    }
    Shape shape;
    std::string dims = spec.substr(eq + 1);
    size_t pos = 0;
    while (pos < dims.size()) {
      size_t comma = dims.find(',', pos);
      if (comma == std::string::npos) comma = dims.size();
      ASSIGN_OR_RETURN(int64_t d, ParseIntOption(dims.substr(pos, comma - pos), "--shape dimension", 0, INT64_MAX));
      shape.push_back(d);
      pos = comma + 1;
      if (comma + 1 == dims.size()) return InvalidArgument("--shape '" + spec + "' ends with a comma");
    }
    if (shape.size() > static_cast<size_t>(kMaxRank)) return InvalidArgument("--shape '" + spec + "' has rank over 8");
    if (!shapes->emplace(spec.substr(0, eq), shape).second) {
      return InvalidArgument("the shape of input '" + spec.substr(0, eq) + "' is given twice");
    }
  }
  return OkStatus();
}

}  // namespace consensor::node
