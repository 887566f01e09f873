#include "executor/runtime.h"

#include <cstdio>
#include <string>

#include "executor/merkle.h"

namespace consensor::executor {

namespace {

void AppendInts(std::string* s, const std::vector<int64_t>& v) {
  for (int64_t x : v) *s += std::to_string(x) + ",";
  *s += "|";
}

// Everything a backend's prepared copy of input k of `ins` may depend on: the op, the constant
// buffer, every operand's view shape and the op's parameters. Equal keys, equal calls.
std::string PreparedKey(const Instruction& ins, size_t k) {
  std::string key = ins.op_name + "|" + std::to_string(k) + "|" + std::to_string(ins.inputs[k]) + "|";
  for (const Shape& s : ins.input_view_shapes) key += ShapeToString(s);
  key += "->" + ShapeToString(ins.output_view_shape) + "|";
  const kernels::OpParams& p = ins.params;
  for (const auto* v : {&p.axes, &p.perm, &p.starts, &p.steps, &p.kernel, &p.strides, &p.dilations, &p.pads,
                        &p.pad_begin, &p.pad_end, &p.input_stuffing}) {
    AppendInts(&key, *v);
  }
  AppendInts(&key, {p.keepdims, p.axis, p.k, p.largest, p.group, p.count_include_pad, static_cast<int64_t>(p.to),
                    p.im2col_groups, p.sum_widens_i8});
  char floats[64];
  std::snprintf(floats, sizeof(floats), "%a|%a", static_cast<double>(p.epsilon), static_cast<double>(p.pad_value));
  return key + floats;
}

}  // namespace

StatusOr<std::unique_ptr<LoadedProgram>> LoadedProgram::Load(const Program& program, kernels::Backend* backend) {
  std::unique_ptr<LoadedProgram> lp(new LoadedProgram(program, backend));
  ASSIGN_OR_RETURN(lp->arena_, backend->AllocateArena(program.arena_bytes));
  for (const auto& [buffer, tensor] : program.constants) {
    RETURN_IF_ERROR(lp->arena_->CopyIn(program.buffers[buffer].offset, tensor.data(), tensor.byte_size()));
  }
  for (const Instruction& ins : program.instructions) {
    if (ins.alias) continue;  // runs no kernel
    // Supports() only looks at op, dtypes and ranks; pointers are not needed.
    std::vector<kernels::TensorView> views;
    for (size_t i = 0; i < ins.inputs.size(); ++i) views.push_back(lp->View(ins.inputs[i], ins.input_view_shapes[i]));
    kernels::TensorView out = lp->View(ins.output, ins.output_view_shape);
    kernels::KernelCall call{ins.op, &ins.params, views.data(), static_cast<int>(views.size()), &out, 1};
    if (!backend->Supports(call)) {
      return Unimplemented("backend " + backend->name() + " does not support " + ins.op_name + " at " + ins.node_label);
    }
  }
  lp->fused_supported_ = !program.fused_instructions.empty();
  for (const Instruction& ins : program.fused_instructions) {
    if (!lp->fused_supported_) break;
    // A conv over a zero-stuffed input or with its relu, the im2col transpose, the widening sum,
    // the one-pass quantize and the Resize lowering's two taps are calls of their own
    // (kernels::OpParams::input_stuffing, relu_output, im2col_groups, sum_widens_i8; a cast with
    // three inputs, a gather with five).
    const bool own_call = !ins.params.input_stuffing.empty() || ins.params.relu_output ||
                          ins.params.im2col_groups != 0 || ins.params.sum_widens_i8 ||
                          (ins.op == kernels::Op::kCast && ins.inputs.size() == 3) ||
                          (ins.op == kernels::Op::kGather && ins.inputs.size() == 5);
    if (ins.epilogue.empty() && !own_call) continue;
    std::vector<kernels::TensorView> views, epilogue_views;
    for (size_t i = 0; i < ins.inputs.size(); ++i) views.push_back(lp->View(ins.inputs[i], ins.input_view_shapes[i]));
    for (size_t i = 0; i < ins.epilogue_inputs.size(); ++i) {
      epilogue_views.push_back(lp->View(ins.epilogue_inputs[i], ins.epilogue_input_shapes[i]));
    }
    kernels::TensorView out = lp->View(ins.output, ins.output_view_shape);
    kernels::Epilogue epilogue{ins.epilogue.data(), static_cast<int>(ins.epilogue.size()), epilogue_views.data(),
                               static_cast<int>(epilogue_views.size())};
    kernels::KernelCall call{ins.op,
                             &ins.params,
                             views.data(),
                             static_cast<int>(views.size()),
                             &out,
                             1,
                             ins.epilogue.empty() ? nullptr : &epilogue};
    lp->fused_supported_ = backend->Supports(call) && (ins.epilogue.empty() || backend->SupportsEpilogue(call));
  }
  RETURN_IF_ERROR(lp->PrepareConstants(program.instructions, &lp->prepared_canonical_));
  if (lp->fused_supported_) RETURN_IF_ERROR(lp->PrepareConstants(program.fused_instructions, &lp->prepared_fused_));
  return lp;
}

Status LoadedProgram::PrepareConstants(const std::vector<Instruction>& list,
                                       std::vector<const kernels::PreparedOperand*>* out) {
  out->assign(list.size(), nullptr);
  std::vector<kernels::TensorView> views;
  for (size_t i = 0; i < list.size(); ++i) {
    const Instruction& ins = list[i];
    if (ins.alias) continue;
    for (size_t k = 0; k < ins.inputs.size() && !(*out)[i]; ++k) {
      if (program_.buffers[ins.inputs[k]].role != BufferRole::kConstant) continue;
      // What a prepared copy depends on: the op, its parameters, and the constant as viewed.
      const std::string key = PreparedKey(ins, k);
      auto it = prepared_.find(key);
      if (it == prepared_.end()) {
        views.clear();
        for (size_t j = 0; j < ins.inputs.size(); ++j) views.push_back(View(ins.inputs[j], ins.input_view_shapes[j]));
        kernels::TensorView y = View(ins.output, ins.output_view_shape);
        kernels::KernelCall call{ins.op, &ins.params, views.data(), static_cast<int>(views.size()), &y, 1};
        auto prepared = backend_->PrepareConstant(call, static_cast<int>(k));
        if (!prepared.ok()) return prepared.status().WithContext(ins.node_label);
        if (*prepared) prepared_bytes_ += (*prepared)->bytes();
        it = prepared_.emplace(std::move(key), std::move(*prepared)).first;
      }
      (*out)[i] = it->second.get();
    }
  }
  return OkStatus();
}

kernels::TensorView LoadedProgram::View(int buffer, const Shape& shape) const {
  const Buffer& b = program_.buffers[buffer];
  kernels::TensorView v;
  v.dtype = b.dtype;
  v.rank = static_cast<int>(shape.size());
  for (int i = 0; i < v.rank; ++i) v.dims[i] = shape[i];
  v.data = arena_->base() + b.offset;
  return v;
}

StatusOr<Tensor> LoadedProgram::ReadBuffer(int buffer) const {
  const Buffer& b = program_.buffers[buffer];
  Tensor t = Tensor::Unfilled(b.dtype, b.shape);  // CopyOut writes every byte
  RETURN_IF_ERROR(arena_->CopyOut(b.offset, t.data(), t.byte_size()));
  return t;
}

StatusOr<Hash256> LoadedProgram::HashBuffer(int buffer) const {
  const Buffer& b = program_.buffers[buffer];
  if (const uint8_t* host = arena_->host_data()) {
    // The same bytes ReadBuffer would copy out, hashed where they are: no allocation, no copy,
    // no page faults on fresh memory.
    const int64_t bytes = NumElements(b.shape) * DTypeSize(b.dtype);
    if (b.offset < 0 || bytes < 0 || b.offset + bytes > arena_->size())
      return OutOfRange("traced buffer out of the arena");
    return TensorHash(b.dtype, b.shape, std::span<const uint8_t>(host + b.offset, static_cast<size_t>(bytes)));
  }
  ASSIGN_OR_RETURN(Tensor t, ReadBuffer(buffer));
  return TensorHash(t);
}

Status LoadedProgram::RunInstruction(const Instruction& ins, const kernels::PreparedOperand* prepared,
                                     std::vector<kernels::TensorView>& views,
                                     std::vector<kernels::TensorView>& epilogue_views) {
  views.clear();
  for (size_t k = 0; k < ins.inputs.size(); ++k) views.push_back(View(ins.inputs[k], ins.input_view_shapes[k]));
  kernels::TensorView out = View(ins.output, ins.output_view_shape);
  kernels::KernelCall call{ins.op, &ins.params, views.data(), static_cast<int>(views.size()), &out, 1};
  call.prepared = prepared;
  kernels::Epilogue epilogue;
  if (!ins.epilogue.empty()) {
    epilogue_views.clear();
    for (size_t k = 0; k < ins.epilogue_inputs.size(); ++k) {
      epilogue_views.push_back(View(ins.epilogue_inputs[k], ins.epilogue_input_shapes[k]));
    }
    epilogue = {ins.epilogue.data(), static_cast<int>(ins.epilogue.size()), epilogue_views.data(),
                static_cast<int>(epilogue_views.size())};
    call.epilogue = &epilogue;
  }
  Status s = backend_->Run(call);
  if (!s.ok()) return s.WithContext(ins.node_label);
  return OkStatus();
}

StatusOr<RunResult> LoadedProgram::Run(const std::map<std::string, Tensor>& inputs, const RunOptions& options) {
  std::map<std::string, const Tensor*> borrowed;
  for (const auto& [name, tensor] : inputs) borrowed.emplace(name, &tensor);
  return RunBorrowed(borrowed, options);
}

StatusOr<RunResult> LoadedProgram::RunBorrowed(const std::map<std::string, const Tensor*>& inputs,
                                               const RunOptions& options) {
  for (const auto& [name, tensor] : inputs) {
    bool known = false;
    for (const auto& [placeholder, buffer] : program_.inputs) known = known || placeholder == name;
    if (!known) return InvalidArgument("the graph has no input named '" + name + "'");
  }
  for (const auto& [name, buffer] : program_.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) return InvalidArgument("missing input '" + name + "'");
    const Buffer& b = program_.buffers[buffer];
    if (it->second == nullptr) return InvalidArgument("input '" + name + "' is null");
    const Tensor& t = *it->second;
    if (t.dtype() != b.dtype || t.shape() != b.shape) {
      return InvalidArgument("input '" + name + "' must be " + std::string(DTypeName(b.dtype)) +
                             ShapeToString(b.shape) + ", got " + std::string(DTypeName(t.dtype())) +
                             ShapeToString(t.shape()));
    }
    RETURN_IF_ERROR(arena_->CopyIn(b.offset, t.data(), t.byte_size()));
  }

