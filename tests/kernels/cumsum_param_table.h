// CumSum's parameter table, shared by the CPU and CUDA kernel tests (reduce_test.cc,
// cuda_reduce_test.cc), so that both backends are checked over the same calls.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/op.h"

namespace consensor::kernels::test_util {

// Every axis of a tensor of rank `rank`, inclusive and exclusive, forward and reverse.
inline std::vector<OpParams> CumSumParamTable(int64_t rank) {
  std::vector<OpParams> table;
  for (int64_t axis = 0; axis < rank; ++axis) {
    for (bool exclusive : {false, true}) {
      for (bool reverse : {false, true}) {
        OpParams p;
        p.axis = axis;
        p.exclusive = exclusive;
        p.reverse = reverse;
        table.push_back(p);
      }
    }
  }
  return table;
}

}  // namespace consensor::kernels::test_util
