"""Buffers a careless caller hands the module: an out= that shares memory with
the ids (this crashed the interpreter), ids another thread rewrites while a
lookup runs with the GIL released, and an artifact whose names are not UTF-8."""
import ctypes
import ctypes.util
import json
import os
import struct
import threading

import numpy as np
import pytest

import qemb
from conftest import run_cli

OVERLAP = ("the output buffer overlaps the ids: rows written there would overwrite inputs not yet read; "
           "pass an output that shares no memory with the inputs")


@pytest.fixture
def rt(tmp):
    table = np.random.default_rng(3).standard_normal((100, 64)).astype(np.float32)
    art = os.path.join(tmp, "t.qemb")
    qemb.compile(table, qnn_sdk_version="2.48", out=art)
    return qemb.Runtime(art, threads=2)


def test_lookup_into_its_own_ids_is_refused(rt):
    buf = np.zeros(256, np.uint16)
    ids = buf[:16].view(np.int64)
    ids[:] = [1, 2, 3, 4]
    before = buf.copy()
    with pytest.raises(qemb.InvalidArgument) as e:
        rt.lookup(ids, out=buf.reshape(4, 64))
    assert str(e.value) == OVERLAP
    assert np.array_equal(buf, before)
    fbuf = np.zeros(4 * 64, np.float32)
    fids = fbuf[8:16].view(np.int64)
    fids[:] = [4, 3, 2, 1]
    with pytest.raises(qemb.InvalidArgument, match="^the output buffer overlaps the ids"):
        rt.lookup_dequantized(fids, out=fbuf.reshape(4, 64))
    hbuf = np.zeros(4 * 64, np.float16)
    hids = hbuf[-16:].view(np.int64)
    hids[:] = 0
    with pytest.raises(qemb.InvalidArgument, match="^the output buffer overlaps the ids"):
        rt.lookup_dequantized(hids, out=hbuf.reshape(4, 64), dtype="f16")
    # The same ids copied out work, and give the rows.
    assert np.array_equal(rt.lookup(ids.copy(), out=buf.reshape(4, 64)), rt.lookup(np.array([1, 2, 3, 4])))


def test_embedding_bag_into_its_own_inputs_is_refused(rt):
    out = np.zeros((2, 64), np.float32)
    ids = out.reshape(-1)[:6].view(np.int64)
    ids[:] = [1, 2, 3]
    offsets = np.array([0, 1, 3], np.int64)
    with pytest.raises(qemb.InvalidArgument) as e:
        rt.embedding_bag(ids, offsets, include_last_offset=True, out=out)
    assert str(e.value) == ("table 0: the output buffer overlaps the indices: rows written there would overwrite "
                            "inputs not yet read; pass an output that shares no memory with the inputs")
    weights = out.reshape(-1)[:3]
    weights[:] = 1.0
    with pytest.raises(qemb.InvalidArgument, match="overlaps the per-sample weights"):
        rt.embedding_bag(np.array([1, 2, 3]), offsets, include_last_offset=True, per_sample_weights=weights, out=out)


def test_ids_rewritten_by_another_thread_never_crash(rt):
    """One thread rewrites the ids with values far outside the table while
    this one looks them up (the GIL released): each call returns rows or
    raises qemb.Error, and the interpreter lives."""
    ids = np.arange(1 << 15, dtype=np.int64) % 100
    offsets = np.arange(0, len(ids) + 1, 4, dtype=np.int64)
    stop = threading.Event()

    def rewrite():
        k = 0
        while not stop.is_set():
            ids[k % 13::97] = [-1, 100, 1 << 40, -(1 << 62), 7][k % 5]
            ids[k % 13::97] = 5
            k += 1

    writer = threading.Thread(target=rewrite)
    writer.start()
    outcomes = {"rows": 0, "error": 0}
    try:
        for _ in range(30):
            for call in (lambda: rt.lookup(ids),
                         lambda: rt.embedding_bag(ids, offsets, include_last_offset=True)):
                try:
                    call()
                    outcomes["rows"] += 1
                except qemb.Error:
                    outcomes["error"] += 1
    finally:
        stop.set()
        writer.join()
    assert outcomes["rows"] + outcomes["error"] == 60


def xxh3_64(data):
    lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib.XXH3_64bits(data, len(data))


def test_describe_with_a_name_that_is_not_utf8(tmp, checkpoint):
    """A section named with a byte that is not UTF-8 (a hostile file; qemb's
    writer refuses such names), its header checksum right: describe() gives
    U+FFFD for the byte, as `qemb inspect --json` prints it, where it raised
    nlohmann's bare RuntimeError."""
    art = os.path.join(tmp, "odd.qemb")
    run_cli("compile", checkpoint, "--qnn-sdk-version", "2.48", "-o", art)
    b = bytearray(open(art, "rb").read())
    count, = struct.unpack_from("<I", b, 12)
    table, = struct.unpack_from("<Q", b, 24)
    names = [bytes(b[table + 96 * i + 32:table + 96 * i + 96]).rstrip(b"\0") for i in range(count)]
    i = next(i for i, n in enumerate(names) if n.startswith(b"tensor:"))
    b[table + 96 * i + 32 + len(b"tensor:")] = 0xFF
    struct.pack_into("<Q", b, 32, 0)
    struct.pack_into("<Q", b, 32, xxh3_64(bytes(b[:64]) + bytes(b[table:table + 96 * count])))
    open(art, "wb").write(b)
    d = qemb.Runtime(art).describe()
    text = json.dumps(d, ensure_ascii=False)
    assert "tensor:\ufffd" in text
    _, out, _ = run_cli("inspect", art, "--json")
    assert "tensor:\ufffd" in out
