"""qemb.Runtime: lookups bit-identical to `qemb run`, any ids shape, out=
written in place and checked, errors that name what is wrong, threads."""
import json
import os
import threading

import numpy as np
import pytest

import qemb
from conftest import MODES, PATTERNS, SCHEMES, artifact_for, bf16_bits, inspect_json, run_cli

IDS = [0, 511, 7, 7, 300, 1, 42, 256, 3]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pattern", list(PATTERNS))
@pytest.mark.parametrize("scheme", SCHEMES)
def test_lookup_equals_cli_run(checkpoint, tmp, scheme, pattern, mode):
    art = artifact_for(checkpoint, os.path.join(tmp, "a.qemb"), scheme, pattern, mode)
    tokens = ",".join(map(str, IDS))
    run_cli("run", art, "--tokens", tokens, "-o", os.path.join(tmp, "u16.npy"))
    run_cli("run", art, "--tokens", tokens, "--dequantize", "-o", os.path.join(tmp, "f32.npy"))
    want_u16 = np.load(os.path.join(tmp, "u16.npy"))
    want_f32 = np.load(os.path.join(tmp, "f32.npy"))
    for reference in (False, True):
        rt = qemb.Runtime(art, reference=reference)
        got = rt.lookup(np.array(IDS))
        assert got.dtype == np.uint16 and got.shape == (len(IDS), 64)
        np.testing.assert_array_equal(got, want_u16)
        got_f = rt.lookup_dequantized(np.array(IDS, dtype=np.int32))
        assert got_f.dtype == np.float32
        assert got_f.tobytes() == want_f32.tobytes()  # bit for bit, signed zeros included
    # The module's own compile of the same checkpoint serves the same rows.
    info = qemb.compile(checkpoint, scheme=scheme, pattern=pattern, qnn_sdk_version=PATTERNS[pattern], mode=mode,
                        out=os.path.join(tmp, "py.qemb"))
    assert (info.scheme, info.pattern, info.mode) == (scheme, pattern, mode)
    np.testing.assert_array_equal(qemb.Runtime(os.path.join(tmp, "py.qemb")).lookup(IDS), want_u16)


def test_properties_match_inspect(rt, artifact):
    _, out, _ = run_cli("inspect", artifact, "--json")
    want = inspect_json(out)
    assert rt.vocab_size == want["vocab_size"] == 512
    assert rt.dim == want["dim"] == 64
    assert rt.activation == (want["act_scale"], want["act_offset"])
    assert rt.kernel == want["kernel"]
    assert rt.isa == want["isa"]
    assert rt.describe() == want
    assert rt.threads == 1
    assert repr(rt).startswith("qemb.Runtime(")


@pytest.mark.parametrize("shape", [(), (9,), (3, 3), (1, 9), (0,), (2, 0), (3, 1, 3)])
def test_ids_of_any_shape(rt, shape):
    ids = np.array(IDS[:int(np.prod(shape))], dtype=np.int64).reshape(shape)
    flat = rt.lookup(ids.reshape(-1))
    got = rt.lookup(ids)
    assert got.shape == shape + (64,)
    np.testing.assert_array_equal(got.reshape(-1, 64), flat)
    got_f = rt.lookup_dequantized(ids)
    assert got_f.shape == shape + (64,)
    np.testing.assert_array_equal(got_f.reshape(-1, 64), rt.lookup_dequantized(ids.reshape(-1)))


def test_ids_forms_agree(rt):
    want = rt.lookup(np.array(IDS, dtype=np.int64))
    forms = [np.array(IDS, dtype=np.int32), IDS, tuple(IDS),
             np.array(IDS, dtype=">i8"),                # non-native byte order: converted
             np.array(IDS, dtype=np.int16), np.array(IDS, dtype=np.uint32),
             np.repeat(np.array(IDS), 2)[::2]]          # non-contiguous: converted
    for ids in forms:
        np.testing.assert_array_equal(rt.lookup(ids), want)
    assert rt.lookup(5).shape == (64,)
    np.testing.assert_array_equal(rt.lookup(5), rt.lookup([5])[0])
    assert rt.lookup([]).shape == (0, 64)


