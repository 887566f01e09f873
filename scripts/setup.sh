#!/usr/bin/env bash
# Installs every dependency of Consensor from Debian's packages.
# Idempotent: when everything is present it only checks and returns in about a second.
set -euo pipefail

DEB_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git clang-format clang-14 libclang-rt-14-dev
  libprotobuf-dev protobuf-compiler
  libgrpc++-dev protobuf-compiler-grpc
  librocksdb-dev libsecp256k1-dev libssl-dev libboost-dev
  libgtest-dev libbenchmark-dev libopenblas-dev
  libtomlplusplus-dev nlohmann-json3-dev libbotan-2-dev
  libonnx-dev libonnx-testdata
  python3-numpy python3-grpcio python3-protobuf python3-torch python3-onnx
)

missing=()
for pkg in "${DEB_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# Node.js and npm bring the offline Foundry toolchain (anvil, forge, cast) and solc-js.
if ! command -v npm >/dev/null 2>&1; then
  echo "setup: installing nodejs npm"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
# Into contracts/node_modules, pinned by contracts/package-lock.json; quick when present.
"$(dirname "$0")/../contracts/setup.sh"

# ONNX Runtime (CPU), the reference of bench/onnx_bench and scripts/ort_compare.py, and the
# published models of tests/functional/published_models_test.py (docs/ONNX.md); pinned by
# bench/models/package-lock.json. --ignore-scripts: onnxruntime-node's install script only
# fetches GPU providers, and its CPU library ships inside the package. Quick when present.
models_dir="$(dirname "$0")/../bench/models"
models_stamp="$models_dir/node_modules/.consensor-lock-sha256"
models_want=$(sha256sum "$models_dir/package-lock.json" | cut -d' ' -f1)
if [ ! -f "$models_stamp" ] || [ "$(cat "$models_stamp")" != "$models_want" ]; then
  echo "setup: installing bench/models (onnxruntime-node and published ONNX models)"
  (cd "$models_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$models_want" > "$models_stamp"
fi
