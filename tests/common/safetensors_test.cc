// Strict safetensors reader/writer: round trips, a hand-built file, hostile input, and a
// deterministic mutation fuzz loop.
#include "common/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace consensor {
namespace {

std::vector<uint8_t> LengthPrefix(uint64_t n) {
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  return out;
}

// 8-byte little-endian header length + header text + data bytes.
std::vector<uint8_t> MakeFile(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = LengthPrefix(header.size());
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// One header entry: "name":{"dtype":..,"shape":..,"data_offsets":[b,e]}
std::string Entry(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t b, uint64_t e) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(b) + "," + std::to_string(e) + "]}";
}

std::vector<uint8_t> Zeros(size_t n) { return std::vector<uint8_t>(n, 0); }

TEST(SafetensorsTest, RoundTripAllDTypes) {
  Tensor f32 = Tensor::FromVector<float>(DType::kF32, {2, 3}, {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-7f});
  Tensor i32 = Tensor::FromVector<int32_t>(DType::kI32, {4}, {1, -2, 2147483647, -2147483647 - 1});
  Tensor i8 = Tensor::FromVector<int8_t>(DType::kI8, {}, {-7});  // rank 0
  Tensor boolean = Tensor::FromVector<uint8_t>(DType::kBool, {3, 1}, {1, 0, 1});
  Tensor i64 = Tensor::FromVector<int64_t>(DType::kI64, {2}, {int64_t{1} << 40, -5});
  Tensor empty_i64(DType::kI64, {2, 0});  // zero-size
  Tensor empty_f32(DType::kF32, {0});
  Tensor u8 = Tensor::FromVector<uint8_t>(DType::kU8, {3}, {0, 200, 255});
  Tensor i16 = Tensor::FromVector<int16_t>(DType::kI16, {2}, {-32768, 7});
  Tensor u16 = Tensor::FromVector<uint16_t>(DType::kU16, {1, 2}, {65535, 1});
  Tensor u32 = Tensor::FromVector<uint32_t>(DType::kU32, {1}, {4294967295u});
  Tensor u64 = Tensor::FromVector<uint64_t>(DType::kU64, {2}, {uint64_t{1} << 63, 3});
  Tensor f64 = Tensor::FromVector<double>(DType::kF64, {3}, {0.1, -0.0, 4.9406564584124654e-324});
  Tensor f16 = Tensor::FromVector<uint16_t>(DType::kF16, {2, 2}, {0x3C00, 0x7E01, 0x0001, 0xFBFF});
  Tensor bf16 = Tensor::FromVector<uint16_t>(DType::kBF16, {3}, {0x3F80, 0xFFC1, 0x8001});
  std::vector<std::pair<std::string, const Tensor*>> tensors = {
      {"layer.0.weight", &f32},
      {"ids", &i32},
      {"scalar", &i8},
      {"mask", &boolean},
      {"empty", &empty_i64},
      {"big", &i64},
      {"empty_too", &empty_f32},
      {"u8", &u8},
      {"i16", &i16},
      {"u16", &u16},
      {"u32", &u32},
      {"u64", &u64},
      {"f64", &f64},
      {"f16", &f16},
      {"bf16", &bf16},
  };
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "caf\xc3\xa9 \"quoted\"\n"}};
  auto file = WriteSafetensors(tensors, metadata);
  ASSERT_TRUE(file.ok()) << file.status().ToString();

  auto index = ParseSafetensors(*file);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->data_start % 8, 0);
  EXPECT_EQ(index->metadata, metadata);
  ASSERT_EQ(index->entries.size(), tensors.size());

  // Data is laid out back to back in the given order.
  int64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const SafetensorsEntry* e = index->Find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->name, name);
    EXPECT_EQ(e->dtype, t->dtype()) << name;
    EXPECT_EQ(e->shape, t->shape()) << name;
    EXPECT_EQ(e->begin, offset) << name;
    EXPECT_EQ(e->end, offset + t->byte_size()) << name;
    offset += t->byte_size();

    auto back = ReadSafetensorsTensor(*file, *index, name);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().ToString();
    EXPECT_EQ(back->dtype(), t->dtype());
    EXPECT_EQ(back->shape(), t->shape());
    ASSERT_EQ(back->byte_size(), t->byte_size());
    EXPECT_EQ(0, std::memcmp(back->data(), t->data(), t->byte_size())) << name;
    EXPECT_EQ(ToHex(TensorHash(*back)), ToHex(TensorHash(*t))) << name;
  }
  EXPECT_EQ(static_cast<int64_t>(file->size()), index->data_start + offset);
  for (size_t i = 1; i < index->entries.size(); ++i) {
    EXPECT_LE(index->entries[i - 1].end, index->entries[i].begin);
  }
  EXPECT_EQ(index->Find("missing"), nullptr);
  auto missing = ReadSafetensorsTensor(*file, *index, "missing");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'missing'"), std::string::npos) << missing.status().message();

  // Writing what was read gives the same bytes.
  std::vector<Tensor> read;
  for (const auto& [name, t] : tensors) read.push_back(*ReadSafetensorsTensor(*file, *index, name));
  std::vector<std::pair<std::string, const Tensor*>> again;
  for (size_t i = 0; i < tensors.size(); ++i) again.emplace_back(tensors[i].first, &read[i]);
  auto file2 = WriteSafetensors(again, index->metadata);
  ASSERT_TRUE(file2.ok());
  EXPECT_EQ(*file, *file2);
}

