"""Every scheme through the Python module: Runtime.lookup returns the table's
own output (uint16, uint8, or float32 for a weight-only scheme), bit-identical
to `qemb run`, and activation_bits says which."""
import os

import numpy as np
import pytest

import qemb
from conftest import artifact_for, run_cli

IDS = [0, 511, 7, 7, 300, 1]
ALL = ["16a4w", "16a8w", "16a2w", "8a4w", "8a8w", "8a2w", "w4", "w8", "w2"]
DTYPES = {16: np.uint16, 8: np.uint8, 0: np.float32}


@pytest.mark.parametrize("mode", ["materialize", "fused"])
@pytest.mark.parametrize("scheme", ALL)
def test_lookup_returns_the_tables_own_output(checkpoint, tmp, scheme, mode):
    bits = 0 if scheme.startswith("w") else int(scheme.split("a")[0])
    art = artifact_for(checkpoint, os.path.join(tmp, "a.qemb"), scheme, "optimized", mode)
    tokens = ",".join(map(str, IDS))
    run_cli("run", art, "--tokens", tokens, "-o", os.path.join(tmp, "native.npy"))
    run_cli("run", art, "--tokens", tokens, "--dequantize", "-o", os.path.join(tmp, "f32.npy"))
    want = np.load(os.path.join(tmp, "native.npy"))
    want_f32 = np.load(os.path.join(tmp, "f32.npy"))
    assert want.dtype == DTYPES[bits]
    rt = qemb.Runtime(art)
    assert rt.activation_bits == bits
    got = rt.lookup(np.array(IDS))
    assert got.dtype == DTYPES[bits] and got.shape == (len(IDS), 64)
    assert got.tobytes() == want.tobytes()
    out = np.empty((len(IDS), 64), dtype=DTYPES[bits])
    assert rt.lookup(IDS, out=out) is not None and out.tobytes() == want.tobytes()
    assert rt.lookup_dequantized(IDS).tobytes() == want_f32.tobytes()
    if bits == 0:  # the floats are y itself
        assert want.tobytes() == want_f32.tobytes()
    else:
        scale, offset = rt.activation
        np.testing.assert_array_equal(want_f32, (scale * (want.astype(np.float32) + np.float32(offset))).astype(np.float32))
    desc = rt.describe()
    assert desc["scheme"] == scheme and desc["act_bits"] == bits


def test_out_of_the_wrong_dtype_is_refused(checkpoint, tmp):
    art = artifact_for(checkpoint, os.path.join(tmp, "a.qemb"), "8a8w", "optimized", "fused")
    rt = qemb.Runtime(art)
    with pytest.raises(qemb.InvalidArgument, match="out has dtype uint16; this lookup writes uint8"):
        rt.lookup([1, 2], out=np.empty((2, 64), dtype=np.uint16))
