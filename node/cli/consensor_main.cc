#include <iostream>
#include <string>
#include <vector>

#include "node/cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return consensor::node::RunCli(args, std::cout, std::cerr);
}