TEST(SafetensorsTest, EmptyFile) {
  auto file = WriteSafetensors({});
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file, MakeFile("{}      ", {}));
  auto index = ParseSafetensors(*file);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_TRUE(index->entries.empty());
  EXPECT_TRUE(index->metadata.empty());
  EXPECT_EQ(index->data_start, 16);

  auto bare = ParseSafetensors(MakeFile("{}", {}));
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(bare->data_start, 10);
}

TEST(SafetensorsTest, WriterBytesExact) {
  Tensor a = Tensor::FromVector<float>(DType::kF32, {2}, {1.0f, -2.0f});
  auto file = WriteSafetensors({{"a", &a}});
  ASSERT_TRUE(file.ok());
  // 54 bytes of JSON padded with two spaces so the data starts at 8 + 56 = 64.
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  )";
  std::vector<uint8_t> expected = MakeFile(header, {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0});
  EXPECT_EQ(*file, expected);

  Tensor b = Tensor::FromVector<int8_t>(DType::kI8, {}, {-3});
  auto with_meta = WriteSafetensors({{"a", &a}, {"b", &b}}, {{"format", "pt"}});
  ASSERT_TRUE(with_meta.ok());
  // 136 bytes: already a multiple of 8, no padding.
  const std::string header2 = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"I8","shape":[],"data_offsets":[8,9]}})";
  EXPECT_EQ(*with_meta, MakeFile(header2, {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0xfd}));
}

