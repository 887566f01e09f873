// Tests for common/: Status, StatusOr and the error macros, dtypes and shapes, SHA-256 and hex,
// and the canonical tensor hash (pinned so the encoding can never drift).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/tensor.h"

namespace consensor {
namespace {

// ------------------------------------------------------------------------------------------
// Status / StatusOr

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(OkStatus().ok());
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusTest, ErrorsCarryCodeAndMessage) {
  Status s = InvalidArgument("bad shape");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad shape");
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: bad shape");
  EXPECT_EQ(ResourceExhausted("x").ToString(), "RESOURCE_EXHAUSTED: x");
  EXPECT_EQ(NotFound("x").code(), StatusCode::kNotFound);
  EXPECT_EQ(FailedPrecondition("x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(OutOfRange("x").code(), StatusCode::kOutOfRange);
  EXPECT_EQ(Unimplemented("x").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(Internal("x").code(), StatusCode::kInternal);
  EXPECT_EQ(DataLoss("x").code(), StatusCode::kDataLoss);
}

TEST(StatusTest, CodesMatchGrpc) {
  // The node maps these one to one onto grpc::StatusCode.
  EXPECT_EQ(static_cast<int>(StatusCode::kInvalidArgument), 3);
  EXPECT_EQ(static_cast<int>(StatusCode::kNotFound), 5);
  EXPECT_EQ(static_cast<int>(StatusCode::kAlreadyExists), 6);
  EXPECT_EQ(static_cast<int>(StatusCode::kResourceExhausted), 8);
  EXPECT_EQ(static_cast<int>(StatusCode::kFailedPrecondition), 9);
  EXPECT_EQ(static_cast<int>(StatusCode::kOutOfRange), 11);
  EXPECT_EQ(static_cast<int>(StatusCode::kUnimplemented), 12);
  EXPECT_EQ(static_cast<int>(StatusCode::kInternal), 13);
  EXPECT_EQ(static_cast<int>(StatusCode::kUnavailable), 14);
  EXPECT_EQ(static_cast<int>(StatusCode::kDataLoss), 15);
  EXPECT_EQ(StatusCodeName(StatusCode::kUnavailable), "UNAVAILABLE");
  EXPECT_EQ(StatusCodeName(StatusCode::kAlreadyExists), "ALREADY_EXISTS");
}

TEST(StatusTest, WithContextPrependsAndKeepsCode) {
  Status s = NotFound("no such blob").WithContext("while loading graph");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "while loading graph: no such blob");
  EXPECT_TRUE(OkStatus().WithContext("ignored").ok());
  EXPECT_EQ(OkStatus().WithContext("ignored").message(), "");
}

TEST(StatusOrTest, HoldsValueOrError) {
  StatusOr<int> v = 42;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 42);
  EXPECT_EQ(v.value(), 42);
  EXPECT_TRUE(v.status().ok());

  StatusOr<int> e = OutOfRange("too far");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(e.status().message(), "too far");
}

TEST(StatusOrTest, MoveOnlyValuesAndArrow) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(7);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> owned = std::move(p).value();
  ASSERT_NE(owned, nullptr);
  EXPECT_EQ(*owned, 7);

  StatusOr<std::string> s = std::string("hello");
  EXPECT_EQ(s->size(), 5u);
  s->append("!");
  EXPECT_EQ(*s, "hello!");
}

Status FailIf(bool fail) { return fail ? Internal("boom") : OkStatus(); }

Status UsesReturnIfError(bool fail, int* reached) {
  RETURN_IF_ERROR(FailIf(fail));
  ++*reached;
  return OkStatus();
}

TEST(MacrosTest, ReturnIfError) {
  int reached = 0;
  EXPECT_TRUE(UsesReturnIfError(false, &reached).ok());
  EXPECT_EQ(reached, 1);
  Status s = UsesReturnIfError(true, &reached);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "boom");
  EXPECT_EQ(reached, 1);
}

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(auto q, Half(h));  // two in one scope: temporaries must not clash
  return q;
}

StatusOr<std::unique_ptr<int>> MakeBox(int v) { return std::make_unique<int>(v); }

