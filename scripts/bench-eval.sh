#!/usr/bin/env bash
# eval at scale against the fused compile of the same table: a 300000 x 1024
# F32 table (1.2 GB, made by qemb_make_example), page cache warm, rounds that
# alternate compile --mode fused (one scheme, 16a4w), eval (both schemes) and
# eval --scheme 16a4w.
# Prints per command the median of the rounds (and the range) of the wall time,
# the CPU time (user + system) and the peak resident memory, and each eval's
# ratio to the compile. Needs ~1.3 GB of free disk under ${TMPDIR:-/tmp}.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target qemb qemb_make_example
rows=${ROWS:-300000} dim=${DIM:-1024} rounds=${ROUNDS:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qemb-bench-eval.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
in="$tmp/table.safetensors"
build/qemb_make_example --rows "$rows" --dim "$dim" --dtype F32 "$in" >/dev/null
cat "$in" > /dev/null
names=(compile eval eval-16a4w)
cmds=("build/qemb compile $in --qnn-sdk-version 2.48 --scheme 16a4w --mode fused --quiet -o $tmp/out.qemb"
      "build/qemb eval $in --qnn-sdk-version 2.48 --quiet"
      "build/qemb eval $in --qnn-sdk-version 2.48 --scheme 16a4w --quiet")
for round in $(seq "$rounds"); do
  for c in "${!cmds[@]}"; do
    /usr/bin/time -f "%e %U %S %M" -a -o "$tmp/${names[$c]}" ${cmds[$c]} > /dev/null
  done
done
# median (min-max) of column $2 (an awk expression over $1..$4) in file $1
spread() { awk "{print $2}" "$1" | sort -g | awk '{v[NR]=$1} END {printf "%.2f (%.2f-%.2f)", v[int((NR+1)/2)], v[1], v[NR]}'; }
median() { awk "{print $2}" "$1" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "== $rows x $dim F32 ($(( $(stat -c %s "$in") >> 20 )) MiB), $rounds rounds, $(nproc) cores"
printf '%-12s %-24s %-24s %-22s %9s %9s\n' command "wall s" "cpu s" "peak MiB" "x wall" "x cpu"
for n in "${names[@]}"; do
  printf '%-12s %-24s %-24s %-22s %9.2f %9.2f\n' "$n" "$(spread "$tmp/$n" '$1')" "$(spread "$tmp/$n" '$2 + $3')" \
    "$(spread "$tmp/$n" '$4 / 1024')" \
    "$(echo "$(median "$tmp/$n" '$1') / $(median "$tmp/compile" '$1')" | bc -l)" \
    "$(echo "$(median "$tmp/$n" '$2 + $3') / $(median "$tmp/compile" '$2 + $3')" | bc -l)"
done
