#!/usr/bin/env bash
# Compiling the embedding out of a 4-shard, 16 GiB-class checkpoint must cost
# no more than compiling it from a lone file: only the shard that holds it is
# mapped. The embedding (Llama-3: 128256 x 4096 BF16, 1 GiB) is real and sits
# in shard 2; the three other shards declare 5 GiB tensors each but are sparse
# files (no disk blocks, and reading them would show up as time). Rounds
# alternate the two inputs; medians of 3 with peak resident memory.
# Needs ~2.5 GiB of free disk under ${TMPDIR:-/tmp}.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target qemb qemb_make_sharded
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qemb-bench-sharded.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
build/qemb_make_sharded --rows "${ROWS:-128256}" --dim "${DIM:-4096}" --shards 4 --filler-gib 5 "$tmp" >/dev/null
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
declared=$(du -b --apparent-size -c "$tmp"/sharded/*.safetensors | tail -1 | cut -f1)
on_disk=$(du -b -c "$tmp"/sharded/*.safetensors | tail -1 | cut -f1)
cat "$tmp/lone.safetensors" "$tmp/sharded/model-00002-of-00004.safetensors" > /dev/null  # page cache warm
: > "$tmp/lone"; : > "$tmp/index"
for round in 1 2 3; do
  for input in lone index; do
    src="$tmp/lone.safetensors"
    [[ $input == index ]] && src="$tmp/sharded/model.safetensors.index.json"
    rm -f "$tmp/out.qemb"
    /usr/bin/time -f "%e %M" -o "$tmp/time" build/qemb compile "$src" --qnn-sdk-version 2.48 --scheme 16a4w \
      --mode fused --quiet -o "$tmp/out.qemb"
    read -r secs kib < "$tmp/time"
    echo "$secs $kib" >> "$tmp/$input"
  done
done
lone_ms=$(awk '{print $1 * 1000}' "$tmp/lone" | median)
index_ms=$(awk '{print $1 * 1000}' "$tmp/index" | median)
echo "== 4 shards, $((declared >> 30)) GiB declared ($((on_disk >> 20)) MiB on disk), embedding in shard 2"
printf '%-44s %9s %10s\n' "compile --scheme 16a4w --mode fused" "ms" "peak MiB"
printf '%-44s %9.0f %10.1f\n' "lone file" "$lone_ms" "$(awk '{print $2 / 1024}' "$tmp/lone" | median)"
printf '%-44s %9.0f %10.1f\n' "model.safetensors.index.json" "$index_ms" "$(awk '{print $2 / 1024}' "$tmp/index" | median)"
printf 'index / lone: %.2f\n' "$(echo "$index_ms / $lone_ms" | bc -l)"
