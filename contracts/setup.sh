#!/usr/bin/env bash
# Installs the pinned offline toolchain (forge, cast, anvil 1.7.1 and solc 0.8.30 from npm) into
# contracts/node_modules. Idempotent: runs `npm ci` only when node_modules is missing or
# package-lock.json changed since the last install.
set -euo pipefail
cd "$(dirname "$0")"
stamp=node_modules/.consensor-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -x node_modules/@foundry-rs/forge-linux-amd64/bin/forge ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
echo "$want" > "$stamp"
