// Functional tests of the ONNX commands of the `consensor` binary: `run model.onnx`, `import`,
// `inspect`, `onnx-test`, on models from Debian's libonnx-testdata, with good and bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/file_io.h"
#include "common/npy.h"
#include "common/safetensors.h"
#include "common/tensor.h"
#include "executor/onnx/import.h"
#include "executor/serialize.h"
#include "tests/functional/daemon_harness.h"

namespace consensor {
namespace {

namespace fs = std::filesystem;

const fs::path kData = "/usr/share/libonnx-testdata/data";

testing_support::CommandResult RunCli(const std::string& args) {
  return testing_support::RunCommand(testing_support::CliBinary(), args);
}

std::string Field(const std::string& out, const std::string& key) {
  size_t p = out.find("\n" + key);
  if (p == std::string::npos && out.rfind(key, 0) == 0) p = 0;
  else if (p != std::string::npos) ++p;
  if (p == std::string::npos) return "";
  size_t start = out.find_first_not_of(' ', p + key.size());
  return out.substr(start, out.find('\n', start) - start);
}

class OnnxCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kData)) GTEST_SKIP() << "libonnx-testdata is not installed";
    dir_ = fs::temp_directory_path() / ("consensor-onnx-cli-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Input k of a test's first data set as an .npy file.
  std::string InputNpy(const std::string& test, int k) {
    auto bytes = consensor::ReadFileBytes(
        (kData / test / "test_data_set_0" / ("input_" + std::to_string(k) + ".pb")).string(), 1 << 26);
    std::string path = Path("in" + std::to_string(k) + ".npy");
    if (!bytes.ok()) {
      ADD_FAILURE() << bytes.status().ToString();
      return path;
    }
    auto t = executor::ParseOnnxTensor(*bytes, {});
    if (!t.ok()) {
      ADD_FAILURE() << t.status().ToString();
      return path;
    }
    EXPECT_TRUE(WriteNpyFile(path, *t).ok());
    return path;
  }

  fs::path dir_;
};

TEST_F(OnnxCliTest, RunImportAndRunTheGraphAgree) {
  const std::string test = "pytorch-converted/test_Conv2d_depthwise_padded";
  const std::string model = (kData / test / "model.onnx").string();
  const std::string x = InputNpy(test, 0);
  auto direct = RunCli("run " + model + " --input 0=" + x);
  ASSERT_EQ(direct.exit_code, 0) << direct.out;
  const std::string root = Field(direct.out, "result");
  ASSERT_EQ(root.size(), 64u) << direct.out;

  auto imported = RunCli("import " + model + " --out " + Path("imp") + " --input 0=" + x + " --inline-max 64");
  ASSERT_EQ(imported.exit_code, 0) << imported.out;
  EXPECT_NE(imported.out.find("input    0 f32[2, 4, 6, 6]"), std::string::npos) << imported.out;
  EXPECT_TRUE(fs::exists(Path("imp/graph.pb")));
  EXPECT_TRUE(fs::exists(Path("imp/weights.safetensors")));
  auto weights = consensor::ReadFileBytes(Path("imp/weights.safetensors"), 1 << 26);
  ASSERT_TRUE(weights.ok());
  ASSERT_TRUE(ParseSafetensors(*weights).ok());
  EXPECT_TRUE(fs::exists(Path("imp/" + ToHex(Sha256Of(*weights)))));

  // The graph file and its weights, without the ONNX file, give the same result root.
  auto again = RunCli("run " + Path("imp/graph.pb") + " --blobs " + Path("imp") + " --input 0=" + x);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(Field(again.out, "result"), root);
  // Without the weights it is a clear error.
  auto no_blobs = RunCli("run " + Path("imp/graph.pb") + " --input 0=" + x);
  EXPECT_EQ(no_blobs.exit_code, 1);
  EXPECT_NE(no_blobs.out.find("--blobs"), std::string::npos) << no_blobs.out;
  // Threads and ISAs do not change a bit.
  for (const char* flags : {"--threads 2", "--isa portable", "--backend cuda-emu"}) {
    auto r = RunCli("run " + model + " --input 0=" + x + " " + flags);
    ASSERT_EQ(r.exit_code, 0) << flags << r.out;
    EXPECT_EQ(Field(r.out, "result"), root) << flags;
  }
  auto inspect = RunCli("inspect " + model + " --shape 0=2,4,6,6");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.out;
  EXPECT_NE(inspect.out.find("conv2d"), std::string::npos) << inspect.out;
}

