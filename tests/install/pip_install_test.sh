#!/usr/bin/env bash
# `pip install .` from the source tree, offline, into a fresh venv that sees
# Debian's numpy: the package imports from the venv and looks ids up. The
# CMake build is the test build's own (QEMB_BUILD_DIR), so only _qemb is
# (re)built, not the whole project a second time.
#   pip_install_test.sh SOURCE_DIR BUILD_DIR PYTHON
set -euo pipefail
src=$(realpath "$1") build=$(realpath "$2") python=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/qemb-pip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv --system-site-packages "$tmp/venv"
QEMB_BUILD_DIR=$build PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$tmp/venv/bin/pip" install --no-build-isolation --no-deps "$src" > "$tmp/pip.log" 2>&1 ||
  { cat "$tmp/pip.log" >&2; exit 1; }
cd "$tmp"
"$tmp/venv/bin/python" - "$tmp" <<'PY'
import os, sys
import numpy as np
import qemb
assert qemb.__file__.startswith(os.path.join(sys.argv[1], "venv")), qemb.__file__
table = np.random.default_rng(0).standard_normal((100, 16), dtype=np.float32)
info = qemb.compile(table, qnn_sdk_version="2.48", out="t.qemb")
assert info.pattern == "optimized", info.pattern
rows = qemb.Runtime("t.qemb").lookup([1, 2, 99])
assert rows.shape == (3, 16) and rows.dtype == np.uint16, (rows.shape, rows.dtype)
print("pip_install_test: installed", qemb.__version__, "from", os.path.dirname(qemb.__file__))
PY
