// Shape inference, attribute checking and kernel parameters of every whitelisted op.
// Depends only on executor/op_schema.h and common/.
#include "executor/op_schema.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <string>

namespace consensor::executor {
namespace {

using kernels::Op;
using Ints = std::vector<int64_t>;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TypeInfo F32(Shape s) { return {DType::kF32, std::move(s)}; }
TypeInfo I32(Shape s) { return {DType::kI32, std::move(s)}; }
TypeInfo I64(Shape s) { return {DType::kI64, std::move(s)}; }
TypeInfo I8(Shape s) { return {DType::kI8, std::move(s)}; }
TypeInfo Bool(Shape s) { return {DType::kBool, std::move(s)}; }

StatusOr<InferResult> Infer(std::string_view op, const std::vector<TypeInfo>& in, const Attributes& attrs = {}) {
  const OpSchema* schema = FindOpSchema(op);
  if (schema == nullptr) return NotFound("no schema for " + std::string(op));
  return schema->infer(in, attrs);
}

// Infers, expects success, and checks that feeding canonical_attrs back in gives the same
// result (the canonical form is a fixed point).
InferResult Ok(std::string_view op, const std::vector<TypeInfo>& in, const Attributes& attrs = {}) {
  auto r = Infer(op, in, attrs);
  EXPECT_TRUE(r.ok()) << op << ": " << r.status().ToString();
  if (!r.ok()) return {};
  auto again = Infer(op, in, r->canonical_attrs);
  EXPECT_TRUE(again.ok()) << op << " (canonical attrs): " << again.status().ToString();
  if (again.ok()) {
    EXPECT_EQ(again->canonical_attrs, r->canonical_attrs) << op;
    EXPECT_EQ(again->output.shape, r->output.shape) << op;
    EXPECT_EQ(again->output.dtype, r->output.dtype) << op;
  }
  return *std::move(r);
}

#define EXPECT_INVALID(expr, substring)                                                           \
  do {                                                                                            \
    auto r_ = (expr);                                                                             \
    ASSERT_FALSE(r_.ok()) << "expected an error mentioning: " << (substring);                     \
    EXPECT_EQ(r_.status().code(), StatusCode::kInvalidArgument) << r_.status().ToString();        \
    EXPECT_NE(r_.status().message().find(substring), std::string::npos) << r_.status().message(); \
  } while (0)

// ---------------------------------------------------------------------------------------
// Table.

TEST(OpSchemaTable, UnknownOpIsNull) {
  EXPECT_EQ(FindOpSchema("conv3d"), nullptr);
  EXPECT_EQ(FindOpSchema(""), nullptr);
  EXPECT_EQ(FindOpSchema("Add"), nullptr);
}

TEST(OpSchemaTable, EveryKernelOpHasExactlyOneSchema) {
  std::set<Op> ops;
  std::set<std::string_view> names;
  for (const OpSchema& s : AllOpSchemas()) {
    EXPECT_TRUE(ops.insert(s.op).second) << s.name;
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_EQ(kernels::OpName(s.op), s.name);
    EXPECT_NE(s.infer, nullptr) << s.name;
    EXPECT_EQ(FindOpSchema(s.name), &s);
    EXPECT_GE(s.min_inputs, 1);
    EXPECT_TRUE(s.max_inputs == -1 || s.max_inputs >= s.min_inputs);
  }
  EXPECT_EQ(ops.size(), static_cast<size_t>(Op::kNumOps));
}

// ---------------------------------------------------------------------------------------
// Common checks.

TEST(OpSchemaCommon, UnknownAttribute) {
  EXPECT_INVALID(Infer("relu", {F32({2})}, {{"axis", int64_t{0}}}), "unknown attribute 'axis' for op 'relu'");
  EXPECT_INVALID(Infer("max_pool2d", {F32({1, 1, 4, 4})}, {{"kernel", Ints{2, 2}}, {"count_include_pad", int64_t{1}}}),
                 "unknown attribute 'count_include_pad'");
}

TEST(OpSchemaCommon, Arity) {
  EXPECT_INVALID(Infer("add", {F32({2})}), "expected 2 inputs, got 1");
  EXPECT_INVALID(Infer("relu", {F32({2}), F32({2})}), "expected 1 inputs, got 2");
  EXPECT_INVALID(Infer("conv2d", {F32({1, 1, 3, 3})}), "expected 2 or 3 inputs, got 1");
  EXPECT_INVALID(Infer("concat", {}, {{"axis", int64_t{0}}}), "expected at least 1 inputs, got 0");
}

TEST(OpSchemaCommon, BadInputTypes) {
  EXPECT_INVALID(Infer("relu", {F32({1, 1, 1, 1, 1, 1, 1, 1, 1})}), "rank 9; the maximum is 8");
  EXPECT_INVALID(Infer("relu", {F32({2, -3})}), "negative dimension");
  EXPECT_INVALID(Infer("relu", {TypeInfo{DType::kInvalid, {2}}}), "invalid dtype");
  EXPECT_INVALID(Infer("relu", {TypeInfo{static_cast<DType>(42), {2}}}), "invalid dtype");
  EXPECT_INVALID(Infer("relu", {F32({int64_t{1} << 40, int64_t{1} << 40})}), "too many elements");
}

TEST(OpSchemaCommon, OutputTooLargeIsRejected) {
  // Each input fits, the broadcast output does not.
  EXPECT_INVALID(Infer("add", {F32({int64_t{1} << 40, 1}), F32({1, int64_t{1} << 40})}), "output");
  EXPECT_INVALID(Infer("expand", {F32({1})}, {{"shape", Ints{int64_t{1} << 40, int64_t{1} << 40}}}), "output");
  EXPECT_INVALID(Infer("pad", {F32({1})}, {{"pads", Ints{1, kMax - 1}}}), "too large");
}

// ---------------------------------------------------------------------------------------
// Unary.

TEST(OpSchemaUnary, FloatOps) {
  for (const char* op : {"neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "gelu",
                         "gelu_tanh", "sin", "cos"}) {
    SCOPED_TRACE(op);
    InferResult r = Ok(op, {F32({2, 3})});
    EXPECT_EQ(r.output.dtype, DType::kF32);
    EXPECT_EQ(r.output.shape, (Shape{2, 3}));
    EXPECT_GE(r.flops, 6);
    EXPECT_TRUE(r.canonical_attrs.empty());
    EXPECT_TRUE(r.kernel_input_shapes.empty());
  }
  EXPECT_GT(Ok("exp", {F32({2, 3})}).flops, Ok("neg", {F32({2, 3})}).flops);
  EXPECT_EQ(Ok("relu", {F32({})}).output.shape, Shape{});
  EXPECT_EQ(Ok("relu", {F32({0, 5})}).output.shape, (Shape{0, 5}));
}

TEST(OpSchemaUnary, IntegerSupport) {
  for (const char* op : {"neg", "abs", "relu"}) {
    for (DType t :
         {DType::kI8, DType::kI32, DType::kI64, DType::kU8, DType::kI16, DType::kU16, DType::kU32, DType::kU64}) {
      EXPECT_EQ(Ok(op, {TypeInfo{t, {4}}}).output.dtype, t) << op;
    }
    EXPECT_INVALID(Infer(op, {Bool({4})}),
                   "has dtype bool; expected f32, i8, i32, i64, u8, i16, u16, u32, u64, f64, f16 or bf16");
  }
  EXPECT_INVALID(Infer("exp", {I32({4})}), "exp: input has dtype i32; expected f32");
  EXPECT_INVALID(Infer("sqrt", {I64({4})}), "expected f32");
  EXPECT_INVALID(Infer("gelu", {I8({4})}), "expected f32");
}

TEST(OpSchemaUnary, NotIdentityCast) {
  EXPECT_EQ(Ok("not", {Bool({3})}).output.dtype, DType::kBool);
  EXPECT_INVALID(Infer("not", {F32({3})}), "expected bool");
  for (DType t : {DType::kF32, DType::kI8, DType::kI32, DType::kI64, DType::kBool}) {
    InferResult r = Ok("identity", {TypeInfo{t, {3, 1}}});
    EXPECT_EQ(r.output.dtype, t);
    EXPECT_EQ(r.flops, 0);
  }
  InferResult c = Ok("cast", {F32({2, 2})}, {{"to", DType::kI8}});
  EXPECT_EQ(c.output.dtype, DType::kI8);
  EXPECT_EQ(c.output.shape, (Shape{2, 2}));
  EXPECT_EQ(c.params.to, DType::kI8);
  EXPECT_EQ(c.canonical_attrs, (Attributes{{"to", DType::kI8}}));
  // The dtype's name is accepted and canonicalized to the DType.
  InferResult by_name = Ok("cast", {Bool({2})}, {{"to", std::string("i64")}});
  EXPECT_EQ(by_name.output.dtype, DType::kI64);
  EXPECT_EQ(by_name.canonical_attrs, (Attributes{{"to", DType::kI64}}));

  EXPECT_INVALID(Infer("cast", {F32({2})}), "missing required attribute 'to'");
  EXPECT_INVALID(Infer("cast", {F32({2})}, {{"to", int64_t{1}}}), "attribute 'to' must be a dtype");
  EXPECT_INVALID(Infer("cast", {F32({2})}, {{"to", std::string("f8")}}), "unknown dtype 'f8'");
  EXPECT_INVALID(Infer("cast", {F32({2})}, {{"to", DType::kInvalid}}), "not a valid dtype");
}

// ---------------------------------------------------------------------------------------
// Binary and where.

TEST(OpSchemaBinary, Broadcasting) {
  InferResult r = Ok("add", {F32({2, 3}), F32({3})});
  EXPECT_EQ(r.output.shape, (Shape{2, 3}));
  EXPECT_EQ(r.flops, 6);
  EXPECT_EQ(Ok("mul", {F32({4, 1, 3}), F32({2, 1})}).output.shape, (Shape{4, 2, 3}));
  EXPECT_EQ(Ok("sub", {F32({}), F32({5})}).output.shape, (Shape{5}));
  EXPECT_EQ(Ok("div", {F32({0, 1}), F32({1, 7})}).output.shape, (Shape{0, 7}));
  EXPECT_EQ(Ok("max", {I64({2, 1}), I64({1, 2})}).output.dtype, DType::kI64);
  EXPECT_EQ(Ok("min", {I8({2}), I8({2})}).output.dtype, DType::kI8);
  EXPECT_EQ(Ok("pow", {F32({2}), F32({})}).output.dtype, DType::kF32);
  EXPECT_INVALID(Infer("add", {F32({2, 3}), F32({4})}), "add: shapes cannot be broadcast together: f32[2, 3], f32[4]");
  EXPECT_INVALID(Infer("add", {F32({0}), F32({2})}), "cannot be broadcast");
}

TEST(OpSchemaBinary, DTypes) {
  for (const char* op : {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}) {
    EXPECT_EQ(Ok(op, {F32({2}), F32({2})}).output.dtype, DType::kBool) << op;
    EXPECT_EQ(Ok(op, {I32({2}), I32({1})}).output.dtype, DType::kBool) << op;
    EXPECT_EQ(Ok(op, {Bool({2}), Bool({2})}).output.dtype, DType::kBool) << op;
  }
  for (const char* op : {"and", "or", "xor"}) {
    EXPECT_EQ(Ok(op, {Bool({2, 2}), Bool({2})}).output.dtype, DType::kBool) << op;
    EXPECT_INVALID(Infer(op, {F32({2}), F32({2})}), "expected bool");
  }
  EXPECT_INVALID(Infer("add", {F32({2}), I32({2})}), "dtypes differ: a is f32[2], b is i32[2]");
  EXPECT_INVALID(Infer("less", {I8({2}), I64({2})}), "dtypes differ");
  EXPECT_EQ(Ok("pow", {I32({2}), I32({2})}).output.dtype, DType::kI32);  // the exact integer power
  EXPECT_INVALID(Infer("pow", {Bool({2}), Bool({2})}),
                 "expected f32, i8, i32, i64, u8, i16, u16, u32, u64, f64, f16 or bf16");
  EXPECT_INVALID(Infer("asin", {I32({2})}), "expected f32");
  EXPECT_INVALID(Infer("add", {Bool({2}), Bool({2})}),
                 "expected f32, i8, i32, i64, u8, i16, u16, u32, u64, f64, f16 or bf16");
}

TEST(OpSchemaBinary, Where) {
  InferResult r = Ok("where", {Bool({2, 1}), I32({1, 3}), I32({})});
  EXPECT_EQ(r.output.dtype, DType::kI32);
  EXPECT_EQ(r.output.shape, (Shape{2, 3}));
  EXPECT_EQ(Ok("where", {Bool({}), F32({4}), F32({3, 1})}).output.shape, (Shape{3, 4}));
  EXPECT_INVALID(Infer("where", {F32({2}), F32({2}), F32({2})}), "condition has dtype f32; expected bool");
  EXPECT_INVALID(Infer("where", {Bool({2}), F32({2}), I32({2})}), "dtypes differ");
  EXPECT_INVALID(Infer("where", {Bool({3}), F32({2}), F32({2})}), "cannot be broadcast");
}

// ---------------------------------------------------------------------------------------
// Reductions.

TEST(OpSchemaReduce, AxesAndKeepdims) {
  InferResult r = Ok("reduce_sum", {F32({2, 3, 4})}, {{"axes", Ints{2, 0}}, {"keepdims", int64_t{0}}});
  EXPECT_EQ(r.output.shape, (Shape{3}));
  EXPECT_EQ(r.params.axes, (Ints{0, 2}));
  EXPECT_FALSE(r.params.keepdims);
  EXPECT_EQ(r.flops, 24);

  InferResult k = Ok("reduce_max", {F32({2, 3, 4})}, {{"axes", Ints{-2}}});
  EXPECT_EQ(k.output.shape, (Shape{2, 1, 4}));
  EXPECT_TRUE(k.params.keepdims);
  EXPECT_EQ(k.params.axes, (Ints{1}));

  // Absent or empty axes: all axes, listed explicitly in the canonical form.
  for (const Attributes& a : {Attributes{}, Attributes{{"axes", Ints{}}}}) {
    InferResult all = Ok("reduce_mean", {F32({2, 3})}, a);
    EXPECT_EQ(all.output.shape, (Shape{1, 1}));
    EXPECT_EQ(all.params.axes, (Ints{0, 1}));
    EXPECT_EQ(all.canonical_attrs, (Attributes{{"axes", Ints{0, 1}}, {"keepdims", int64_t{1}}}));
  }
  EXPECT_EQ(Ok("reduce_min", {F32({2, 3})}, {{"keepdims", int64_t{0}}}).output.shape, Shape{});
  // An empty reduction is well defined (sum 0, max -inf).
  EXPECT_EQ(Ok("reduce_max", {F32({0, 3})}, {{"axes", Ints{0}}}).output.shape, (Shape{1, 3}));
  EXPECT_EQ(Ok("reduce_sum", {F32({})}).output.shape, Shape{});
}

TEST(OpSchemaReduce, CanonicalFormIgnoresSpelling) {
  InferResult a = Ok("reduce_sum", {F32({4, 5})}, {{"axes", Ints{-1}}});
  InferResult b = Ok("reduce_sum", {F32({4, 5})}, {{"axes", Ints{1}}, {"keepdims", int64_t{1}}});
  EXPECT_EQ(a.canonical_attrs, b.canonical_attrs);
  EXPECT_EQ(a.canonical_attrs, (Attributes{{"axes", Ints{1}}, {"keepdims", int64_t{1}}}));
  InferResult c = Ok("reduce_sum", {F32({4, 5})}, {{"axes", Ints{1, 0}}});
  InferResult d = Ok("reduce_sum", {F32({4, 5})}, {});
  EXPECT_EQ(c.canonical_attrs, d.canonical_attrs);
}

TEST(OpSchemaReduce, Errors) {
  EXPECT_INVALID(Infer("reduce_sum", {F32({2, 3})}, {{"axes", Ints{3}}}),
                 "reduce_sum: axis 3 is out of range for rank 2");
  EXPECT_INVALID(Infer("reduce_sum", {F32({2, 3})}, {{"axes", Ints{-3}}}), "axis -3 is out of range for rank 2");
  EXPECT_INVALID(Infer("reduce_sum", {F32({2, 3})}, {{"axes", Ints{1, -1}}}), "appears more than once");
  EXPECT_INVALID(Infer("reduce_sum", {F32({2, 3})}, {{"axes", int64_t{1}}}), "attribute 'axes' must be a list of ints");
  EXPECT_INVALID(Infer("reduce_sum", {F32({2, 3})}, {{"keepdims", int64_t{2}}}), "attribute 'keepdims' must be 0 or 1");
  EXPECT_INVALID(Infer("reduce_sum", {F32({2, 3})}, {{"keepdims", 1.0f}}), "attribute 'keepdims' must be an int");
  EXPECT_INVALID(Infer("reduce_sum", {F32({})}, {{"axes", Ints{0}}}), "out of range for rank 0");
}

TEST(OpSchemaReduce, DTypes) {
  EXPECT_EQ(Ok("reduce_sum", {I32({4})}).output.dtype, DType::kI32);
  EXPECT_EQ(Ok("reduce_sum", {I8({4})}).output.dtype, DType::kI8);
  EXPECT_INVALID(Infer("reduce_mean", {I32({4})}), "reduce_mean: input has dtype i32; expected f32");
  EXPECT_INVALID(Infer("reduce_sum", {Bool({4})}),
                 "expected f32, i8, i32, i64, u8, i16, u16, u32, u64, f64, f16 or bf16");
  EXPECT_EQ(Ok("reduce_max", {I64({4})}).output.dtype, DType::kI64);
  EXPECT_EQ(Ok("argmax", {I8({4})}).output.dtype, DType::kI64);
  EXPECT_INVALID(Infer("reduce_max", {Bool({4})}),
                 "expected f32, i8, i32, i64, u8, i16, u16, u32, u64, f64, f16 or bf16");
}

TEST(OpSchemaReduce, ArgMax) {
  InferResult r = Ok("argmax", {F32({2, 3, 4})}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}});
  EXPECT_EQ(r.output.dtype, DType::kI64);
  EXPECT_EQ(r.output.shape, (Shape{2, 3}));
  EXPECT_EQ(r.params.axis, 2);
  EXPECT_FALSE(r.params.keepdims);
  EXPECT_EQ(r.canonical_attrs, (Attributes{{"axis", int64_t{2}}, {"keepdims", int64_t{0}}}));