TEST_F(OnnxCliTest, BadModelsAndInputsAreClearErrors) {
  const std::string test = "node/test_gemm_default_vector_bias";
  const std::string model = (kData / test / "model.onnx").string();
  const std::string a = InputNpy(test, 0), b = InputNpy(test, 1), c = InputNpy(test, 2);
  const std::string ok_inputs = " --input a=" + a + " --input b=" + b + " --input c=" + c;
  ASSERT_EQ(RunCli("run " + model + ok_inputs).exit_code, 0);

  // A truncated model.
  auto bytes = consensor::ReadFileBytes(model, 1 << 20);
  ASSERT_TRUE(bytes.ok());
  std::ofstream(Path("cut.onnx"), std::ios::binary).write(reinterpret_cast<const char*>(bytes->data()), 40);
  auto cut = RunCli("run " + Path("cut.onnx") + ok_inputs);
  EXPECT_EQ(cut.exit_code, 1) << cut.out;
  EXPECT_NE(cut.out.find("error: "), std::string::npos) << cut.out;
  // Not a model at all.
  std::ofstream(Path("text.onnx")) << "hello";
  EXPECT_EQ(RunCli("run " + Path("text.onnx") + ok_inputs).exit_code, 1);
  // An input the model does not have, and one with a shape the model contradicts.
  auto extra = RunCli("run " + model + ok_inputs + " --input zz=" + a);
  EXPECT_EQ(extra.exit_code, 1);
  EXPECT_NE(extra.out.find("no input named 'zz'"), std::string::npos) << extra.out;
  auto wrong = RunCli("run " + model + " --input a=" + b + " --input b=" + b + " --input c=" + c);
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.out.find("input 'a'"), std::string::npos) << wrong.out;
  // An unsupported op is named with its node.
  // (Bernoulli: random, so it has no deterministic lowering.)
  auto random = RunCli("run " + (kData / "node/test_bernoulli/model.onnx").string() + " --shape x=10");
  EXPECT_EQ(random.exit_code, 1);
  EXPECT_NE(random.out.find("unsupported op Bernoulli in node '#0'"), std::string::npos) << random.out;
  // A missing file, and usage errors.
  EXPECT_EQ(RunCli("run " + Path("absent.onnx")).exit_code, 1);
  EXPECT_EQ(RunCli("import " + model).exit_code, 2);
  EXPECT_EQ(RunCli("import " + model + " --out " + Path("o") + " --shape a=3,").exit_code, 2);
  EXPECT_EQ(RunCli("onnx-test").exit_code, 2);
  const std::string node_dir = (kData / "node").string();
  for (const char* bad : {" --backend tpu", " --device 1024", " --isa sse", " --threads 0"}) {
    auto r = RunCli("onnx-test " + node_dir + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.out;
    EXPECT_NE(r.out.find("usage: consensor onnx-test"), std::string::npos) << bad << "\n" << r.out;
  }
}

// An If on an input runs once `--bind` fixes that input at import (the branch taken is
// inlined); without it both branches run and a `where` selects, with the same result.
TEST_F(OnnxCliTest, RunBindFoldsAnIfOnAnInput) {
  const std::string test = "node/test_if";
  const std::string model = (kData / test / "model.onnx").string();
  const std::string cond = InputNpy(test, 0);
  auto bound = RunCli("run " + model + " --bind cond=" + cond + " --out " + Path("out"));
  ASSERT_EQ(bound.exit_code, 0) << bound.out;
  auto got = ReadNpyFile(Path("out/res.npy"), {});
  ASSERT_TRUE(got.ok()) << got.status().message();
  auto want_bytes = consensor::ReadFileBytes((kData / test / "test_data_set_0" / "output_0.pb").string(), 1 << 20);
  ASSERT_TRUE(want_bytes.ok());
  auto want = executor::ParseOnnxTensor(*want_bytes, {});
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(got->shape(), want->shape());
  EXPECT_EQ(got->dtype(), want->dtype());
  EXPECT_TRUE(std::equal(got->bytes().begin(), got->bytes().end(), want->bytes().begin(), want->bytes().end()));

  // Unbound, both branches run and `where` selects (DETERMINISM.md 6.1): the same values.
  auto unbound = RunCli("run " + model + " --input cond=" + cond + " --out " + Path("selected"));
  ASSERT_EQ(unbound.exit_code, 0) << unbound.out;
  auto selected = ReadNpyFile(Path("selected/res.npy"), {});
  ASSERT_TRUE(selected.ok()) << selected.status().message();
  EXPECT_TRUE(
      std::equal(selected->bytes().begin(), selected->bytes().end(), want->bytes().begin(), want->bytes().end()));
  auto both = RunCli("run " + model + " --input cond=" + cond + " --bind cond=" + cond);
  EXPECT_EQ(both.exit_code, 1) << both.out;
  EXPECT_NE(both.out.find("both --bind and --input"), std::string::npos) << both.out;
}

