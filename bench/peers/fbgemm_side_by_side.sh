#!/usr/bin/env bash
# Side by side with FBGEMM's CPU embedding kernels (issues 32 and 38).
#
#   bench/peers/fbgemm_side_by_side.sh FBGEMM QEMB_BUILD
#
# FBGEMM is a CMake build directory of FBGEMM's CPU library (libfbgemm.a and
# its asmjit and cpuinfo), against which this script builds
# fbgemm_embedding_driver.cc, or an already built driver binary. QEMB_BUILD
# holds `qemb` (its `qemb bench` is the qemb side). Nothing of FBGEMM's is in
# this repository: build it yourself (docs/kernels.md, "Side by side with
# FBGEMM", says how).
#
# Cases: fp32 rows out of 4-bit and 8-bit rowwise tables, D = $DIMS,
#   gather: --batch $BATCH ids, one row each (FBGEMM: bags of one id);
#   bag:    --batch $BATCH bags of $POOLING ids, summed;
#   hot:    a $ROWS_HOT-row table, 1024 ids cycled (qemb bench's hot set);
#   cold:   a $ROWS_COLD-row table, fresh random ids over all of it.
# qemb runs `qemb bench --json` on fused `w4` / `w8` artifacts (and, with
# REF=1, `16a4w` / `16a8w` (optimized pattern) with --dequantize, for
# reference) compiled here
# from a random float16 .npy; FBGEMM runs the driver, which draws the same
# ids and times the same way (paired turns against a memcpy gather).
# Each ISA of $ISAS is a pair of runs: `native` (both dispatch as they will)
# and `AVX2` (qemb's Highway targets restricted by hwy_max_isa.so, FBGEMM by
# FBGEMM_ENABLE_INSTRUCTIONS=AVX2).
#
# $ROUNDS rounds; in each, every case runs FBGEMM then qemb back to back, and
# every other round runs the cases and the pair in reverse order. One thread,
# pinned to core $CPU. Pages: PAGES=huge gives both sides 2 MiB pages (the
# FBGEMM table with MADV_HUGEPAGE; qemb's artifacts copied to a tmpfs mounted
# huge=always, which needs root: without it the script says so and stops);
# PAGES=small gives both 4 KiB pages (MADV_NOHUGEPAGE; artifacts on disk).
#
# Output: the table (median rates over the rounds, the median of the
# per-round qemb/FBGEMM ratios and their range) and, in $WORK, every run's
# JSON (runs.jsonl). Knobs (environment): ROUNDS=5 SECONDS_PER=0.5 DIMS=128
# ROWS_HOT=1048576 ROWS_COLD=8388608 BATCH=2048 POOLING=20 BITS="4 8"
# KINDS="gather bag" TEMPS="hot cold" ISAS="native AVX2" PAGES=huge CPU=1
# REF=1 WORK=/tmp/qemb-peers PYTHON=python3 (with numpy) KEEP=0 (1 keeps
# the .npy and artifacts in $WORK for the next run) FBGEMM_COMMIT (named in
# the table; read from FBGEMM's source tree when it is a git checkout).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -eq 2 ]] || usage
FBGEMM=$(realpath "$1")
QEMB_BUILD=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)

ROUNDS=${ROUNDS:-5}
SECONDS_PER=${SECONDS_PER:-0.5}
DIMS=${DIMS:-128}
ROWS_HOT=${ROWS_HOT:-1048576}
ROWS_COLD=${ROWS_COLD:-8388608}
BATCH=${BATCH:-2048}
POOLING=${POOLING:-20}
BITS=${BITS:-"4 8"}
KINDS=${KINDS:-"gather bag"}
TEMPS=${TEMPS:-"hot cold"}
ISAS=${ISAS:-"native AVX2"}
PAGES=${PAGES:-huge}
CPU=${CPU:-1}
REF=${REF:-1}
WORK=${WORK:-/tmp/qemb-peers}
PYTHON=${PYTHON:-python3}
KEEP=${KEEP:-0}

