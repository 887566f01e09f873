#!/usr/bin/env bash
# Soak test of a local devnet: steady task load while random nodes are killed with SIGKILL and
# restarted (default 100 times). Reports acknowledged tasks lost and wrong certificates (both
# must be 0) and the time a restarted node takes to recover. See scripts/soak.py for options:
#
#   scripts/soak.sh [--nodes 4] [--kills 100] [--interval 6] [--rate 4] [--build build]
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/soak.py" "$@"
