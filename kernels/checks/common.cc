#include "kernels/checks/common.h"

namespace consensor::kernels {

std::string ShapeString(const TensorView& v) { return ShapeToString(Shape(v.dims, v.dims + v.rank)); }

bool SameShape(const TensorView& a, const TensorView& b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i)
    if (a.dims[i] != b.dims[i]) return false;
  return true;
}

void ContiguousStrides(const TensorView& v, int64_t* strides) {
  int64_t s = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= v.dims[d];
  }
}

AxisSplit SplitAtAxis(const TensorView& v, int64_t axis) {
  AxisSplit s;
  for (int d = 0; d < axis; ++d) s.outer *= v.dims[d];
  s.n = v.dims[axis];
  for (int d = static_cast<int>(axis) + 1; d < v.rank; ++d) s.inner *= v.dims[d];
  return s;
}

void BroadcastStrides(const int64_t* in_dims, int in_rank, const int64_t* out_dims, int out_rank, int64_t* strides) {
  int64_t s = 1;
  for (int d = out_rank - 1; d >= 0; --d) {
    const int id = d - (out_rank - in_rank);
    if (id < 0) {
      strides[d] = 0;
      continue;
    }
    strides[d] = (in_dims[id] == 1 && out_dims[d] != 1) ? 0 : s;
    s *= in_dims[id];
  }
}

void CoalesceLayout(StridedLayout& l) {
  int64_t dims[kMaxRank];
  int64_t st[kMaxOperands][kMaxRank];
  int r = 0;
  for (int d = 0; d < l.rank; ++d) {
    if (l.dims[d] == 1) continue;
    if (r > 0) {
      bool mergeable = true;
      for (int k = 0; k < l.num_operands; ++k) mergeable = mergeable && st[k][r - 1] == l.strides[k][d] * l.dims[d];
      if (mergeable) {
        dims[r - 1] *= l.dims[d];
        for (int k = 0; k < l.num_operands; ++k) st[k][r - 1] = l.strides[k][d];
        continue;
      }
    }
    dims[r] = l.dims[d];
    for (int k = 0; k < l.num_operands; ++k) st[k][r] = l.strides[k][d];
    ++r;
  }
  if (r == 0) {
    dims[0] = 1;
    for (int k = 0; k < l.num_operands; ++k) st[k][0] = 0;
    r = 1;
  }
  l.rank = r;
  for (int d = 0; d < kMaxRank; ++d) {
    l.dims[d] = d < r ? dims[d] : 1;
    for (int k = 0; k < kMaxOperands; ++k) l.strides[k][d] = (d < r && k < l.num_operands) ? st[k][d] : 0;
  }
}

}  // namespace consensor::kernels
