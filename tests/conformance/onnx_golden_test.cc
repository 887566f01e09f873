// Golden hashes for imported ONNX models: for each model of Debian's libonnx-testdata listed
// in tests/conformance/onnx_golden.txt ("SUITE/TEST GRAPH_ID RESULT_ROOT"), the import must
// give the same graph id (the lowering of docs/ONNX.md did not change) and every backend
// configuration must give the same result root on the test's first data set.
// CNSR_WRITE_ONNX_GOLDEN=FILE regenerates the list from kGoldenModels and kCpuOnlyModels (only when a lowering
// changes on purpose).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "common/file_io.h"
#include "executor/onnx/import.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "executor/validate.h"
#include "tests/conformance/backends.h"
#include "tests/test_paths.h"

namespace consensor {
namespace {

namespace fs = std::filesystem;

const fs::path kData = "/usr/share/libonnx-testdata/data";

// One or two models per lowering in docs/ONNX.md.
constexpr const char* kGoldenModels[] = {
    "node/test_gemm_all_attributes",
    "node/test_gemm_default_vector_bias",
    "node/test_matmul_4d",
    "node/test_conv_with_strides_and_asymmetric_padding",
    "node/test_conv_with_autopad_same",
    "pytorch-converted/test_Conv1d_dilated",
    "pytorch-converted/test_Conv2d_depthwise_strided",
    "node/test_batchnorm_epsilon",
    "pytorch-converted/test_BatchNorm2d_eval",
    "node/test_maxpool_2d_ceil",
    "node/test_maxpool_1d_default",
    "node/test_maxpool_2d_same_lower",
    "node/test_averagepool_2d_same_upper",
    "node/test_averagepool_2d_pads_count_include_pad",
    "node/test_globalaveragepool",
    "node/test_globalmaxpool",
    "node/test_softmax_axis_1",
    "node/test_softmax_large_number",
    "node/test_logsoftmax_axis_1",
    "node/test_layer_normalization_4d_axis1",
    "node/test_layer_normalization_default_axis_expanded",
    "node/test_reduce_mean_keepdims_random",
    "node/test_reduce_sum_keepdims_random",
    "node/test_reduce_l2_keep_dims_random",
    "node/test_argmax_keepdims_random_select_last_index",
    "node/test_argmin_no_keepdims_random",
    "node/test_erf",
    "node/test_pow",
    "node/test_sigmoid",
    "node/test_tanh",
    "node/test_leakyrelu",
    "node/test_selu",
    "node/test_elu",
    "node/test_hardswish",
    "node/test_softplus",
    "node/test_clip",
    "node/test_prelu_broadcast",
    "node/test_mean_example",
    "node/test_where_long_example",
    "node/test_reduce_sum_square_default_axes_keepdims_random",
    "node/test_reshape_negative_dim",
    "node/test_slice_neg_steps",
    "node/test_gather_negative_indices",
    "node/test_expand_dim_changed",
    "node/test_split_variable_parts_2d",
    "node/test_concat_3d_axis_1",
    "node/test_flatten_axis2",
    "node/test_unsqueeze_two_axes",
    "node/test_squeeze",
    "node/test_transpose_all_permutations_3",
    "node/test_tile",
    "node/test_constant_pad",
    "node/test_constantofshape_float_ones",
    "node/test_range_int32_type_negative_delta",
    "node/test_depthtospace_crd_mode",
    "pytorch-operator/test_operator_flatten",
    "pytorch-converted/test_Linear",
    "pytorch-converted/test_PReLU_2d",
    "pytorch-converted/test_Softmax",
    // Issue 19's first ops.
    "node/test_floor",
    "node/test_round",
    "node/test_mod_mixed_sign_float32",
    "node/test_mod_mixed_sign_int32",
    "node/test_tril_neg",
    "node/test_onehot_negative_indices",
    "node/test_hardmax_axis_1",
    "node/test_instancenorm_example",
    "node/test_gather_elements_negative_indices",
    "node/test_lrn",
    "node/test_gathernd_example_int32_batch_dim1",
    "node/test_reduce_prod_keepdims_random",
    "node/test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
    "node/test_resize_downsample_scales_linear_align_corners",
    "node/test_resize_tf_crop_and_resize",
    "node/test_resize_upsample_sizes_nearest_ceil_half_pixel",
    "node/test_upsample_nearest",
    "node/test_convtranspose_1d",
    "node/test_convtranspose_3d",
    "node/test_convtranspose_autopad_same",
    "node/test_convtranspose_output_shape",
    "node/test_convtranspose_dilations",
    "pytorch-converted/test_ConvTranspose2d",
    "node/test_top_k_smallest",
    "node/test_top_k_negative_axis",
    "node/test_nllloss_NCd1d2d3_none_no_weight_negative_ii",
    "node/test_nllloss_NCd1_mean_weight_negative_ii",
    "node/test_nllloss_NCd1d2_no_weight_reduction_mean_ii",
    "node/test_sce_mean_weight_ii_4d_log_prob",
    "node/test_sce_NCd1d2d3_sum_weight_high_ii",
    "node/test_eyelike_populate_off_main_diagonal",
    "node/test_scatter_elements_with_duplicate_indices",
    "node/test_scatternd_multiply",
    "node/test_scatter_without_axis",
    "node/test_lstm_with_peepholes",
    "node/test_lstm_batchwise",
    "node/test_gru_seq_length",
    "node/test_gru_batchwise",
    "node/test_simple_rnn_with_initial_bias",
    // Inverse trigonometric and hyperbolic ops, windows folded at import, integer Pow.
    "node/test_acos",
    "node/test_asin",
    "node/test_atan",
    "node/test_sinh",
    "node/test_cosh",
    "node/test_asinh",
    "node/test_acosh",
    "node/test_atanh",
    "node/test_hannwindow",
    "node/test_hannwindow_symmetric",
    "node/test_hammingwindow",
    "node/test_hammingwindow_symmetric",
    "node/test_blackmanwindow",
    "node/test_blackmanwindow_symmetric",
    "node/test_pow_types_int32_int32",
    "node/test_pow_types_int64_float32",
    "node/test_gridsample",
    "node/test_gridsample_aligncorners_true",
    "node/test_gridsample_bicubic",
    "node/test_gridsample_nearest",
    "node/test_gridsample_border_padding",
    "node/test_gridsample_reflection_padding",
    "node/test_roialign_aligned_false",
    "node/test_roialign_aligned_true",
    "node/test_maxunpool_export_with_output_shape",
    "node/test_det_nd",
    // MeanVarianceNormalization, Compress, ReverseSequence (DETERMINISM.md 6.8a).
    "node/test_mvn",
    "node/test_compress_0",
    "node/test_reversesequence_time",
    "node/test_loop11",
    "node/test_scan9_sum",
    "node/test_scan_sum",
    // NonMaxSuppression, NonZero, Unique, folded at import (DETERMINISM.md 6.8c).
    "node/test_nonmaxsuppression_center_point_box_format",
    "node/test_nonmaxsuppression_two_classes",
    "node/test_nonzero_example",
    "node/test_unique_sorted_with_axis_3d",
    "node/test_unique_not_sorted_without_axis",
    // MaxUnpool at run-time indices (DETERMINISM.md 6.7d).
    "node/test_maxunpool_export_without_output_shape",
    // FLOAT16 and BFLOAT16 (DETERMINISM.md 1.3, 1.4): the CUDA backends give the CPU's bits.
    "node/test_cast_FLOAT16_to_FLOAT",
    "node/test_cast_FLOAT_to_FLOAT16",
    "node/test_cast_FLOAT_to_BFLOAT16",
    "node/test_max_float16",
    "node/test_min_float16",
    "node/test_mod_mixed_sign_float16",
    // u8, i16, u16, u32, u64 (and BitShift, lowered to gather, min, mul, div): the CUDA backends
    // give the CPU's bits.
    "node/test_bitshift_right_uint16",
    "node/test_bitshift_left_uint64",
    "node/test_mod_mixed_sign_int16",
    "node/test_max_uint32",
    "node/test_add_uint8",
    // The quantization ops (DETERMINISM.md 6.6; u8) and MaxPool on u8 (6.8a).
    "node/test_quantizelinear_axis",
    "node/test_dequantizelinear_axis",
    "node/test_dynamicquantizelinear_min_adjusted",
    "node/test_matmulinteger",
    "node/test_convinteger_with_padding",
    "node/test_qlinearmatmul_3D",
    "node/test_qlinearconv",
    "node/test_maxpool_2d_uint8",
};

// Models in f64, which the CUDA backends have no kernels for: those backends must refuse them.
constexpr const char* kCpuOnlyModels[] = {
    // f64 (DETERMINISM.md 1.2).
    "node/test_cast_FLOAT_to_DOUBLE",
    "node/test_max_float64",
    "node/test_mod_mixed_sign_float64",
    "node/test_cast_FLOAT16_to_DOUBLE",
    "node/test_cast_DOUBLE_to_FLOAT16",
    "node/test_reduce_log_sum_exp_keepdims_random",
    "pytorch-operator/test_operator_add_broadcast",
    // CumSum and Einsum in f64 (DETERMINISM.md 4.6a, 6.8a).
    "node/test_cumsum_2d_axis_1",
    "node/test_cumsum_1d_reverse_exclusive",
    "node/test_einsum_batch_matmul",
    "node/test_einsum_batch_diagonal",
    "node/test_einsum_sum",
};

bool IsCpuOnly(const std::string& name) {
  for (const char* model : kCpuOnlyModels) {
    if (name == model) return true;
  }
  return false;
}

struct Imported {
  executor::OnnxImport model;
  std::map<std::string, Tensor> inputs;
  Hash256 graph_id{};
};

StatusOr<Imported> ImportTest(const std::string& name) {
  const fs::path dir = kData / name;
  ASSIGN_OR_RETURN(auto model_bytes, consensor::ReadFileBytes((dir / "model.onnx").string(), 1 << 28));
  ASSIGN_OR_RETURN(executor::OnnxModelInfo info, executor::ReadOnnxModelInfo(model_bytes));
  Imported out;
  std::map<std::string, Tensor> all;
  for (size_t k = 0; k < info.inputs.size(); ++k) {
    const fs::path pb = dir / "test_data_set_0" / ("input_" + std::to_string(k) + ".pb");
    if (!fs::exists(pb)) break;
    ASSIGN_OR_RETURN(auto bytes, consensor::ReadFileBytes(pb.string(), 1 << 28));
    ASSIGN_OR_RETURN(Tensor t, executor::ParseOnnxTensor(bytes, {}));
    all.emplace(info.inputs[k].name, std::move(t));
  }
  // As `consensor onnx-test` does: inputs that steer shapes are bound at import.
  ASSIGN_OR_RETURN(executor::OnnxImportForValues imported, executor::ImportOnnxForValues(model_bytes, all));
  out.model = std::move(imported.model);
  out.inputs = std::move(imported.run_inputs);
  ASSIGN_OR_RETURN(auto validated, executor::Validate(out.model.graph, {}));
  out.graph_id = validated.id;
  return out;
}

StatusOr<Hash256> ResultRoot(const Imported& imported, const kernels::BackendOptions& config) {
  executor::MemoryBlobSource blobs;
  if (!imported.model.weights.empty()) blobs.Add(imported.model.weights);
  ASSIGN_OR_RETURN(executor::Program program, executor::CompileGraph(imported.model.graph, &blobs, {}));
  ASSIGN_OR_RETURN(auto backend, kernels::CreateBackend(config));
  ASSIGN_OR_RETURN(auto loaded, executor::LoadedProgram::Load(program, backend.get()));
  ASSIGN_OR_RETURN(executor::RunResult result, loaded->Run(imported.inputs));
  return result.result_root;
}

struct GoldenLine {
  std::string name, graph_id, result_root;
};

std::vector<GoldenLine> ReadGolden() {
  std::vector<GoldenLine> lines;
  std::ifstream in(fs::path(testing_support::SourceDir()) / "tests/conformance/onnx_golden.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    GoldenLine g;
    fields >> g.name >> g.graph_id >> g.result_root;
    lines.push_back(g);
  }
  return lines;
}

TEST(OnnxGolden, ImportedModelsMatchOnEveryBackend) {
  if (!fs::exists(kData)) GTEST_SKIP() << "libonnx-testdata is not installed (scripts/setup.sh installs it)";
  if (const char* path = std::getenv("CNSR_WRITE_ONNX_GOLDEN")) {
    std::ofstream out(path);
    out << "# Imported libonnx-testdata models: SUITE/TEST GRAPH_ID RESULT_ROOT (tests/conformance/onnx_golden_test.cc)\n";
    std::vector<const char*> names(std::begin(kGoldenModels), std::end(kGoldenModels));
    names.insert(names.end(), std::begin(kCpuOnlyModels), std::end(kCpuOnlyModels));
    for (const char* name : names) {
      auto imported = ImportTest(name);
      ASSERT_TRUE(imported.ok()) << name << ": " << imported.status().message();
      auto root = ResultRoot(*imported, kernels::BackendOptions{});
      ASSERT_TRUE(root.ok()) << name << ": " << root.status().message();
      out << name << " " << ToHex(imported->graph_id) << " " << ToHex(*root) << "\n";
    }
    return;
  }
  const auto golden = ReadGolden();
  ASSERT_GE(golden.size(), 55u);
  const auto configs = testing::AvailableBackends();
  for (const auto& g : golden) {
    SCOPED_TRACE(g.name);
    auto imported = ImportTest(g.name);
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    EXPECT_EQ(ToHex(imported->graph_id), g.graph_id) << "the lowering changed";
    for (const auto& config : configs) {
      auto root = ResultRoot(*imported, config);
      if (config.name != "cpu" && IsCpuOnly(g.name)) {
        EXPECT_EQ(root.status().code(), StatusCode::kUnimplemented) << config.name << ": " << root.status().message();
        continue;
      }
      ASSERT_TRUE(root.ok()) << config.name << ": " << root.status().message();
      EXPECT_EQ(ToHex(*root), g.result_root) << config.name << " " << config.isa << " x" << config.threads;
    }
  }
}

}  // namespace
}  // namespace consensor
