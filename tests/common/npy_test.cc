// Tests for common/npy: round trips, interoperability with real numpy (run at test time through
// /usr/bin/python3), strict rejection of malformed files, and a mutation fuzz test.
#include "common/npy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace consensor {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";

// A fresh directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/npy_test.XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    if (p) path_ = p;
  }
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

bool HaveNumpy() {
  static const bool have = [] {
    if (::access(kPython, X_OK) != 0) return false;
    std::string cmd = std::string(kPython) + " -c 'import numpy' >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }();
  return have;
}

// Runs a Python script (written to a file, with `dir` as argv[1]); returns its exit status and
// appends stdout+stderr to *output.
int RunPython(const TempDir& dir, const std::string& script, std::string* output) {
  std::string script_path = dir.file("script.py");
  std::string out_path = dir.file("script.out");
  WriteText(script_path, script);
  std::string cmd = std::string(kPython) + " '" + script_path + "' '" + dir.path() + "' >'" + out_path + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::vector<uint8_t> out = ReadAll(out_path);
  output->assign(out.begin(), out.end());
  return rc;
}

// Deterministic pseudo-random tensor contents (bool restricted to 0/1).
Tensor RandomTensor(DType dtype, const Shape& shape, std::mt19937_64& rng) {
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.byte_size(); ++i) {
    t.data()[i] = static_cast<uint8_t>(dtype == DType::kBool ? rng() & 1 : rng());
  }
  return t;
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.byte_size() == b.byte_size() &&
         (a.byte_size() == 0 || std::memcmp(a.data(), b.data(), a.byte_size()) == 0);
}

// Builds an npy file around an arbitrary header text (padded with spaces and '\n' like numpy).
std::vector<uint8_t> MakeNpy(const std::string& dict, std::span<const uint8_t> data, int major = 1,
                             bool add_newline = true) {
  std::string header = dict;
  if (add_newline) {
    size_t preamble = major == 1 ? 10 : 12;
    while ((preamble + header.size() + 1) % 64 != 0) header.push_back(' ');
    header.push_back('\n');
  }
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  uint32_t len = static_cast<uint32_t>(header.size());
  out.push_back(static_cast<uint8_t>(len));
  out.push_back(static_cast<uint8_t>(len >> 8));
  if (major != 1) {
    out.push_back(static_cast<uint8_t>(len >> 16));
    out.push_back(static_cast<uint8_t>(len >> 24));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> Bytes(size_t n, uint8_t v = 0) { return std::vector<uint8_t>(n, v); }

std::string Dict(const std::string& descr, const std::string& shape, const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

// Expects ParseNpy to fail with a message containing `needle`.
void ExpectError(std::span<const uint8_t> file, const std::string& needle, const NpyLimits& limits = {},
                 StatusCode code = StatusCode::kInvalidArgument) {
  StatusOr<Tensor> t = ParseNpy(file, limits);
  ASSERT_FALSE(t.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(t.status().code(), code) << t.status().ToString();
  EXPECT_NE(t.status().message().find(needle), std::string::npos)
      << "message '" << t.status().message() << "' lacks '" << needle << "'";
}

// ------------------------------------------------------------------------------------------
// Round trips

TEST(NpyTest, RoundTripEveryDtypeAndRank) {
  const std::vector<Shape> shapes = {
      {},        {1},       {7},          {0},          {3, 5},       {0, 4}, {4, 0},
      {2, 3, 4}, {2, 0, 3}, {1, 2, 3, 4}, {3, 1, 0, 2}, {2, 2, 2, 2}, {1000},  // first dim with several digits
  };
  std::mt19937_64 rng(1234);
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(shape));
      Tensor t = RandomTensor(dtype, shape, rng);
      std::vector<uint8_t> file = EncodeNpy(t);
      ASSERT_GE(file.size(), 10u);
      const size_t header_len = file[8] | (file[9] << 8);
      const size_t data_start = 10 + header_len;
      EXPECT_EQ(data_start % 64, 0u);
      EXPECT_EQ(file[data_start - 1], '\n');
      EXPECT_EQ(file.size(), data_start + static_cast<size_t>(t.byte_size()));
      StatusOr<Tensor> back = ParseNpy(file, NpyLimits{});
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_TRUE(SameTensor(t, *back));
      EXPECT_EQ(TensorHash(t), TensorHash(*back));
    }
  }
}

TEST(NpyTest, HeaderThenDataIsTheFileAndAValueOfTheWrongSizeEncodesNothing) {
  std::mt19937_64 rng(99);
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape : std::vector<Shape>{{}, {0}, {3, 5}, {1000, 2}}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(shape));
      const Tensor t = RandomTensor(dtype, shape, rng);
      const std::vector<uint8_t> file = EncodeNpy(t);
      EXPECT_EQ(EncodeNpy(t.dtype(), t.shape(), t.bytes()), file);
      std::vector<uint8_t> assembled = EncodeNpyHeader(t.dtype(), t.shape());
      assembled.insert(assembled.end(), t.bytes().begin(), t.bytes().end());
      EXPECT_EQ(assembled, file);
      if (t.byte_size() > 0)
        EXPECT_TRUE(EncodeNpy(t.dtype(), t.shape(), t.bytes().first(t.bytes().size() - 1)).empty());
      const std::vector<uint8_t> longer(static_cast<size_t>(t.byte_size()) + 1, 0);
      EXPECT_TRUE(EncodeNpy(t.dtype(), t.shape(), longer).empty());
    }
  }
  EXPECT_TRUE(EncodeNpyHeader(DType::kInvalid, {3}).empty());
}