TEST(SafetensorsTest, ParsesHandWrittenFile) {
  // Keys in no particular order, whitespace, metadata in the middle, a zero-size tensor.
  const std::string header =
      "{ \"b\" : {\"shape\": [1, 1], \"dtype\": \"I8\", \"data_offsets\": [8, 9]},\n"
      "  \"__metadata__\": {\"who\": \"hand\", \"empty\": \"\"},\n"
      "  \"z\": {\"data_offsets\": [9, 9], \"dtype\": \"I64\", \"shape\": [0, 5]},\n"
      "  \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},\n"
      "  \"m\": {\"dtype\": \"BOOL\", \"shape\": [2], \"data_offsets\": [9, 11]},\n"
      "  \"i\": {\"dtype\": \"I32\", \"shape\": [], \"data_offsets\": [11, 15]} }\t\n ";
  const std::vector<uint8_t> data = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0,  // a: 1, -2
                                     0xfd,                                            // b: -3
                                     0x01, 0x00,                                      // m: true, false
                                     0x2a, 0x00, 0x00, 0x00};                         // i: 42
  const std::vector<uint8_t> file = MakeFile(header, data);
  auto index = ParseSafetensors(file);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->data_start, static_cast<int64_t>(8 + header.size()));
  EXPECT_EQ(index->metadata, (std::map<std::string, std::string>{{"who", "hand"}, {"empty", ""}}));
  ASSERT_EQ(index->entries.size(), 5u);
  std::vector<std::string> order;
  for (const auto& e : index->entries) order.push_back(e.name);
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "z", "m", "i"}));  // by offset, then end

  const SafetensorsEntry* b = index->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kI8);
  EXPECT_EQ(b->shape, (Shape{1, 1}));
  EXPECT_EQ(b->begin, 8);
  EXPECT_EQ(b->end, 9);

  auto a = ReadSafetensorsTensor(file, *index, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->data_as<float>()[0], 1.0f);
  EXPECT_EQ(a->data_as<float>()[1], -2.0f);
  EXPECT_EQ(ReadSafetensorsTensor(file, *index, "b")->data_as<int8_t>()[0], -3);
  auto m = ReadSafetensorsTensor(file, *index, "m");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->data()[0], 1);
  EXPECT_EQ(m->data()[1], 0);
  auto z = ReadSafetensorsTensor(file, *index, "z");
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->shape(), (Shape{0, 5}));
  EXPECT_EQ(z->num_elements(), 0);
  auto i = ReadSafetensorsTensor(file, *index, "i");
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->rank(), 0);
  EXPECT_EQ(i->data_as<int32_t>()[0], 42);
}

struct HostileCase {
  std::string name;
  std::vector<uint8_t> file;
  StatusCode code;
  std::string message;  // substring of the error
  SafetensorsLimits limits = {};
};