  InferResult d = Ok("argmax", {F32({2, 3})});
  EXPECT_EQ(d.output.shape, (Shape{1, 3}));
  EXPECT_EQ(d.params.axis, 0);
  EXPECT_TRUE(d.params.keepdims);

  EXPECT_INVALID(Infer("argmax", {F32({2, 0})}, {{"axis", int64_t{1}}}), "empty axis 1");
  EXPECT_INVALID(Infer("argmax", {F32({2, 3})}, {{"axis", int64_t{2}}}), "axis 2 is out of range for rank 2");
  EXPECT_INVALID(Infer("argmax", {F32({})}), "out of range for rank 0");
  // argmax and top_k order keys as i64: not the unsigned types or i16.
  EXPECT_INVALID(Infer("argmax", {TypeInfo{DType::kU64, {3}}}, {{"axis", int64_t{0}}}),
                 "has dtype u64; expected f32, i8, i32, i64, f16 or bf16");
  EXPECT_EQ(Ok("reduce_sum", {TypeInfo{DType::kU16, {3}}}).output.dtype, DType::kU16);
  EXPECT_EQ(Ok("cast", {TypeInfo{DType::kU32, {3}}}, {{"to", DType::kI16}}).output.dtype, DType::kI16);
  EXPECT_INVALID(Infer("argmax", {F32({2})}, {{"axis", Ints{0}}}), "attribute 'axis' must be an int");
  // Other axes may be empty: the output is then empty too.
  EXPECT_EQ(Ok("argmax", {F32({0, 3})}, {{"axis", int64_t{1}}}).output.shape, (Shape{0, 1}));
}

