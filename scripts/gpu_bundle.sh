#!/usr/bin/env bash
# Packs the GPU checks into .gpu/ for a machine with an NVIDIA GPU that has the driver but
# none of the project's Debian libraries (no gRPC, protobuf, RocksDB, ...), such as the
# lent device machines: the CUDA build of the test and benchmark binaries, the shared
# libraries they need beyond the C and C++ runtimes, and the libonnx-testdata models of the
# ONNX golden test. scripts/gpu_check.sh runs them there.
#
#   scripts/gpu_bundle.sh            (build dir: build-gpu, or $BUILD_DIR)
#
# The result is one file, .gpu/bundle.tar.xz (about 21 MB: the fat binaries compress well;
# unpacked they are over 100 MB, more than a lent machine's 64 MiB carry). .gpu/ is kept out
# of git through .git/info/exclude; carry it to the GPU machine as is.
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

stage=$build/gpu-bundle
rm -rf "$stage" .gpu
mkdir -p "$stage/bin" "$stage/lib" "$stage/onnx-testdata" .gpu
for t in "${targets[@]}"; do
  bin=$(find "$build" -type f -name "$t" -perm -u+x | head -n 1)
  [ -n "$bin" ] || { echo "gpu_bundle: $t was not built" >&2; exit 1; }
  strip -o "$stage/bin/$t" "$bin"
done

# Everything ldd resolves except the C/C++ runtime and the NVIDIA driver and libraries,
# which the GPU machine has in versions at least as new.
ldd "$stage"/bin/* | awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt|libcudart)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done

# The models of the ONNX golden test (tests/conformance/onnx_golden.txt).
data=/usr/share/libonnx-testdata/data
grep -v '^#' tests/conformance/onnx_golden.txt | awk '{print $1}' | while read -r test; do
  mkdir -p "$stage/onnx-testdata/$(dirname "$test")"
  cp -r "$data/$test" "$stage/onnx-testdata/$test"
done

# The tests read their inputs from the source path compiled into them.
pwd >"$stage/SOURCE_DIR"
git rev-parse HEAD >"$stage/COMMIT"
tar -C "$stage" -cJf .gpu/bundle.tar.xz .
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
echo "gpu_bundle: .gpu/bundle.tar.xz is $(du -h .gpu/bundle.tar.xz | cut -f1) ($(du -sh "$stage" | cut -f1) unpacked," \
  "$(ls "$stage/lib" | wc -l) libraries) for commit $(cut -c1-12 "$stage/COMMIT")"
