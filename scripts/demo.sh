#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, and run the example graph
# shipped in examples/ on the deterministic CPU executor.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target consensor
mkdir -p build/demo-out
set -x
build/node/consensor inspect examples/mlp.cgraph
build/node/consensor run examples/mlp.cgraph --input x=examples/mlp_x.npy --out build/demo-out --trace
