#!/usr/bin/env bash
# Checks the layering docs/README.md states (its layout of the source tree): no source or public header includes
# a header of a layer above its own. Each layer may include itself and the
# layers it builds on (the DEPS of qemb_layer in CMakeLists.txt, transitively).
# Also checks the public face: a header under include/qemb/ includes only
# other public headers (qemb/...), never an internal one under src/, so that
# the installed headers stand on their own.
# Usage: scripts/check-layers.sh [repo root]; prints each offending include.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

declare -A allowed=(
  [core]="core"
  [quant]="quant core"
  [artifact]="artifact core"
  [kernels]="kernels core"
  [io]="io kernels core"
  [runtime]="runtime artifact kernels core"
  [sdk]="sdk core"
  [lowering]="lowering sdk quant core"
  [passes]="passes lowering sdk quant kernels core"
  [compiler]="compiler passes lowering sdk quant io artifact runtime kernels core"
  [eval]="eval compiler passes lowering sdk quant io artifact runtime kernels core"
  [export]="export compiler passes lowering sdk quant io artifact runtime kernels core"
  [cli]="cli eval export compiler passes lowering sdk quant io artifact runtime kernels core"
)

# The layer whose src/ folder implements each public header.
declare -A header_layer=(
  [status.h]=core [numeric.h]=core [half.h]=core [version.h]=core [scheme.h]=core
  [quantize.h]=quant
  [pattern.h]=lowering [sdk_version.h]=sdk
  [artifact.h]=artifact
  [runtime.h]=runtime [embedding_bag.h]=runtime [bench.h]=runtime [inspect.h]=runtime [qemb.h]=runtime
  [checkpoint.h]=io [safetensors.h]=io [gguf.h]=io [npy.h]=io [tokens.h]=io [pytorch.h]=io
  [compiler.h]=compiler
  [eval.h]=eval
  [export.h]=export
)

layer_of_include() {  # "qemb/x.h" or "<layer>/x.h" -> layer, or empty for third-party
  local inc=$1
  case $inc in
    qemb/*)
      local h=${inc#qemb/}
      if [[ -z ${header_layer[$h]:-} ]]; then
        echo "?"
      else
        echo "${header_layer[$h]}"
      fi
      ;;
    */*)
      local dir=${inc%%/*}
      [[ -n ${allowed[$dir]:-} ]] && echo "$dir"
      ;;
  esac
  return 0
}

status=0
check_file() {  # file layer
  local file=$1 layer=$2 inc target
  while IFS= read -r inc; do
    target=$(layer_of_include "$inc")
    [[ -z $target ]] && continue
    if [[ $target == "?" ]]; then
      echo "$file: includes $inc, a public header scripts/check-layers.sh does not place in a layer"
      status=1
    elif [[ " ${allowed[$layer]} " != *" $target "* ]]; then
      echo "$file: $layer includes $inc ($target, a higher layer)"
      status=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
}

for layer in "${!allowed[@]}"; do
  [[ -d src/$layer ]] || continue
  while IFS= read -r f; do check_file "$f" "$layer"; done < <(find "src/$layer" -type f \( -name '*.cc' -o -name '*.h' \))
done
for h in include/qemb/*.h; do
  name=${h#include/qemb/}
  layer=${header_layer[$name]:-}
  if [[ -z $layer ]]; then
    echo "$h: a public header scripts/check-layers.sh does not place in a layer"
    status=1
    continue
  fi
  check_file "$h" "$layer"
  while IFS= read -r inc; do
    if [[ $inc != qemb/* ]]; then
      echo "$h: a public header includes \"$inc\", which is not a public header (qemb/...)"
      status=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$h")
done
[[ $status == 0 ]] && echo "layers: every include goes to the same or a lower layer; public headers include only public ones"
exit $status
