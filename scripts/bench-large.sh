#!/usr/bin/env bash
# Compiles production-sized tables (Llama-3: 128256 x 4096 BF16, 1 GiB; Gemma:
# 262144 x 2304 BF16) and reports wall time and peak resident memory next to a
# plain read pass over the same file, plus the output size.
# Needs ~4 GiB of free disk under ${TMPDIR:-/tmp}.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target qemb qemb_make_example
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
measure() {  # label, command...
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$@" >/dev/null
  read -r secs kib < "$tmp/time"
  printf '%-34s %8.2f s  peak %8.1f MiB\n' "$label" "$secs" "$(echo "$kib / 1024" | bc -l)"
}
for shape in "128256 4096 llama3" "262144 2304 gemma"; do
  set -- $shape
  in="$tmp/$3.safetensors"
  build/qemb_make_example --rows "$1" --dim "$2" "$in" >/dev/null
  sync
  echo "== $3: $1 x $2 BF16 ($(du -m "$in" | cut -f1) MiB)"
  measure "read pass (cat)" sh -c "cat '$in' > /dev/null"
  for args in "--scheme 16a4w --mode auto" "--scheme 16a8w --mode auto" "--scheme 16a4w --mode materialize"; do
    measure "compile $args" build/qemb compile "$in" --qnn-sdk-version 2.48 $args --quiet -o "$tmp/out.qemb"
    echo "    artifact $(du -m "$tmp/out.qemb" | cut -f1) MiB"
  done
  rm -f "$in" "$tmp/out.qemb"
done