TEST(NpyTest, HeaderTextMatchesNumpyConventions) {
  auto header_of = [](const Tensor& t) {
    std::vector<uint8_t> f = EncodeNpy(t);
    size_t len = f[8] | (f[9] << 8);
    std::string h(f.begin() + 10, f.begin() + 10 + len);
    return h.substr(0, h.find('}') + 1);
  };
  EXPECT_EQ(header_of(Tensor(DType::kF32, {3})), "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
  EXPECT_EQ(header_of(Tensor(DType::kBool, {})), "{'descr': '|b1', 'fortran_order': False, 'shape': (), }");
  EXPECT_EQ(header_of(Tensor(DType::kI8, {2, 0, 3})), "{'descr': '|i1', 'fortran_order': False, 'shape': (2, 0, 3), }");
  EXPECT_EQ(header_of(Tensor(DType::kI32, {1})), "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }");
  EXPECT_EQ(header_of(Tensor(DType::kI64, {5, 6})), "{'descr': '<i8', 'fortran_order': False, 'shape': (5, 6), }");
  // Exact bytes of np.save(np.zeros(3, np.float32)) (numpy 1.24), captured once.
  std::vector<uint8_t> f = EncodeNpy(Tensor(DType::kF32, {3}));
  std::string expected_header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }" + std::string(60, ' ') + "\n";
  ASSERT_EQ(f.size(), 128u + 12);
  EXPECT_EQ(f[8], 0x76);
  EXPECT_EQ(f[9], 0x00);
  EXPECT_EQ(std::string(f.begin() + 10, f.begin() + 128), expected_header);
}

TEST(NpyTest, FileRoundTripIsAtomicAndOverwrites) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string path = dir.file("t.npy");
  std::mt19937_64 rng(7);
  Tensor a = RandomTensor(DType::kF32, {4, 4}, rng);
  ASSERT_TRUE(WriteNpyFile(path, a).ok());
  StatusOr<Tensor> back = ReadNpyFile(path, NpyLimits{});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(SameTensor(a, *back));

  Tensor b = RandomTensor(DType::kBool, {9}, rng);
  ASSERT_TRUE(WriteNpyFile(path, b).ok());
  back = ReadNpyFile(path, NpyLimits{});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(SameTensor(b, *back));

  // No temporary files are left behind.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "t.npy");
  }
  EXPECT_EQ(entries, 1);
}

