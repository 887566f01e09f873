// `consensor selftest`: proves that a backend reproduces the CPU reference on this machine
// (executor/selftest.h), before an operator trusts it with tasks it will sign.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace consensor::node {

// consensor selftest [--backend cpu|cuda|cuda-emu] [--device N] [--isa ...] [--threads N]
//                    [--full] [--json]
// (args without the leading "selftest"). Exit 0 when every graph matches, 1 on a mismatch or
// when the backend is unavailable or fails, 2 for bad usage.
int RunSelfTestCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace consensor::node
