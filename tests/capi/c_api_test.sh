#!/usr/bin/env bash
# Runs the C API test on an artifact compiled from the example checkpoint,
# against the CLI's own lookup of the same ids.
#   c_api_test.sh QEMB MAKE_EXAMPLE C_API_TEST
set -euo pipefail
qemb=$1 make_example=$2 test=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qemb-capi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$make_example" "$tmp/model.safetensors" >/dev/null
ids=(0 1 7 511 300 300 42 2)
for pattern in optimized:2.48 legacy:2.37; do
  for scheme in 16a4w 16a8w; do
    "$qemb" compile "$tmp/model.safetensors" --scheme "$scheme" --qnn-sdk-version "${pattern#*:}" \
      --quiet -o "$tmp/model.qemb"
    list=$(IFS=,; echo "${ids[*]}")
    "$qemb" run "$tmp/model.qemb" --tokens "$list" -o "$tmp/expected.npy"
    (cd "$tmp" && "$test" model.qemb expected.npy 512 "${ids[@]}")
    rm -f "$tmp/model.qemb" "$tmp/expected.npy"
  done
done
# The uint8 and weight-only forms.
"$qemb" compile "$tmp/model.safetensors" --scheme 8a8w --qnn-sdk-version 2.48 --mode fused --quiet -o "$tmp/a8.qemb"
"$qemb" compile "$tmp/model.safetensors" --scheme w4 --mode fused --quiet -o "$tmp/w4.qemb"
(cd "$tmp" && "$test" --forms a8.qemb w4.qemb)
rm -f "$tmp/a8.qemb" "$tmp/w4.qemb"
# Three tables of one artifact, each with its own scheme, mode and vocabulary,
# against each compiled alone.
tables=(model.embed_tokens.weight lm_head.weight model.layers.0.self_attn.q_proj.weight)
schemes=(16a4w 16a8w 16a4w)
modes=(fused materialize fused)
args=()
for i in 0 1 2; do
  "$qemb" compile "$tmp/model.safetensors" --tensor "${tables[i]}" --scheme "${schemes[i]}" --mode "${modes[i]}" \
    --qnn-sdk-version 2.48 --quiet -o "$tmp/single$i.qemb"
  args+=("${tables[i]}=single$i.qemb")
done
"$qemb" compile "$tmp/model.safetensors" --tensor "$(IFS=,; echo "${tables[*]}")" --scheme 16a4w \
  --scheme "${tables[1]}=16a8w" --mode fused --mode "${tables[1]}=materialize" --qnn-sdk-version 2.48 --quiet \
  -o "$tmp/multi.qemb"
(cd "$tmp" && "$test" --tables multi.qemb "${args[@]}")