std::vector<HostileCase> HostileCases() {
  const std::string f32_2 = Entry("a", "F32", "[2]", 0, 8);
  std::vector<HostileCase> c;
  auto add = [&](std::string name, std::vector<uint8_t> file, StatusCode code, std::string message,
                 SafetensorsLimits limits = {}) {
    c.push_back({std::move(name), std::move(file), code, std::move(message), limits});
  };
  const auto kInvalid = StatusCode::kInvalidArgument;

  add("empty file", {}, kInvalid, "too short");
  add("truncated length", {4, 0, 0, 0, 0}, kInvalid, "too short");
  {
    std::vector<uint8_t> f = LengthPrefix(uint64_t{200} << 20);
    f.push_back('{');
    add("header over the cap", f, StatusCode::kResourceExhausted, "exceeds the limit");
  }
  add("length 2^64-1", LengthPrefix(~uint64_t{0}), StatusCode::kResourceExhausted, "exceeds the limit");
  {
    std::vector<uint8_t> f = LengthPrefix(100);
    std::string h = "{}";
    f.insert(f.end(), h.begin(), h.end());
    add("header length past the end", f, kInvalid, "runs past the end of the file");
  }
  {
    SafetensorsLimits small;
    small.max_header_bytes = 4;
    add("custom header cap", MakeFile("{}      ", {}), StatusCode::kResourceExhausted, "exceeds the limit", small);
  }
  add("zero-length header", MakeFile("", {}), kInvalid, "does not start with '{'");
  add("header not JSON", MakeFile("{not json}", {}), kInvalid, "not valid JSON");
  add("unterminated JSON", MakeFile("{\"a\":", {}), kInvalid, "not valid JSON");
  add("text after the object", MakeFile("{} x", {}), kInvalid, "not valid JSON");
  add("two objects", MakeFile("{}{}", {}), kInvalid, "not valid JSON");
  add("JSON comment", MakeFile("{/* c */}", {}), kInvalid, "not valid JSON");
  add("header JSON array", MakeFile("[1, 2]", {}), kInvalid, "does not start with '{'");
  add("leading whitespace", MakeFile(" {}", {}), kInvalid, "does not start with '{'");
  add("invalid UTF-8", MakeFile("{\"\xff\":1}", {}), kInvalid, "not valid UTF-8");
  add("overlong UTF-8", MakeFile("{\"\xc0\xaf\":1}", {}), kInvalid, "not valid UTF-8");
  add("UTF-8 surrogate", MakeFile("{\"\xed\xa0\x80\":1}", {}), kInvalid, "not valid UTF-8");
  add("duplicate tensor names",
      MakeFile("{" + Entry("a", "F32", "[1]", 0, 4) + "," + Entry("a", "F32", "[1]", 4, 8) + "}", Zeros(8)), kInvalid,
      "duplicate tensor name 'a'");
  add("duplicate metadata key", MakeFile(R"({"__metadata__":{},"__metadata__":{}})", {}), kInvalid,
      "duplicate key '__metadata__'");
  add("duplicate key inside an entry",
      MakeFile(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", Zeros(8)), kInvalid,
      "duplicate key 'dtype' in the value of 'a'");
  add("duplicate metadata entry", MakeFile(R"({"__metadata__":{"k":"1","k":"2"}})", {}), kInvalid, "duplicate key 'k'");
  add("entry not an object", MakeFile(R"({"a":[0,8]})", Zeros(8)), kInvalid, "entry must be an object");
  add("missing dtype", MakeFile(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", Zeros(8)), kInvalid,
      "tensor 'a' is missing 'dtype'");
  add("missing shape", MakeFile(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", Zeros(8)), kInvalid,
      "tensor 'a' is missing 'shape'");
  add("missing data_offsets", MakeFile(R"({"a":{"dtype":"F32","shape":[2]}})", Zeros(8)), kInvalid,
      "tensor 'a' is missing 'data_offsets'");
  add("extra key", MakeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"foo":1}})", Zeros(8)), kInvalid,
      "tensor 'a' has unknown key 'foo'");
  add("wrong dtype string", MakeFile("{" + Entry("a", "FLOAT32", "[2]", 0, 8) + "}", Zeros(8)), kInvalid,
      "tensor 'a' has unknown dtype 'FLOAT32'");
  add("lowercase dtype", MakeFile("{" + Entry("a", "f32", "[2]", 0, 8) + "}", Zeros(8)), kInvalid,
      "unknown dtype 'f32'");
  add("dtype not a string", MakeFile(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", Zeros(8)), kInvalid,
      "'dtype' must be a string");
  add("F8_E4M3", MakeFile("{" + Entry("x", "F8_E4M3", "[2]", 0, 2) + "}", Zeros(2)), StatusCode::kUnimplemented,
      "tensor 'x' has dtype F8_E4M3, which consensor does not support (supported: F32, I32, I8, BOOL, I64, U8, I16, "
      "U16, U32, U64, F64, F16, BF16)");
  add("F16 short", MakeFile("{" + Entry("x", "F16", "[2]", 0, 3) + "}", Zeros(3)), kInvalid,
      "tensor 'x' (f16[2]) has data_offsets [0, 3] spanning 3 bytes, but its shape needs 4 bytes");
  add("BF16 long", MakeFile("{" + Entry("x", "BF16", "[2]", 0, 8) + "}", Zeros(8)), kInvalid,
      "tensor 'x' (bf16[2]) has data_offsets [0, 8] spanning 8 bytes, but its shape needs 4 bytes");
  add("F64 short", MakeFile("{" + Entry("x", "F64", "[2]", 0, 12) + "}", Zeros(12)), kInvalid,
      "tensor 'x' (f64[2]) has data_offsets [0, 12] spanning 12 bytes, but its shape needs 16 bytes");
  // The new integer dtypes with a byte count that does not match the shape.
  add("U16 short", MakeFile("{" + Entry("x", "U16", "[3]", 0, 5) + "}", Zeros(5)), kInvalid,
      "tensor 'x' (u16[3]) has data_offsets [0, 5] spanning 5 bytes, but its shape needs 6 bytes");
  add("U64 short", MakeFile("{" + Entry("x", "U64", "[2]", 0, 8) + "}", Zeros(8)), kInvalid,
      "tensor 'x' (u64[2]) has data_offsets [0, 8] spanning 8 bytes, but its shape needs 16 bytes");
  add("I16 long", MakeFile("{" + Entry("x", "I16", "[1]", 0, 4) + "}", Zeros(4)), kInvalid,
      "tensor 'x' (i16[1]) has data_offsets [0, 4] spanning 4 bytes, but its shape needs 2 bytes");
  add("U8 past the buffer", MakeFile("{" + Entry("x", "U8", "[4]", 0, 4) + "}", Zeros(3)), kInvalid,
      "run past the end of the data buffer");
  add("U32 byte-count overflow", MakeFile("{" + Entry("x", "U32", "[4611686018427387904]", 0, 0) + "}", {}), kInvalid,
      "more than 2^64");
  add("negative dim", MakeFile("{" + Entry("a", "F32", "[-1]", 0, 8) + "}", Zeros(8)), kInvalid,
      "not a non-negative integer");
  add("float dim", MakeFile("{" + Entry("a", "F32", "[2.0]", 0, 8) + "}", Zeros(8)), kInvalid,
      "not a non-negative integer");
  add("string dim", MakeFile("{" + Entry("a", "F32", "[\"2\"]", 0, 8) + "}", Zeros(8)), kInvalid,
      "not a non-negative integer");
  add("dim past 2^64", MakeFile("{" + Entry("a", "F32", "[18446744073709551616]", 0, 8) + "}", Zeros(8)), kInvalid,
      "not a non-negative integer");
  add("dim past int64", MakeFile("{" + Entry("a", "F32", "[9223372036854775808]", 0, 8) + "}", Zeros(8)), kInvalid,
      "too large");
  add("shape not an array", MakeFile("{" + Entry("a", "F32", "2", 0, 8) + "}", Zeros(8)), kInvalid,
      "'shape' must be an array");
  add("nested shape", MakeFile("{" + Entry("a", "F32", "[[2]]", 0, 8) + "}", Zeros(8)), kInvalid, "nests too deeply");
  add("rank 9", MakeFile("{" + Entry("a", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) + "}", Zeros(4)), kInvalid,
      "tensor 'a' has rank 9");
  add("offsets reversed", MakeFile("{" + Entry("a", "F32", "[0]", 8, 0) + "}", Zeros(8)), kInvalid,
      "reversed data_offsets [8, 0]");
  add("offsets size mismatch",
      MakeFile("{" + Entry("a", "F32", "[2]", 0, 4) + "," + Entry("b", "F32", "[1]", 4, 8) + "}", Zeros(8)), kInvalid,
      "tensor 'a' (f32[2]) has data_offsets [0, 4] spanning 4 bytes, but its shape needs 8 bytes");
  add("offsets not two integers", MakeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", Zeros(8)),
      kInvalid, "'data_offsets' must be an array of two");
  add("negative offset", MakeFile(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[-1,-1]}})", {}), kInvalid,
      "'data_offsets' must be an array of two");
  add("hole between tensors",
      MakeFile("{" + Entry("a", "F32", "[1]", 0, 4) + "," + Entry("b", "F32", "[1]", 8, 12) + "}", Zeros(12)), kInvalid,
      "bytes [4, 8) of the data buffer belong to no tensor (a hole before tensor 'b')");
  add("hole at the start", MakeFile("{" + Entry("a", "F32", "[1]", 4, 8) + "}", Zeros(8)), kInvalid, "bytes [0, 4)");
  add("overlapping tensors",
      MakeFile("{" + Entry("a", "F32", "[2]", 0, 8) + "," + Entry("b", "F32", "[1]", 4, 8) + "}", Zeros(8)), kInvalid,
      "tensor 'b' data_offsets [4, 8] overlap tensor 'a' [0, 8]");
  add("aliased tensors",
      MakeFile("{" + Entry("a", "F32", "[2]", 0, 8) + "," + Entry("b", "F32", "[2]", 0, 8) + "}", Zeros(8)), kInvalid,
      "overlap");
  add("zero-size inside another",
      MakeFile("{" + Entry("a", "F32", "[2]", 0, 8) + "," + Entry("b", "F32", "[0]", 4, 4) + "}", Zeros(8)), kInvalid,
      "overlap");
  add("trailing bytes", MakeFile("{" + f32_2 + "}", Zeros(10)), kInvalid, "2 trailing bytes after the last tensor");
  add("data but no tensors", MakeFile("{}", Zeros(1)), kInvalid, "1 trailing bytes");
  add("offsets beyond the buffer", MakeFile("{" + f32_2 + "}", Zeros(4)), kInvalid,
      "data_offsets [0, 8] run past the end of the data buffer (4 bytes)");
  add("element-count overflow", MakeFile("{" + Entry("a", "F32", "[1099511627776, 1099511627776]", 0, 0) + "}", {}),
      kInvalid, "tensor 'a' shape [1099511627776, 1099511627776]");
  add("byte-count overflow", MakeFile("{" + Entry("a", "I64", "[4611686018427387904]", 0, 0) + "}", {}), kInvalid,
      "more than 2^64");
  add("metadata not an object", MakeFile(R"({"__metadata__":"x"})", {}), kInvalid, "'__metadata__' must be an object");
  add("metadata null", MakeFile(R"({"__metadata__":null})", {}), kInvalid, "'__metadata__' must be an object");
  add("metadata non-string value", MakeFile(R"({"__metadata__":{"k":1}})", {}), kInvalid,
      "'__metadata__' value of 'k' is not a string");
  add("metadata nested object", MakeFile(R"({"__metadata__":{"k":{}}})", {}), kInvalid, "not a string");
  {
    SafetensorsLimits one;
    one.max_tensors = 1;
    add("too many tensors",
        MakeFile("{" + Entry("a", "F32", "[1]", 0, 4) + "," + Entry("b", "F32", "[1]", 4, 8) + "}", Zeros(8)),
        StatusCode::kResourceExhausted, "2 tensors, over the limit of 1", one);
  }
  return c;
}