// u16 inputs and output through `consensor run` (BitShift; a shift by 16 or more gives 0), a
// u16 .npy with too few bytes, and cuda-emu, which has no u16 kernels: clear errors, exit 1.
TEST_F(OnnxCliTest, UnsignedTensorsRunOnEveryBackendAndF64IsRefusedByCudaEmu) {
  const std::string model = (kData / "node/test_bitshift_right_uint16/model.onnx").string();
  ASSERT_TRUE(WriteNpyFile(Path("x.npy"), Tensor::FromVector<uint16_t>(DType::kU16, {3}, {65535, 4, 1})).ok());
  ASSERT_TRUE(WriteNpyFile(Path("y.npy"), Tensor::FromVector<uint16_t>(DType::kU16, {3}, {1, 2, 17})).ok());
  const std::string inputs = " --input x=" + Path("x.npy") + " --input y=" + Path("y.npy");
  auto r = RunCli("run " + model + inputs + " --out " + Path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("z u16[3]"), std::string::npos) << r.out;
  auto z = ReadNpyFile(Path("out/z.npy"), {});
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  ASSERT_EQ(z->dtype(), DType::kU16);
  EXPECT_EQ(std::vector<uint16_t>(z->data_as<uint16_t>(), z->data_as<uint16_t>() + 3),
            (std::vector<uint16_t>{32767, 1, 0}));

  auto file = consensor::ReadFileBytes(Path("x.npy"), 1 << 20);
  ASSERT_TRUE(file.ok());
  std::ofstream(Path("short.npy"), std::ios::binary)
      .write(reinterpret_cast<const char*>(file->data()), static_cast<std::streamsize>(file->size() - 3));
  auto short_input = RunCli("run " + model + " --input x=" + Path("short.npy") + " --input y=" + Path("y.npy"));
  EXPECT_EQ(short_input.exit_code, 1) << short_input.out;
  EXPECT_NE(short_input.out.find("truncated npy data: u16[3] needs 6 bytes, file has 3"), std::string::npos)
      << short_input.out;

  // cuda-emu gives the CPU's bits for the unsigned types (DETERMINISM.md 2)...
  auto emu = RunCli("run " + model + inputs + " --backend cuda-emu --out " + Path("emu"));
  ASSERT_EQ(emu.exit_code, 0) << emu.out;
  auto z_emu = ReadNpyFile(Path("emu/z.npy"), {});
  ASSERT_TRUE(z_emu.ok()) << z_emu.status().ToString();
  EXPECT_EQ(TensorHash(*z_emu), TensorHash(*z));
  // ...and refuses f64, which only the CPU runs, with the reason.
  ASSERT_TRUE(
      WriteNpyFile(Path("f.npy"), Tensor::FromVector<float>(DType::kF32, {3, 4}, std::vector<float>(12, 1.5f))).ok());
  auto f64 = RunCli("run " + (kData / "node/test_cast_FLOAT_to_DOUBLE/model.onnx").string() +
                    " --input input=" + Path("f.npy") + " --backend cuda-emu");
  EXPECT_EQ(f64.exit_code, 1) << f64.out;
  EXPECT_NE(f64.out.find("backend cuda-emu does not support"), std::string::npos) << f64.out;
}

TEST_F(OnnxCliTest, OnnxTestCountsAndExpectations) {
  auto r = RunCli("onnx-test " + (kData / "node").string() + " --filter test_softmax --verbose --report " +
                  Path("report.json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("PASS        node/test_softmax_axis_0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 0 failed"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(Path("report.json")));
  // An expectation file that disagrees makes it fail, naming the test.
  std::ofstream(Path("expect.txt")) << "node/test_softmax_axis_0 UNSUPPORTED  # wrong on purpose\n";
  auto mismatch =
      RunCli("onnx-test " + (kData / "node").string() + " --filter test_softmax_axis_0 --expect " + Path("expect.txt"));
  EXPECT_EQ(mismatch.exit_code, 1) << mismatch.out;
  EXPECT_NE(mismatch.out.find("UNEXPECTED  node/test_softmax_axis_0: PASS, expected UNSUPPORTED"), std::string::npos)
      << mismatch.out;
}

}  // namespace
}  // namespace consensor
