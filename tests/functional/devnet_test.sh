#!/usr/bin/env bash
# The README's main job, as a test: scripts/devnet.sh brings up anvil, the contracts and three
# operator nodes, submit-example gets a certified result that `consensor verify` accepts on-chain,
# and down stops everything. Uses the test build's binaries and a private devnet directory.
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
"$SRC/scripts/devnet.sh" status
"$SRC/scripts/devnet.sh" down
[ ! -d "$CONSENSOR_DEVNET_DIR" ] || { echo "FAIL: down left state behind"; exit 1; }
echo "devnet OK"
