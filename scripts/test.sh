#!/usr/bin/env bash
# Builds qemb with its tests and benchmarks and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DQEMB_BUILD_TESTS=ON -DQEMB_BUILD_BENCH=ON >/dev/null
cmake --build build -j2
scripts/install-ort.sh
ctest --test-dir build --output-on-failure -j2
