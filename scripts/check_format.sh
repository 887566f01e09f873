#!/usr/bin/env bash
# Checks that every C++/CUDA source (*.cc *.h *.cu *.cuh) is formatted as .clang-format says,
# with clang-format 14 (scripts/setup.sh installs it). Lists the unformatted files and exits 1;
# exits 0 when all are formatted. scripts/format.sh fixes them.
#   scripts/check_format.sh          check
#   scripts/check_format.sh --list   print the checked files
#   scripts/check_format.sh --fix    format the unformatted files in place (scripts/format.sh)
# The files are the tracked ones (git ls-files), or, outside a git checkout, those under the
# source tree; generated and vendored code is left out: contracts/ (Solidity, node_modules),
# build*/ directories, tests/conformance/vectors/.
# CLANG_FORMAT names another clang-format 14 binary (default: clang-format on PATH).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CLANG_FORMAT="${CLANG_FORMAT:-clang-format}"
REQUIRED_MAJOR=14

mode=check
case "${1:-}" in
  "") ;;
  --list) mode=list ;;
  --fix) mode=fix ;;
  *)
    echo "usage: scripts/check_format.sh [--list | --fix]" >&2
    exit 2
    ;;
esac

excluded() {
  case "$1" in
    contracts/* | build*/* | tests/conformance/vectors/* | node_modules/* | */node_modules/*)
      return 0 ;;
  esac
  return 1
}

# Source files, relative to ROOT, one a line, sorted.
list_files() {
  local f
  {
    if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
      git ls-files -- '*.cc' '*.h' '*.cu' '*.cuh'
    else
      find . -type d \( -name .git -o -name node_modules -o -path ./contracts -o -path './build*' \
        -o -path ./tests/conformance/vectors \) -prune -o \
        -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print | sed 's|^\./||'
    fi
  } | while IFS= read -r f; do
    # Tracked but deleted from the work tree: nothing to check.
    if [ -f "$f" ] && ! excluded "$f"; then printf '%s\n' "$f"; fi
  done | LC_ALL=C sort
}

mapfile -t files < <(list_files)

if [ "$mode" = list ]; then
  if ((${#files[@]})); then printf '%s\n' "${files[@]}"; fi
  exit 0
fi

if ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
  echo "check_format: $CLANG_FORMAT not found; scripts/setup.sh installs it (Debian package clang-format)" >&2
  exit 2
fi
version="$("$CLANG_FORMAT" --version)"
major="$(sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p' <<<"$version" | head -n 1)"
if [ "$major" != "$REQUIRED_MAJOR" ]; then
  echo "check_format: need clang-format $REQUIRED_MAJOR (other versions format differently), found: $version" >&2
  echo "check_format: set CLANG_FORMAT to a clang-format $REQUIRED_MAJOR binary" >&2
  exit 2
fi
if ((${#files[@]} == 0)); then
  echo "check_format: no C++/CUDA sources found under $ROOT" >&2
  exit 2
fi

# One violation reported per file is enough to name it.
rc=0
out="$(printf '%s\0' "${files[@]}" |
  xargs -0 "$CLANG_FORMAT" --style=file --dry-run --Werror --ferror-limit=1 2>&1)" || rc=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9][0-9]*:[0-9][0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$out" |
  LC_ALL=C sort -u)
if ((rc != 0 && ${#bad[@]} == 0)); then
  # clang-format failed for another reason (unreadable file, bad .clang-format, ...).
  printf '%s\n' "$out" >&2
  echo "check_format: $CLANG_FORMAT failed" >&2
  exit 2
fi

if [ "$mode" = fix ]; then
  if ((${#bad[@]})); then
    printf '%s\0' "${bad[@]}" | xargs -0 "$CLANG_FORMAT" --style=file -i
    printf 'formatted %s\n' "${bad[@]}"
  fi
  echo "format: ${#bad[@]} of ${#files[@]} files reformatted"
  exit 0
fi

if ((${#bad[@]})); then
  printf 'unformatted: %s\n' "${bad[@]}"
  echo "check_format: ${#bad[@]} of ${#files[@]} files are not clang-formatted; run scripts/format.sh to fix"
  exit 1
fi
echo "check_format: all ${#files[@]} files formatted"
