#!/usr/bin/env bash
# Installs the Debian 12 packages qemb builds and tests with (run as root).
# Pass --test to add what only the test stages need (Chromium for the report
# test, clang for fuzzing and sanitizers, Node.js and npm for ONNX Runtime,
# pytest and PyTorch for the Python module's tests, venv and wheel for its
# `pip install .` test; python3-torch takes about
# a minute to install).
# Pass --aarch64 for the cross build (scripts/test-aarch64.sh): the arm64
# cross compiler, qemu-user and the :arm64 package of every library the cross
# build uses (it leaves out ONNX export, the Python module and the benchmarks:
# libonnx-dev:arm64 cannot be installed next to the build machine's).
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config
          libhwy-dev nlohmann-json3-dev libcli11-dev libxxhash-dev
          libonnx-dev libprotobuf-dev
          libgtest-dev libgmock-dev libbenchmark-dev
          pybind11-dev python3-dev python3-numpy)
if [[ "${1:-}" == "--test" ]]; then
  packages+=(chromium clang-14 libclang-rt-14-dev
             python3-pytest python3-torch python3-venv python3-wheel)
  # Any Node.js with npm will do (e.g. one already installed from elsewhere).
  command -v npm >/dev/null || packages+=(nodejs npm)
elif [[ "${1:-}" == "--aarch64" ]]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    apt-get update -qq
  fi
  libs=("${packages[@]}")
  packages=(cmake ninja-build crossbuild-essential-arm64 qemu-user)
  for p in "${libs[@]}"; do
    [[ "$p" == *-dev ]] || continue
    # Not in the cross build: the benchmarks, the Python module, and the ONNX
    # exporter, whose arm64 packages cannot be installed beside the native
    # ones (libonnxifi).
    case "$p" in
      libbenchmark-dev|pybind11-dev|python3-dev|libonnx-dev|libprotobuf-dev) continue ;;
    esac
    info=$(apt-cache show --no-all-versions "$p:arm64" 2>/dev/null || true)
    if [[ -z "$info" ]]; then
      packages+=("$p")  # Architecture: all (headers only): the native package serves
    else
      packages+=("$p:arm64")
    fi
  done
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