QEMB=$QEMB_BUILD/qemb
[[ -x $QEMB ]] || { echo "no qemb binary in $QEMB_BUILD" >&2; exit 1; }
[[ $PAGES == huge || $PAGES == small ]] || { echo "PAGES is huge or small" >&2; exit 1; }
mkdir -p "$WORK"
cleanup() {  # also when a run fails: the artifacts and the tmpfs are large
  if [[ $KEEP != 1 ]]; then
    rm -rf "$WORK/artifacts" "$WORK"/t*_d*.npy
    if mountpoint -q "$WORK/hugefs"; then umount "$WORK/hugefs"; fi
  fi
}
trap cleanup EXIT

# --- FBGEMM's side: the driver -------------------------------------------
if [[ -f $FBGEMM && -x $FBGEMM ]]; then
  DRIVER=$FBGEMM
else
  [[ -f $FBGEMM/libfbgemm.a ]] || { echo "$FBGEMM: no libfbgemm.a (give a CMake build of FBGEMM's CPU library, or the driver binary)" >&2; exit 1; }
  src=$(sed -n 's/^fbgemm_SOURCE_DIR:STATIC=//p' "$FBGEMM/CMakeCache.txt")
  [[ -d $src/include/fbgemm ]] || { echo "cannot find FBGEMM's headers (fbgemm_SOURCE_DIR in $FBGEMM/CMakeCache.txt)" >&2; exit 1; }
  cpuinfo_inc=$(sed -n 's/^CPUINFO_SOURCE_DIR:[A-Z]*=//p' "$FBGEMM/CMakeCache.txt")
  mapfile -t libs < <(find "$FBGEMM" -name 'lib*.a' ! -path '*/googletest/*' ! -path '*/bench/*' | sort)
  DRIVER=$WORK/fbgemm_embedding_driver
  if [[ ! -x $DRIVER || $DRIVER -ot $HERE/fbgemm_embedding_driver.cc || $DRIVER -ot $FBGEMM/libfbgemm.a ]]; then
    echo "building $DRIVER against $FBGEMM" >&2
    ${CXX:-g++} -std=c++20 -O2 -I"$src/include" ${cpuinfo_inc:+-I"$cpuinfo_inc/include"} \
      "$HERE/fbgemm_embedding_driver.cc" -o "$DRIVER" \
      -Wl,--start-group "${libs[@]}" -Wl,--end-group -fopenmp -lpthread -ldl
  fi
fi
if [[ -z ${FBGEMM_COMMIT:-} ]]; then
  FBGEMM_COMMIT=unknown
  if [[ -n ${src:-} ]] && git -C "$src" rev-parse HEAD >/dev/null 2>&1; then FBGEMM_COMMIT=$(git -C "$src" rev-parse --short HEAD); fi
fi

# --- qemb's side: the ISA shim and the artifacts ---------------------------
SHIM=$WORK/hwy_max_isa.so
if [[ ! -f $SHIM || $SHIM -ot $HERE/hwy_max_isa.cc ]]; then
  ${CXX:-g++} -O2 -shared -fPIC "$HERE/hwy_max_isa.cc" -o "$SHIM" -lhwy
fi

ART=$WORK/artifacts
mkdir -p "$ART"
if [[ $PAGES == huge ]]; then
  ART=$WORK/hugefs
  mkdir -p "$ART"
  if ! mountpoint -q "$ART"; then
    mount -t tmpfs -o huge=always,size=8G tmpfs "$ART" 2>/dev/null || {
      echo "PAGES=huge needs a tmpfs mounted with huge=always at $ART (as root: mount -t tmpfs -o huge=always,size=8G tmpfs $ART), or run with PAGES=small" >&2
      exit 1
    }
  fi
fi