TEST(NpyTest, FileErrors) {
  TempDir dir;
  StatusOr<Tensor> missing = ReadNpyFile(dir.file("nope.npy"), NpyLimits{});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.npy"), std::string::npos);

  // A file larger than the limit is refused before it is read into memory.
  Tensor big(DType::kI8, {100000});
  ASSERT_TRUE(WriteNpyFile(dir.file("big.npy"), big).ok());
  StatusOr<Tensor> over = ReadNpyFile(dir.file("big.npy"), NpyLimits{.max_bytes = 1000});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(ReadNpyFile(dir.file("big.npy"), NpyLimits{.max_bytes = 100000}).ok());

  // Parse errors carry the path as context.
  std::vector<uint8_t> junk = {'h', 'e', 'l', 'l', 'o'};
  WriteAll(dir.file("junk.npy"), junk);
  StatusOr<Tensor> bad = ReadNpyFile(dir.file("junk.npy"), NpyLimits{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("junk.npy"), std::string::npos);
  EXPECT_NE(bad.status().message().find("magic"), std::string::npos);

  // Writing into a directory that does not exist fails cleanly; so does an invalid tensor.
  EXPECT_FALSE(WriteNpyFile(dir.file("no/such/dir/x.npy"), big).ok());
  EXPECT_FALSE(WriteNpyFile(dir.file("invalid.npy"), Tensor()).ok());
  EXPECT_TRUE(EncodeNpy(Tensor()).empty());
}

// ------------------------------------------------------------------------------------------
// Interoperability with numpy

TEST(NpyNumpyTest, ReadsFilesWrittenByNumpy) {
  if (!HaveNumpy()) GTEST_SKIP() << kPython << " with numpy is not available";
  TempDir dir;
  const std::string script = R"PY(
import sys, os
import numpy as np
from numpy.lib import format as npf
d = sys.argv[1]
sub = np.float32(1e-45)  # smallest subnormal
arrays = {
  'f32_scalar': np.array(3.5, dtype=np.float32),
  'f32_2x3': np.array([[0.0, -0.0, np.inf], [-np.inf, np.nan, sub]], dtype=np.float32),
  'f32_empty': np.zeros((0,), dtype=np.float32),
  'i32_vec': np.array([0, 1, -1, 2**31 - 1, -2**31], dtype=np.int32),
  'i32_zero_dim': np.zeros((2, 0, 3), dtype=np.int32),
  'i8_cube': (np.arange(8, dtype=np.int16) * 37 - 128).astype(np.int8).reshape(2, 2, 2),
  'bool_vec': np.array([True, False, True, True, False]),
  'bool_scalar': np.array(True),
  'i64_r4': (np.arange(6, dtype=np.int64) * (2**40) - 2**62).reshape(3, 1, 2, 1),
  'i64_big_first_dim': np.arange(1234, dtype=np.int64),
  'f32_strided': np.arange(20, dtype=np.float32).reshape(4, 5)[:, ::2],
  'f32_r8': np.arange(2**8, dtype=np.float32).reshape((2,) * 8),
  'u8_vec': np.array([0, 1, 200, 255], dtype=np.uint8),
  'i16_vec': np.array([0, -1, 2**15 - 1, -2**15], dtype=np.int16),
  'u16_mat': np.array([[0, 1], [2**15, 2**16 - 1]], dtype=np.uint16),
  'u32_vec': np.array([0, 2**31, 2**32 - 1], dtype=np.uint32),
  'u64_vec': np.array([0, 2**63, 2**64 - 1], dtype=np.uint64),
  'f64_vec': np.array([0.0, -0.0, np.inf, 0.1, np.nan, 5e-324], dtype=np.float64),
  'f16_vec': np.array([0.0, -0.0, np.inf, 0.1, np.nan, 6e-8, 65504.0], dtype=np.float16),
  'bf16_bits': np.array([0x3F80, 0x7FC0, 0x8001, 0xFF80], dtype=np.uint16).view('V2'),
}
names = {np.dtype('<f4'): 'f32', np.dtype('<i4'): 'i32', np.dtype('i1'): 'i8', np.dtype('?'): 'bool', np.dtype('<i8'): 'i64',
         np.dtype('u1'): 'u8', np.dtype('<i2'): 'i16', np.dtype('<u2'): 'u16', np.dtype('<u4'): 'u32', np.dtype('<u8'): 'u64',
         np.dtype('<f8'): 'f64', np.dtype('<f2'): 'f16', np.dtype('V2'): 'bf16'}
for name, a in arrays.items():
  for ver in [(1, 0), (2, 0), (3, 0)]:
    with open(os.path.join(d, '%s.v%d.npy' % (name, ver[0])), 'wb') as f:
      npf.write_array(f, a, version=ver, allow_pickle=False)
  np.save(os.path.join(d, name + '.save.npy'), a)
  with open(os.path.join(d, name + '.raw'), 'wb') as f:
    f.write(np.ascontiguousarray(a).tobytes())
  with open(os.path.join(d, name + '.meta'), 'w') as f:
    f.write(' '.join([names[a.dtype]] + [str(x) for x in a.shape]))
# Files that must be rejected.
np.save(os.path.join(d, 'rej_fortran.npy'), np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
np.save(os.path.join(d, 'rej_bigendian.npy'), np.arange(4, dtype='>f4'))
np.save(os.path.join(d, 'rej_f8be.npy'), np.arange(4, dtype='>f8'))
np.save(os.path.join(d, 'rej_f2be.npy'), np.arange(4, dtype='>f2'))
np.save(os.path.join(d, 'rej_v4.npy'), np.zeros(2, dtype='V4'))
np.save(os.path.join(d, 'rej_struct.npy'), np.zeros(2, dtype=[('a', '<i4'), ('b', '<f4')]))
with open(os.path.join(d, 'names.txt'), 'w') as f:
  f.write('\n'.join(arrays.keys()))
print('ok')
)PY";
  std::string out;
  ASSERT_EQ(RunPython(dir, script, &out), 0) << out;

  std::vector<uint8_t> names_bytes = ReadAll(dir.file("names.txt"));
  std::istringstream names_in(std::string(names_bytes.begin(), names_bytes.end()));
  std::string name;
  int checked = 0;
  while (std::getline(names_in, name)) {
    std::vector<uint8_t> meta_bytes = ReadAll(dir.file(name + ".meta"));
    std::istringstream meta(std::string(meta_bytes.begin(), meta_bytes.end()));
    std::string dtype_name;
    meta >> dtype_name;
    StatusOr<DType> dtype = DTypeFromName(dtype_name);
    ASSERT_TRUE(dtype.ok());
    Shape shape;
    for (int64_t d; meta >> d;) shape.push_back(d);
    std::vector<uint8_t> raw = ReadAll(dir.file(name + ".raw"));
    for (const char* suffix : {".v1.npy", ".v2.npy", ".v3.npy", ".save.npy"}) {
      SCOPED_TRACE(name + suffix);
      StatusOr<Tensor> t = ReadNpyFile(dir.file(name + suffix), NpyLimits{});
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      EXPECT_EQ(t->dtype(), *dtype);
      EXPECT_EQ(t->shape(), shape);
      ASSERT_EQ(static_cast<size_t>(t->byte_size()), raw.size());
      EXPECT_TRUE(raw.empty() || std::memcmp(t->data(), raw.data(), raw.size()) == 0);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 20 * 4);
  StatusOr<Tensor> h16 = ReadNpyFile(dir.file("f16_vec.v1.npy"), NpyLimits{});
  ASSERT_TRUE(h16.ok());
  EXPECT_EQ(h16->dtype(), DType::kF16);
  EXPECT_EQ(h16->data_as<uint16_t>()[3], 0x2E66u);  // 0.1 in binary16
  EXPECT_EQ(h16->data_as<uint16_t>()[6], 0x7BFFu);  // 65504
  StatusOr<Tensor> b16 = ReadNpyFile(dir.file("bf16_bits.save.npy"), NpyLimits{});
  ASSERT_TRUE(b16.ok());
  EXPECT_EQ(b16->dtype(), DType::kBF16);
  EXPECT_EQ(b16->data_as<uint16_t>()[0], 0x3F80u);

  // Spot-check decoded values, not just bytes.
  StatusOr<Tensor> f = ReadNpyFile(dir.file("f32_2x3.v2.npy"), NpyLimits{});
  ASSERT_TRUE(f.ok());
  const float* fv = f->data_as<float>();
  EXPECT_EQ(fv[0], 0.0f);
  EXPECT_TRUE(std::signbit(fv[1]));
  EXPECT_TRUE(std::isinf(fv[2]) && fv[2] > 0);
  EXPECT_TRUE(std::isnan(fv[4]));
  EXPECT_EQ(fv[5], std::numeric_limits<float>::denorm_min());
  StatusOr<Tensor> i = ReadNpyFile(dir.file("i32_vec.v1.npy"), NpyLimits{});
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->data_as<int32_t>()[3], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(i->data_as<int32_t>()[4], std::numeric_limits<int32_t>::min());
  StatusOr<Tensor> s = ReadNpyFile(dir.file("f32_strided.save.npy"), NpyLimits{});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->shape(), (Shape{4, 3}));
  EXPECT_EQ(s->data_as<float>()[4], 7.0f);  // row 1: 5, 7, 9
  StatusOr<Tensor> u = ReadNpyFile(dir.file("u64_vec.save.npy"), NpyLimits{});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->dtype(), DType::kU64);
  EXPECT_EQ(u->data_as<uint64_t>()[2], std::numeric_limits<uint64_t>::max());
  StatusOr<Tensor> d64 = ReadNpyFile(dir.file("f64_vec.save.npy"), NpyLimits{});
  ASSERT_TRUE(d64.ok());
  EXPECT_EQ(d64->dtype(), DType::kF64);
  EXPECT_EQ(d64->data_as<double>()[3], 0.1);
  EXPECT_TRUE(std::signbit(d64->data_as<double>()[1]));
  EXPECT_EQ(d64->data_as<double>()[5], std::numeric_limits<double>::denorm_min());
  StatusOr<Tensor> h = ReadNpyFile(dir.file("i16_vec.v1.npy"), NpyLimits{});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->data_as<int16_t>()[3], -32768);

  struct Rejected {
    const char* file;
    const char* needle;
  };
  for (const Rejected& r :
       {Rejected{"rej_fortran.npy", "Fortran"}, Rejected{"rej_bigendian.npy", "big-endian"},
        Rejected{"rej_f8be.npy", "big-endian"}, Rejected{"rej_f2be.npy", "big-endian"},
        Rejected{"rej_v4.npy", "unsupported npy dtype '|V4'"}, Rejected{"rej_struct.npy", "structured"}}) {
    StatusOr<Tensor> t = ReadNpyFile(dir.file(r.file), NpyLimits{});
    ASSERT_FALSE(t.ok()) << r.file;
    EXPECT_NE(t.status().message().find(r.needle), std::string::npos) << t.status().message();
  }
}

