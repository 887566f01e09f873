#!/usr/bin/env bash
# Runs every test: installs dependencies, builds (Release, then ASan+UBSan) and runs ctest.
#   scripts/test.sh            full run (what CI does)
#   scripts/test.sh --quick    Release build only, no sanitizer pass
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
  esac
done

scripts/setup.sh
jobs=$(nproc)

# ccache (setup.sh installs it; CMakeLists.txt uses it when found): paths under the clone are
# hashed relative to it, so a clean clone in another directory reuses earlier objects.
export CCACHE_BASEDIR="$PWD"

echo "== Layering and formatting"
scripts/check_layers.sh
scripts/check_format.sh

# ctest_exclude: a regex of tests one pass leaves out (empty: none).
ctest_exclude=
run_suite() {
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest -j "$jobs" --output-on-failure --timeout 900 ${ctest_exclude:+-E "$ctest_exclude"})
}

echo "== Release build and tests"
run_suite build -DCMAKE_BUILD_TYPE=Release

if [ "$quick" = 0 ]; then
  echo "== ASan + UBSan build and tests"
  # Benchmarks add nothing under sanitizers; leak checking stays on.
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # nvcc output is not host code: the Release pass already built it, so the sanitizer pass
  # skips nvcc (the CUDA kernels still run here, under the emulation, with sanitizers on).
  # -O1 with line tables only: sanitizer reports keep file:line, and the build stays well
  # within CI's time on two cores.
  # -ffile-prefix-map: debug info and __FILE__ name paths relative to the clone, which also lets
  # ccache share these objects between clones (with -g it otherwise hashes the directory).
  # The contract tests run forge, cast and anvil only, none of our code: once, in Release, is enough.
  ctest_exclude='^contracts_'
  run_suite build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG -ffile-prefix-map=$PWD=." \
    -DCNSR_SANITIZE=ON -DCNSR_BUILD_BENCH=OFF -DCNSR_CUDA=OFF
fi
