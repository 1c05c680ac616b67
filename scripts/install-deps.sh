#!/usr/bin/env bash
# Installs the Debian 12 packages qemb builds and tests with (run as root).
# Pass --test to add what only the test stages need (Chromium for the report
# test, clang for fuzzing and sanitizers, Node.js and npm for ONNX Runtime,
# pytest and PyTorch for the Python module's tests; python3-torch takes about
# a minute to install).
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config
          libhwy-dev nlohmann-json3-dev libcli11-dev libxxhash-dev
          libonnx-dev libprotobuf-dev
          libgtest-dev libgmock-dev libbenchmark-dev
          pybind11-dev python3-dev python3-numpy)
if [[ "${1:-}" == "--test" ]]; then
  packages+=(chromium clang-14 libclang-rt-14-dev
             python3-pytest python3-torch)
  # Any Node.js with npm will do (e.g. one already installed from elsewhere).
  command -v npm >/dev/null || packages+=(nodejs npm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