  RunResult result;
  std::vector<kernels::TensorView> views, epilogue_views;
  const bool fused = options.fuse && !options.trace && fused_supported_;
  const std::vector<Instruction>& instructions = fused ? program_.fused_instructions : program_.instructions;
  const std::vector<const kernels::PreparedOperand*>& prepared = fused ? prepared_fused_ : prepared_canonical_;
  for (size_t i = 0; i < instructions.size(); ++i) {
    const Instruction& ins = instructions[i];
    if (options.check_continue) RETURN_IF_ERROR(options.check_continue());
    // An alias's output already holds its bytes (they are its input's); it is still traced.
    if (!ins.alias) RETURN_IF_ERROR(RunInstruction(ins, prepared[i], views, epilogue_views));
    if (options.trace) {
      RETURN_IF_ERROR(backend_->Synchronize());
      ASSIGN_OR_RETURN(Hash256 h, HashBuffer(ins.output));
      result.trace.push_back(h);
    }
  }
  RETURN_IF_ERROR(backend_->Synchronize());

  // Each output is hashed where it is (HashBuffer) and copied only when asked: a copy is a fresh
  // allocation and a pass over the bytes that the hash does not need.
  const uint8_t* host = arena_->host_data();
  const bool copy = options.copy_outputs || host == nullptr;
  std::vector<std::pair<std::string, Hash256>> named;
  for (const auto& [name, buffer] : program_.outputs) {
    const Buffer& b = program_.buffers[buffer];
    NamedTensor out;
    out.name = name;
    out.dtype = b.dtype;
    out.shape = b.shape;
    if (copy) {
      ASSIGN_OR_RETURN(out.tensor, ReadBuffer(buffer));
      out.hash = TensorHash(out.tensor);
    } else {
      ASSIGN_OR_RETURN(out.hash, HashBuffer(buffer));
      out.in_arena =
          std::span<const uint8_t>(host + b.offset, static_cast<size_t>(NumElements(b.shape) * DTypeSize(b.dtype)));
    }
    named.emplace_back(name, out.hash);
    result.outputs.push_back(std::move(out));
  }
  result.result_root = ResultRoot(std::move(named));
  if (options.trace) {
    std::vector<Hash256> leaves;
    for (size_t i = 0; i < result.trace.size(); ++i)
      leaves.push_back(TraceLeaf(static_cast<uint32_t>(i), result.trace[i]));
    result.trace_root = MerkleRoot(std::move(leaves));
  }
  return result;
}

}  // namespace consensor::executor
