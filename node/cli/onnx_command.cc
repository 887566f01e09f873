#include "node/cli/onnx_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "common/npy.h"
#include "common/sha256.h"
#include "executor/onnx/import.h"
#include "executor/program.h"
#include "executor/runtime.h"
#include "executor/serialize.h"
#include "executor/validate.h"
#include "kernels/backend_factory.h"
#include "kernels/half.h"
#include "node/cli/cli_args.h"
#include "node/cli/model_file.h"

namespace consensor::node {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr char kImportUsage[] =
    R"(usage: consensor import MODEL.onnx --out DIR [--input NAME=FILE.npy]... [--shape NAME=D0,D1,...]...
                        [--bind NAME=FILE.npy]... [--inline-max BYTES] [--text]
       consensor import --list-ops

Imports an ONNX model: writes DIR/graph.pb (DIR/graph.pbtxt with --text), the weights as one
safetensors file DIR/<sha256> (so `--blobs DIR` finds it) with the link DIR/weights.safetensors,
and prints the graph's inputs, outputs and id. Inputs with symbolic dimensions take their
shapes from --shape, or from the .npy files given with --input. --bind fixes an input's value
at import (it becomes a constant): for inputs that steer shapes, such as a Reshape's target.
Constants up to --inline-max bytes (default 1024) stay inline in the graph. --list-ops prints
the ONNX ops the importer supports.
)";

constexpr char kOnnxTestUsage[] =
    R"(usage: consensor onnx-test DIR... [--filter TEXT] [--expect FILE] [--write-expect FILE]
                           [--report FILE.json] [--verbose] [--backend cpu|cuda|cuda-emu] [--device N]
                           [--isa auto|avx2|portable] [--threads N] [--rtol X] [--atol Y]
                           [--require-claimed]

Runs ONNX backend test cases: each DIR is a test (a folder with model.onnx and
test_data_set_*/{input,output}_*.pb) or a folder of tests, such as Debian's
/usr/share/libonnx-testdata/data/node. Every test is imported, run, and compared with its
expected outputs: floats within |got - want| <= atol + rtol * |want| (defaults: rtol 1e-3,
atol 1e-7, as the ONNX backend tests; f16 and bf16 at least one step of their format, rtol
2^-10 and 2^-7), NaN where NaN is expected; integers and bools exactly.
A test is PASS, FAIL, UNSUPPORTED (an op, dtype or attribute Consensor does not import; the
reason is printed) or NODATA (no test data sets). Exits 1 when any test fails, or when
--expect FILE is given and a test's outcome differs from the file's (the file lists every
test that does not pass, one `SUITE/TEST STATUS` per line; --write-expect writes it), or
with --require-claimed when a test whose ops are all supported does not pass for a reason
other than a dtype Consensor lacks or randomness.
)";

int Fail(std::ostream& err, const Status& s) {
  err << "error: " << s.message() << "\n";
  return kExitFailure;
}

int Usage(std::ostream& err, const std::string& message, const char* usage) {
  err << "error: " << message << "\n\n" << usage;
  return kExitUsage;
}

std::string TypeString(DType dtype, const Shape& shape) { return std::string(DTypeName(dtype)) + ShapeToString(shape); }

// Reads repeated `flag NAME=FILE.npy` values.
StatusOr<std::map<std::string, Tensor>> ReadInputs(const ParsedArgs& a, const std::string& flag) {
  ASSIGN_OR_RETURN(auto files, ParseNamedFiles(a.All(flag), flag));
  return ReadNpyFiles(files, NpyLimits{});
}

}  // namespace

int RunImportCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  ArgSpec spec;
  spec.value_options = {"--out", "--input", "--shape", "--bind", "--inline-max"};
  spec.flags = {"--text", "--list-ops", "--help"};
  auto parsed = ParseArgs(raw, spec);
  if (!parsed.ok()) return Usage(err, parsed.status().message(), kImportUsage);
  const ParsedArgs& a = *parsed;
  if (a.HasFlag("--help")) {
    out << kImportUsage;
    return kExitOk;
  }
  if (a.HasFlag("--list-ops")) {
    for (const auto& op : executor::SupportedOnnxOps()) out << op << "\n";
    return kExitOk;
  }
  if (a.positional.size() != 1) return Usage(err, "import takes exactly one MODEL.onnx argument", kImportUsage);
  auto dir = a.Option("--out");
  if (!dir) return Usage(err, "import needs --out DIR", kImportUsage);

  executor::OnnxImportOptions options;
  if (Status s = ParseShapeSpecs(a.All("--shape"), &options.input_shapes); !s.ok()) {
    return Usage(err, s.message(), kImportUsage);
  }
  auto inputs = ReadInputs(a, "--input");
  if (!inputs.ok()) return Fail(err, inputs.status());
  for (const auto& [name, t] : *inputs) {
    if (!options.input_shapes.emplace(name, t.shape()).second) {
      return Usage(err, "input '" + name + "' has both --shape and --input", kImportUsage);
    }
  }
  auto bound = ReadInputs(a, "--bind");
  if (!bound.ok()) return Fail(err, bound.status());
  options.constant_inputs = std::move(bound).value();
  if (auto v = a.Option("--inline-max")) {
    auto n = ParseIntOption(*v, "--inline-max", 0, int64_t{1} << 30);
    if (!n.ok()) return Usage(err, n.status().message(), kImportUsage);
    options.inline_max_bytes = *n;
  }
  auto imported = executor::ImportOnnxFile(a.positional[0], options);
  if (!imported.ok()) return Fail(err, imported.status());
  auto validated = executor::Validate(imported->graph, options.limits);
  if (!validated.ok()) return Fail(err, validated.status());

  if (Status s = consensor::CreateDirectories(*dir); !s.ok()) return Fail(err, s);
  const std::string graph_path = *dir + (a.HasFlag("--text") ? "/graph.pbtxt" : "/graph.pb");
  if (Status s = executor::SaveGraphFile(graph_path, imported->graph); !s.ok()) return Fail(err, s);
  std::string weights_path;
  if (!imported->weights.empty()) {
    const std::string hex = ToHex(imported->weights_sha256);
    weights_path = *dir + "/" + hex;
    if (Status s = consensor::WriteFileAtomic(weights_path, imported->weights); !s.ok()) return Fail(err, s);
    const std::string link = *dir + "/weights.safetensors";
    ::unlink(link.c_str());
    if (::symlink(hex.c_str(), link.c_str()) != 0) {
      return Fail(err, Internal("cannot create " + link + ": " + std::strerror(errno)));
    }
  }

  out << "model    " << a.positional[0] << " (opset " << imported->opset
      << (imported->producer.empty() ? "" : ", " + imported->producer) << ")\n";
  out << "graph    " << ToHex(validated->id) << "\n";
  for (int v : validated->placeholders) {
    out << "input    " << imported->graph.values()[v].name << " "
        << TypeString(validated->types[v].dtype, validated->types[v].shape) << "\n";
  }
  for (const auto& [name, v] : validated->outputs) {
    out << "output   " << name << " " << TypeString(validated->types[v].dtype, validated->types[v].shape) << "\n";
  }
  out << "ops      " << validated->order.size() << " (" << imported->folded_nodes << " ONNX nodes folded at import)\n";
  out << "wrote    " << graph_path << "\n";
  if (!weights_path.empty()) {
    out << "wrote    " << weights_path << " (safetensors, " << imported->weights.size() << " bytes)\n";
  }
  return kExitOk;
}

namespace {

struct TestOutcome {
  std::string name;    // SUITE/TEST
  std::string status;  // PASS, FAIL, UNSUPPORTED, NODATA
  std::string reason;
  std::vector<std::string> ops;
};

struct TestSettings {
  kernels::BackendOptions backend;
  double rtol = 1e-3;
  double atol = 1e-7;
};

bool IsFile(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

StatusOr<Tensor> ReadPbTensor(const std::filesystem::path& p) {
  ASSIGN_OR_RETURN(auto bytes, consensor::ReadFileBytes(p.string(), int64_t{1} << 30));
  auto t = executor::ParseOnnxTensor(bytes, executor::Limits{});
  if (!t.ok()) return t.status().WithContext(p.filename().string());
  return t;
}

// The tolerance check of one float output (f32 or f64), element by element.
template <typename T>
std::string CompareFloats(const T* g, const T* w, int64_t n, const TestSettings& s) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(w[i]) || std::isnan(g[i])) {
      if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    } else if (std::isinf(w[i]) || std::isinf(g[i])) {
      if (w[i] == g[i]) continue;
    } else if (std::fabs(static_cast<double>(g[i]) - w[i]) <= s.atol + s.rtol * std::fabs(static_cast<double>(w[i]))) {
      continue;
    }
    std::ostringstream m;
    m << std::setprecision(sizeof(T) == 8 ? 17 : 9) << "element " << i << " is " << g[i] << ", expected " << w[i];
    return m.str();
  }
  return "";
}

