// The consensord command line: flags over a TOML config, then run until SIGINT/SIGTERM.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace consensor::node {

// Exit codes: 0 clean shutdown, 1 startup failure (bad config, datadir in use, port taken...),
// 2 usage error.
int RunDaemon(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace consensor::node