schemes="w4 w8"
[[ $REF == 1 ]] && schemes="$schemes 16a4w 16a8w"
need_rows=()
[[ " $TEMPS " == *" hot "* ]] && need_rows+=("$ROWS_HOT")
[[ " $TEMPS " == *" cold "* ]] && need_rows+=("$ROWS_COLD")
for d in $DIMS; do
  for rows in "${need_rows[@]}"; do
    npy=$WORK/t${rows}_d${d}.npy
    for s in $schemes; do
      a=$WORK/artifacts/${s}_${rows}_d${d}.qemb
      if [[ ! -f $a ]]; then
        if [[ ! -f $npy ]]; then
          "$PYTHON" -c 'import numpy' 2>/dev/null ||
            { echo "$PYTHON has no numpy: set PYTHON to a python3 that has it" >&2; exit 1; }
          echo "writing $npy" >&2
          "$PYTHON" - "$rows" "$d" "$npy" <<'EOF'
import sys
import numpy as np
rows, d, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
m = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=(rows, d))
rng = np.random.default_rng(1)
for i in range(0, rows, 1 << 18):
    n = min(1 << 18, rows - i)
    m[i:i + n] = rng.standard_normal((n, d), dtype=np.float32).astype(np.float16)
m.flush()
EOF
        fi
        echo "compiling $a" >&2
        pattern=()
        [[ $s == 16a* ]] && pattern=(--pattern optimized)  # not the legacy one auto picks without an SDK
        "$QEMB" compile "$npy" --scheme "$s" --mode fused "${pattern[@]}" --quiet -o "$a"
      fi
      if [[ $PAGES == huge && ! -f $ART/$(basename "$a") ]]; then
        before=$(awk '/^ShmemHugePages:/{print $2}' /proc/meminfo)
        cp "$a" "$ART/"
        after=$(awk '/^ShmemHugePages:/{print $2}' /proc/meminfo)
        size_kb=$(( $(stat -c %s "$a") / 1024 ))
        (( after - before >= size_kb * 9 / 10 )) ||
          echo "warning: $ART/$(basename "$a") did not get 2 MiB pages ($(( after - before )) of $size_kb KiB)" >&2
      fi
    done
    [[ $KEEP == 1 ]] || rm -f "$npy"
  done
done

# --- the runs ----------------------------------------------------------------
RUNS=$WORK/runs.jsonl
: > "$RUNS"
cases=()
for isa in $ISAS; do for d in $DIMS; do for kind in $KINDS; do for temp in $TEMPS; do for bits in $BITS; do
  cases+=("$isa $d $kind $temp $bits")
done; done; done; done; done

run_one() {  # system isa d kind temp bits round
  local system=$1 isa=$2 d=$3 kind=$4 temp=$5 bits=$6 round=$7 rows out
  rows=$ROWS_HOT; [[ $temp == cold ]] && rows=$ROWS_COLD
  local -a env_isa=() cold=() pool=()
  [[ $temp == cold ]] && cold=(--cold)
  if [[ $system == fbgemm ]]; then
    [[ $isa == native ]] || env_isa=(FBGEMM_ENABLE_INSTRUCTIONS="$isa")
    [[ $kind == bag ]] && pool=(--pooling "$POOLING")
    out=$(env "${env_isa[@]}" taskset -c "$CPU" "$DRIVER" --bits "$bits" --dim "$d" --rows "$rows" \
      --batch "$BATCH" "${pool[@]}" "${cold[@]}" --seconds "$SECONDS_PER" --pages "$PAGES")
  else
    local scheme=$system deq=()
    [[ $system == qemb ]] && scheme=w$bits
    [[ $system == ref ]] && scheme=16a${bits}w
    [[ $system == ref && $kind == gather ]] && deq=(--dequantize)  # bags pool into float32 anyway
    [[ $isa == native ]] || env_isa=(QEMB_PEERS_ISA="$isa" LD_PRELOAD="$SHIM")
    [[ $kind == bag ]] && pool=(--bags --pooling "$POOLING")
    out=$(env "${env_isa[@]}" taskset -c "$CPU" "$QEMB" bench "$ART/${scheme}_${rows}_d${d}.qemb" \
      --batch "$BATCH" "${pool[@]}" "${cold[@]}" "${deq[@]}" --seconds "$SECONDS_PER" --json | tr -d '\n')
  fi
  printf '{"round": %d, "system": "%s", "want_isa": "%s", "d": %d, "kind": "%s", "temp": "%s", "bits": %d, "run": %s}\n' \
    "$round" "$system" "$isa" "$d" "$kind" "$temp" "$bits" "$out" >> "$RUNS"
}

