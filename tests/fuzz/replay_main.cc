// fuzz_replay: runs corpus and regression inputs through the fuzz targets compiled into it, so
// every ctest pass (Release, then ASan+UBSan) replays them without clang or libFuzzer.
//   fuzz_replay <target> <file or directory>...   every regular file, in name order; also the empty input
//   fuzz_replay <target> --mutations N [--seed S] <file or directory>...
//                                                 then N inputs mutated from those files, the same N
//                                                 for the same seed and files (docs/FUZZING.md)
//   fuzz_replay --write-seeds <target> <dir>      writes the target's generated seeds (named by hash)
//   fuzz_replay --list                            the targets
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define CNSR_HAVE_SANITIZER_DEATH_CALLBACK 1
#endif

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

// ---- mutations: a small, deterministic stand-in for libFuzzer's mutators, so that the sanitizer
// pass runs every target on inputs nobody wrote down, within a fixed budget. No coverage
// feedback: it finds shallow bugs near the corpus, libFuzzer (scripts/fuzz.sh) the deep ones.

// splitmix64: the sequence depends on the seed only, on every platform.
struct Rng {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }
};

constexpr size_t kMaxMutantBytes = 64 * 1024;

void OverwriteInteresting(std::vector<uint8_t>& out, Rng& rng) {
  static constexpr std::array<uint64_t, 12> kValues = {0,
                                                       1,
                                                       0x7F,
                                                       0x80,
                                                       0xFF,
                                                       0x7FFF,
                                                       0xFFFF,
                                                       0x7FFFFFFF,
                                                       0x80000000,
                                                       0xFFFFFFFF,
                                                       0x7FFFFFFFFFFFFFFFull,
                                                       0xFFFFFFFFFFFFFFFFull};
  const size_t width = size_t{1} << rng.Below(4);  // 1, 2, 4 or 8 bytes
  if (out.size() < width) return;
  uint64_t v = kValues[rng.Below(kValues.size())];
  if (rng.Below(2)) v = v + 1 - 2 * rng.Below(2);  // off by one either way
  const size_t at = rng.Below(out.size() - width + 1);
  const bool big_endian = rng.Below(2) != 0;
  for (size_t i = 0; i < width; ++i) {
    const size_t shift = 8 * (big_endian ? width - 1 - i : i);
    out[at + i] = static_cast<uint8_t>(v >> shift);
  }
}

std::vector<uint8_t> Mutate(const std::vector<std::vector<uint8_t>>& corpus, Rng& rng) {
  std::vector<uint8_t> out = corpus[rng.Below(corpus.size())];
  const size_t steps = 1 + rng.Below(4);
  for (size_t step = 0; step < steps; ++step) {
    switch (rng.Below(8)) {
      case 0:  // flip one bit
        if (!out.empty()) out[rng.Below(out.size())] ^= static_cast<uint8_t>(1u << rng.Below(8));
        break;
      case 1:  // one random byte
        if (!out.empty()) out[rng.Below(out.size())] = static_cast<uint8_t>(rng.Next());
        break;
      case 2: {  // insert up to 8 random bytes
        const size_t at = rng.Below(out.size() + 1), n = 1 + rng.Below(8);
        std::vector<uint8_t> bytes(n);
        for (auto& b : bytes) b = static_cast<uint8_t>(rng.Next());
        out.insert(out.begin() + static_cast<ptrdiff_t>(at), bytes.begin(), bytes.end());
        break;
      }
      case 3: {  // erase up to 16 bytes
        if (out.empty()) break;
        const size_t at = rng.Below(out.size()), n = 1 + rng.Below(std::min<size_t>(16, out.size() - at));
        out.erase(out.begin() + static_cast<ptrdiff_t>(at), out.begin() + static_cast<ptrdiff_t>(at + n));
        break;
      }
      case 4: {  // copy a piece of the input elsewhere into it
        if (out.empty()) break;
        const size_t from = rng.Below(out.size()), n = 1 + rng.Below(std::min<size_t>(64, out.size() - from));
        const std::vector<uint8_t> piece(out.begin() + static_cast<ptrdiff_t>(from),
                                         out.begin() + static_cast<ptrdiff_t>(from + n));
        out.insert(out.begin() + static_cast<ptrdiff_t>(rng.Below(out.size() + 1)), piece.begin(), piece.end());
        break;
      }
      case 5:  // a boundary integer, little- or big-endian
        OverwriteInteresting(out, rng);
        break;
      case 6: {  // splice: this input's head, another's tail
        const std::vector<uint8_t>& other = corpus[rng.Below(corpus.size())];
        out.resize(rng.Below(out.size() + 1));
        out.insert(out.end(), other.begin() + static_cast<ptrdiff_t>(rng.Below(other.size() + 1)), other.end());
        break;
      }
      default: {  // text: a digit becomes another digit, anything else a printable character
        if (out.empty()) break;
        uint8_t& b = out[rng.Below(out.size())];
        b = (b >= '0' && b <= '9') ? static_cast<uint8_t>('0' + rng.Below(10))
                                   : static_cast<uint8_t>(' ' + rng.Below(95));
        break;
      }
    }
  }
  if (out.size() > kMaxMutantBytes) out.resize(kMaxMutantBytes);
  return out;
}