// The same bytes under another 2-byte dtype.
Tensor BitsAs(DType dtype, const Tensor& t) {
  Tensor out(dtype, t.shape());
  if (t.byte_size() > 0) std::memcpy(out.data(), t.data(), static_cast<size_t>(t.byte_size()));
  return out;
}

// Compares one output; returns an empty string when it matches. The suite stores BFLOAT16
// outputs as UINT16 bit patterns (numpy has no bfloat16), so those compare as bf16.
std::string Compare(const Tensor& got, const Tensor& want_as_stored, const TestSettings& s) {
  const Tensor want = got.dtype() == DType::kBF16 && want_as_stored.dtype() == DType::kU16
                          ? BitsAs(DType::kBF16, want_as_stored)
                          : want_as_stored;
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return "got " + TypeString(got.dtype(), got.shape()) + ", expected " + TypeString(want.dtype(), want.shape());
  }
  if (got.dtype() == DType::kF32) {
    return CompareFloats(got.data_as<float>(), want.data_as<float>(), got.num_elements(), s);
  }
  if (got.dtype() == DType::kF64) {
    return CompareFloats(got.data_as<double>(), want.data_as<double>(), got.num_elements(), s);
  }
  if (IsHalfDType(got.dtype())) {
    // Compared in f32, allowing one step of the 16-bit format: the reference may compute in
    // f16/bf16 itself, where Consensor computes in f32 and rounds once (DETERMINISM.md 1.3).
    const bool f16 = got.dtype() == DType::kF16;
    const int64_t n = got.num_elements();
    std::vector<float> g(static_cast<size_t>(n)), w(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t gb = got.data_as<uint16_t>()[i], wb = want.data_as<uint16_t>()[i];
      g[i] = f16 ? half::F16ToF32(gb) : half::BF16ToF32(gb);
      w[i] = f16 ? half::F16ToF32(wb) : half::BF16ToF32(wb);
    }
    TestSettings loose = s;
    loose.rtol = std::max(s.rtol, f16 ? 0x1p-10 : 0x1p-7);
    loose.atol = std::max(s.atol, f16 ? 0x1p-24 : 0x1p-133);
    return CompareFloats(g.data(), w.data(), n, loose);
  }
  if (std::memcmp(got.data(), want.data(), static_cast<size_t>(got.byte_size())) == 0) return "";
  for (int64_t i = 0; i < got.byte_size(); ++i) {
    if (got.data()[i] != want.data()[i]) return "differs at byte " + std::to_string(i);
  }
  return "";
}

