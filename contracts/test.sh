#!/usr/bin/env bash
# Builds the contracts and runs every forge test (unit, fuzz, invariant, gas) offline.
# FUZZ_RUNS / INVARIANT_RUNS / INVARIANT_DEPTH override the defaults of foundry.toml.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
FORGE=node_modules/@foundry-rs/forge-linux-amd64/bin/forge
export FOUNDRY_FUZZ_RUNS=${FUZZ_RUNS:-256}
export FOUNDRY_INVARIANT_RUNS=${INVARIANT_RUNS:-64}
export FOUNDRY_INVARIANT_DEPTH=${INVARIANT_DEPTH:-64}
"$FORGE" build
"$FORGE" test "$@"
