// fuzz_replay: runs corpus and regression inputs through the fuzz targets compiled into it, so
// every ctest pass (Release, then ASan+UBSan) replays them without clang or libFuzzer.
//   fuzz_replay <target> <file or directory>...   every regular file, in name order; also the empty input
//   fuzz_replay --write-seeds <target> <dir>      writes the target's generated seeds (named by hash)
//   fuzz_replay --list                            the targets
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/sha256.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

namespace fs = std::filesystem;
using consensor::fuzz::Registry;

int Usage() {
  std::fprintf(stderr,
               "usage: fuzz_replay <target> <file or dir>...\n"
               "       fuzz_replay --write-seeds <target> <dir>\n"
               "       fuzz_replay --list\n");
  return 2;
}

int WriteSeeds(const std::string& name, const std::string& dir) {
  auto it = Registry().find(name);
  if (it == Registry().end() || it->second.seeds == nullptr) {
    std::fprintf(stderr, "fuzz_replay: target '%s' has no seed generator\n", name.c_str());
    return 2;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  int written = 0;
  for (const auto& seed : it->second.seeds()) {
    const std::string path = dir + "/seed-" + consensor::ToHex(consensor::Sha256Of(seed)).substr(0, 16);
    if (auto s = consensor::WriteFileAtomic(path, seed); !s.ok()) {
      std::fprintf(stderr, "fuzz_replay: %s\n", s.ToString().c_str());
      return 1;
    }
    ++written;
  }
  std::printf("%s: wrote %d seeds to %s\n", name.c_str(), written, dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--list") {
    for (const auto& [name, entry] : Registry()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (argc == 4 && std::string(argv[1]) == "--write-seeds") return WriteSeeds(argv[2], argv[3]);
  if (argc < 3) return Usage();
  auto it = Registry().find(argv[1]);
  if (it == Registry().end() || it->second.run == nullptr) {
    std::fprintf(stderr, "fuzz_replay: no target named '%s' (--list shows them)\n", argv[1]);
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int i = 2; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& entry : fs::directory_iterator(argv[i], ec)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else if (fs::is_regular_file(argv[i], ec)) {
      inputs.emplace_back(argv[i]);
    } else {
      std::fprintf(stderr, "fuzz_replay: %s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  // A corpus that went missing must fail the test, not pass it with nothing replayed.
  if (inputs.empty()) {
    std::fprintf(stderr, "fuzz_replay: no inputs found for '%s'\n", argv[1]);
    return 2;
  }
  std::sort(inputs.begin(), inputs.end());
  it->second.run(nullptr, 0);
  for (const auto& path : inputs) {
    auto bytes = consensor::ReadFileBytes(path.string(), int64_t{64} << 20);
    if (!bytes.ok()) {
      std::fprintf(stderr, "fuzz_replay: %s\n", bytes.status().ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", path.c_str(), bytes->size());
    it->second.run(bytes->data(), bytes->size());
  }
  std::printf("%s: replayed %zu inputs\n", argv[1], inputs.size());
  return 0;
}