TEST(NpyNumpyTest, NumpyReadsOurFiles) {
  if (!HaveNumpy()) GTEST_SKIP() << kPython << " with numpy is not available";
  TempDir dir;
  struct Case {
    std::string name;
    DType dtype;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {"f32_scalar", DType::kF32, {}},       {"f32_vec", DType::kF32, {17}},
      {"f32_empty", DType::kF32, {0}},       {"i32_mat", DType::kI32, {3, 4}},
      {"i32_zero", DType::kI32, {2, 0}},     {"i8_r3", DType::kI8, {2, 3, 4}},
      {"bool_vec", DType::kBool, {10}},      {"bool_scalar", DType::kBool, {}},
      {"i64_r4", DType::kI64, {2, 1, 3, 2}}, {"f32_r8", DType::kF32, {2, 1, 2, 1, 2, 1, 2, 3}},
      {"i8_long", DType::kI8, {123456}},
  };
  std::mt19937_64 rng(99);
  std::string listing;
  for (const Case& c : cases) {
    Tensor t = RandomTensor(c.dtype, c.shape, rng);
    if (c.dtype == DType::kF32) {
      // Keep NaNs out so numpy's value comparison below is meaningful; bytes are compared too.
      for (int64_t k = 0; k < t.num_elements(); ++k)
        t.data_as<float>()[k] = static_cast<float>(rng() % 2001) * 0.25f - 250.0f;
      if (t.num_elements() > 1) t.data_as<float>()[1] = -0.0f;
    }
    ASSERT_TRUE(WriteNpyFile(dir.file(c.name + ".npy"), t).ok());
    WriteAll(dir.file(c.name + ".raw"), t.bytes());
    static const char* kNumpyNames[] = {"", "<f4", "<i4", "|i1", "|b1", "<i8"};
    listing.append(c.name).append(" ").append(kNumpyNames[static_cast<int>(c.dtype)]);
    for (int64_t d : c.shape) listing.append(" ").append(std::to_string(d));
    listing += "\n";
  }
  WriteText(dir.file("cases.txt"), listing);
  const std::string script = R"PY(
import sys, os, io
import numpy as np
d = sys.argv[1]
n = 0
for line in open(os.path.join(d, 'cases.txt')):
  parts = line.split()
  name, descr, shape = parts[0], parts[1], tuple(int(x) for x in parts[2:])
  path = os.path.join(d, name + '.npy')
  a = np.load(path, allow_pickle=False)
  raw = open(os.path.join(d, name + '.raw'), 'rb').read()
  assert a.dtype == np.dtype(descr), (name, a.dtype, descr)
  assert a.shape == shape, (name, a.shape, shape)
  assert a.flags['C_CONTIGUOUS']
  assert a.tobytes() == raw, name
  expected = np.frombuffer(raw, dtype=np.dtype(descr)).reshape(shape)
  assert np.array_equal(a, expected), name
  # Our encoding is byte-identical to np.save.
  buf = io.BytesIO()
  np.save(buf, a)
  ours = open(path, 'rb').read()
  assert buf.getvalue() == ours, (name, buf.getvalue()[:128], ours[:128])
  n += 1
print('checked', n)
)PY";
  std::string out;
  ASSERT_EQ(RunPython(dir, script, &out), 0) << out;
  EXPECT_NE(out.find("checked " + std::to_string(cases.size())), std::string::npos) << out;
}

