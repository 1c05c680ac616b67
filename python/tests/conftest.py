"""Shared fixtures: the qemb CLI (the reference the module is checked
against), the example checkpoint, small generated tables, and a minimal
safetensors reader/writer. Every temporary file lives in a directory that is
removed when its fixture ends."""
import json
import os
import shutil
import struct
import subprocess
import tempfile

import numpy as np
import pytest

import qemb

CLI = os.environ.get("QEMB_CLI", "qemb")
MAKE_EXAMPLE = os.environ.get("QEMB_MAKE_EXAMPLE", "qemb_make_example")

SCHEMES = ["16a4w", "16a8w"]
PATTERNS = {"optimized": "2.48", "legacy": "2.37"}  # pattern -> a target SDK that deploys it
MODES = ["materialize", "fused"]


def run_cli(*args, check=True):
    """Runs the qemb CLI; returns (exit code, stdout, stderr)."""
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "QNN_SDK_ROOT"})
    if check and p.returncode != 0:
        raise AssertionError(f"qemb {' '.join(map(str, args))} failed:\n{p.stderr}")
    return p.returncode, p.stdout, p.stderr


def inspect_json(stdout):
    """`qemb inspect --json` without what only the CLI adds (the export command line)."""
    d = json.loads(stdout)
    d.pop("export_onnx_command", None)
    return d


def cli_error_message(stderr):
    """The library's message in the CLI's `qemb: error: <kind>: <message>` line."""
    line = next(l for l in stderr.splitlines() if l.startswith("qemb: error: "))
    return line[len("qemb: error: "):].split(": ", 1)[1]


@pytest.fixture
def tmp():
    d = tempfile.mkdtemp(prefix="qemb-py-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def session_dir():
    d = tempfile.mkdtemp(prefix="qemb-py-session-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_sdk_root(monkeypatch):
    """Tests name their target; a QNN_SDK_ROOT of the machine must not leak in."""
    monkeypatch.delenv("QNN_SDK_ROOT", raising=False)


@pytest.fixture(scope="session")
def checkpoint(session_dir):
    """The example checkpoint: model.embed_tokens.weight BF16 [512, 64]."""
    path = os.path.join(session_dir, "model.safetensors")
    subprocess.run([MAKE_EXAMPLE, path], check=True, capture_output=True)
    return path


def make_table(rows=96, dim=40, seed=7):
    """A float32 table whose rows have log-normally spread scales (rare-token
    rows are small), so the legacy pattern visibly differs from the optimized."""
    rng = np.random.default_rng(seed)
    scales = np.exp(rng.normal(-4.0, 1.0, size=(rows, 1))).astype(np.float32)
    return (rng.standard_normal((rows, dim)).astype(np.float32) * scales).astype(np.float32)


_DTYPES = {"F32": np.float32, "F16": np.float16}


def write_safetensors(path, tensors):
    """tensors: {name: (dtype, numpy array)}; dtype F32, F16 or BF16 (uint16 bits)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path, name):
    """A tensor as float32 (F32, F16 or BF16)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    info = json.loads(raw[8:8 + n])[name]
    begin, end = info["data_offsets"]
    data = raw[8 + n + begin:8 + n + end]
    if info["dtype"] == "BF16":
        bits = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(info["shape"])
    return np.frombuffer(data, dtype=_DTYPES[info["dtype"]]).astype(np.float32).reshape(info["shape"])


def bf16_bits(table):
    """float32 -> bfloat16 bits, round to nearest even."""
    u = table.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.fixture(scope="session")
def table_checkpoint(session_dir):
    """A generated F32 table and a checkpoint holding it as model.embed_tokens.weight."""
    table = make_table()
    path = os.path.join(session_dir, "table.safetensors")
    write_safetensors(path, {"model.embed_tokens.weight": ("F32", table)})
    return table, path


def pool_reference(rows, ids, offsets, weights=None, mode="sum", padding_idx=None):
    """The contract: per bag, acc = +0.0f, then acc + (w * y) per non-padding id in
    index order, each a float32 operation; mean divides by the count."""
    out = np.zeros((len(offsets) - 1, rows.shape[1]), dtype=np.float32)
    for b in range(len(offsets) - 1):
        acc = np.zeros(rows.shape[1], dtype=np.float32)
        count = 0
        for i in range(offsets[b], offsets[b + 1]):
            if padding_idx is not None and ids[i] == padding_idx:
                continue
            y = rows[i]
            acc = acc + (np.float32(weights[i]) * y if weights is not None else y)
            count += 1
        out[b] = acc / np.float32(count) if mode == "mean" and count else acc
    return out


def artifact_for(checkpoint, out, scheme, pattern, mode):
    run_cli("compile", checkpoint, "--scheme", scheme, "--qnn-sdk-version", PATTERNS[pattern],
            "--pattern", pattern, "--mode", mode, "--quiet", "-o", out)
    return out


@pytest.fixture(scope="session")
def artifact(checkpoint, session_dir):
    """The example checkpoint compiled 16a4w, optimized, fused."""
    return artifact_for(checkpoint, os.path.join(session_dir, "rt.qemb"), "16a4w", "optimized", "fused")


@pytest.fixture(scope="module")
def rt(artifact):
    return qemb.Runtime(artifact)
