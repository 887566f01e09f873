// consensord: the Consensor operator node.
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "node/daemon/daemon.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return consensor::node::RunDaemon(args, std::cout, std::cerr);
}
