// One source per fuzz target, two ways to build it (docs/FUZZING.md):
//  - with clang and CNSR_FUZZ (scripts/fuzz.sh): the source is a libFuzzer target, fuzz_<name>;
//  - in every other build: the target registers itself in fuzz_replay, the ctest executable that
//    runs every input of tests/fuzz/corpus/<name>/ through it (under ASan+UBSan in CI's second pass).
//
//   CNSR_FUZZ_TARGET(npy) { ...use data and size...; return 0; }
//   CNSR_FUZZ_SEEDS(npy) { return {bytes, ...}; }  // optional: `fuzz_replay --write-seeds`
//
// A target reports a broken invariant with CNSR_FUZZ_CHECK, which aborts (so libFuzzer records
// the input as a crash); bad input that is rejected with a Status is the expected outcome.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace consensor::fuzz {

using TargetFn = int (*)(const uint8_t* data, size_t size);
using SeedsFn = std::vector<std::vector<uint8_t>> (*)();

struct TargetEntry {
  TargetFn run = nullptr;
  SeedsFn seeds = nullptr;
};

inline std::map<std::string, TargetEntry>& Registry() {
  static std::map<std::string, TargetEntry> registry;
  return registry;
}
inline bool RegisterTarget(const char* name, TargetFn fn) {
  Registry()[name].run = fn;
  return true;
}
inline bool RegisterSeeds(const char* name, SeedsFn fn) {
  Registry()[name].seeds = fn;
  return true;
}

inline std::vector<uint8_t> Bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* what) {
  std::fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n", file, line, what);
  std::abort();
}

}  // namespace consensor::fuzz

#define CNSR_FUZZ_CHECK(cond) ((cond) ? (void)0 : ::consensor::fuzz::CheckFailed(__FILE__, __LINE__, #cond))

#ifdef CNSR_LIBFUZZER
#define CNSR_FUZZ_ENTRY(name) \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return CnsrFuzz_##name(data, size); }
#else
#define CNSR_FUZZ_ENTRY(name)                                      \
  [[maybe_unused]] static const bool cnsr_fuzz_registered_##name = \
      ::consensor::fuzz::RegisterTarget(#name, &CnsrFuzz_##name);
#endif

#define CNSR_FUZZ_TARGET(name)                                  \
  static int CnsrFuzz_##name(const uint8_t* data, size_t size); \
  CNSR_FUZZ_ENTRY(name)                                         \
  static int CnsrFuzz_##name(const uint8_t* data, size_t size)

#define CNSR_FUZZ_SEEDS(name)                                            \
  static std::vector<std::vector<uint8_t>> CnsrFuzzSeeds_##name();       \
  [[maybe_unused]] static const bool cnsr_fuzz_seeds_registered_##name = \
      ::consensor::fuzz::RegisterSeeds(#name, &CnsrFuzzSeeds_##name);    \
  static std::vector<std::vector<uint8_t>> CnsrFuzzSeeds_##name()
