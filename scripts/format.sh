#!/usr/bin/env bash
# Formats, in place, every C++/CUDA source that scripts/check_format.sh checks (same files, same
# clang-format 14, same .clang-format), and names the files it changed.
set -euo pipefail

exec "$(dirname "${BASH_SOURCE[0]}")/check_format.sh" --fix