// ------------------------------------------------------------------------------------------
// Malformed input

TEST(NpyMalformedTest, EmptyAndMagic) {
  ExpectError({}, "empty npy file");
  std::vector<uint8_t> good = EncodeNpy(Tensor(DType::kF32, {2}));
  std::vector<uint8_t> bad = good;
  bad[5] = 'Z';
  ExpectError(bad, "bad magic");
  bad = good;
  bad[0] = 0x92;
  ExpectError(bad, "bad magic");
  ExpectError(std::span<const uint8_t>(good.data(), 3), "bad magic");
  std::vector<uint8_t> text = {'{', '}', '\n'};
  ExpectError(text, "bad magic");
}

TEST(NpyMalformedTest, TruncatedPreambleAndHeader) {
  std::vector<uint8_t> good = EncodeNpy(Tensor(DType::kF32, {2}));
  ExpectError(std::span<const uint8_t>(good.data(), 6), "missing format version");
  ExpectError(std::span<const uint8_t>(good.data(), 7), "missing format version");
  ExpectError(std::span<const uint8_t>(good.data(), 9), "missing header length");
  ExpectError(std::span<const uint8_t>(good.data(), 10), "runs past the end");
  ExpectError(std::span<const uint8_t>(good.data(), 40), "runs past the end");
  std::vector<uint8_t> v2 = MakeNpy(Dict("<f4", "(2,)"), Bytes(8), 2);
  ExpectError(std::span<const uint8_t>(v2.data(), 11), "missing header length");
  ExpectError(std::span<const uint8_t>(v2.data(), 60), "runs past the end");
}

TEST(NpyMalformedTest, HeaderLengthPastEndOrTooLarge) {
  std::vector<uint8_t> f = MakeNpy(Dict("<f4", "(2,)"), Bytes(8));
  f[8] = 0xff;
  f[9] = 0x7f;
  ExpectError(f, "runs past the end");
  std::vector<uint8_t> v2 = MakeNpy(Dict("<f4", "(2,)"), Bytes(8), 2);
  v2[10] = 0x01;  // + 65536
  ExpectError(v2, "exceeds the maximum");
  v2[10] = 0;
  v2[11] = 0xff;  // ~4 GiB: must not allocate or read
  ExpectError(v2, "exceeds the maximum");
  // A real header just over 64 KiB (v2) is refused; one at the limit parses.
  std::string big_dict = Dict("<f4", "(2,)") + std::string(64 * 1024, ' ');
  ExpectError(MakeNpy(big_dict, Bytes(8), 2), "exceeds the maximum");
  std::string ok_dict = Dict("<f4", "(2,)");
  ok_dict += std::string(64 * 1024 - 1 - ok_dict.size(), ' ') + "\n";
  std::vector<uint8_t> at_limit = MakeNpy(ok_dict, Bytes(8), 2, /*add_newline=*/false);
  EXPECT_TRUE(ParseNpy(at_limit, NpyLimits{}).ok());
}

TEST(NpyMalformedTest, Versions) {
  std::vector<uint8_t> f = MakeNpy(Dict("<f4", "(2,)"), Bytes(8));
  f[6] = 4;
  ExpectError(f, "unsupported npy format version 4.0");
  f[6] = 0;
  ExpectError(f, "unsupported npy format version 0.0");
  f[6] = 1;
  f[7] = 1;
  ExpectError(f, "unsupported npy format version 1.1");
  EXPECT_TRUE(ParseNpy(MakeNpy(Dict("<f4", "(2,)"), Bytes(8), 2), NpyLimits{}).ok());
  EXPECT_TRUE(ParseNpy(MakeNpy(Dict("<f4", "(2,)"), Bytes(8), 3), NpyLimits{}).ok());
}