StatusOr<int> Unbox(int v) {
  std::unique_ptr<int> box;
  ASSIGN_OR_RETURN(box, MakeBox(v));  // assignment to an existing, move-only variable
  return *box;
}

TEST(MacrosTest, AssignOrReturn) {
  ASSERT_TRUE(Quarter(12).ok());
  EXPECT_EQ(*Quarter(12), 3);
  StatusOr<int> odd_first = Quarter(7);
  EXPECT_EQ(odd_first.status().message(), "7 is odd");
  StatusOr<int> odd_second = Quarter(6);
  EXPECT_EQ(odd_second.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(odd_second.status().message(), "3 is odd");
  EXPECT_EQ(*Unbox(9), 9);
}

// ------------------------------------------------------------------------------------------
// DType and shapes

TEST(DTypeTest, WireValuesAndSizes) {
  EXPECT_EQ(static_cast<int>(DType::kF32), 1);
  EXPECT_EQ(static_cast<int>(DType::kI32), 2);
  EXPECT_EQ(static_cast<int>(DType::kI8), 3);
  EXPECT_EQ(static_cast<int>(DType::kBool), 4);
  EXPECT_EQ(static_cast<int>(DType::kI64), 5);
  EXPECT_EQ(static_cast<int>(DType::kU8), 6);
  EXPECT_EQ(static_cast<int>(DType::kI16), 7);
  EXPECT_EQ(static_cast<int>(DType::kU16), 8);
  EXPECT_EQ(static_cast<int>(DType::kU32), 9);
  EXPECT_EQ(static_cast<int>(DType::kU64), 10);
  EXPECT_EQ(static_cast<int>(DType::kF64), 11);
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kI32), 4);
  EXPECT_EQ(DTypeSize(DType::kI8), 1);
  EXPECT_EQ(DTypeSize(DType::kBool), 1);
  EXPECT_EQ(DTypeSize(DType::kI64), 8);
  EXPECT_EQ(DTypeSize(DType::kU8), 1);
  EXPECT_EQ(DTypeSize(DType::kI16), 2);
  EXPECT_EQ(DTypeSize(DType::kU16), 2);
  EXPECT_EQ(DTypeSize(DType::kU32), 4);
  EXPECT_EQ(DTypeSize(DType::kU64), 8);
  EXPECT_EQ(DTypeSize(DType::kF64), 8);
  EXPECT_EQ(DTypeSize(DType::kInvalid), 0);
  EXPECT_FALSE(IsValidDType(DType::kInvalid));
  EXPECT_FALSE(IsValidDType(static_cast<DType>(14)));
  EXPECT_EQ(DTypeSize(DType::kF16), 2);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(static_cast<int>(DType::kF16), 12);  // wire codes
  EXPECT_EQ(static_cast<int>(DType::kBF16), 13);
  EXPECT_TRUE(IsHalfDType(DType::kF16) && IsHalfDType(DType::kBF16));
  EXPECT_FALSE(IsHalfDType(DType::kF32) || IsFloatDType(DType::kF16) || IsIntegerDType(DType::kBF16));
  EXPECT_TRUE(IsFloatDType(DType::kF64));
  EXPECT_FALSE(IsIntegerDType(DType::kF64));
  EXPECT_TRUE(IsIntegerDType(DType::kI8));
  EXPECT_TRUE(IsIntegerDType(DType::kU64));
  EXPECT_TRUE(IsUnsignedIntegerDType(DType::kU8));
  EXPECT_FALSE(IsUnsignedIntegerDType(DType::kI16));
  EXPECT_TRUE(IsSignedIntegerDType(DType::kI16));
  EXPECT_FALSE(IsIntegerDType(DType::kBool));
  EXPECT_FALSE(IsIntegerDType(DType::kF32));
}

TEST(DTypeTest, NamesRoundTrip) {
  for (DType t : kAllDTypes) {
    StatusOr<DType> back = DTypeFromName(DTypeName(t));
    ASSERT_TRUE(back.ok()) << DTypeName(t);
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(DTypeName(DType::kF32), "f32");
  EXPECT_EQ(DTypeName(DType::kBool), "bool");
  EXPECT_EQ(DTypeName(DType::kF64), "f64");
  EXPECT_EQ(DTypeName(DType::kF16), "f16");
  EXPECT_EQ(DTypeName(DType::kBF16), "bf16");
}

TEST(DTypeTest, UnknownNamesAreRejected) {
  for (const char* name : {"f8", "", "F32", "float32", "float64", "invalid", "f32 "}) {
    StatusOr<DType> t = DTypeFromName(name);
    ASSERT_FALSE(t.ok()) << name;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("unknown dtype"), std::string::npos) << t.status().message();
  }
}