def test_out_is_written_in_place_and_reused(rt):
    out = np.empty((2, 3, 64), dtype=np.uint16)
    ids = np.array(IDS[:6]).reshape(2, 3)
    got = rt.lookup(ids, out=out)
    assert got is out
    np.testing.assert_array_equal(out, rt.lookup(ids))
    ids2 = np.array(IDS[3:9]).reshape(2, 3)
    assert rt.lookup(ids2, out=out) is out
    np.testing.assert_array_equal(out, rt.lookup(ids2))
    outf = np.empty((6, 64), dtype=np.float32)
    assert rt.lookup_dequantized(ids.reshape(-1), out=outf) is outf
    np.testing.assert_array_equal(outf, rt.lookup_dequantized(ids.reshape(-1)))
    # A view into a larger buffer works when it is contiguous.
    big = np.zeros((10, 64), dtype=np.uint16)
    rt.lookup(IDS[:4], out=big[2:6])
    np.testing.assert_array_equal(big[2:6], rt.lookup(IDS[:4]))
    assert not big[:2].any() and not big[6:].any()


def _readonly(shape, dtype):
    a = np.full(shape, 7, dtype=dtype)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("method,make,message", [
    ("lookup", lambda: np.full((9, 64), 7, np.int32), "out has dtype int32; this lookup writes uint16"),
    ("lookup", lambda: np.full((9, 64), 7, np.float32), "out has dtype float32; this lookup writes uint16"),
    ("lookup", lambda: np.full((9, 64), 7, ">u2"), "out has dtype >u2; this lookup writes uint16"),
    ("lookup_dequantized", lambda: np.full((9, 64), 7, np.float64),
     "out has dtype float64; this lookup writes float32"),
    ("lookup", lambda: np.full((9, 63), 7, np.uint16), "out has shape (9, 63); ids of shape (9,) need (9, 64)"),
    ("lookup", lambda: np.full((3, 3, 64), 7, np.uint16), "out has shape (3, 3, 64); ids of shape (9,) need (9, 64)"),
    ("lookup", lambda: np.full((64, 9), 7, np.uint16).T,
     "out is not C-contiguous; pass a contiguous array (numpy.empty(shape, dtype))"),
    ("lookup", lambda: np.full((18, 64), 7, np.uint16)[::2],
     "out is not C-contiguous; pass a contiguous array (numpy.empty(shape, dtype))"),
    ("lookup", lambda: _readonly((9, 64), np.uint16), "out is read-only; pass a writable array"),
    ("lookup_dequantized", lambda: _readonly((9, 64), np.float32), "out is read-only; pass a writable array"),
])
def test_bad_out_is_refused_and_left_unchanged(rt, method, make, message):
    out = make()
    before = out.copy()
    with pytest.raises(qemb.InvalidArgument) as e:
        getattr(rt, method)(np.array(IDS), out=out)
    assert str(e.value) == message
    assert isinstance(e.value, qemb.Error) and isinstance(e.value, ValueError)
    np.testing.assert_array_equal(out, before)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_half_precision_lookups(checkpoint, tmp, scheme, mode):
    """f16 and bf16: the float32 rows rounded to nearest even, equal to qemb run's .npy."""
    art = artifact_for(checkpoint, os.path.join(tmp, "h.qemb"), scheme, "optimized", mode)
    rt = qemb.Runtime(art)
    y = rt.lookup_dequantized(IDS)
    f16 = rt.lookup_dequantized(np.array(IDS, dtype=np.int32), dtype="f16")
    assert f16.dtype == np.float16 and f16.shape == y.shape
    assert f16.tobytes() == y.astype(np.float16).tobytes()  # NumPy rounds to nearest even too
    bf16 = rt.lookup_dequantized(IDS, dtype="bf16")
    assert bf16.dtype == np.uint16
    np.testing.assert_array_equal(bf16, bf16_bits(y))
    out = np.empty((len(IDS), 64), dtype=np.float16)
    assert rt.lookup_dequantized(IDS, out=out, dtype="f16") is out
    tokens = ",".join(map(str, IDS))
    for dtype, got in (("f16", f16), ("bf16", bf16)):
        path = os.path.join(tmp, dtype + ".npy")
        run_cli("run", art, "--tokens", tokens, "--dequantize", "--out-dtype", dtype, "-o", path)
        assert np.load(path).tobytes() == got.tobytes()
    with pytest.raises(qemb.InvalidArgument, match="^unknown output dtype 'float16': expected f32, f16 or bf16$"):
        rt.lookup_dequantized(IDS, dtype="float16")
    with pytest.raises(qemb.InvalidArgument, match="^out has dtype float32; this lookup writes float16$"):
        rt.lookup_dequantized(IDS, out=np.empty((len(IDS), 64), dtype=np.float32), dtype="f16")
    with pytest.raises(qemb.IdOutOfRange):
        rt.lookup_dequantized([0, 512], dtype="bf16")


