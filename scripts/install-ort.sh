#!/usr/bin/env bash
# Installs ONNX Runtime's CPU engine (npm onnxruntime-node) into build/npm for
# the ONNX export tests. --ignore-scripts: its install script downloads GPU
# binaries; the CPU ones ship inside the package. Opset 21 (uint16
# QuantizeLinear/DequantizeLinear, INT4) needs onnxruntime 1.18 or newer.
# Without it the tests skip and say why, so a failure here is not fatal.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.30.0
prefix=build/npm
if [[ -f $prefix/node_modules/onnxruntime-node/package.json ]] &&
   grep -q "\"version\": \"$version\"" $prefix/node_modules/onnxruntime-node/package.json; then
  exit 0
fi
mkdir -p $prefix
if ! command -v npm >/dev/null; then
  echo "install-ort: npm not found; the ONNX Runtime tests will be skipped" >&2
  exit 0
fi
npm install --ignore-scripts --no-audit --no-fund --loglevel=error --prefix $prefix "onnxruntime-node@$version" ||
  echo "install-ort: npm install onnxruntime-node@$version failed; the ONNX Runtime tests will be skipped" >&2
