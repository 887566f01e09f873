#include "tests/test_paths.h"

namespace consensor::testing_support {

const std::string& SourceDir() {
  static const std::string dir = CNSR_SOURCE_DIR;
  return dir;
}

const std::string& BinaryDir() {
  static const std::string dir = CNSR_BINARY_DIR;
  return dir;
}

}  // namespace consensor::testing_support