TEST(ShapeTest, CheckedNumElements) {
  EXPECT_EQ(*CheckedNumElements({}), 1);
  EXPECT_EQ(*CheckedNumElements({5}), 5);
  EXPECT_EQ(*CheckedNumElements({2, 3, 4}), 24);
  EXPECT_EQ(*CheckedNumElements({2, 0, 4}), 0);
  EXPECT_EQ(*CheckedNumElements({1, 1, 1, 1, 1, 1, 1, 1}), 1);  // rank 8 is allowed
  EXPECT_EQ(*CheckedNumElements({int64_t{1} << 62}), int64_t{1} << 62);
  EXPECT_EQ(*CheckedNumElements({int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
}

TEST(ShapeTest, CheckedNumElementsRejectsNegative) {
  StatusOr<int64_t> n = CheckedNumElements({3, -1});
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("negative"), std::string::npos) << n.status().message();
}

TEST(ShapeTest, CheckedNumElementsRejectsOverflow) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  for (const Shape& s : {Shape{big, 2}, Shape{int64_t{1} << 32, int64_t{1} << 32}, Shape{(int64_t{1} << 62) + 1},
                         Shape{1 << 16, 1 << 16, 1 << 16, 1 << 16}}) {
    StatusOr<int64_t> n = CheckedNumElements(s);
    ASSERT_FALSE(n.ok()) << ShapeToString(s);
    EXPECT_NE(n.status().message().find("too many elements"), std::string::npos) << n.status().message();
  }
}

TEST(ShapeTest, CheckedNumElementsRejectsRankAboveEight) {
  StatusOr<int64_t> n = CheckedNumElements(Shape(9, 1));
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("rank 9"), std::string::npos) << n.status().message();
}

TEST(ShapeTest, ToString) {
  EXPECT_EQ(ShapeToString({}), "[]");
  EXPECT_EQ(ShapeToString({7}), "[7]");
  EXPECT_EQ(ShapeToString({2, 0, 3}), "[2, 0, 3]");
  EXPECT_EQ(NumElements({2, 3}), 6);
}

// ------------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-2, appendix B) and hex

std::string HexOf(const Hash256& h) { return ToHex(h); }