// ---------------------------------------------------------------------------------------
// Matmul.

TEST(OpSchemaMatMul, TwoD) {
  InferResult r = Ok("matmul", {F32({4, 16}), F32({16, 8})});
  EXPECT_EQ(r.output.dtype, DType::kF32);
  EXPECT_EQ(r.output.shape, (Shape{4, 8}));
  EXPECT_EQ(r.flops, 2 * 4 * 16 * 8);
  ASSERT_EQ(r.kernel_input_shapes.size(), 2u);
  EXPECT_EQ(r.kernel_input_shapes[0], (Shape{4, 16}));
  EXPECT_EQ(r.kernel_input_shapes[1], (Shape{16, 8}));
  EXPECT_EQ(r.kernel_output_shape, (Shape{4, 8}));
  EXPECT_TRUE(r.canonical_attrs.empty());
}

TEST(OpSchemaMatMul, RankOnePromotion) {
  InferResult a = Ok("matmul", {F32({16}), F32({16, 8})});
  EXPECT_EQ(a.output.shape, (Shape{8}));
  EXPECT_EQ(a.kernel_input_shapes[0], (Shape{1, 16}));
  EXPECT_EQ(a.kernel_input_shapes[1], (Shape{16, 8}));
  EXPECT_EQ(a.kernel_output_shape, (Shape{1, 8}));

  InferResult b = Ok("matmul", {F32({3, 4, 16}), F32({16})});
  EXPECT_EQ(b.output.shape, (Shape{3, 4}));
  EXPECT_EQ(b.kernel_input_shapes[0], (Shape{3, 4, 16}));
  EXPECT_EQ(b.kernel_input_shapes[1], (Shape{1, 16, 1}));
  EXPECT_EQ(b.kernel_output_shape, (Shape{3, 4, 1}));

  InferResult dot = Ok("matmul", {F32({16}), F32({16})});
  EXPECT_EQ(dot.output.shape, Shape{});
  EXPECT_EQ(dot.kernel_output_shape, (Shape{1, 1}));
  EXPECT_EQ(dot.flops, 32);
}