// The input being run, for the death report: a crash in a mutant must leave the bytes behind.
std::vector<uint8_t> g_current;
char g_dump_path[512] = {};

void DumpCurrentInput() {
  const int fd = open(g_dump_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  while (done < g_current.size()) {
    const ssize_t n = write(fd, g_current.data() + done, g_current.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  static const char kMessage[] = "fuzz_replay: the failing mutant is in ";
  (void)!write(2, kMessage, sizeof(kMessage) - 1);
  (void)!write(2, g_dump_path, std::strlen(g_dump_path));
  (void)!write(2, "\n", 1);
}

void OnFatalSignal(int sig) {
  DumpCurrentInput();
  signal(sig, SIG_DFL);
  raise(sig);
}

void ArmDeathReport(const std::string& target) {
  const char* dir = std::getenv("TMPDIR");
  std::snprintf(g_dump_path, sizeof(g_dump_path), "%s/fuzz-mutant-%s-%d", dir != nullptr ? dir : "/tmp", target.c_str(),
                static_cast<int>(getpid()));
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(sig, OnFatalSignal);
#ifdef CNSR_HAVE_SANITIZER_DEATH_CALLBACK
  __sanitizer_set_death_callback(&DumpCurrentInput);  // ASan and UBSan reports end here, not in a signal
#endif
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
  long long mutations = 0;
  uint64_t seed = 1;
  std::vector<fs::path> inputs;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--mutations" || arg == "--seed") && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0') {
        std::fprintf(stderr, "fuzz_replay: %s needs a number, not '%s'\n", arg.c_str(), argv[i]);
        return 2;
      }
      if (arg == "--mutations") {
        mutations = static_cast<long long>(v);
      } else {
        seed = v;
      }
      continue;
    }
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
  std::vector<std::vector<uint8_t>> corpus;
  for (const auto& path : inputs) {
    auto bytes = consensor::ReadFileBytes(path.string(), int64_t{64} << 20);
    if (!bytes.ok()) {
      std::fprintf(stderr, "fuzz_replay: %s\n", bytes.status().ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", path.c_str(), bytes->size());
    it->second.run(bytes->data(), bytes->size());
    corpus.push_back(std::move(*bytes));
  }
  std::printf("%s: replayed %zu inputs\n", argv[1], inputs.size());
  if (mutations > 0) {
    ArmDeathReport(argv[1]);
    Rng rng{seed};
    for (long long k = 0; k < mutations; ++k) {
      g_current = Mutate(corpus, rng);
      it->second.run(g_current.data(), g_current.size());
    }
    std::printf("%s: ran %lld mutants (seed %llu)\n", argv[1], mutations, static_cast<unsigned long long>(seed));
  }
  return 0;
}
