#!/usr/bin/env bash
# CI fuzzing stage: builds every libFuzzer target (fuzz/) with clang, ASan and
# UBSan, runs each for a bounded time on a copy of its seed corpus (the repo's
# corpus never grows in CI) and fails on any finding: crash, sanitizer report,
# leak, timeout, out-of-memory or a broken invariant.
#
#   FUZZ_SECONDS   time per target (default 30)
#   FUZZ_TARGETS   space-separated subset (default: all)
#   FUZZ_CXX       compiler (default clang++-14)
#
# A finding is copied to build-fuzz/findings/. Reproduce it with
#   build-fuzz/fuzz/fuzz_<target> build-fuzz/findings/<file>
# and, once fixed, keep it as fuzz/corpus/<target>/regression-<what> (the
# normal test suite replays every corpus file: ctest -L fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${FUZZ_SECONDS:-30}
targets=(${FUZZ_TARGETS:-safetensors gguf artifact runtime npy pickle torch_file token_list sdk_version})
build=build-fuzz
started=$SECONDS

cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="${FUZZ_CXX:-clang++-14}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" \
  -DQEMB_SANITIZE=address,undefined -DQEMB_BUILD_FUZZ=ON \
  -DQEMB_BUILD_TESTS=OFF -DQEMB_BUILD_BENCH=OFF -DQEMB_BUILD_PYTHON=OFF >/dev/null
cmake --build "$build" -j2 --target "${targets[@]/#/fuzz_}"
echo "ci-fuzz: built ${#targets[@]} targets in $((SECONDS - started)) s"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/findings"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
summary=""
for t in "${targets[@]}"; do
  cp -r "fuzz/corpus/$t" "$work/corpus-$t"
  mkdir -p "$work/findings-$t"
  args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048
        -artifact_prefix="$work/findings-$t/")
  dict="fuzz/dict/$t.dict"
  [[ $t == runtime ]] && dict=fuzz/dict/artifact.dict  # same input format
  [[ -f "$dict" ]] && args+=(-dict="$root/$dict")
  log="$work/$t.log"
  t0=$SECONDS
  if (cd "$work" && "$root/$build/fuzz/fuzz_$t" "${args[@]}" "$work/corpus-$t" >"$log" 2>&1); then
    status=ok
  else
    status=FAILED
    failed+=("$t")
  fi
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' | tail -1)
  line=$(printf '%-12s %-6s %10s executions in %3d s' "$t" "$status" "${execs:-?}" $((SECONDS - t0)))
  echo "ci-fuzz: $line"
  summary+="  $line"$'\n'
  if [[ $status != ok ]]; then
    echo "---- fuzz_$t log (tail) ----"
    tail -n 60 "$log"
    for f in "$work/findings-$t"/*; do
      [[ -e "$f" ]] || continue
      cp "$f" "$build/findings/$t-$(basename "$f")"
      echo "finding kept: $build/findings/$t-$(basename "$f")"
    done
  fi
done

echo "ci-fuzz: per target (${seconds} s each):"
printf '%s' "$summary"
echo "ci-fuzz: total $((SECONDS - started)) s"
if ((${#failed[@]})); then
  echo "ci-fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