TEST(OpSchemaMatMul, BatchBroadcast) {
  InferResult r = Ok("matmul", {F32({2, 1, 4, 16}), F32({3, 16, 8})});
  EXPECT_EQ(r.output.shape, (Shape{2, 3, 4, 8}));
  EXPECT_EQ(r.kernel_input_shapes[0], (Shape{2, 1, 4, 16}));
  EXPECT_EQ(r.kernel_input_shapes[1], (Shape{1, 3, 16, 8}));
  EXPECT_EQ(r.kernel_output_shape, (Shape{2, 3, 4, 8}));
  EXPECT_EQ(r.flops, 2 * 6 * 4 * 8 * 16);
  EXPECT_EQ(Ok("matmul", {F32({5, 0, 3}), F32({3, 2})}).output.shape, (Shape{5, 0, 2}));
  EXPECT_INVALID(Infer("matmul", {F32({2, 4, 16}), F32({3, 16, 8})}),
                 "batch dimensions cannot be broadcast: a is f32[2, 4, 16], b is f32[3, 16, 8]");
}

TEST(OpSchemaMatMul, Errors) {
  EXPECT_INVALID(Infer("matmul", {F32({4, 16}), F32({15, 8})}),
                 "matmul: inner dimensions differ: a is f32[4, 16], b is f32[15, 8]");
  EXPECT_INVALID(Infer("matmul", {F32({}), F32({3})}), "a must have rank >= 1");
  EXPECT_INVALID(Infer("matmul", {F32({3}), F32({})}), "b must have rank >= 1");
  EXPECT_INVALID(Infer("matmul", {I8({2, 2}), I8({2, 2})}), "expected f32");
  EXPECT_INVALID(Infer("matmul", {F32({2, 2}), I32({2, 2})}), "b has dtype i32; expected f32");
}

TEST(OpSchemaMatMul, Int8) {
  InferResult r = Ok("matmul_i8", {I8({2, 3}), I8({3, 5})});
  EXPECT_EQ(r.output.dtype, DType::kI32);
  EXPECT_EQ(r.output.shape, (Shape{2, 5}));
  EXPECT_EQ(r.flops, 2 * 2 * 3 * 5);
  EXPECT_INVALID(Infer("matmul_i8", {F32({2, 3}), F32({3, 5})}), "matmul_i8: a has dtype f32; expected i8");
  EXPECT_INVALID(Infer("matmul_i8", {I8({2, 3}), I32({3, 5})}), "expected i8");
}

TEST(OpSchemaMatMul, FlopsSaturate) {
  const int64_t big = int64_t{1} << 21;  // 2 * big^3 = 2^64
  InferResult r = Ok("matmul", {F32({big, big}), F32({big, big})});
  EXPECT_EQ(r.flops, kMax);
}

// ---------------------------------------------------------------------------------------
// Conv and pools.

TEST(OpSchemaConv, Basic) {
  InferResult r = Ok("conv2d", {F32({2, 3, 32, 32}), F32({8, 3, 3, 3})}, {{"pads", Ints{1, 1, 1, 1}}});
  EXPECT_EQ(r.output.shape, (Shape{2, 8, 32, 32}));
  EXPECT_EQ(r.params.strides, (Ints{1, 1}));
  EXPECT_EQ(r.params.pads, (Ints{1, 1, 1, 1}));
  EXPECT_EQ(r.params.dilations, (Ints{1, 1}));
  EXPECT_EQ(r.params.kernel, (Ints{3, 3}));
  EXPECT_EQ(r.params.group, 1);
  EXPECT_EQ(r.flops, int64_t{2} * (2 * 8 * 32 * 32) * 3 * 3 * 3);
  EXPECT_EQ(
      r.canonical_attrs,
      (Attributes{
          {"strides", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}}, {"dilations", Ints{1, 1}}, {"group", int64_t{1}}}));
  // Same op spelled with all defaults explicit.
  InferResult same = Ok("conv2d", {F32({2, 3, 32, 32}), F32({8, 3, 3, 3})},
                        {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{1, 1}}, {"group", int64_t{1}}});
  EXPECT_EQ(same.canonical_attrs, r.canonical_attrs);
}

TEST(OpSchemaConv, StridesDilationsGroupsBias) {
  // OH = (9 + 0 + 1 - 2*(3-1) - 1) / 2 + 1 = 3; OW = (10 + 2 + 0 - 1*(2-1) - 1) / 3 + 1 = 4.
  InferResult r =
      Ok("conv2d", {F32({1, 4, 9, 10}), F32({6, 2, 3, 2}), F32({6})},
         {{"strides", Ints{2, 3}}, {"pads", Ints{0, 2, 1, 0}}, {"dilations", Ints{2, 1}}, {"group", int64_t{2}}});
  EXPECT_EQ(r.output.shape, (Shape{1, 6, 3, 4}));
  EXPECT_EQ(r.params.group, 2);
  EXPECT_EQ(r.params.kernel, (Ints{3, 2}));
  EXPECT_EQ(r.params.strides, (Ints{2, 3}));
  EXPECT_EQ(r.params.dilations, (Ints{2, 1}));
  EXPECT_EQ(r.flops, 2 * (6 * 3 * 4) * 2 * 3 * 2 + 6 * 3 * 4);
  // Depthwise.
  EXPECT_EQ(Ok("conv2d", {F32({1, 3, 5, 5}), F32({3, 1, 3, 3})}, {{"group", int64_t{3}}}).output.shape,
            (Shape{1, 3, 3, 3}));
}