TEST(NpyMalformedTest, AcceptsPythonLiteralVariants) {
  // Double quotes, any key order, no trailing comma, extra whitespace, trailing comma in shape.
  for (const std::string& dict : {
           std::string("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}"),
           std::string("{'shape': (2, 3), 'descr': '<f4', 'fortran_order': False}"),
           std::string("{ 'descr' : '<f4' ,\n 'fortran_order' : False ,\t'shape' : ( 2 , 3 , ) , }"),
           std::string("{'descr':'<f4','fortran_order':False,'shape':(2,3,)}"),
       }) {
    StatusOr<Tensor> t = ParseNpy(MakeNpy(dict, Bytes(24)), NpyLimits{});
    ASSERT_TRUE(t.ok()) << dict << ": " << t.status().ToString();
    EXPECT_EQ(t->shape(), (Shape{2, 3}));
  }
  StatusOr<Tensor> i1 = ParseNpy(MakeNpy(Dict("i1", "(3,)"), Bytes(3)), NpyLimits{});
  ASSERT_TRUE(i1.ok()) << i1.status().ToString();
  EXPECT_EQ(i1->dtype(), DType::kI8);
  StatusOr<Tensor> zero = ParseNpy(MakeNpy(Dict("<i8", "(0,)"), {}), NpyLimits{});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->num_elements(), 0);
  StatusOr<Tensor> scalar = ParseNpy(MakeNpy(Dict("<i8", "()"), Bytes(8, 1)), NpyLimits{});
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->rank(), 0);
  EXPECT_EQ(scalar->data_as<int64_t>()[0], 0x0101010101010101LL);
}

TEST(NpyMalformedTest, BadDictSyntax) {
  struct Case {
    std::string dict;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,), }", "expected ',' or '}'"},
      {"'descr': '<f4', 'fortran_order': False, 'shape': (2,)", "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", "expected a quoted key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", "unexpected text after"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}}", "unexpected text after"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (2,)}", "expected ':'"},
      {"{'descr': '<f4\", 'fortran_order': False, 'shape': (2,)}", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x}", "unterminated string"},
      {"{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': (2,)}", "escape sequences"},
      {"{descr: '<f4', 'fortran_order': False, 'shape': (2,)}", "expected a quoted key"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}", "expected ':'"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': (2,)}", "expected a quoted dtype string"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}", "expected True or False"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", "expected True or False"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}", "expected True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", "is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", "not a list"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 2}", "expected a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}", "expected a non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (,)}", "expected a non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2L,)}", "invalid integer literal"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0x2,)}", "invalid integer literal"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (02,)}", "leading zeros"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (+2,)}", "expected a non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,}", "expected a non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ((2,),)}", "expected a non-negative integer"},
      {"{'descr': '<f4',, 'fortran_order': False, 'shape': (2,)}", "expected a quoted key"},
      {"{,}", "expected a quoted key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\x01", "invalid byte 0x01"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\xc3\xa9", "invalid byte 0xc3"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dict);
    ExpectError(MakeNpy(c.dict, Bytes(8)), c.needle);
  }
  // A header not terminated by '\n'.
  ExpectError(MakeNpy(Dict("<f4", "(2,)") + "   ", Bytes(8), 1, /*add_newline=*/false), "does not end with a newline");
  ExpectError(MakeNpy("", Bytes(8), 1, /*add_newline=*/false), "does not end with a newline");
  ExpectError(MakeNpy("", Bytes(8)), "expected '{'");
}

TEST(NpyMalformedTest, MissingExtraAndDuplicateKeys) {
  ExpectError(MakeNpy("{'descr': '<f4', 'fortran_order': False}", Bytes(4)), "missing key 'shape'");
  ExpectError(MakeNpy("{'descr': '<f4', 'shape': (1,)}", Bytes(4)), "missing key 'fortran_order'");
  ExpectError(MakeNpy("{'fortran_order': False, 'shape': (1,)}", Bytes(4)), "missing key 'descr'");
  ExpectError(MakeNpy("{}", Bytes(4)), "missing key");
  ExpectError(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", Bytes(4)),
              "unexpected key 'extra'");
  ExpectError(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'Shape': (1,)}", Bytes(4)),
              "unexpected key 'Shape'");
  ExpectError(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'shape': (1,)}", Bytes(4)),
              "duplicate key 'shape'");
  ExpectError(MakeNpy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", Bytes(4)),
              "duplicate key 'descr'");
  ExpectError(MakeNpy("{'descr': '<f4', 'fortran_order': True, 'fortran_order': False, 'shape': (1,)}", Bytes(4)),
              "duplicate key 'fortran_order'");
}

TEST(NpyMalformedTest, DtypesEndiannessAndOrder) {
  for (const char* descr : {"|f8", "|f2", "|V4", "|u2", "u4", "<u16", "|b2", "b1", "<b1", "=f4", "f4", "<c8", "|O",
                            "<U3", "|S4", "", "<f4 ", "<F4"}) {
    SCOPED_TRACE(descr);
    ExpectError(MakeNpy(Dict(descr, "(1,)"), Bytes(8)),
                "unsupported npy dtype '" + std::string(descr) +
                    "' (supported: <f4, <i4, |i1, |b1, <i8, |u1, <i2, <u2, <u4, <u8, <f8, <f2, |V2 for bf16)");
  }
  for (const char* descr : {">f4", ">i4", ">i8", ">i1", ">u2", ">i2", ">u8", ">f8"}) {
    SCOPED_TRACE(descr);
    ExpectError(MakeNpy(Dict(descr, "(1,)"), Bytes(8)), "big-endian npy arrays are not supported");
  }
  ExpectError(MakeNpy(Dict("<f4", "(2, 2)", "True"), Bytes(16)), "Fortran order");
  ExpectError(MakeNpy("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,)}", Bytes(4)), "structured");
}

