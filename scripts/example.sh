#!/usr/bin/env bash
# Builds qemb and runs the main job on the bundled example checkpoint:
# compile for an old and a new SDK, look up a few tokens, inspect, export to
# ONNX, and print what quantization cost.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target qemb qemb_make_example
mkdir -p out
q=build/qemb
build/qemb_make_example out/llama-mini.safetensors
echo "== compile for QNN SDK 2.37 (legacy pattern) and 2.48 (optimized pattern)"
$q compile out/llama-mini.safetensors --qnn-sdk-version 2.37 -o out/llama-mini-2.37.qemb
$q compile out/llama-mini.safetensors --qnn-sdk-version 2.48 -o out/llama-mini-2.48.qemb
echo "== look up the example tokens"
$q run out/llama-mini-2.48.qemb --tokens-file examples/tokens.txt -o out/lookup.npy
$q run out/llama-mini-2.48.qemb --tokens 1,2,3 --dequantize | cut -c1-100
echo "== inspect"
$q inspect out/llama-mini-2.48.qemb
echo "== export to ONNX (QDQ, opset 21) with AIMET-format encodings for the QNN converter"
$q export-onnx out/llama-mini.safetensors --qnn-sdk-version 2.48 --encodings out/llama-mini.encodings.json \
  -o out/llama-mini.onnx
echo "== what quantization cost"
$q eval out/llama-mini.safetensors --scheme all --qnn-sdk-version 2.48 --worst-rows 3 --report out/llama-mini-report.html
echo "report: out/llama-mini-report.html"
