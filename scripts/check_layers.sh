#!/usr/bin/env bash
# Fails when an #include points up the layers (kernels <- executor <- consensus <- node) or
# between node/ parts in a direction docs/ARCHITECTURE.md does not allow.
set -euo pipefail
cd "$(dirname "$0")/.."

# folder -> the project folders its files may include (besides itself and proto's generated
# consensor/v1/*.pb.h, which any layer above kernels may use).
declare -A ALLOWED=(
  [common]="common"
  [kernels]="common kernels"
  [executor]="common kernels executor"
  [executor/onnx]="common kernels executor"
  [consensus]="common"
  [node/telemetry]="common"
  [node/storage]="common"
  [node/keys]="common"
  [node/chain]="common consensus node/keys node/telemetry"
  [node/p2p]="common node/telemetry"
  [node/engine]="common kernels executor consensus node/chain node/p2p node/storage node/telemetry node/keys"
  [node/api]="common kernels executor consensus node/engine node/storage node/telemetry node/chain node/p2p node/keys"
  [node/cli]="common kernels executor executor/onnx consensus node/api node/chain node/keys node/telemetry"
  [node/daemon]="common kernels executor consensus node/api node/engine node/chain node/p2p node/storage node/telemetry node/keys node/cli/cli_args.h"
)
# Folders whose files may not include proto-generated code (consensus is pure and links
# common alone; kernels know nothing of graphs).
NO_PROTO="common kernels consensus"

status=0
for dir in "${!ALLOWED[@]}"; do
  files=$(find "$dir" -maxdepth 1 -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) | sort)
  # kernels/ includes its own sub-folders (cpu, cuda, checks).
  if [ "$dir" = kernels ]; then files=$(find kernels -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) | sort); fi
  for f in $files; do
    while IFS= read -r inc; do
      [ -z "$inc" ] && continue
      case "$inc" in
        consensor/v1/*)
          if [[ " $NO_PROTO " == *" ${dir%%/*} "* ]]; then
            echo "$f: includes $inc (generated protobuf) but $dir must not depend on proto/"; status=1
          fi
          continue ;;
        onnx/*) [ "$dir" = executor/onnx ] || { echo "$f: includes $inc outside executor/onnx"; status=1; }; continue ;;
        tests/*) echo "$f: production code includes a test header $inc"; status=1; continue ;;
      esac
      ok=0
      inc_dir=$(dirname "$inc")
      [ "$inc_dir" = "$dir" ] && ok=1
      [ "$dir" = kernels ] && [[ "$inc" == kernels/* ]] && ok=1
      for a in ${ALLOWED[$dir]}; do
        if [ "$inc" = "$a" ] || [ "$inc_dir" = "$a" ] || { [ "$a" = kernels ] && [[ "$inc" == kernels/* ]]; }; then ok=1; fi
      done
      if [ "$ok" = 0 ]; then echo "$f: includes $inc, which $dir may not depend on"; status=1; fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
  done
done
# Every folder with sources must be listed above, so a new folder gets a rule.
for d in $(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' 2>/dev/null | grep -E '^(common|kernels|executor|consensus|node)/' | xargs -n1 dirname | sort -u); do
  case "$d" in kernels/*) continue ;; esac
  [ -n "${ALLOWED[$d]+x}" ] || { echo "$d: no layering rule in scripts/check_layers.sh"; status=1; }
done
if [ "$status" = 0 ]; then echo "layers: every #include points down the layers"; fi
exit $status
