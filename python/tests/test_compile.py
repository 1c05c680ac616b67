"""qemb.compile / evaluate / fakequant: the same results as the CLI on the
same table, from a checkpoint path or from an array held in memory."""
import json
import os

import numpy as np
import pytest

import qemb
from conftest import (bf16_bits, inspect_json, make_table, read_safetensors, run_cli, write_safetensors)

IDS = np.array([0, 95, 3, 3, 50, 17])


def cli_rows(tmp, art, ids=IDS):
    out = os.path.join(tmp, "rows.npy")
    run_cli("run", art, "--tokens", ",".join(map(str, ids)), "-o", out)
    rows = np.load(out)
    os.remove(out)
    return rows


@pytest.mark.parametrize("mode", ["materialize", "fused"])
@pytest.mark.parametrize("scheme", ["16a4w", "16a8w"])
def test_compile_array_equals_cli_compile_of_checkpoint(table_checkpoint, tmp, scheme, mode):
    table, ckpt = table_checkpoint
    run_cli("compile", ckpt, "--scheme", scheme, "--mode", mode, "--qnn-sdk-version", "2.48", "--quiet",
            "-o", os.path.join(tmp, "cli.qemb"))
    info = qemb.compile(table, scheme=scheme, mode=mode, qnn_sdk_version="2.48", out=os.path.join(tmp, "py.qemb"))
    np.testing.assert_array_equal(cli_rows(tmp, os.path.join(tmp, "py.qemb")), cli_rows(tmp, os.path.join(tmp, "cli.qemb")))
    # The description is `qemb inspect --json` of the written file.
    _, out, _ = run_cli("inspect", os.path.join(tmp, "py.qemb"), "--json")
    assert info == inspect_json(out)
    assert isinstance(info, qemb.Artifact)
    assert (info.scheme, info.mode, info.pattern, info.vocab_size, info.dim) == (scheme, mode, "optimized", 96, 40)
    assert info.source["file"] == "<memory>" and info.source["dtype"] == "F32"


def test_compile_path_returns_inspect_json(checkpoint, tmp):
    info = qemb.compile(checkpoint, scheme="16a8w", qnn_sdk_version="2.37", out=os.path.join(tmp, "a.qemb"))
    _, out, _ = run_cli("inspect", os.path.join(tmp, "a.qemb"), "--json")
    assert info == inspect_json(out)
    assert info.pattern == "legacy" and info.sdk_version is not None


def test_compile_float16_array_equals_f16_checkpoint(tmp):
    table = make_table().astype(np.float16)
    ckpt = os.path.join(tmp, "h.safetensors")
    write_safetensors(ckpt, {"embed_tokens.weight": ("F16", table)})
    run_cli("compile", ckpt, "--qnn-sdk-version", "2.48", "--quiet", "-o", os.path.join(tmp, "cli.qemb"))
    info = qemb.compile(table, qnn_sdk_version="2.48", out=os.path.join(tmp, "py.qemb"))
    assert info.source["dtype"] == "F16"
    np.testing.assert_array_equal(cli_rows(tmp, os.path.join(tmp, "py.qemb")), cli_rows(tmp, os.path.join(tmp, "cli.qemb")))


def test_compile_bfloat16_tensor_equals_bf16_checkpoint(tmp):
    torch = pytest.importorskip("torch", reason="python3-torch is not installed; bfloat16 input needs torch")
    bits = bf16_bits(make_table())
    ckpt = os.path.join(tmp, "b.safetensors")
    write_safetensors(ckpt, {"embed_tokens.weight": ("BF16", bits)})
    tensor = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
    run_cli("compile", ckpt, "--qnn-sdk-version", "2.48", "--quiet", "-o", os.path.join(tmp, "cli.qemb"))
    info = qemb.compile(tensor, qnn_sdk_version="2.48", out=os.path.join(tmp, "py.qemb"))
    assert info.source["dtype"] == "BF16"
    np.testing.assert_array_equal(cli_rows(tmp, os.path.join(tmp, "py.qemb")), cli_rows(tmp, os.path.join(tmp, "cli.qemb")))


def test_compile_non_contiguous_array(tmp):
    table = make_table()
    wide = np.repeat(table, 2, axis=1)[:, ::2]  # equal to table, not contiguous
    a = qemb.compile(table, qnn_sdk_version="2.48", out=os.path.join(tmp, "a.qemb"))
    qemb.compile(wide, qnn_sdk_version="2.48", out=os.path.join(tmp, "b.qemb"))
    np.testing.assert_array_equal(qemb.Runtime(os.path.join(tmp, "a.qemb")).lookup(IDS),
                                  qemb.Runtime(os.path.join(tmp, "b.qemb")).lookup(IDS))
    assert a.vocab_size == 96