TEST(OpSchemaConv, Errors) {
  const TypeInfo x = F32({1, 6, 8, 8});
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3})}, {{"group", int64_t{4}}}),
                 "input channels 6 are not divisible by group 4");
  EXPECT_INVALID(Infer("conv2d", {x, F32({5, 3, 3, 3})}, {{"group", int64_t{2}}}),
                 "output channels 5 are not divisible by group 2");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 3, 3, 3})}), "has 3 input channels per group");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3})}, {{"group", int64_t{0}}}), "'group' must be >= 1");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3})}, {{"group", int64_t{-2}}}), "'group' must be >= 1");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3}), F32({5})}), "bias must have shape [4]");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3}), I32({4})}), "dtypes differ");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 9, 3})}), "output height would be empty");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3})}, {{"dilations", Ints{1, 4}}}), "output width would be empty");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 0, 3})}), "empty kernel");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3})}, {{"strides", Ints{0, 1}}}),
                 "attribute 'strides' values must be >= 1");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3})}, {{"strides", Ints{1, 1, 1}}}),
                 "attribute 'strides' must have 2 values, got 3");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3})}, {{"pads", Ints{0, -1, 0, 0}}}),
                 "attribute 'pads' values must be >= 0");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3})}, {{"pads", Ints{kMax, 0, kMax, 0}}}), "too large");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3})}, {{"dilations", Ints{kMax, 1}}}), "too large");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3})}, {{"dilations", Ints{0, 1}}}), "must be >= 1");
  EXPECT_INVALID(Infer("conv2d", {F32({6, 8, 8}), F32({4, 6, 3, 3})}), "input (N, C, H, W) must have rank 4");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3})}), "must have rank 4");
  EXPECT_INVALID(Infer("conv2d", {I32({1, 6, 8, 8}), I32({4, 6, 3, 3})}), "expected f32");
  EXPECT_INVALID(Infer("conv2d", {x, F32({4, 6, 3, 3})}, {{"strides", 2.0f}}),
                 "attribute 'strides' must be a list of ints");
}