systems=(fbgemm qemb)
[[ $REF == 1 ]] && systems+=(ref)
echo "FBGEMM $FBGEMM_COMMIT ($DRIVER), qemb $QEMB; $ROUNDS rounds on CPU $CPU, $PAGES pages" >&2
for ((round = 1; round <= ROUNDS; ++round)); do
  order=("${cases[@]}") sys_order=("${systems[@]}")
  if (( round % 2 == 0 )); then
    mapfile -t order < <(printf '%s\n' "${cases[@]}" | tac)
    mapfile -t sys_order < <(printf '%s\n' "${systems[@]}" | tac)
  fi
  for c in "${order[@]}"; do
    for s in "${sys_order[@]}"; do
      # shellcheck disable=SC2086
      run_one "$s" $c "$round"
    done
  done
  echo "round $round of $ROUNDS done" >&2
done

# --- the table ----------------------------------------------------------------
"$PYTHON" - "$RUNS" "$FBGEMM_COMMIT" "$PAGES" "$ROUNDS" <<'EOF'
import json, statistics, subprocess, sys
from collections import defaultdict
runs = [json.loads(l) for l in open(sys.argv[1])]
cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
            if l.startswith("Model name")), "?")
print(f"CPU: {cpu}; FBGEMM {sys.argv[2]}; {sys.argv[3]} pages; {sys.argv[4]} rounds; one thread pinned")
by = defaultdict(dict)  # (isa, d, kind, temp, bits) -> {(system, round): run}
for r in runs:
    by[(r["want_isa"], r["d"], r["kind"], r["temp"], r["bits"])][(r["system"], r["round"])] = r["run"]
def m(x): return f"{x / 1e6:.1f}M"
print("| case | FBGEMM | qemb | qemb / FBGEMM | FBGEMM / memcpy | qemb / memcpy |")
print("|---|---|---|---|---|---|")
for key, runs_ in by.items():
    isa, d, kind, temp, bits = key
    rounds = sorted({rd for (_, rd) in runs_})
    for system, label in (("qemb", f"w{bits}"), ("ref", f"16a{bits}w" + (" --dequantize" if kind == "gather" else ""))):
        pairs = [(runs_[("fbgemm", rd)], runs_[(system, rd)]) for rd in rounds if (system, rd) in runs_]
        if not pairs: continue
        fb = statistics.median(p[0]["rows_per_s"] for p in pairs)
        qe = statistics.median(p[1]["rows_per_s"] for p in pairs)
        ratios = [p[1]["rows_per_s"] / p[0]["rows_per_s"] for p in pairs]
        fbm = statistics.median(p[0]["ratio"] for p in pairs)
        qem = statistics.median(p[1]["ratio"] for p in pairs)
        fisa = pairs[0][0]["isa"]; qisa = pairs[0][1]["isa"]
        unit = "ids/s" if kind == "bag" else "rows/s"
        name = f"{kind} {temp} D={d} {bits}-bit ({label}; qemb {qisa}, FBGEMM {fisa})"
        print(f"| {name} | {m(fb)} {unit} | {m(qe)} | {statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}] "
              f"| {fbm:.2f} | {qem:.2f} |")
EOF

