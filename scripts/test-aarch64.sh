#!/usr/bin/env bash
# Cross-builds qemb and its tests for aarch64 (cmake/aarch64-linux-gnu.cmake),
# runs the ctest suite under qemu-aarch64 on each emulated CPU model below, and
# checks that artifacts cross between this machine's build and the aarch64 one:
# each compiles every scheme/pattern/mode, each runs both artifacts, and the
# .npy outputs must be the same bytes.
#
# Environment:
#   QEMB_AARCH64_MODELS  the models to run, by name (default: all below)
#   QEMB_AARCH64_SAMPLE  N > 1: on every model but the first, run the kernel,
#                        CLI, end-to-end and runtime tests fully and every Nth
#                        other test (offset by the model's position, so the
#                        models together cover them all); default 1: everything
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-aarch64
native=build

# name | QEMU_CPU | the ISA qemb must pick | every kernel set the CPU supports, best first
models=(
  "neon|cortex-a72|NEON|NEON"
  "sve-256|max,sve-max-vq=2|SVE_256|SVE_256,SVE2,SVE,NEON"
  "sve2-512|max,sve-max-vq=4|SVE2|SVE2,SVE,NEON"
  "sve2-128|max,sve-max-vq=1|SVE2_128|SVE2_128,SVE2,SVE,NEON"
  "sve-512|a64fx|SVE|SVE,NEON"
)
wanted=${QEMB_AARCH64_MODELS:-}
sample=${QEMB_AARCH64_SAMPLE:-1}
full_labels='kernels|cli|compiler|runtime'

scripts/install-deps.sh
scripts/install-deps.sh --aarch64

# The build machine's qemb, for the cross-architecture check.
if [[ ! -f "$native/build.ninja" ]]; then
  cmake -S . -B "$native" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$native" -j2 --target qemb qemb_make_example

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DQEMB_BUILD_TESTS=ON -DQEMB_BUILD_BENCH=OFF -DQEMB_ONNX_EXPORT=OFF >/dev/null
cmake --build "$build" -j2

x86=$native/qemb
arm=$build/emulated/qemb  # runs the aarch64 qemb in qemu-aarch64
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Compiles with both builds, runs both artifacts with both, compares bytes.
cross_check() {
  local ckpt=$work/example.safetensors ids=$work/ids.txt n=0
  "$native/qemb_make_example" "$ckpt" >/dev/null
  "$build/emulated/qemb_make_example" "$work/example-arm.safetensors" >/dev/null
  cmp "$ckpt" "$work/example-arm.safetensors"
  seq 0 511 >"$ids"
  seq 511 -7 0 >>"$ids"
  local count=0 schemes="16a4w 16a8w"
  # The tuned kernels' schemes on every model; on the first, also the
  # generic kernels' (2-bit weights, uint8 activations, weight-only floats,
  # whose SDK version does not matter), which every model's kernel tests
  # already check against the reference bit for bit.
  if ((index == 0)); then schemes="$schemes 16a2w 8a4w 8a8w 8a2w w4 w8 w2"; fi
  for scheme in $schemes; do
    for sdk in 2.37 2.48; do  # legacy, optimized pattern
      [[ $scheme == w* && $sdk == 2.37 ]] && continue
      for mode in materialize fused; do
        local flags="$ckpt --scheme $scheme --qnn-sdk-version $sdk --mode $mode --quiet"
        $x86 compile $flags -o "$work/x86.qemb"
        $arm compile $flags -o "$work/arm.qemb"
        cmp "$work/x86.qemb" "$work/arm.qemb"
        count=$((count + 1))
        for out in "" --dequantize; do
          $x86 run "$work/x86.qemb" --tokens-file "$ids" $out -o "$work/want.npy"
          for exe in x86 arm; do
            for art in x86 arm; do
              rm -f "$work/got.npy"
              ${!exe} run "$work/$art.qemb" --tokens-file "$ids" $out -o "$work/got.npy"
              cmp "$work/want.npy" "$work/got.npy" || {
                echo "cross-check: $scheme $sdk $mode $out: $art artifact run on $exe differs" >&2
                return 1
              }
              n=$((n + 1))
            done
          done
        done
      done
    done
  done
  echo "cross-check: $count artifacts byte-identical from both builds; $n runs, identical .npy"
}

index=0
for entry in "${models[@]}"; do
  IFS='|' read -r name cpu isa sets <<<"$entry"
  if [[ -n "$wanted" && " $wanted " != *" $name "* ]]; then continue; fi
  start=$SECONDS
  export QEMU_CPU=$cpu QEMB_EXPECT_ISA=$isa QEMB_EXPECT_KERNEL_SETS=$sets
  echo "== aarch64 $name (qemu -cpu $cpu): expecting $isa"
  if ((index == 0 || sample <= 1)); then
    ctest --test-dir "$build" -j2 --output-on-failure
  else
    ctest --test-dir "$build" -j2 --output-on-failure -L "$full_labels"
    ctest --test-dir "$build" -j2 --output-on-failure -LE "$full_labels" -I "$((index % sample + 1)),,$sample"
  fi
  cross_check
  echo "== aarch64 $name done in $((SECONDS - start)) s"
  index=$((index + 1))
done
