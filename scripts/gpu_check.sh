#!/usr/bin/env bash
# Runs the GPU checks of issue 3 on a machine with an NVIDIA GPU, from the bundle that
# scripts/gpu_bundle.sh made in .gpu/bundle.tar.xz (run from the repository root there):
#   * the device, driver and clocks;
#   * the conformance vectors and the ONNX golden hashes on every backend, the real `cuda`
#     one included (conformance_tests adds it when a GPU is usable);
#   * the CUDA kernel families against the CPU, bit for bit (kernels_tests Cuda*);
#   * the backend self-test that consensord runs at startup, full size;
#   * compute-sanitizer racecheck and memcheck over the CUDA kernel tests (the SIMT
#     emulation runs blocks one after another and cannot see races);
#   * bench/cuda_bench at n = 4096 against cuBLAS / cuBLASLt and copy bandwidth.
# Each step's output goes to OUTDIR/<step>.txt; the exit status is non-zero when any
# step failed. Record what it printed in docs/PERFORMANCE.md ("GPU").
#
#   scripts/gpu_check.sh [OUTDIR]        (default: $OUT, else gpu-check-out)
set -uo pipefail
cd "$(dirname "$0")/.."

out=${1:-${OUT:-gpu-check-out}}
mkdir -p "$out"
if [ ! -f .gpu/bundle.tar.xz ]; then
  echo "gpu_check: no .gpu/bundle.tar.xz (run scripts/gpu_bundle.sh on the build machine first)" >&2
  exit 2
fi
export b=/tmp/consensor-gpu-bundle  # exported: the sh -c steps below read it
rm -rf "$b" && mkdir -p "$b" && tar -C "$b" -xJf .gpu/bundle.tar.xz || exit 2

# The tests read vectors from the source path compiled into them, and the ONNX golden test
# reads Debian's libonnx-testdata path: point both at this checkout when they are absent.
src=$(cat "$b/SOURCE_DIR")
if [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then
  mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"
fi
if [ ! -e /usr/share/libonnx-testdata/data ]; then
  mkdir -p /usr/share/libonnx-testdata && ln -s "$b/onnx-testdata" /usr/share/libonnx-testdata/data
fi

# Bundled libraries first, then wherever this machine keeps cuBLAS and the driver.
libs=$b/lib
for name in libcublasLt.so.13 libcublas.so.13 libcuda.so.1; do
  dir=$(find / -xdev -name "$name" -not -path '/proc/*' 2>/dev/null | head -n 1 | xargs -r dirname)
  [ -n "$dir" ] && libs=$libs:$dir
done
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

failed=()
step() {
  local name=$1
  shift
  echo "== $name: $*"
  local start=$SECONDS
  "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  echo "   exit $rc after $((SECONDS - start)) s; last lines:"
  tail -n 6 "$out/$name.txt" | sed 's/^/   | /'
  [ "$rc" = 0 ] || failed+=("$name")
}

step device sh -c 'date -u; cat $b/COMMIT; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv'
step libraries sh -c 'if ldd $b/bin/* | grep "not found"; then exit 1; fi; echo all libraries found'
step conformance $b/bin/conformance_tests --gtest_brief=1
step kernels $b/bin/kernels_tests --gtest_brief=1 --gtest_filter='Cuda*:SimtTensorCore*'
step selftest $b/bin/consensor selftest --backend cuda --full
if command -v compute-sanitizer >/dev/null; then
  step racecheck compute-sanitizer --tool racecheck --error-exitcode 1 \
    $b/bin/kernels_tests --gtest_brief=1 --gtest_filter='CudaMatMul.I8*:CudaDataMovement*:CudaReduce*:CudaNormalization*'
  step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 \
    $b/bin/kernels_tests --gtest_brief=1 --gtest_filter='Cuda*'
else
  echo "== compute-sanitizer not found: racecheck and memcheck skipped"
  failed+=(sanitizer-missing)
fi
step bench $b/bin/cuda_bench --n 4096 --reps 20

if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu_check: FAILED: ${failed[*]} (details in $out/)"
  exit 1
fi
echo "gpu_check: all steps passed (details in $out/)"
