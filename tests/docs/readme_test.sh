#!/usr/bin/env bash
# The README's quickstart runs as written: its ```sh block, in a fresh folder
# holding the bundled example checkpoint and the built qemb as build/qemb.
# Also: every relative link of the README and docs/ names a file that exists.
#   readme_test.sh SOURCE_DIR QEMB MAKE_EXAMPLE [HAVE_ONNX]
# HAVE_ONNX OFF (a build without the ONNX exporter, e.g. the cross build):
# the export step is left out.
set -euo pipefail
src=$(realpath "$1") qemb=$(realpath "$2") make_example=$(realpath "$3") have_onnx=${4:-ON}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qemb-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
block=$(awk '/^## Quickstart/{in_section=1} in_section && /^```sh$/{grab=1; next} grab && /^```$/{exit} grab' \
  "$src/README.md")
[[ $(grep -c '^\$q ' <<<"$block") -ge 5 ]] || { echo "README quickstart: expected 5 qemb commands" >&2; exit 1; }
outputs="out/quick.qemb out/quick.npy out/quick.onnx"
if [[ $have_onnx != ON ]]; then
  block=$(grep -v 'export-onnx' <<<"$block")
  outputs="out/quick.qemb out/quick.npy"
fi
mkdir -p "$tmp/out" "$tmp/build"
"$make_example" "$tmp/out/llama-mini.safetensors" >/dev/null
printf '#!/bin/sh\nexec %s "$@"\n' "$qemb" > "$tmp/build/qemb"
chmod +x "$tmp/build/qemb"
(cd "$tmp" && bash -euo pipefail -c "$block" > "$tmp/quickstart.log" 2>&1) ||
  { echo "README quickstart failed:" >&2; cat "$tmp/quickstart.log" >&2; exit 1; }
for f in $outputs; do
  [[ -s $tmp/$f ]] || { echo "README quickstart wrote no $f" >&2; exit 1; }
done
# Both set-up commands name scripts that exist.
for s in scripts/example.sh scripts/test.sh; do
  grep -q "^    bash $s\$" "$src/README.md" || { echo "README lacks the set-up command bash $s" >&2; exit 1; }
  [[ -f $src/$s ]] || { echo "README names $s, which does not exist" >&2; exit 1; }
done
# Relative links (file part before any #anchor) resolve.
status=0
for md in "$src/README.md" "$src"/docs/*.md; do
  dir=$(dirname "$md")
  while IFS= read -r link; do
    target=${link%%#*}
    [[ -z $target || $target == http* || $target == mailto:* ]] && continue
    [[ -e $dir/$target ]] || { echo "$(basename "$md"): link to missing $target" >&2; status=1; }
  done < <(grep -o '\](\([^)]*\))' "$md" | sed 's/^](\(.*\))$/\1/')
done
exit $status