TEST(NpyMalformedTest, BadShapes) {
  ExpectError(MakeNpy(Dict("<f4", "(-1,)"), Bytes(4)), "negative dimension");
  ExpectError(MakeNpy(Dict("<f4", "(2, -3)"), Bytes(4)), "negative dimension");
  ExpectError(MakeNpy(Dict("<f4", "(99999999999999999999,)"), Bytes(4)), "too large");
  ExpectError(MakeNpy(Dict("<f4", "(9223372036854775808,)"), Bytes(4)), "too large");
  // 2^62 elements is a valid count but far over the default limit; 2^63 - 1 is not a valid count.
  ExpectError(MakeNpy(Dict("<f4", "(4611686018427387904,)"), Bytes(4)), "over the limit", {},
              StatusCode::kResourceExhausted);
  ExpectError(MakeNpy(Dict("<f4", "(9223372036854775807,)"), Bytes(4)), "too many elements");
  ExpectError(MakeNpy(Dict("<f4", "(4294967296, 4294967296)"), Bytes(4)), "too many elements");
  ExpectError(MakeNpy(Dict("<i8", "(3037000500, 3037000500, 3037000500)"), Bytes(4)), "too many elements");
  ExpectError(MakeNpy(Dict("<f4", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), Bytes(4)), "maximum rank");
  EXPECT_TRUE(ParseNpy(MakeNpy(Dict("<f4", "(1, 1, 1, 1, 1, 1, 1, 1)"), Bytes(4)), NpyLimits{}).ok());
  // A zero dim makes the huge neighbours harmless: no data, no allocation.
  StatusOr<Tensor> z = ParseNpy(MakeNpy(Dict("<f4", "(0, 4611686018427387904)"), {}), NpyLimits{});
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  EXPECT_EQ(z->num_elements(), 0);
}

TEST(NpyMalformedTest, DataSizeMustBeExact) {
  ExpectError(MakeNpy(Dict("<f4", "(2, 3)"), Bytes(20)), "truncated npy data: f32[2, 3] needs 24 bytes, file has 20");
  ExpectError(MakeNpy(Dict("<f4", "(2, 3)"), {}), "needs 24 bytes, file has 0");
  ExpectError(MakeNpy(Dict("<i8", "()"), Bytes(7)), "needs 8 bytes, file has 7");
  // The new integer dtypes: a header that claims one with the wrong byte count.
  ExpectError(MakeNpy(Dict("<u2", "(3,)"), Bytes(5)), "truncated npy data: u16[3] needs 6 bytes, file has 5");
  ExpectError(MakeNpy(Dict("<i2", "(2, 2)"), Bytes(9)), "1 trailing bytes after the data");
  ExpectError(MakeNpy(Dict("<u8", "(2,)"), Bytes(12)), "needs 16 bytes, file has 12");
  ExpectError(MakeNpy(Dict("|u1", "(4,)"), Bytes(3)), "needs 4 bytes, file has 3");
  ExpectError(MakeNpy(Dict("<u4", "(1,)"), Bytes(8)), "4 trailing bytes");
  // f64: eight bytes an element.
  ExpectError(MakeNpy(Dict("<f8", "(2, 2)"), Bytes(31)), "truncated npy data: f64[2, 2] needs 32 bytes, file has 31");
  ExpectError(MakeNpy(Dict("<f8", "(1,)"), Bytes(12)), "4 trailing bytes");
  ExpectError(MakeNpy(Dict("<f4", "(2, 3)"), Bytes(25)), "1 trailing bytes after the data");
  ExpectError(MakeNpy(Dict("<f4", "(0,)"), Bytes(4)), "4 trailing bytes");
  ExpectError(MakeNpy(Dict("|b1", "()"), Bytes(2)), "trailing bytes");
  // A huge claimed shape with tiny data is rejected without allocating.
  ExpectError(MakeNpy(Dict("<f4", "(1000000000,)"), Bytes(16)), "needs 4000000000 bytes, file has 16");
}

TEST(NpyMalformedTest, SizeLimit) {
  std::vector<uint8_t> f = MakeNpy(Dict("<f4", "(5,)"), Bytes(20));
  ExpectError(f, "over the limit of 16 bytes", NpyLimits{.max_bytes = 16}, StatusCode::kResourceExhausted);
  EXPECT_TRUE(ParseNpy(f, NpyLimits{.max_bytes = 20}).ok());
  ExpectError(f, "over the limit", NpyLimits{.max_bytes = 0}, StatusCode::kResourceExhausted);
  ExpectError(f, "over the limit", NpyLimits{.max_bytes = -5}, StatusCode::kResourceExhausted);
  // Empty arrays are fine under any limit.
  EXPECT_TRUE(ParseNpy(MakeNpy(Dict("<f4", "(0, 7)"), {}), NpyLimits{.max_bytes = 0}).ok());
  // The default limit is 4 GiB.
  ExpectError(MakeNpy(Dict("<i8", "(536870913,)"), Bytes(8)), "over the limit of 4294967296 bytes", {},
              StatusCode::kResourceExhausted);
  ExpectError(MakeNpy(Dict("<i8", "(536870912,)"), Bytes(8)), "truncated npy data");
}

TEST(NpyMalformedTest, BoolBytesMustBeZeroOrOne) {
  std::vector<uint8_t> data = {0, 1, 1, 2};
  ExpectError(MakeNpy(Dict("|b1", "(4,)"), data), "bool element 3 has byte value 2");
  data = {0xff};
  ExpectError(MakeNpy(Dict("|b1", "()"), data), "byte value 255");
  data = {0, 1, 1, 0};
  EXPECT_TRUE(ParseNpy(MakeNpy(Dict("|b1", "(2, 2)"), data), NpyLimits{}).ok());
  // i8 has no such restriction.
  data = {0xff, 2};
  EXPECT_TRUE(ParseNpy(MakeNpy(Dict("|i1", "(2,)"), data), NpyLimits{}).ok());
}

