// Where the tests find the source tree (contracts, examples, vectors) and the build tree (the
// daemon and CLI binaries). Only test_paths.cc is compiled with these paths, so every other test
// object is the same in any clone and ccache can share it between build directories.
#pragma once

#include <string>

namespace consensor::testing_support {

const std::string& SourceDir();
const std::string& BinaryDir();

}  // namespace consensor::testing_support
