#!/usr/bin/env bash
# A compile against the physical floors of the same run: `cp` of the
# checkpoint to a new file plus its fsync (read and write the same bytes, as a
# materialized compile does; qemb fsyncs its output too) and a read pass over
# the mapped checkpoint (what a fused compile must at least do). Default
# table: Llama-3's 128256 x 4096 BF16 (1 GiB, made by qemb_make_example).
# Each round runs cp, the read pass and every compile once, in that order, so
# all of them meet the same machine state; the ratios are taken within a round
# and their median (min-max) over the rounds is printed, with wall and CPU
# time, peak resident memory and page faults of each command.
# Also in each round: a write + fsync of as many zero bytes as each fused
# artifact has (the output's own floor: that much must reach the disk), and,
# with BASELINE=path/to/another/qemb, that binary's compiles (an old build
# against the new one, both in the same rounds).
# ROWS, DIM, DTYPE, ROUNDS override the defaults. Needs ~2.5x the table's
# size of free disk under ${TMPDIR:-/tmp}.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target qemb qemb_make_example qemb_read_pass >/dev/null
rows=${ROWS:-128256} dim=${DIM:-4096} dtype=${DTYPE:-BF16} rounds=${ROUNDS:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qemb-bench-compile.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
in="$tmp/table.safetensors"
build/qemb_make_example --rows "$rows" --dim "$dim" --dtype "$dtype" "$in" >/dev/null
cat "$in" > /dev/null
names=(cp+fsync read-pass materialize-16a4w materialize-16a8w fused-16a4w fused-16a8w)
compile="build/qemb compile $in --qnn-sdk-version 2.48 --quiet -o $tmp/out"
cmds=("cp $in $tmp/out && sync $tmp/out" "build/qemb_read_pass --mmap $in >/dev/null"
      "$compile --mode materialize --scheme 16a4w" "$compile --mode materialize --scheme 16a8w"
      "$compile --mode fused --scheme 16a4w" "$compile --mode fused --scheme 16a8w")
for s in 16a4w 16a8w; do
  $compile --mode fused --scheme $s
  names+=("write-$s")
  cmds+=("dd if=/dev/zero of=$tmp/out bs=128K count=$(stat -c %s "$tmp/out") iflag=count_bytes conv=fsync status=none")
done
if [ -n "${BASELINE:-}" ]; then
  base="$BASELINE compile $in --qnn-sdk-version 2.48 --quiet -o $tmp/out"
  names+=(base-materialize-16a4w base-materialize-16a8w base-fused-16a4w base-fused-16a8w)
  cmds+=("$base --mode materialize --scheme 16a4w" "$base --mode materialize --scheme 16a8w"
         "$base --mode fused --scheme 16a4w" "$base --mode fused --scheme 16a8w")
fi
rm -f "$tmp/out"
for n in "${names[@]}"; do : > "$tmp/$n"; done
for round in $(seq "$rounds"); do
  for c in "${!cmds[@]}"; do
    rm -f "$tmp/out"
    /usr/bin/time -f "%e %U %S %M %R" -a -o "$tmp/${names[$c]}" sh -c "${cmds[$c]}"
    [ -f "$tmp/out" ] && stat -c %s "$tmp/out" > "$tmp/${names[$c]}.size"
  done
done
# median (min-max) of a column of numbers
stats() { sort -g | awk '{v[NR]=$1} END {printf "%.2f (%.2f-%.2f)", v[int((NR+1)/2)], v[1], v[NR]}'; }
# per-round ratio of column expression $3 between files $1 and $2
ratios() { paste -d' ' "$1" "$2" | awk -v e="$3" '{split($0, a, " "); n = split(e, k, ","); \
  x = 0; y = 0; for (i = 1; i <= n; ++i) { x += a[k[i]]; y += a[k[i] + 5] } print (y > 0 ? x / y : 0)}'; }
echo "== $rows x $dim $dtype ($(( $(stat -c %s "$in") >> 20 )) MiB), $rounds rounds, $(nproc) cores, $(uptime | sed 's/.*load/load/')"
printf '%-22s %-19s %-19s %-20s %-11s %-19s %-19s\n' command "wall s" "cpu s" "peak MiB" "faults" "x floor (wall)" "x floor (cpu)"
for n in "${names[@]}"; do
  case $n in *materialize*|cp*) floor=cp+fsync ;; *) floor=read-pass ;; esac
  printf '%-22s %-19s %-19s %-20s %-11s %-19s %-19s\n' "$n" "$(awk '{print $1}' "$tmp/$n" | stats)" \
    "$(awk '{print $2 + $3}' "$tmp/$n" | stats)" "$(awk '{print $4 / 1024}' "$tmp/$n" | stats)" \
    "$(awk '{print $5}' "$tmp/$n" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')" \
    "$(ratios "$tmp/$n" "$tmp/$floor" 1 | stats) $floor" "$(ratios "$tmp/$n" "$tmp/$floor" 2,3 | stats)"
done
for n in materialize-16a4w materialize-16a8w; do
  size=$(cat "$tmp/fused-${n#materialize-}.size")
  echo "$n: peak bound (packed table + 64 MiB) $(( (size >> 20) + 64 )) MiB"
done