def test_out_must_be_an_array(rt):
    with pytest.raises(qemb.InvalidArgument, match="^out must be a numpy.ndarray of uint16; got list$"):
        rt.lookup([1, 2], out=[0] * 128)


@pytest.mark.parametrize("ids,message", [
    ([1.0, 2.0], "ids must be integers (int32 or int64); got float64"),
    (np.array([True]), "ids must be integers (int32 or int64); got bool"),
    (np.array([1], dtype=np.uint64), "ids of dtype uint64 may not fit int64; pass int64 or int32 ids"),
])
def test_non_integer_ids_are_refused(rt, ids, message):
    with pytest.raises(qemb.InvalidArgument) as e:
        rt.lookup(ids)
    assert str(e.value) == message


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_out_of_range_id_names_position_and_value(rt, dtype):
    out = np.full((2, 3, 64), 9, dtype=np.uint16)
    with pytest.raises(qemb.IdOutOfRange) as e:
        rt.lookup(np.array([[1, 2, 3], [4, 512, 5]], dtype=dtype), out=out)
    assert str(e.value) == "token id 512 at position 4 is past the last row; ids must be in [0, 512)"
    assert isinstance(e.value, IndexError) and isinstance(e.value, qemb.Error)
    assert e.value.code == "out of range"
    assert (out == 9).all()
    outf = np.full((2, 64), 0.5, dtype=np.float32)
    with pytest.raises(IndexError, match=r"^token id -1 at position 1 is negative; ids must be in \[0, 512\)$"):
        rt.lookup_dequantized(np.array([0, -1], dtype=dtype), out=outf)
    assert (outf == 0.5).all()


def test_eight_threads_share_one_runtime(rt):
    rng = np.random.default_rng(1)
    batches = [rng.integers(0, 512, size=(4, 33)) for _ in range(8)]
    want = [rt.lookup(b) for b in batches]
    errors = []

    def work(t):
        out = np.empty((4, 33, 64), dtype=np.uint16)
        for i in range(300):
            if i % 50 == 7:  # errors on one thread leave the others alone
                try:
                    rt.lookup([0, 512 + t])
                except qemb.IdOutOfRange as e:
                    if f"token id {512 + t} at position 1" not in str(e):
                        errors.append(str(e))
            rt.lookup(batches[t], out=out)
            if not np.array_equal(out, want[t]):
                errors.append(f"thread {t} round {i}: wrong rows")
                return

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_threads_option(artifact):
    rt = qemb.Runtime(artifact, threads=0, verify="header")
    assert rt.threads >= 1
    ids = np.arange(4096) % 512
    np.testing.assert_array_equal(rt.lookup(ids), qemb.Runtime(artifact).lookup(ids))
    with pytest.raises(qemb.InvalidArgument, match=r"^threads is -2: expected 0 \(one per core\) or more$"):
        qemb.Runtime(artifact, threads=-2)
    with pytest.raises(qemb.InvalidArgument, match="^unknown verify 'fast': expected full or header$"):
        qemb.Runtime(artifact, verify="fast")