TEST(SafetensorsTest, RejectsHostileInput) {
  for (const HostileCase& c : HostileCases()) {
    SCOPED_TRACE(c.name);
    auto r = ParseSafetensors(c.file, c.limits);
    ASSERT_FALSE(r.ok()) << "accepted: " << c.name;
    EXPECT_EQ(r.status().code(), c.code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << "message: " << r.status().message() << "\nwanted: " << c.message;
  }
}

TEST(SafetensorsTest, MetadataAloneAndWhitespaceAreValid) {
  auto r = ParseSafetensors(MakeFile(R"({"__metadata__":{"a":"b"}}   )", {}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->metadata.at("a"), "b");
  // Escapes in names are decoded.
  auto esc = ParseSafetensors(MakeFile("{" + Entry("a\\u00e9\\n", "I8", "[1]", 0, 1) + "}", {7}));
  ASSERT_TRUE(esc.ok()) << esc.status().ToString();
  EXPECT_NE(esc->Find("a\xc3\xa9\n"), nullptr);
}

TEST(SafetensorsTest, BoolBytesMustBeZeroOrOne) {
  const std::vector<uint8_t> file = MakeFile("{" + Entry("flags", "BOOL", "[3]", 0, 3) + "}", {1, 2, 0});
  auto index = ParseSafetensors(file);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  auto t = ReadSafetensorsTensor(file, *index, "flags");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("tensor 'flags': bool element 1 has byte value 2"), std::string::npos)
      << t.status().message();
}

TEST(SafetensorsTest, ReadChecksIndexAgainstFile) {
  Tensor a = Tensor::FromVector<float>(DType::kF32, {2}, {1.0f, 2.0f});
  auto file = WriteSafetensors({{"a", &a}});
  ASSERT_TRUE(file.ok());
  auto index = ParseSafetensors(*file);
  ASSERT_TRUE(index.ok());
  // The same index against a shorter file never reads past its end.
  std::vector<uint8_t> truncated(file->begin(), file->end() - 1);
  auto r = ReadSafetensorsTensor(truncated, *index, "a");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  // A hand-edited index: Find still works, and a bad shape is caught.
  SafetensorsIndex edited = *index;
  edited.entries[0].shape = {3};
  edited.by_name.clear();
  ASSERT_NE(edited.Find("a"), nullptr);
  EXPECT_EQ(ReadSafetensorsTensor(*file, edited, "a").status().code(), StatusCode::kInvalidArgument);
}

TEST(SafetensorsTest, WriterRejectsBadNames) {
  Tensor a = Tensor::FromVector<float>(DType::kF32, {1}, {1.0f});
  EXPECT_EQ(WriteSafetensors({{"a", &a}, {"a", &a}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors({{"", &a}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors({{"__metadata__", &a}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors({{"a", nullptr}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors({{"bad\xff", &a}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSafetensors({{"a", &a}}, {{"k", "\xc3"}}).status().code(), StatusCode::kInvalidArgument);
  Tensor invalid;
  EXPECT_EQ(WriteSafetensors({{"a", &invalid}}).status().code(), StatusCode::kInvalidArgument);
  auto dup = WriteSafetensors({{"w", &a}, {"w", &a}});
  EXPECT_NE(dup.status().message().find("'w'"), std::string::npos);
}

TEST(SafetensorsTest, FuzzMutationsNeverCrash) {
  Tensor f32 = Tensor::FromVector<float>(DType::kF32, {2, 2}, {1, 2, 3, 4});
  Tensor i32 = Tensor::FromVector<int32_t>(DType::kI32, {3}, {5, 6, 7});
  Tensor b = Tensor::FromVector<uint8_t>(DType::kBool, {4}, {1, 0, 0, 1});
  Tensor i8 = Tensor::FromVector<int8_t>(DType::kI8, {}, {9});
  Tensor i64(DType::kI64, {0, 3});
  auto base = WriteSafetensors({{"w", &f32}, {"ids", &i32}, {"mask", &b}, {"s", &i8}, {"e", &i64}}, {{"format", "pt"}});
  ASSERT_TRUE(base.ok());
  ASSERT_TRUE(ParseSafetensors(*base).ok());

  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>((*base)[i]) << (8 * i);
  std::mt19937 rng(20240607);
  int parsed = 0, read = 0, bad_bool = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<uint8_t> f = *base;
    const int kind = static_cast<int>(rng() % 5);
    if (kind == 0) {
      // Flip a few random bits anywhere.
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) f[rng() % f.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    } else if (kind == 1) {
      f.resize(rng() % f.size());  // truncate
    } else if (kind == 2) {
      // Overwrite a header byte with something JSON-ish.
      static constexpr char kChars[] = "{}[],:\"0123456789-. eE\\uF";
      f[8 + rng() % header_len] = static_cast<uint8_t>(kChars[rng() % (sizeof(kChars) - 1)]);
    } else if (kind == 3) {
      // Random bytes in the data buffer (bool bytes among them).
      const size_t data_start = 8 + header_len;
      const int writes = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < writes; ++k) {
        f[data_start + rng() % (f.size() - data_start)] = static_cast<uint8_t>(rng() % 4 == 0 ? rng() : rng() % 3);
      }
    } else {
      // A random byte in the length field, or an appended byte.
      if (rng() % 2 == 0) {
        f[rng() % 8] = static_cast<uint8_t>(rng());
      } else {
        f.push_back(static_cast<uint8_t>(rng()));
      }
    }
    auto index = ParseSafetensors(f);
    if (!index.ok()) continue;
    ++parsed;
    int64_t total = 0;
    for (const SafetensorsEntry& e : index->entries) {
      ASSERT_LE(0, e.begin);
      ASSERT_LE(e.begin, e.end);
      ASSERT_LE(index->data_start + e.end, static_cast<int64_t>(f.size()));
      total += e.end - e.begin;
      auto t = ReadSafetensorsTensor(f, *index, e.name);
      if (!t.ok()) {
        EXPECT_EQ(e.dtype, DType::kBool) << t.status().ToString();  // only bool bytes can be wrong
        ++bad_bool;
        continue;
      }
      ++read;
      EXPECT_EQ(t->dtype(), e.dtype);
      EXPECT_EQ(t->shape(), e.shape);
    }
    EXPECT_EQ(index->data_start + total, static_cast<int64_t>(f.size()));
  }
  // Mutations of the data buffer keep most files valid, so both paths are exercised.
  EXPECT_GT(parsed, 300);
  EXPECT_GT(read, 1000);
  EXPECT_GT(bad_bool, 10);
}

}  // namespace
}  // namespace consensor