TestOutcome RunOneTest(const std::filesystem::path& dir, const std::string& name, const TestSettings& settings) {
  TestOutcome o;
  o.name = name;
  auto unsupported_or_fail = [&](const Status& s) {
    o.status = s.code() == StatusCode::kUnimplemented ? "UNSUPPORTED" : "FAIL";
    o.reason = s.message();
    // The test's name already says which model it is.
    const std::string prefix = "model '" + (dir / "model.onnx").string() + "': ";
    if (o.reason.rfind(prefix, 0) == 0) o.reason = o.reason.substr(prefix.size());
    return o;
  };
  auto bytes = consensor::ReadFileBytes((dir / "model.onnx").string(), int64_t{1} << 30);
  if (!bytes.ok()) return unsupported_or_fail(bytes.status());
  auto info = executor::ReadOnnxModelInfo(*bytes);
  if (!info.ok()) return unsupported_or_fail(info.status());
  o.ops = info->op_types;
  if (info->non_tensor) {
    return unsupported_or_fail(Unimplemented("unsupported dtype: sequence, map or optional inputs or outputs"));
  }

  std::vector<std::filesystem::path> sets;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) {
      sets.push_back(entry.path());
    }
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) {
    o.status = "NODATA";
    o.reason = "no test_data_set_* folders";
    return o;
  }

  auto backend = kernels::CreateBackend(settings.backend);
  if (!backend.ok()) return unsupported_or_fail(backend.status());
  std::map<std::string, Shape> imported_shapes;
  std::map<std::string, Tensor> bound;  // inputs bound as constants at import
  std::optional<executor::Program> program;
  for (const auto& set : sets) {
    std::map<std::string, Tensor> inputs;
    std::map<std::string, Shape> shapes;
    for (size_t k = 0; IsFile(set / ("input_" + std::to_string(k) + ".pb")); ++k) {
      auto t = ReadPbTensor(set / ("input_" + std::to_string(k) + ".pb"));
      if (!t.ok()) return unsupported_or_fail(t.status());
      if (k >= info->inputs.size()) return unsupported_or_fail(InvalidArgument("more input files than model inputs"));
      // The suite's generator has no bfloat16 (numpy): its BFLOAT16 tests store bf16 data as
      // UINT16 bit patterns, read here as the model's bf16 input, and some give CastLike's
      // `like` a [1] tensor that contradicts the model's rank (ONNX Runtime refuses those too).
      const bool bf16_test = std::any_of(info->inputs.begin(), info->inputs.end(),
                                         [](const executor::OnnxInputInfo& i) { return i.dtype == DType::kBF16; });
      if (bf16_test && info->inputs[k].shape.size() != t->shape().size()) {
        return unsupported_or_fail(Unimplemented("unsupported dtype encoding: the BFLOAT16 test's data gives input '" +
                                                 info->inputs[k].name + "' as " + ShapeToString(t->shape()) +
                                                 ", not in the model's rank"));
      }
      if (info->inputs[k].dtype == DType::kBF16 && t->dtype() == DType::kU16) *t = BitsAs(DType::kBF16, *t);
      shapes[info->inputs[k].name] = t->shape();
      inputs.emplace(info->inputs[k].name, std::move(t).value());
    }
    std::vector<Tensor> expected;
    for (size_t k = 0; IsFile(set / ("output_" + std::to_string(k) + ".pb")); ++k) {
      auto t = ReadPbTensor(set / ("output_" + std::to_string(k) + ".pb"));
      if (!t.ok()) return unsupported_or_fail(t.status());
      expected.push_back(std::move(t).value());  // UINT16 for BFLOAT16: see Compare
    }
    if (expected.size() > info->outputs.size()) {
      return unsupported_or_fail(InvalidArgument("more output files than model outputs"));
    }
    if (!program || shapes != imported_shapes) {
      // Consensor needs shapes before a task runs, so inputs that steer them (a Reshape
      // target, ReduceSum's axes) are bound at import, as `consensor import --bind` does.
      auto imported = executor::ImportOnnxForValues(*bytes, inputs);
      if (!imported.ok()) return unsupported_or_fail(imported.status());
      bound = std::move(imported->bound);
      executor::MemoryBlobSource blobs;
      if (!imported->model.weights.empty()) blobs.Add(imported->model.weights);
      auto compiled = executor::CompileGraph(imported->model.graph, &blobs, executor::Limits{});
      if (!compiled.ok()) return unsupported_or_fail(compiled.status());
      program = std::move(compiled).value();
      imported_shapes = shapes;
    }
    for (const auto& [name, t] : bound) {
      auto it = inputs.find(name);
      if (it == inputs.end() || TensorHash(it->second) != TensorHash(t)) {
        return unsupported_or_fail(Unimplemented("unsupported: bound input '" + name + "' differs between data sets"));
      }
      inputs.erase(it);
    }
    auto loaded = executor::LoadedProgram::Load(*program, backend->get());
    if (!loaded.ok()) return unsupported_or_fail(loaded.status());
    auto result = (*loaded)->Run(inputs);
    if (!result.ok()) return unsupported_or_fail(result.status());
    for (size_t k = 0; k < expected.size(); ++k) {
      const std::string& out_name = info->outputs[k];
      auto it = std::find_if(result->outputs.begin(), result->outputs.end(),
                             [&](const executor::NamedTensor& t) { return t.name == out_name; });
      if (it == result->outputs.end()) return unsupported_or_fail(Internal("output '" + out_name + "' missing"));
      std::string diff = Compare(it->tensor, expected[k], settings);
      if (!diff.empty()) {
        o.status = "FAIL";
        o.reason = set.filename().string() + " output '" + out_name + "': " + diff;
        return o;
      }
    }
  }
  o.status = "PASS";
  return o;
}

