#!/usr/bin/env bash
# The README's main job, as a test: scripts/devnet.sh brings up anvil, the contracts and three
# operator nodes, submit-example gets a certified result that `consensor verify` accepts on-chain,
# a PyTorch-exported ONNX model gets a certified result equal to a local run, and down stops
# everything. Uses the test build's binaries and a private devnet directory.
set -euo pipefail
SRC=$1
BUILD=$2
export CONSENSOR_BUILD_DIR=$BUILD
export CONSENSOR_DEVNET_DIR
CONSENSOR_DEVNET_DIR=$(mktemp -d /tmp/consensor-devnet-test.XXXXXX)
trap '"$SRC/scripts/devnet.sh" down >/dev/null 2>&1 || true; rm -rf "$CONSENSOR_DEVNET_DIR"' EXIT
"$SRC/scripts/devnet.sh" up 3
out=$("$SRC/scripts/devnet.sh" submit-example 2>&1) || { echo "$out"; exit 1; }
echo "$out"
grep -q '^state    succeeded' <<<"$out" || { echo "FAIL: no succeeded state"; exit 1; }
grep -q '^certified ' <<<"$out" || { echo "FAIL: no certificate"; exit 1; }
grep -q '^VERIFIED' <<<"$out" || { echo "FAIL: certificate not verified"; exit 1; }

# An ONNX model exported from PyTorch, through the network: the certified result root must be
# the one a local `consensor run` of the same model gives.
models=$CONSENSOR_DEVNET_DIR/torch-models
/usr/bin/python3 "$SRC/scripts/export_torch_models.py" "$models" >/dev/null
model=$models/transformer/model.onnx
local_root=$("$BUILD/node/consensor" run "$model" --input tokens="$models/transformer/input_tokens.npy" | awk '/^result/ {print $2}')
out=$("$SRC/scripts/devnet.sh" submit "$model" --input tokens="$models/transformer/input_tokens.npy" \
        --replicas 3 --quorum 2 --out "$models/net-out" 2>&1) || { echo "$out"; exit 1; }
echo "$out"
grep -q '^state    succeeded' <<<"$out" || { echo "FAIL: ONNX task not succeeded"; exit 1; }
grep -q '^VERIFIED' <<<"$out" || { echo "FAIL: ONNX certificate not verified"; exit 1; }
grep -q "$local_root" <<<"$out" || { echo "FAIL: network result differs from local run ($local_root)"; exit 1; }
[ -f "$models/net-out/logits.npy" ] || { echo "FAIL: no downloaded output"; exit 1; }

"$SRC/scripts/devnet.sh" status
"$SRC/scripts/devnet.sh" down
[ ! -d "$CONSENSOR_DEVNET_DIR" ] || { echo "FAIL: down left state behind"; exit 1; }
echo "devnet OK"
