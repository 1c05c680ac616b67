#!/usr/bin/env bash
# Compiles production-sized tables (Llama-3: 128256 x 4096 BF16, 1 GiB; Gemma:
# 262144 x 2304 BF16, 1.1 GiB) and compares each compile with a plain read pass
# over the same file in the same run: read(2) into a reused buffer and mmap +
# touch (how compile reads), one thread each, page cache warm. Rounds
# alternate the read passes and the compiles; medians of 3 are reported, with
# peak resident memory against the bound (artifact size + 256 MiB).
# Needs ~4 GiB of free disk under ${TMPDIR:-/tmp}.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target qemb qemb_make_example qemb_read_pass
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qemb-bench-large.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rounds=3
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
read_ms() { build/qemb_read_pass "$1" "$2" | awk '{print $4}'; }
compiles=("--scheme 16a4w --mode fused" "--scheme 16a8w --mode fused" "--scheme 16a4w --mode materialize"
          "--scheme 16a8w --mode materialize" "--scheme 16a4w --mode auto")
for shape in "128256 4096 llama3" "262144 2304 gemma"; do
  set -- $shape
  in="$tmp/$3.safetensors"
  build/qemb_make_example --rows "$1" --dim "$2" "$in" >/dev/null
  cat "$in" > /dev/null; cat "$in" > /dev/null  # page cache warm, as for the read passes
  : > "$tmp/read"; : > "$tmp/mmap"
  for c in "${!compiles[@]}"; do : > "$tmp/c$c"; done
  for round in $(seq $rounds); do
    read_ms --read "$in" >> "$tmp/read"
    read_ms --mmap "$in" >> "$tmp/mmap"
    for c in "${!compiles[@]}"; do
      rm -f "$tmp/out.qemb"
      /usr/bin/time -f "%e %M" -o "$tmp/time" build/qemb compile "$in" --qnn-sdk-version 2.48 ${compiles[$c]} \
        --quiet -o "$tmp/out.qemb"
      read -r secs kib < "$tmp/time"
      echo "$secs $kib $(stat -c %s "$tmp/out.qemb")" >> "$tmp/c$c"
    done
  done
  read_med=$(median < "$tmp/read"); mmap_med=$(median < "$tmp/mmap")
  echo "== $3: $1 x $2 BF16 ($(( $(stat -c %s "$in") >> 20 )) MiB); read(2) pass ${read_med} ms, mmap pass ${mmap_med} ms"
  printf '%-34s %9s %9s %9s %11s %11s\n' "compile" "ms" "x read" "x mmap" "peak MiB" "bound MiB"
  for c in "${!compiles[@]}"; do
    ms=$(awk '{print $1 * 1000}' "$tmp/c$c" | median)
    peak=$(awk '{print $2 / 1024}' "$tmp/c$c" | median)
    bound=$(awk 'NR == 1 {print $3 / 1048576 + 256}' "$tmp/c$c")
    printf '%-34s %9.0f %9.2f %9.2f %11.1f %11.1f\n' "${compiles[$c]}" "$ms" \
      "$(echo "$ms / $read_med" | bc -l)" "$(echo "$ms / $mmap_med" | bc -l)" "$peak" "$bound"
  done
  rm -f "$in" "$tmp/out.qemb"
done