// ------------------------------------------------------------------------------------------
// Fuzz: random mutations of valid files must never crash (this also runs under ASan/UBSan).

TEST(NpyFuzzTest, RandomMutationsNeverCrash) {
  std::mt19937_64 rng(20240601);
  std::vector<std::vector<uint8_t>> seeds;
  seeds.push_back(EncodeNpy(RandomTensor(DType::kF32, {2, 3}, rng)));
  seeds.push_back(EncodeNpy(RandomTensor(DType::kBool, {5}, rng)));
  seeds.push_back(EncodeNpy(RandomTensor(DType::kI64, {}, rng)));
  seeds.push_back(EncodeNpy(RandomTensor(DType::kI8, {2, 0, 3}, rng)));
  seeds.push_back(MakeNpy("{'shape': (3, 1,), \"descr\": '<i4', 'fortran_order': False}", Bytes(12), 2));
  seeds.push_back(MakeNpy(Dict("|i1", "(1, 2, 1, 2, 1, 2, 1, 2)"), Bytes(16), 3));
  const std::string interesting = "(),'\"{}:-0123456789 TrueFalse\n[]\\L.";
  NpyLimits limits{.max_bytes = 1 << 20};
  int ok_count = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> f = seeds[rng() % seeds.size()];
    const int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations && !f.empty(); ++m) {
      // Most mutations land in the preamble and header, where the parsing happens.
      size_t header_end = std::min<size_t>(f.size(), 128);
      size_t pos = (rng() % 4 != 0) ? rng() % header_end : rng() % f.size();
      switch (rng() % 6) {
        case 0: f[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: f[pos] = static_cast<uint8_t>(rng()); break;
        case 2: f[pos] = static_cast<uint8_t>(interesting[rng() % interesting.size()]); break;
        case 3: f.resize(rng() % (f.size() + 1)); break;
        case 4: f.erase(f.begin() + static_cast<std::ptrdiff_t>(pos)); break;
        case 5: f.insert(f.begin() + static_cast<std::ptrdiff_t>(pos), static_cast<uint8_t>(rng())); break;
      }
    }
    // An exactly sized heap copy, so any out-of-bounds read is caught by ASan.
    std::unique_ptr<uint8_t[]> exact(new uint8_t[f.size() + (f.empty() ? 1 : 0)]);
    if (!f.empty()) std::memcpy(exact.get(), f.data(), f.size());
    StatusOr<Tensor> t = ParseNpy(std::span<const uint8_t>(exact.get(), f.size()), limits);
    if (t.ok()) {
      ++ok_count;
      ASSERT_LE(static_cast<size_t>(t->byte_size()), f.size());
      ASSERT_LE(t->rank(), kMaxRank);
      if (t->dtype() == DType::kBool) {
        for (int64_t i = 0; i < t->num_elements(); ++i) ASSERT_LE(t->data()[i], 1);
      }
      // Whatever parsed must re-encode and parse back to the same tensor.
      StatusOr<Tensor> again = ParseNpy(EncodeNpy(*t), limits);
      ASSERT_TRUE(again.ok()) << again.status().ToString();
      ASSERT_TRUE(SameTensor(*t, *again));
    } else {
      ASSERT_FALSE(t.status().message().empty());
    }
  }
  // Some mutations (e.g. in the data or header padding) leave the file valid.
  EXPECT_GT(ok_count, 0);
}

}  // namespace
}  // namespace consensor

namespace consensor {
namespace {

TEST(NpyHeader, ValidatesFromThePrefixAlone) {
  Tensor t(DType::kF32, {300, 500});
  std::vector<uint8_t> file = EncodeNpy(t);
  NpyLimits limits;
  auto info = ParseNpyHeader(std::span<const uint8_t>(file.data(), 200), file.size(), limits);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->dtype, DType::kF32);
  EXPECT_EQ(info->shape, (Shape{300, 500}));
  EXPECT_EQ(info->data_bytes, 300 * 500 * 4);
  EXPECT_EQ(info->data_offset + info->data_bytes, static_cast<int64_t>(file.size()));
  // The size of the whole file must match the shape, though only the prefix was read.
  auto short_file = ParseNpyHeader(std::span<const uint8_t>(file.data(), 200), file.size() - 1, limits);
  EXPECT_EQ(short_file.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_file.status().message().find("truncated npy data"), std::string::npos);
  auto long_file = ParseNpyHeader(std::span<const uint8_t>(file.data(), 200), file.size() + 3, limits);
  EXPECT_NE(long_file.status().message().find("trailing bytes"), std::string::npos);
  // A prefix that stops inside the header is an error, not a read past the end.
  auto cut = ParseNpyHeader(std::span<const uint8_t>(file.data(), 20), file.size(), limits);
  EXPECT_EQ(cut.status().code(), StatusCode::kInvalidArgument);
  // The cap applies before anything is allocated.
  limits.max_bytes = 1000;
  EXPECT_EQ(ParseNpyHeader(std::span<const uint8_t>(file.data(), 200), file.size(), limits).status().code(),
            StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace consensor
