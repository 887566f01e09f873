#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (in build-fuzz/, ASan+UBSan+coverage) and runs them.
# docs/FUZZING.md explains the targets and what CI runs instead (a replay of the corpora).
#   scripts/fuzz.sh                          every target for 60 s
#   scripts/fuzz.sh --time 600 gossip graph  the named targets for 600 s each
#   scripts/fuzz.sh --runs 10000000 npy      a number of executions (with --time: whichever ends first)
#   scripts/fuzz.sh --jobs 2                 two targets at a time (default 1)
#   scripts/fuzz.sh --timeout 60             an input running longer than this many seconds fails
#                                            (default 10; libFuzzer counts wall time, so raise it on a
#                                            shared machine or under nice, where a run can be starved)
#   scripts/fuzz.sh --build-only
# Each target starts from tests/fuzz/corpus/<target>/ and adds what it finds to
# build-fuzz/corpus/<target>/ (never to the tree). A crash, leak, timeout or out-of-memory input
# goes to build-fuzz/crashes/<target>/ and fails the script; once fixed, commit it as
# tests/fuzz/corpus/<target>/regression-<what>. Logs: build-fuzz/logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

time_s=
runs=-1
jobs=1
timeout_s=10
build_only=0
targets=()
while (($#)); do
  case "$1" in
    --time) time_s=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

all_targets=$(sed -n 's/^set(CNSR_FUZZ_TARGETS \(.*\))$/\1/p' tests/fuzz/CMakeLists.txt)
# Without --time: 60 s, or no time limit when --runs is given.
if [ -z "$time_s" ]; then if [ "$runs" = -1 ]; then time_s=60; else time_s=0; fi; fi
if ((${#targets[@]} == 0)); then read -r -a targets <<<"$all_targets"; fi
for t in "${targets[@]}"; do
  [[ " $all_targets " == *" $t "* ]] || { echo "fuzz.sh: no target '$t' (targets: $all_targets)" >&2; exit 2; }
done

command -v clang++-14 >/dev/null || { echo "fuzz.sh: clang++-14 missing; run scripts/setup.sh" >&2; exit 1; }
dir=build-fuzz
# -O1 with line tables, assertions on: what a fuzzer needs to find bugs and report them.
cmake -S . -B "$dir" -G Ninja -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
  -DCNSR_FUZZ=ON -DCNSR_BUILD_BENCH=OFF -DCNSR_CUDA=OFF >/dev/null
cmake --build "$dir" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"
((build_only)) && exit 0

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$dir/logs"

run_one() {
  local t=$1
  mkdir -p "$dir/corpus/$t" "$dir/crashes/$t"
  local status=ok
  # -rss_limit_mb and -malloc_limit_mb turn an unbounded allocation into a reported failure;
  # -timeout turns a hang (one input running over --timeout seconds) into one.
  "$dir/tests/fuzz/fuzz_$t" -max_total_time="$time_s" -runs="$runs" -timeout="$timeout_s" -rss_limit_mb=2048 \
    -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$dir/crashes/$t/" \
    "$dir/corpus/$t" "tests/fuzz/corpus/$t" >"$dir/logs/$t.log" 2>&1 || status=FAILED
  local execs
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/logs/$t.log" | tail -1)
  local secs
  secs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/logs/$t.log" | tail -1)
  printf '%-12s %-7s execs %-12s exec/s %-8s corpus %s\n' "$t" "$status" "${execs:-?}" "${secs:-?}" \
    "$(find "$dir/corpus/$t" -type f | wc -l)"
  [ "$status" = ok ]
}
export -f run_one
export dir time_s runs timeout_s
failed=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}' || failed=1
if ((failed)); then
  echo "fuzz.sh: a target failed; see $dir/logs/ and the inputs in $dir/crashes/" >&2
  exit 1
fi
