#!/usr/bin/env bash
# CI sanitizer stage:
#  1. the whole test suite (every ctest test, the fuzz corpora replayed
#     included) built with AddressSanitizer + UndefinedBehaviorSanitizer;
#  2. built with ThreadSanitizer: the concurrency stress test (8 threads x 100k
#     lookups on one loaded runtime, every result checked), the worker pool,
#     the streamed compile (workers handing the output file to each other in
#     order, and aborting on a bad row) with its ArtifactStream tests, and
#     the hostile buffers (an output sharing memory with the ids; ids another
#     thread rewrites during the call).
# Any sanitizer report fails the stage (-fno-sanitize-recover=all, and TSan's
# non-zero exit on a report).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

# -- ASan + UBSan: everything --------------------------------------------------
# -O1 and line tables only: half the compile time of -O2 -g, still exact
# stack traces; no NDEBUG, so asserts run too.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DQEMB_SANITIZE=address,undefined -DQEMB_BUILD_TESTS=ON -DQEMB_BUILD_BENCH=OFF -DQEMB_BUILD_PYTHON=OFF >/dev/null
cmake --build build-asan -j2
built=$SECONDS
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The ONNX Runtime tests drive the sanitized qemb with the engine test.sh installed.
QEMB_ORT_MODULES=$PWD/build/npm/node_modules ctest --test-dir build-asan --output-on-failure -j2
echo "ci-sanitizers: ASan+UBSan build $((built - started)) s, tests $((SECONDS - built)) s"

# -- TSan: the concurrency stress test and the streamed compile -----------------
tsan_started=$SECONDS
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" \
  -DQEMB_SANITIZE=thread -DQEMB_BUILD_TESTS=ON -DQEMB_BUILD_BENCH=OFF -DQEMB_BUILD_PYTHON=OFF >/dev/null
cmake --build build-tsan -j2 --target runtime_stress_test compile_kernels_test artifact_stream_test \
  worker_pool_test hostile_buffers_test
tsan_built=$SECONDS
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
build-tsan/runtime_stress_test
build-tsan/compile_kernels_test
build-tsan/artifact_stream_test --gtest_repeat=20
build-tsan/worker_pool_test
build-tsan/hostile_buffers_test --gtest_filter='Modes/HostileBuffers.*'  # the 6000-table open is a plain-build check
echo "ci-sanitizers: TSan build $((tsan_built - tsan_started)) s, tests $((SECONDS - tsan_built)) s"
echo "ci-sanitizers: total $((SECONDS - started)) s"
