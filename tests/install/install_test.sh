#!/usr/bin/env bash
# Installs the build into a fresh prefix and builds examples/consumer against
# it twice: with find_package(qemb CONFIG) and with pkg-config. Both consumers
# must print the same rows; the Python module, when built, must import from
# the prefix's Python path.
#   install_test.sh BUILD_DIR SOURCE_DIR [PYTHON PYTHON_INSTALL_DIR]
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") python=${3:-} pydir=${4:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qemb-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/qemb include/qemb/qemb.h include/qemb/runtime.h; do
  [[ -e $prefix/$f ]] || { echo "missing after install: $f" >&2; exit 1; }
done
[[ -n $(find "$prefix" -name qembConfig.cmake) ]] || { echo "no qembConfig.cmake installed" >&2; exit 1; }
pc=$(dirname "$(find "$prefix" -name qemb.pc)")

# find_package: a C++ program on qemb::compiler, a C program on qemb::runtime.
cmake -S "$src/examples/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
ids=(0 5 31 17 5)
"$tmp/consumer/compile_table" "$tmp/t.qemb" "${ids[@]}" > "$tmp/cxx.txt"
"$tmp/consumer/lookup" "$tmp/t.qemb" "${ids[@]}" > "$tmp/c.txt"
# The runtime-only program links none of the compiler's layers.
if nm -C "$tmp/consumer/lookup" | grep -q 'qemb::compile_rows'; then
  echo "lookup (qemb::runtime) pulled in the compiler" >&2; exit 1
fi

# The shared C API: a SONAME with the major version, only qemb_* exported,
# and the same rows.
lib=$(find "$prefix" -name 'libqemb.so.*.*.*')
[[ -n $lib ]] || { echo "no libqemb.so.MAJOR.MINOR.PATCH installed" >&2; exit 1; }
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
[[ $soname == libqemb.so.$(sed -n 's/^#define QEMB_VERSION_MAJOR //p' "$prefix/include/qemb/version.h") ]] ||
  { echo "libqemb.so has SONAME '$soname'" >&2; exit 1; }
others=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^qemb_' || true)
[[ -z $others ]] || { echo "libqemb.so exports more than qemb_*:" >&2; echo "$others" | head >&2; exit 1; }
LD_LIBRARY_PATH="$(dirname "$lib")" "$tmp/consumer/lookup_shared" "$tmp/t.qemb" "${ids[@]}" > "$tmp/shared.txt"
readelf -d "$tmp/consumer/lookup_shared" | grep -qF "[$soname]" ||
  { echo "lookup_shared does not load $soname" >&2; exit 1; }

# pkg-config: the same C program, from the .pc file alone.
cc -std=c99 -o "$tmp/lookup_pc" "$src/examples/consumer/lookup.c" \
  $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs qemb)
"$tmp/lookup_pc" "$tmp/t.qemb" "${ids[@]}" > "$tmp/pc.txt"

[[ $(wc -l < "$tmp/cxx.txt") -eq ${#ids[@]} ]] || { echo "expected ${#ids[@]} rows" >&2; cat "$tmp/cxx.txt"; exit 1; }
diff "$tmp/cxx.txt" "$tmp/c.txt"
diff "$tmp/cxx.txt" "$tmp/pc.txt"
diff "$tmp/cxx.txt" "$tmp/shared.txt"
# The installed CLI reads the artifact the consumer wrote, and agrees.
"$prefix/bin/qemb" run "$tmp/t.qemb" --tokens "$(IFS=,; echo "${ids[*]}")" > "$tmp/cli.txt"
diff "$tmp/cxx.txt" "$tmp/cli.txt"

if [[ -n $python ]]; then
  PYTHONPATH="$prefix/$pydir" "$python" - "$tmp/t.qemb" "$prefix" "${ids[@]}" <<'PY'
import sys, qemb
assert qemb.__file__.startswith(sys.argv[2]), qemb.__file__
rt = qemb.Runtime(sys.argv[1])
rows = rt.lookup([int(i) for i in sys.argv[3:]])
for i, row in zip(sys.argv[3:], rows):
    print(f"{i}: " + " ".join(str(v) for v in row))
PY
fi > "$tmp/py.txt"
[[ -z $python ]] || diff "$tmp/cxx.txt" "$tmp/py.txt"
echo "install_test: installed, built with find_package and pkg-config, rows agree"
