// The `consensor` command-line tool. Kept as a library function so tests can call it
// in-process as well as through the binary.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace consensor::node {

// Returns the process exit code: 0 success, 1 failure of the task (bad graph, bad input,
// over a cap, run-time error), 2 usage error.
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace consensor::node