TEST(Sha256Test, FipsVectors) {
  EXPECT_EQ(HexOf(Sha256Of("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HexOf(Sha256Of("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(HexOf(Sha256Of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, MillionAs) {
  // FIPS 180-2 B.3, fed in uneven pieces to exercise incremental updates.
  Sha256 h;
  std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    size_t n = std::min(left, chunk.size());
    h.Update(std::string_view(chunk.data(), n));
    left -= n;
  }
  EXPECT_EQ(HexOf(h.Finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, IncrementalMatchesOneShotAndLittleEndianHelpers) {
  Sha256 h;
  h.Update(std::string_view("ab"));
  h.UpdateU8('c');
  EXPECT_EQ(h.Finish(), Sha256Of("abc"));

  Sha256 h2;
  h2.UpdateU32(0x04030201u);
  h2.UpdateU64(0x0c0b0a0908070605ull);
  const uint8_t expect[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  EXPECT_EQ(h2.Finish(), Sha256Of(std::span<const uint8_t>(expect)));
}

TEST(Sha256Test, HashesInterleavedKeepTheirOwnState) {
  // Each Sha256 holds its own state: three hashes fed in turns, as nested hashes (a result root
  // over tensor hashes) are, each give their own digest.
  std::array<Sha256, 3> hashes;
  const std::string_view pieces[3][3] = {
      {"a", "b", "c"}, {"", "", ""}, {"abcdbcdecdefdefgefgh", "fghighijhijkijkljklm", "klmnlmnomnopnopq"}};
  for (int piece = 0; piece < 3; ++piece) {
    for (int k = 0; k < 3; ++k) hashes[k].Update(pieces[k][piece]);
  }
  EXPECT_EQ(HexOf(hashes[2].Finish()), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(HexOf(hashes[0].Finish()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HexOf(hashes[1].Finish()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(HexTest, RoundTrip) {
  Hash256 h = Sha256Of("abc");
  std::string hex = ToHex(h);
  StatusOr<Hash256> back = Hash256FromHex(hex);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, h);
  // Upper case is accepted too.
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ASSERT_TRUE(Hash256FromHex(upper).ok());
  EXPECT_EQ(*Hash256FromHex(upper), h);
  const uint8_t raw[] = {0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(ToHex(raw), "000fa0ff");
}

TEST(HexTest, Errors) {
  std::string good(64, '0');
  StatusOr<Hash256> short_hex = Hash256FromHex(good.substr(0, 63));
  ASSERT_FALSE(short_hex.ok());
  EXPECT_NE(short_hex.status().message().find("64 hex digits"), std::string::npos);
  EXPECT_FALSE(Hash256FromHex(good + "0").ok());
  EXPECT_FALSE(Hash256FromHex("").ok());
  for (char bad : {'g', 'G', ' ', 'x', '-', '\0'}) {
    std::string s = good;
    s[17] = bad;
    StatusOr<Hash256> r = Hash256FromHex(s);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("invalid hex digit"), std::string::npos) << r.status().message();
  }
}

// ------------------------------------------------------------------------------------------
// Tensor hash (docs/DETERMINISM.md section 2)

// Builds the spec's byte string by hand, independently of TensorHash.
std::vector<uint8_t> SpecEncoding(uint8_t dtype_code, const std::vector<uint64_t>& dims,
                                  const std::vector<uint8_t>& data) {
  const char tag[] = "consensor.tensor.v1";
  std::vector<uint8_t> b(tag, tag + 20);  // 19 ASCII bytes and the NUL: the 20-byte tag
  EXPECT_EQ(b.back(), 0);
  b.push_back(dtype_code);
  b.push_back(static_cast<uint8_t>(dims.size()));
  for (uint64_t d : dims) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(d >> (8 * i)));
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

TEST(TensorHashTest, MatchesHandBuiltEncoding) {
  // f32[2, 3] with values 0.5 * i.
  std::vector<float> vals = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, -2.5f};
  Tensor t = Tensor::FromVector(DType::kF32, {2, 3}, vals);
  std::vector<uint8_t> data;
  for (float f : vals) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int i = 0; i < 4; ++i) data.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }
  std::vector<uint8_t> enc = SpecEncoding(1, {2, 3}, data);
  EXPECT_EQ(enc.size(), 20u + 2 + 16 + 24);
  EXPECT_EQ(TensorHash(t), Sha256Of(enc));

  // i64 scalar, i8 with a zero-size dim, bool vector, i32 rank 4.
  Tensor s = Tensor::FromVector<int64_t>(DType::kI64, {}, {-2});
  EXPECT_EQ(TensorHash(s), Sha256Of(SpecEncoding(5, {}, {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})));
  Tensor z(DType::kI8, {4, 0});
  EXPECT_EQ(TensorHash(z), Sha256Of(SpecEncoding(3, {4, 0}, {})));
  Tensor b = Tensor::FromVector<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  EXPECT_EQ(TensorHash(b), Sha256Of(SpecEncoding(4, {3}, {1, 0, 1})));
  Tensor r4 = Tensor::FromVector<int32_t>(DType::kI32, {1, 1, 1, 2}, {0x01020304, -1});
  EXPECT_EQ(TensorHash(r4), Sha256Of(SpecEncoding(2, {1, 1, 1, 2}, {4, 3, 2, 1, 0xff, 0xff, 0xff, 0xff})));
  // f64 (code 11): 8 bytes little-endian per element; 1.5 is 0x3FF8000000000000.
  Tensor d = Tensor::FromVector<double>(DType::kF64, {2}, {1.5, -0.0});
  EXPECT_EQ(TensorHash(d), Sha256Of(SpecEncoding(11, {2}, {0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x80})));
}

TEST(TensorHashTest, DistinguishesDtypeShapeAndData) {
  Tensor a = Tensor::FromVector<int32_t>(DType::kI32, {4}, {1, 2, 3, 4});
  Tensor b = Tensor::FromVector<int32_t>(DType::kI32, {2, 2}, {1, 2, 3, 4});
  Tensor c = Tensor::FromVector<float>(DType::kF32, {4}, {0, 0, 0, 0});
  std::memcpy(c.data(), a.data(), 16);  // same bytes, different dtype
  Tensor d = Tensor::FromVector<int32_t>(DType::kI32, {4}, {1, 2, 3, 5});
  EXPECT_NE(TensorHash(a), TensorHash(b));
  EXPECT_NE(TensorHash(a), TensorHash(c));
  EXPECT_NE(TensorHash(a), TensorHash(d));
  EXPECT_EQ(TensorHash(a), TensorHash(Tensor(a)));
  // Signed zero is part of the bits.
  Tensor pz = Tensor::FromVector<float>(DType::kF32, {}, {0.0f});
  Tensor nz = Tensor::FromVector<float>(DType::kF32, {}, {-0.0f});
  EXPECT_NE(TensorHash(pz), TensorHash(nz));
}

// Literal digests computed once with Python's hashlib from the spec (not with this code):
//   hashlib.sha256(b"consensor.tensor.v1\0" + bytes([dtype, rank]) +
//                  b"".join(struct.pack("<Q", d) for d in shape) + data).hexdigest()
TEST(TensorHashTest, PinnedGoldenValues) {
  Tensor f = Tensor::FromVector<float>(DType::kF32, {2}, {1.0f, -0.0f});
  EXPECT_EQ(ToHex(TensorHash(f)), "c783ab2a78e486875ad8922d61ef2c0b0791c979fdcb73b3367823c1692232e5");
  Tensor b = Tensor::FromVector<uint8_t>(DType::kBool, {}, {1});
  EXPECT_EQ(ToHex(TensorHash(b)), "cc3d1514385e44f48a06b331a0054e2628df8d1851dc19a07ea27d3fb0858788");
  Tensor i = Tensor::FromVector<int32_t>(DType::kI32, {2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(ToHex(TensorHash(i)), "9eb31804e72989e848f564ce4a24b7305e5b9060f2c9e5814f537ae81ad6d508");
  Tensor e(DType::kI8, {0, 3});
  EXPECT_EQ(ToHex(TensorHash(e)), "56481cf61d9e8d18982106f2bbee07a94b1ce25666ec9210ea3db608ba43aaf8");
}

// ------------------------------------------------------------------------------------------
// Tensor basics

TEST(TensorTest, FromBytesValidates) {
  const uint8_t bytes[] = {1, 0, 1};
  StatusOr<Tensor> ok = Tensor::FromBytes(DType::kBool, {3}, bytes);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->num_elements(), 3);
  EXPECT_EQ(ok->byte_size(), 3);

  StatusOr<Tensor> wrong_size = Tensor::FromBytes(DType::kI32, {3}, bytes);
  ASSERT_FALSE(wrong_size.ok());
  EXPECT_NE(wrong_size.status().message().find("needs 12 bytes, got 3"), std::string::npos)
      << wrong_size.status().message();

  const uint8_t bad_bool[] = {1, 2};
  StatusOr<Tensor> bb = Tensor::FromBytes(DType::kBool, {2}, bad_bool);
  ASSERT_FALSE(bb.ok());
  EXPECT_NE(bb.status().message().find("not 0 or 1"), std::string::npos);

  EXPECT_FALSE(Tensor::FromBytes(DType::kInvalid, {}, {}).ok());
  EXPECT_FALSE(Tensor::FromBytes(DType::kF32, {-1}, {}).ok());
}

TEST(TensorTest, StorageIsAlignedAndZeroed) {
  Tensor t(DType::kF32, {3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  for (int64_t i = 0; i < t.byte_size(); ++i) EXPECT_EQ(t.data()[i], 0);
  Tensor copy = t;
  copy.data_as<float>()[0] = 1.0f;
  EXPECT_EQ(t.data_as<float>()[0], 0.0f);
  EXPECT_EQ(copy.shape(), (Shape{3, 5}));
  EXPECT_EQ(copy.rank(), 2);
}

}  // namespace
}  // namespace consensor