// "unsupported op", "unsupported dtype", ... : the kind of an UNSUPPORTED reason, for counts.
std::string UnsupportedKind(const std::string& reason) {
  if (reason.find("unsupported op") != std::string::npos) return "op";
  if (reason.find("unsupported dtype") != std::string::npos) return "dtype";
  if (reason.find("random") != std::string::npos) return "random";
  return "feature";
}

// A test whose ops Consensor all claims to import must pass, unless a dtype Consensor does
// not have or randomness (which no two operators could agree on) is the reason.
bool ViolatesClaim(const TestOutcome& o, const std::set<std::string>& supported) {
  if (o.status == "FAIL") return true;
  if (o.status != "UNSUPPORTED" || o.ops.empty()) return false;
  for (const auto& op : o.ops) {
    if (!supported.count(op)) return false;
  }
  const std::string kind = UnsupportedKind(o.reason);
  return kind != "dtype" && kind != "random";
}

StatusOr<std::map<std::string, std::string>> ReadExpectations(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read '" + path + "'");
  std::map<std::string, std::string> expected;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, status;
    fields >> name >> status;
    if (name.empty() || (status != "UNSUPPORTED" && status != "NODATA" && status != "FAIL")) {
      return InvalidArgument(path + ":" + std::to_string(number) + ": expected 'SUITE/TEST UNSUPPORTED|NODATA|FAIL'");
    }
    expected[name] = status;
  }
  return expected;
}

}  // namespace

int RunOnnxTestCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  ArgSpec spec;
  spec.value_options = {"--filter", "--expect", "--write-expect", "--report", "--backend",
                        "--device", "--isa",    "--threads",      "--rtol",   "--atol"};
  spec.flags = {"--verbose", "--require-claimed", "--help"};
  auto parsed = ParseArgs(raw, spec);
  if (!parsed.ok()) return Usage(err, parsed.status().message(), kOnnxTestUsage);
  const ParsedArgs& a = *parsed;
  if (a.HasFlag("--help")) {
    out << kOnnxTestUsage;
    return kExitOk;
  }
  if (a.positional.empty()) return Usage(err, "onnx-test needs at least one DIR", kOnnxTestUsage);
  TestSettings settings;
  auto flags = ParseBackendFlags(a);
  if (!flags.ok()) return Usage(err, flags.status().message(), kOnnxTestUsage);
  settings.backend = *flags;
  for (auto [flag, field] : {std::pair{"--rtol", &settings.rtol}, std::pair{"--atol", &settings.atol}}) {
    if (auto v = a.Option(flag)) {
      char* end = nullptr;
      double d = std::strtod(v->c_str(), &end);
      if (end == v->c_str() || *end != '\0' || !(d >= 0) || d > 1) {
        return Usage(err, std::string(flag) + " must be a number in [0, 1], got '" + *v + "'", kOnnxTestUsage);
      }
      *field = d;
    }
  }
  std::optional<std::map<std::string, std::string>> expectations;
  if (auto path = a.Option("--expect")) {
    auto e = ReadExpectations(*path);
    if (!e.ok()) return Fail(err, e.status());
    expectations = std::move(e).value();
  }

  // Collect the tests: a folder with model.onnx is one; otherwise its subfolders that have one.
  std::vector<std::pair<std::string, std::filesystem::path>> tests;
  for (const std::string& arg : a.positional) {
    std::filesystem::path dir(arg);
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) return Fail(err, NotFound("'" + arg + "' is not a directory"));
    while (!dir.empty() && dir.filename().empty()) dir = dir.parent_path();  // trailing slash
    if (IsFile(dir / "model.onnx")) {
      tests.emplace_back(dir.parent_path().filename().string() + "/" + dir.filename().string(), dir);
      continue;
    }
    std::vector<std::filesystem::path> subdirs;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.is_directory() && IsFile(entry.path() / "model.onnx")) subdirs.push_back(entry.path());
    }
    std::sort(subdirs.begin(), subdirs.end());
    for (const auto& s : subdirs) tests.emplace_back(dir.filename().string() + "/" + s.filename().string(), s);
  }
  if (auto f = a.Option("--filter")) {
    std::erase_if(tests, [&](const auto& t) { return t.first.find(*f) == std::string::npos; });
  }
  if (tests.empty()) return Fail(err, NotFound("no ONNX tests (folders with model.onnx) found"));

  std::map<std::string, int> counts;
  std::map<std::string, int> unsupported_kinds;
  std::vector<TestOutcome> outcomes;
  for (const auto& [name, dir] : tests) {
    TestOutcome o = RunOneTest(dir, name, settings);
    ++counts[o.status];
    if (o.status == "UNSUPPORTED") ++unsupported_kinds[UnsupportedKind(o.reason)];
    if (o.status != "PASS" || a.HasFlag("--verbose")) {
      out << std::left << std::setw(12) << o.status << o.name << (o.reason.empty() ? "" : ": " + o.reason) << "\n";
    }
    outcomes.push_back(std::move(o));
  }

  int mismatches = 0;
  if (expectations) {
    std::set<std::string> seen;
    for (const auto& o : outcomes) {
      seen.insert(o.name);
      auto it = expectations->find(o.name);
      const std::string want = it == expectations->end() ? "PASS" : it->second;
      if (want != o.status) {
        ++mismatches;
        out << "UNEXPECTED  " << o.name << ": " << o.status << ", expected " << want << "\n";
      }
    }
  }
  int claim_violations = 0;
  if (a.HasFlag("--require-claimed")) {
    const auto ops = executor::SupportedOnnxOps();
    const std::set<std::string> supported(ops.begin(), ops.end());
    for (const auto& o : outcomes) {
      if (ViolatesClaim(o, supported)) {
        ++claim_violations;
        out << "CLAIMED     " << o.name << " uses only supported ops but is " << o.status << ": " << o.reason << "\n";
      }
    }
  }
  out << "\n"
      << outcomes.size() << " tests: " << counts["PASS"] << " passed, " << counts["FAIL"] << " failed, "
      << counts["UNSUPPORTED"] << " unsupported (" << unsupported_kinds["op"] << " op, " << unsupported_kinds["dtype"]
      << " dtype, " << unsupported_kinds["random"] << " random, " << unsupported_kinds["feature"]
      << " attribute or feature), " << counts["NODATA"] << " without data\n";
  if (a.HasFlag("--require-claimed")) out << claim_violations << " tests of supported ops do not pass\n";
  if (expectations) out << mismatches << " outcomes differ from " << *a.Option("--expect") << "\n";

  if (auto path = a.Option("--write-expect")) {
    std::ostringstream text;
    text << "# ONNX tests that do not pass, written by `consensor onnx-test --write-expect`.\n"
         << "# Every test not listed here must pass. Format: SUITE/TEST STATUS  # reason\n";
    for (const auto& o : outcomes) {
      if (o.status == "PASS") continue;
      std::string reason = o.reason;
      std::replace(reason.begin(), reason.end(), '\n', ' ');
      text << o.name << " " << o.status << "  # " << reason << "\n";
    }
    const std::string s = text.str();
    if (Status st = consensor::WriteFileAtomic(*path, {reinterpret_cast<const uint8_t*>(s.data()), s.size()});
        !st.ok()) {
      return Fail(err, st);
    }
  }
  if (auto path = a.Option("--report")) {
    nlohmann::json report;
    report["counts"] = counts;
    report["unsupported_kinds"] = unsupported_kinds;
    report["tests"] = nlohmann::json::array();
    for (const auto& o : outcomes) {
      report["tests"].push_back({{"name", o.name}, {"status", o.status}, {"reason", o.reason}, {"ops", o.ops}});
    }
    const std::string s = report.dump(1);
    if (Status st = consensor::WriteFileAtomic(*path, {reinterpret_cast<const uint8_t*>(s.data()), s.size()});
        !st.ok()) {
      return Fail(err, st);
    }
  }
  if (claim_violations > 0) return kExitFailure;
  if (expectations) return mismatches == 0 ? kExitOk : kExitFailure;
  return counts["FAIL"] == 0 ? kExitOk : kExitFailure;
}

}  // namespace consensor::node
