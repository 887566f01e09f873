#!/usr/bin/env bash
# Packs the GPU checks into .gpu/ for a machine with an NVIDIA GPU that has the driver but
# none of the project's Debian libraries (no gRPC, protobuf, RocksDB, ...), such as the
# lent device machines: the CUDA build of the test and benchmark binaries, the shared
# libraries they need beyond the C and C++ runtimes, and the libonnx-testdata models of the
# ONNX golden test. scripts/gpu_check.sh runs them there.
#
#   scripts/gpu_bundle.sh            (build dir: build-gpu, or $BUILD_DIR)
#
# .gpu/ is kept out of git through .git/info/exclude; it is built here, on the CI-like
# machine that has nvcc and the Debian packages, and copied to the GPU machine as is.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BUILD_DIR:-build-gpu}
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "gpu_bundle: nvcc not found; the bundle needs the CUDA build" >&2
  exit 1
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCNSR_CUDA=ON >/dev/null
if ! grep -q 'CNSR_HAVE_CUDA=1' "$build/build.ninja"; then
  echo "gpu_bundle: CMake did not enable CUDA in $build" >&2
  exit 1
fi
targets=(conformance_tests kernels_tests executor_tests cuda_bench consensor)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

rm -rf .gpu
mkdir -p .gpu/bin .gpu/lib .gpu/onnx-testdata
for t in "${targets[@]}"; do
  bin=$(find "$build" -type f -name "$t" -perm -u+x | head -n 1)
  [ -n "$bin" ] || { echo "gpu_bundle: $t was not built" >&2; exit 1; }
  strip -o ".gpu/bin/$t" "$bin"
done

# Everything ldd resolves except the C/C++ runtime and the NVIDIA driver and libraries,
# which the GPU machine has in versions at least as new.
ldd .gpu/bin/* | awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt|libcudart)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/lib/; done

# The models of the ONNX golden test (tests/conformance/onnx_golden.txt).
data=/usr/share/libonnx-testdata/data
grep -v '^#' tests/conformance/onnx_golden.txt | awk '{print $1}' | while read -r test; do
  mkdir -p ".gpu/onnx-testdata/$(dirname "$test")"
  cp -r "$data/$test" ".gpu/onnx-testdata/$test"
done

# The tests read their inputs from the source path compiled into them.
pwd >.gpu/SOURCE_DIR
git rev-parse HEAD >.gpu/COMMIT
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
echo "gpu_bundle: .gpu/ holds $(du -sh .gpu | cut -f1) ($(ls .gpu/lib | wc -l) libraries) for commit $(cut -c1-12 .gpu/COMMIT)"