TEST(OpSchemaPool, MaxAndAvg) {
  InferResult m = Ok("max_pool2d", {F32({1, 3, 8, 8})}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  EXPECT_EQ(m.output.shape, (Shape{1, 3, 4, 4}));
  EXPECT_EQ(m.params.kernel, (Ints{2, 2}));
  EXPECT_EQ(m.params.strides, (Ints{2, 2}));
  EXPECT_EQ(m.params.pads, (Ints{0, 0, 0, 0}));
  EXPECT_EQ(m.params.dilations, (Ints{1, 1}));
  EXPECT_EQ(m.flops, 3 * 4 * 4 * 4);
  EXPECT_EQ(
      m.canonical_attrs,
      (Attributes{
          {"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{0, 0, 0, 0}}, {"dilations", Ints{1, 1}}}));
  // Dilated max pool: span 2*(3-1)+1 = 5 over 9 + 1 padding -> (10-5)/1+1 = 6.
  EXPECT_EQ(Ok("max_pool2d", {F32({1, 1, 9, 9})},
               {{"kernel", Ints{3, 3}}, {"dilations", Ints{2, 2}}, {"pads", Ints{1, 0, 0, 0}}})
                .output.shape,
            (Shape{1, 1, 6, 5}));

  InferResult a = Ok(
      "avg_pool2d", {F32({2, 3, 7, 7})},
      {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}});
  EXPECT_EQ(a.output.shape, (Shape{2, 3, 4, 4}));
  EXPECT_TRUE(a.params.count_include_pad);
  EXPECT_EQ(a.canonical_attrs.at("count_include_pad"), AttrValue(int64_t{1}));
  EXPECT_EQ(a.canonical_attrs.at("dilations"), AttrValue(Ints{1, 1}));
  EXPECT_FALSE(Ok("avg_pool2d", {F32({1, 1, 4, 4})}, {{"kernel", Ints{2, 2}}}).params.count_include_pad);
}

TEST(OpSchemaPool, Errors) {
  const TypeInfo x = F32({1, 3, 8, 8});
  EXPECT_INVALID(Infer("max_pool2d", {x}), "missing required attribute 'kernel'");
  EXPECT_INVALID(Infer("max_pool2d", {x}, {{"kernel", Ints{0, 2}}}), "attribute 'kernel' values must be >= 1");
  EXPECT_INVALID(Infer("max_pool2d", {x}, {{"kernel", Ints{2}}}), "attribute 'kernel' must have 2 values");
  EXPECT_INVALID(Infer("max_pool2d", {x}, {{"kernel", Ints{9, 2}}}), "output height would be empty");
  EXPECT_INVALID(Infer("max_pool2d", {x}, {{"kernel", Ints{2, 2}}, {"pads", Ints{0, 0, -1, 0}}}), ">= 0");
  EXPECT_INVALID(Infer("avg_pool2d", {x}, {{"kernel", Ints{2, 2}}, {"dilations", Ints{2, 2}}}),
                 "'dilations' must be [1, 1] for average pooling");
  EXPECT_INVALID(Infer("avg_pool2d", {x}, {{"kernel", Ints{2, 2}}, {"count_include_pad", int64_t{3}}}),
                 "must be 0 or 1");
  EXPECT_INVALID(Infer("avg_pool2d", {F32({3, 8, 8})}, {{"kernel", Ints{2, 2}}}), "must have rank 4");
  EXPECT_INVALID(Infer("max_pool2d", {I32({1, 3, 8, 8})}, {{"kernel", Ints{2, 2}}}), "expected f32");
}

// ---------------------------------------------------------------------------------------
// Softmax and layer_norm.

TEST(OpSchemaNorm, Softmax) {
  InferResult r = Ok("softmax", {F32({2, 5})});
  EXPECT_EQ(r.output.shape, (Shape{2, 5}));
  EXPECT_EQ(r.params.axis, 1);
  EXPECT_EQ(r.canonical_attrs, (Attributes{{"axis", int64_t{1}}}));
  EXPECT_GT(r.flops, 10);
  EXPECT_EQ(Ok("softmax", {F32({2, 5})}, {{"axis", int64_t{-2}}}).params.axis, 0);
  EXPECT_INVALID(Infer("softmax", {F32({2, 5})}, {{"axis", int64_t{2}}}), "axis 2 is out of range for rank 2");
  EXPECT_INVALID(Infer("softmax", {F32({})}), "axis -1 is out of range for rank 0");
  EXPECT_INVALID(Infer("softmax", {I32({3})}), "expected f32");
}

TEST(OpSchemaNorm, LayerNorm) {
  InferResult r = Ok("layer_norm", {F32({2, 3, 4}), F32({4})});
  EXPECT_EQ(r.output.shape, (Shape{2, 3, 4}));
  EXPECT_EQ(r.params.axis, 2);
  EXPECT_FLOAT_EQ(r.params.epsilon, 1e-5f);
  EXPECT_EQ(r.canonical_attrs, (Attributes{{"axis", int64_t{2}}, {"epsilon", 1e-5f}}));

  InferResult b = Ok("layer_norm", {F32({2, 3, 4}), F32({3, 4}), F32({3, 4})},
                     {{"axis", int64_t{1}}, {"epsilon", int64_t{1}}});  // an int epsilon is fine
  EXPECT_EQ(b.params.axis, 1);
  EXPECT_EQ(b.params.epsilon, 1.0f);
  EXPECT_EQ(b.canonical_attrs.at("epsilon"), AttrValue(1.0f));

  EXPECT_INVALID(Infer("layer_norm", {F32({2, 3, 4}), F32({3})}), "scale must have shape [4]");
  EXPECT_INVALID(Infer("layer_norm", {F32({2, 3, 4}), F32({4}), F32({3, 4})}), "bias must have shape [4]");
  EXPECT_INVALID(Infer("layer_norm", {F32({2, 3, 4}), I32({4})}), "dtypes differ");
  EXPECT_INVALID(Infer("layer_norm", {F32({2, 3, 4}), F32({4})}, {{"epsilon", -1.0f}}),
                 "attribute 'epsilon' must be finite and non-negative");
  EXPECT_INVALID(
      Infer("layer_norm", {F32({2, 3, 4}), F32({4})}, {{"epsilon", std::numeric_limits<float>::quiet_NaN()}}),
      "must be finite");
  EXPECT_INVALID(Infer("layer_norm", {F32({2, 3, 4}), F32({4})}, {{"epsilon", Ints{1}}}),
                 "attribute 'epsilon' must be a float");
  EXPECT_INVALID(Infer("layer_norm", {F32({2, 3, 4}), F32({4})}, {{"axis", int64_t{3}}}), "out of range for rank 3");
}

// ---------------------------------------------------------------------------------------
// Data movement.

TEST(OpSchemaData, Reshape) {
  InferResult r = Ok("reshape", {I32({2, 3, 4})}, {{"shape", Ints{6, -1}}});
  EXPECT_EQ(r.output.dtype, DType::kI32);
  EXPECT_EQ(r.output.shape, (Shape{6, 4}));
  EXPECT_EQ(r.flops, 0);
  EXPECT_EQ(r.canonical_attrs, (Attributes{{"shape", Ints{6, 4}}}));
  EXPECT_EQ(Ok("reshape", {F32({2, 3})}, {{"shape", Ints{6}}}).canonical_attrs,
            Ok("reshape", {F32({2, 3})}, {{"shape", Ints{-1}}}).canonical_attrs);
  EXPECT_EQ(Ok("reshape", {F32({1})}, {{"shape", Ints{}}}).output.shape, Shape{});
  // 0 is a literal zero dim, not "copy the input dim".
  EXPECT_EQ(Ok("reshape", {F32({0, 3})}, {{"shape", Ints{0, 5}}}).output.shape, (Shape{0, 5}));
  EXPECT_INVALID(Infer("reshape", {F32({2, 3})}, {{"shape", Ints{0, 3}}}),
                 "cannot reshape f32[2, 3] (6 elements) to [0, 3] (0 elements)");
  EXPECT_INVALID(Infer("reshape", {F32({2, 3})}, {{"shape", Ints{4, 2}}}), "(6 elements) to [4, 2] (8 elements)");
  EXPECT_INVALID(Infer("reshape", {F32({2, 3})}, {{"shape", Ints{4, -1}}}), "cannot reshape f32[2, 3]");
  EXPECT_INVALID(Infer("reshape", {F32({2, 3})}, {{"shape", Ints{-1, -1}}}), "more than one -1");
  EXPECT_INVALID(Infer("reshape", {F32({2, 3})}, {{"shape", Ints{-2, -3}}}), "negative dimension");
  EXPECT_INVALID(Infer("reshape", {F32({0, 3})}, {{"shape", Ints{0, -1}}}), "cannot infer the -1");
  EXPECT_INVALID(Infer("reshape", {F32({2, 3})}, {{"shape", Ints{kMax, kMax, 0}}}), "too many elements");
  EXPECT_INVALID(Infer("reshape", {F32({2, 3})}, {{"shape", Ints{1, 1, 1, 1, 1, 1, 1, 2, 3}}}), "maximum is 8");
  EXPECT_INVALID(Infer("reshape", {F32({2, 3})}), "missing required attribute 'shape'");
}

TEST(OpSchemaData, Transpose) {
  InferResult r = Ok("transpose", {F32({2, 3, 4})});
  EXPECT_EQ(r.output.shape, (Shape{4, 3, 2}));
  EXPECT_EQ(r.params.perm, (Ints{2, 1, 0}));
  EXPECT_EQ(r.canonical_attrs, (Attributes{{"perm", Ints{2, 1, 0}}}));
  InferResult p = Ok("transpose", {Bool({2, 3, 4})}, {{"perm", Ints{0, 2, 1}}});
  EXPECT_EQ(p.output.shape, (Shape{2, 4, 3}));
  EXPECT_EQ(p.output.dtype, DType::kBool);
  EXPECT_EQ(p.params.perm, (Ints{0, 2, 1}));
  EXPECT_EQ(Ok("transpose", {F32({})}).output.shape, Shape{});
  EXPECT_INVALID(Infer("transpose", {F32({2, 3, 4})}, {{"perm", Ints{0, 0, 1}}}),
                 "perm [0, 0, 1] is not a permutation");
  EXPECT_INVALID(Infer("transpose", {F32({2, 3, 4})}, {{"perm", Ints{0, 1}}}), "not a permutation");
  EXPECT_INVALID(Infer("transpose", {F32({2, 3, 4})}, {{"perm", Ints{0, 1, 3}}}), "not a permutation");
  EXPECT_INVALID(Infer("transpose", {F32({2, 3, 4})}, {{"perm", Ints{0, 1, -1}}}), "not a permutation");
}

TEST(OpSchemaData, SliceBasic) {
  InferResult r = Ok("slice", {F32({10, 20})}, {{"starts", Ints{1}}, {"ends", Ints{-1}}});
  EXPECT_EQ(r.output.shape, (Shape{8, 20}));
  EXPECT_EQ(r.params.starts, (Ints{1, 0}));
  EXPECT_EQ(r.params.steps, (Ints{1, 1}));
  EXPECT_EQ(r.flops, 0);

  InferResult ax =
      Ok("slice", {F32({10, 20})}, {{"starts", Ints{3}}, {"ends", Ints{kMax}}, {"axes", Ints{-1}}, {"steps", Ints{4}}});
  EXPECT_EQ(ax.output.shape, (Shape{10, 5}));  // 3, 7, 11, 15, 19
  EXPECT_EQ(ax.params.starts, (Ints{0, 3}));
  EXPECT_EQ(ax.params.steps, (Ints{1, 4}));

  // Clamping: starts beyond the dim give an empty result.
  EXPECT_EQ(Ok("slice", {F32({10})}, {{"starts", Ints{20}}, {"ends", Ints{30}}}).output.shape, (Shape{0}));
  EXPECT_EQ(Ok("slice", {F32({10})}, {{"starts", Ints{-100}}, {"ends", Ints{3}}}).output.shape, (Shape{3}));
  EXPECT_EQ(Ok("slice", {F32({10})}, {{"starts", Ints{5}}, {"ends", Ints{2}}}).output.shape, (Shape{0}));
  EXPECT_EQ(Ok("slice", {F32({0, 4})}, {{"starts", Ints{0}}, {"ends", Ints{1}}}).output.shape, (Shape{0, 4}));
}

TEST(OpSchemaData, SliceNegativeSteps) {
  // Full reversal: start -1 -> 9, end INT64_MIN -> clamped to -1.
  InferResult rev = Ok("slice", {F32({10})}, {{"starts", Ints{-1}}, {"ends", Ints{kMin}}, {"steps", Ints{-1}}});
  EXPECT_EQ(rev.output.shape, (Shape{10}));
  EXPECT_EQ(rev.params.starts, (Ints{9}));
  EXPECT_EQ(rev.params.steps, (Ints{-1}));
  // end -1 means dim - 1 = 9, so nothing is taken.
  EXPECT_EQ(Ok("slice", {F32({10})}, {{"starts", Ints{9}}, {"ends", Ints{-1}}, {"steps", Ints{-1}}}).output.shape,
            (Shape{0}));
  // start 100 clamps to 9; 9, 6, 3 (end 1 exclusive).
  InferResult s3 = Ok("slice", {F32({10})}, {{"starts", Ints{100}}, {"ends", Ints{1}}, {"steps", Ints{-3}}});
  EXPECT_EQ(s3.output.shape, (Shape{3}));
  EXPECT_EQ(s3.params.starts, (Ints{9}));
  EXPECT_EQ(s3.params.steps, (Ints{-3}));
  // An extreme step takes one element and does not overflow.
  InferResult one = Ok("slice", {F32({10})}, {{"starts", Ints{5}}, {"ends", Ints{kMin}}, {"steps", Ints{kMin}}});
  EXPECT_EQ(one.output.shape, (Shape{1}));
  EXPECT_EQ(one.params.starts, (Ints{5}));
  EXPECT_EQ(Ok("slice", {F32({10})}, {{"starts", Ints{0}}, {"ends", Ints{kMax}}, {"steps", Ints{kMax}}}).output.shape,
            (Shape{1}));
  // Negative step on an empty dim.
  EXPECT_EQ(Ok("slice", {F32({0})}, {{"starts", Ints{-1}}, {"ends", Ints{kMin}}, {"steps", Ints{-1}}}).output.shape,
            (Shape{0}));
}

TEST(OpSchemaData, SliceCanonicalForm) {
  // Different spellings of the same slice get the same canonical attributes.
  InferResult a = Ok("slice", {F32({10, 20})}, {{"starts", Ints{2}}, {"ends", Ints{kMax}}, {"axes", Ints{1}}});
  InferResult b = Ok("slice", {F32({10, 20})},
                     {{"starts", Ints{0, -18}}, {"ends", Ints{10, 20}}, {"axes", Ints{0, 1}}, {"steps", Ints{1, 1}}});
  EXPECT_EQ(a.canonical_attrs, b.canonical_attrs);
  EXPECT_EQ(a.canonical_attrs,
            (Attributes{{"starts", Ints{0, 2}}, {"ends", Ints{10, 20}}, {"axes", Ints{0, 1}}, {"steps", Ints{1, 1}}}));
  // Step 2 over [0, 5) and [0, 6) takes the same elements.
  EXPECT_EQ(Ok("slice", {F32({10})}, {{"starts", Ints{0}}, {"ends", Ints{5}}, {"steps", Ints{2}}}).canonical_attrs,
            Ok("slice", {F32({10})}, {{"starts", Ints{0}}, {"ends", Ints{6}}, {"steps", Ints{2}}}).canonical_attrs);
  // A reversal that reaches index 0 round-trips through the canonical form (checked by Ok()).
  InferResult rev = Ok("slice", {F32({4})}, {{"starts", Ints{3}}, {"ends", Ints{kMin}}, {"steps", Ints{-1}}});
  EXPECT_EQ(rev.canonical_attrs.at("ends"), AttrValue(Ints{-5}));
  // All empty slices are the same.
  EXPECT_EQ(Ok("slice", {F32({10})}, {{"starts", Ints{7}}, {"ends", Ints{3}}}).canonical_attrs,
            Ok("slice", {F32({10})}, {{"starts", Ints{3}}, {"ends", Ints{7}}, {"steps", Ints{-2}}}).canonical_attrs);
}

TEST(OpSchemaData, SliceErrors) {
  const TypeInfo x = F32({10, 20});
  EXPECT_INVALID(Infer("slice", {x}, {{"starts", Ints{0}}, {"ends", Ints{5}}, {"steps", Ints{0}}}),
                 "step for axis 0 must not be 0");
  EXPECT_INVALID(Infer("slice", {x}, {{"starts", Ints{0, 0}}, {"ends", Ints{5}}}),
                 "'starts' and 'ends' must have the same length");
  EXPECT_INVALID(Infer("slice", {x}, {{"starts", Ints{0}}, {"ends", Ints{5}}, {"axes", Ints{0, 1}}}),
                 "'axes' [0, 1] must have the same length");
  EXPECT_INVALID(Infer("slice", {x}, {{"starts", Ints{0}}, {"ends", Ints{5}}, {"steps", Ints{1, 1}}}),
                 "'steps' [1, 1] must have the same length");
  EXPECT_INVALID(Infer("slice", {x}, {{"starts", Ints{0, 0}}, {"ends", Ints{1, 1}}, {"axes", Ints{1, -1}}}),
                 "axis 1 appears more than once");
  EXPECT_INVALID(Infer("slice", {x}, {{"starts", Ints{0}}, {"ends", Ints{1}}, {"axes", Ints{2}}}),
                 "axis 2 is out of range for rank 2");
  EXPECT_INVALID(Infer("slice", {x}, {{"starts", Ints{0, 0, 0}}, {"ends", Ints{1, 1, 1}}}),
                 "'starts' has 3 values but the input f32[10, 20] has rank 2");
  EXPECT_INVALID(Infer("slice", {x}, {{"ends", Ints{1}}}), "missing required attribute 'starts'");
  EXPECT_INVALID(Infer("slice", {x}, {{"starts", Ints{0}}, {"ends", int64_t{1}}}), "'ends' must be a list of ints");
}

TEST(OpSchemaData, Concat) {
  InferResult r = Ok("concat", {F32({2, 3}), F32({4, 3}), F32({0, 3})});
  EXPECT_EQ(r.output.shape, (Shape{6, 3}));
  EXPECT_EQ(r.params.axis, 0);
  EXPECT_EQ(r.canonical_attrs, (Attributes{{"axis", int64_t{0}}}));
  InferResult last = Ok("concat", {I64({2, 3}), I64({2, 5})}, {{"axis", int64_t{-1}}});
  EXPECT_EQ(last.output.shape, (Shape{2, 8}));
  EXPECT_EQ(last.params.axis, 1);
  EXPECT_EQ(Ok("concat", {Bool({7})}).output.shape, (Shape{7}));
  EXPECT_INVALID(Infer("concat", {F32({2, 3}), F32({2, 4})}),
                 "input 0 is f32[2, 3] but input 1 is f32[2, 4]; all dims except axis 0 must match");
  EXPECT_INVALID(Infer("concat", {F32({2, 3}), F32({2, 3, 1})}), "all dims except axis 0 must match");
  EXPECT_INVALID(Infer("concat", {F32({2}), I32({2})}), "dtypes differ");
  EXPECT_INVALID(Infer("concat", {F32({}), F32({})}), "axis 0 is out of range for rank 0");
  EXPECT_INVALID(Infer("concat", {F32({2})}, {{"axis", int64_t{1}}}), "axis 1 is out of range for rank 1");
  EXPECT_INVALID(Infer("concat", {F32({int64_t{1} << 61}), F32({int64_t{1} << 61}), F32({int64_t{1} << 61}),
                                  F32({int64_t{1} << 61})}),
                 "too large");
}

TEST(OpSchemaData, Gather) {
  InferResult r = Ok("gather", {F32({5, 4}), I64({2, 3})});
  EXPECT_EQ(r.output.shape, (Shape{2, 3, 4}));
  EXPECT_EQ(r.output.dtype, DType::kF32);
  EXPECT_EQ(r.params.axis, 0);
  EXPECT_EQ(r.canonical_attrs, (Attributes{{"axis", int64_t{0}}}));
  InferResult a1 = Ok("gather", {I8({5, 4, 3}), I32({2})}, {{"axis", int64_t{-2}}});
  EXPECT_EQ(a1.output.shape, (Shape{5, 2, 3}));
  EXPECT_EQ(a1.params.axis, 1);
  EXPECT_EQ(Ok("gather", {F32({5, 4}), I32({})}).output.shape, (Shape{4}));
  EXPECT_INVALID(Infer("gather", {F32({5, 4}), F32({2})}), "indices has dtype f32; expected i32 or i64");
  EXPECT_INVALID(Infer("gather", {F32({5, 4}), I8({2})}), "expected i32 or i64");
  EXPECT_INVALID(Infer("gather", {F32({5, 4}), I32({2})}, {{"axis", int64_t{2}}}), "axis 2 is out of range");
  EXPECT_INVALID(Infer("gather", {F32({}), I32({2})}), "out of range for rank 0");
  EXPECT_INVALID(Infer("gather", {F32({2, 2, 2, 2, 2}), I32({1, 1, 1, 1, 1})}), "would have rank 9");
}

TEST(OpSchemaData, Expand) {
  InferResult r = Ok("expand", {F32({3, 1})}, {{"shape", Ints{2, 1, 4}}});
  EXPECT_EQ(r.output.shape, (Shape{2, 3, 4}));
  EXPECT_EQ(r.canonical_attrs, (Attributes{{"shape", Ints{2, 3, 4}}}));
  EXPECT_EQ(r.flops, 0);
  EXPECT_EQ(Ok("expand", {I32({1})}, {{"shape", Ints{0}}}).output.shape, (Shape{0}));
  EXPECT_EQ(Ok("expand", {I32({5})}, {{"shape", Ints{}}}).output.shape, (Shape{5}));
  EXPECT_INVALID(Infer("expand", {F32({3, 2})}, {{"shape", Ints{4, 4}}}), "cannot broadcast f32[3, 2] to shape [4, 4]");
  EXPECT_INVALID(Infer("expand", {F32({3})}, {{"shape", Ints{-1, 3}}}), "negative dimension");
  EXPECT_INVALID(Infer("expand", {F32({3})}, {{"shape", Ints{1, 1, 1, 1, 1, 1, 1, 1, 3}}}), "maximum is 8");
}

TEST(OpSchemaData, Pad) {
  InferResult r = Ok("pad", {I32({2, 3})}, {{"pads", Ints{1, 0, 2, 1}}, {"value", 7.5f}});
  EXPECT_EQ(r.output.shape, (Shape{5, 4}));
  EXPECT_EQ(r.output.dtype, DType::kI32);
  EXPECT_EQ(r.params.pad_begin, (Ints{1, 0}));
  EXPECT_EQ(r.params.pad_end, (Ints{2, 1}));
  EXPECT_EQ(r.params.pad_value, 7.5f);
  EXPECT_EQ(r.canonical_attrs, (Attributes{{"pads", Ints{1, 0, 2, 1}}, {"value", 7.5f}}));
  InferResult d = Ok("pad", {F32({2})}, {{"pads", Ints{0, 3}}, {"value", int64_t{2}}});
  EXPECT_EQ(d.params.pad_value, 2.0f);
  EXPECT_EQ(d.canonical_attrs.at("value"), AttrValue(2.0f));
  EXPECT_EQ(Ok("pad", {F32({2})}, {{"pads", Ints{0, 0}}}).canonical_attrs.at("value"), AttrValue(0.0f));
  EXPECT_INVALID(Infer("pad", {F32({2, 3})}, {{"pads", Ints{1, 0, -1, 0}}}), "attribute 'pads' values must be >= 0");
  EXPECT_INVALID(Infer("pad", {F32({2, 3})}, {{"pads", Ints{1, 1}}}), "attribute 'pads' must have 4 values, got 2");
  EXPECT_INVALID(Infer("pad", {F32({2, 3})}), "missing required attribute 'pads'");
  EXPECT_INVALID(Infer("pad", {F32({2})}, {{"pads", Ints{0, 0}}, {"value", Ints{1}}}),
                 "attribute 'value' must be a float");
  EXPECT_INVALID(Infer("pad", {F32({2})}, {{"pads", Ints{kMax, kMax}}}), "too large");
}

}  // namespace
}  // namespace consensor::executor