def test_calibration_tokens_list_or_file(table_checkpoint, tmp):
    table, ckpt = table_checkpoint
    with open(os.path.join(tmp, "cal.txt"), "w") as f:
        f.write("1, 2, 3\n")
    run_cli("compile", ckpt, "--calibration-tokens", os.path.join(tmp, "cal.txt"), "--qnn-sdk-version", "2.48",
            "--quiet", "-o", os.path.join(tmp, "cli.qemb"))
    a = qemb.compile(table, calibration_tokens=[1, 2, 3], qnn_sdk_version="2.48", out=os.path.join(tmp, "a.qemb"))
    b = qemb.compile(ckpt, calibration_tokens=os.path.join(tmp, "cal.txt"), qnn_sdk_version="2.48",
                     out=os.path.join(tmp, "b.qemb"))
    want = cli_rows(tmp, os.path.join(tmp, "cli.qemb"))
    np.testing.assert_array_equal(cli_rows(tmp, os.path.join(tmp, "a.qemb")), want)
    np.testing.assert_array_equal(cli_rows(tmp, os.path.join(tmp, "b.qemb")), want)
    assert a.act_scale == b.act_scale


def test_evaluate_equals_cli_eval_json(table_checkpoint):
    table, ckpt = table_checkpoint
    _, out, _ = run_cli("eval", ckpt, "--json", "--qnn-sdk-version", "2.48", "--worst-rows", "3")
    want = json.loads(out)
    assert qemb.evaluate(ckpt, qnn_sdk_version="2.48", worst_rows=3) == want
    got = qemb.evaluate(table, qnn_sdk_version="2.48", worst_rows=3)
    assert got["results"] == want["results"]
    assert got["file"] == "<memory>"
    tokens = qemb.evaluate(ckpt, scheme="16a4w", qnn_sdk_version="2.48", tokens=[5, 1, 5])
    assert tokens["rows_evaluated"] == 2 and [r["scheme"] for r in tokens["results"]] == ["16a4w", "16a4w"]


@pytest.mark.parametrize("pattern,sdk", [("optimized", "2.48"), ("legacy", "2.37")])
def test_fakequant_equals_cli(table_checkpoint, tmp, pattern, sdk):
    table, ckpt = table_checkpoint
    run_cli("fakequant", ckpt, "--scheme", "16a4w", "--qnn-sdk-version", sdk, "--quiet",
            "-o", os.path.join(tmp, "cli.safetensors"))
    info = qemb.fakequant(ckpt, scheme="16a4w", qnn_sdk_version=sdk, out=os.path.join(tmp, "py.safetensors"))
    assert info["pattern"] == pattern and info["tensor"] == "model.embed_tokens.weight"
    assert (info["rows"], info["dim"], info["dtype"]) == (96, 40, "F32")
    with open(os.path.join(tmp, "cli.safetensors"), "rb") as a, open(os.path.join(tmp, "py.safetensors"), "rb") as b:
        assert a.read() == b.read()
    values = qemb.fakequant(table, scheme="16a4w", qnn_sdk_version=sdk)
    assert values.dtype == np.float32 and values.shape == table.shape
    want = read_safetensors(os.path.join(tmp, "cli.safetensors"), "model.embed_tokens.weight")
    assert values.tobytes() == want.tobytes()
    # ... and what a runtime compiled the same way returns, dequantized.
    qemb.compile(table, scheme="16a4w", qnn_sdk_version=sdk, out=os.path.join(tmp, "a.qemb"))
    np.testing.assert_array_equal(qemb.Runtime(os.path.join(tmp, "a.qemb")).lookup_dequantized(np.arange(96)), values)


COLLAPSING = np.array([[7.0, -3.0, 1.0, 0.5], [0.4, -0.1, 0.2, 0.0], [-0.6, 0.3, 0.0, 0.1],
                       [0.02, -0.01, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.49, 0.2, -0.3, 0.1]], dtype=np.float32)


def test_compile_warns_when_the_legacy_pattern_collapses_rows(tmp):
    out = os.path.join(tmp, "a.qemb")
    with pytest.warns(qemb.CollapseWarning) as caught:
        info = qemb.compile(COLLAPSING, scheme="16a4w", qnn_sdk_version="2.37", out=out)
    assert info.collapsed_rows == 3 and info.pattern == "legacy"
    assert str(caught[0].message) == (
        "the legacy pattern collapses 3 of 6 rows (50.00%) of this 16a4w table to a constant; target QNN SDK "
        ">= 2.48 (qnn_sdk_version=\"2.48\") for the optimized pattern, which loses none (max_collapsed_rows=0 "
        "makes this an error)")
    assert caught[0].filename == __file__  # points at the caller's line
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert qemb.compile(COLLAPSING, qnn_sdk_version="2.48", out=out).collapsed_rows == 0
    before = open(out, "rb").read()
    with pytest.raises(qemb.ValidationError, match=r"collapses 3 of 6 rows .* more than "
                                                   r"CompileOptions.max_collapsed_rows = 0; nothing was written"):
        qemb.compile(COLLAPSING, qnn_sdk_version="2.37", out=out, max_collapsed_rows=0)
    assert open(out, "rb").read() == before
    with pytest.raises(qemb.InvalidArgument, match="max_collapsed_rows is -1"):
        qemb.compile(COLLAPSING, qnn_sdk_version="2.37", out=out, max_collapsed_rows=-1)
