"""Pooled lookups (EmbeddingBag): Runtime.embedding_bag and qemb.embedding_bags
equal `qemb run --bags` bit for bit and the contract's float32 sum of the
looked-up rows in index order; bad input raises the library's error and
writes nothing."""
import os

import numpy as np
import pytest

import qemb
from conftest import MODES, PATTERNS, SCHEMES, artifact_for, make_table, pool_reference, run_cli, write_safetensors

# 5 bags over 12 ids: [0,3) [3,3) [3,8) [8,9) [9,12); id 7 repeats, 0 is a padding candidate.
IDS = np.array([3, 7, 0, 511, 7, 7, 0, 42, 300, 1, 0, 255], dtype=np.int64)
OFFSETS = np.array([0, 3, 3, 8, 9, 12], dtype=np.int64)  # with the last
WEIGHTS = np.array([0.5, -1.25, 0.0, 2.0, 3.0, -0.0, 1.0, 0.125, -7.5, 1.5, 2.5, 0.75], dtype=np.float32)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pattern", list(PATTERNS))
@pytest.mark.parametrize("scheme", SCHEMES)
def test_equals_cli_and_contract(checkpoint, tmp, scheme, pattern, mode):
    art = artifact_for(checkpoint, os.path.join(tmp, "a.qemb"), scheme, pattern, mode)
    np.save(os.path.join(tmp, "ids.npy"), IDS)
    np.save(os.path.join(tmp, "offsets.npy"), OFFSETS.astype(np.int32))
    np.save(os.path.join(tmp, "w.npy"), WEIGHTS)
    cases = [  # (CLI flags, embedding_bag kwargs, reference kwargs)
        ([], {}, {}),
        (["--weights", "w.npy"], dict(per_sample_weights=WEIGHTS), dict(weights=WEIGHTS)),
        (["--pool", "mean", "--padding-idx", "0"], dict(mode="mean", padding_idx=0), dict(mode="mean", padding_idx=0)),
        (["--padding-idx", "-1"], dict(padding_idx=-1), dict(padding_idx=511)),
    ]
    for reference in (False, True):
        rt = qemb.Runtime(art, reference=reference)
        rows = rt.lookup_dequantized(IDS)
        for flags, kwargs, ref in cases:
            out = os.path.join(tmp, "out.npy")
            run_cli("run", art, "--tokens-file", os.path.join(tmp, "ids.npy"), "--bags",
                    os.path.join(tmp, "offsets.npy"), *[os.path.join(tmp, f) if f.endswith(".npy") else f for f in flags],
                    "-o", out)
            want = np.load(out)
            got = rt.embedding_bag(IDS, OFFSETS, include_last_offset=True, **kwargs)
            assert got.dtype == np.float32 and got.shape == (5, 64)
            assert got.tobytes() == want.tobytes(), (flags, reference)  # bit for bit, signed zeros included
            assert got.tobytes() == pool_reference(rows, IDS, OFFSETS, **ref).tobytes(), flags


def test_every_form_of_bags(rt):
    rows = rt.lookup_dequantized(IDS)
    want = pool_reference(rows, IDS, OFFSETS)
    lengths = np.diff(OFFSETS)
    forms = [
        dict(offsets=OFFSETS, include_last_offset=True),
        dict(offsets=OFFSETS[:-1]),                       # PyTorch's default: B starts
        dict(offsets=OFFSETS[:-1].astype(np.int32)),
        dict(offsets=list(OFFSETS[:-1])),
        dict(lengths=lengths),
        dict(lengths=lengths.astype(np.int32)),
    ]
    for kwargs in forms:
        assert rt.embedding_bag(IDS, **kwargs).tobytes() == want.tobytes(), kwargs
        assert rt.embedding_bag(IDS.astype(np.int32), **kwargs).tobytes() == want.tobytes(), kwargs
    assert not want[1].any() and np.signbit(want[1]).sum() == 0  # the empty bag is +0.0
    # 2-D ids: B bags of L ids, one per row; weights of the same shape.
    grid = IDS.reshape(4, 3)
    w = WEIGHTS.reshape(4, 3)
    got = rt.embedding_bag(grid, per_sample_weights=w)
    assert got.tobytes() == pool_reference(rows, IDS, [0, 3, 6, 9, 12], weights=WEIGHTS).tobytes()
    # Weights given as a list or float64 are converted to float32 first.
    assert rt.embedding_bag(IDS, OFFSETS[:-1], per_sample_weights=WEIGHTS.astype(np.float64).tolist()).tobytes() == \
        pool_reference(rows, IDS, OFFSETS, weights=WEIGHTS).tobytes()


def test_half_outputs_round_once(rt):
    f32 = rt.embedding_bag(IDS, OFFSETS[:-1], per_sample_weights=WEIGHTS)
    f16 = rt.embedding_bag(IDS, OFFSETS[:-1], per_sample_weights=WEIGHTS, dtype="f16")
    assert f16.dtype == np.float16 and f16.tobytes() == f32.astype(np.float16).tobytes()
    bf16 = rt.embedding_bag(IDS, OFFSETS[:-1], per_sample_weights=WEIGHTS, dtype="bf16")
    u = f32.view(np.uint32)
    assert bf16.dtype == np.uint16
    assert bf16.tobytes() == ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()


def test_out_is_written_in_place_and_checked(rt):
    out = np.full((5, 64), 7.0, dtype=np.float32)
    assert rt.embedding_bag(IDS, OFFSETS[:-1], out=out) is out
    assert out.tobytes() == rt.embedding_bag(IDS, OFFSETS[:-1]).tobytes()
    with pytest.raises(qemb.InvalidArgument, match=r"^out has shape \(4, 64\); 5 bags of 64 columns need \(5, 64\)$"):
        rt.embedding_bag(IDS, OFFSETS[:-1], out=np.zeros((4, 64), np.float32))
    with pytest.raises(qemb.InvalidArgument, match="^out has dtype float64; this call writes float32$"):
        rt.embedding_bag(IDS, OFFSETS[:-1], out=np.zeros((5, 64)))
    with pytest.raises(qemb.InvalidArgument, match="^out has dtype float32; this call writes uint16$"):
        rt.embedding_bag(IDS, OFFSETS[:-1], dtype="bf16", out=out)


def test_tables_batched_into_one_output(tmp, rt):
    """Tables of different dims and schemes: [B, sum D] with each table's columns at its offset."""
    small = make_table(rows=30, dim=5, seed=3)
    art = os.path.join(tmp, "small.qemb")
    qemb.compile(small, scheme="16a8w", qnn_sdk_version="2.37", out=art)
    rt2 = qemb.Runtime(art)
    ids2 = np.array([4, 29, 0, 4, 17], dtype=np.int32)
    lengths2 = np.array([1, 2, 0, 0, 2])
    tables = [
        dict(runtime=rt, ids=IDS, offsets=OFFSETS, include_last_offset=True, per_sample_weights=WEIGHTS),
        dict(runtime=rt2, ids=ids2, lengths=lengths2, mode="mean", padding_idx=4, name="small"),
        dict(runtime=rt, ids=IDS.reshape(-1, 1)[:5]),
    ]
    got = qemb.embedding_bags(tables)
    assert got.shape == (5, 64 + 5 + 64)
    np.testing.assert_array_equal(got[:, :64], rt.embedding_bag(IDS, OFFSETS, include_last_offset=True,
                                                                 per_sample_weights=WEIGHTS))
    np.testing.assert_array_equal(got[:, 64:69], rt2.embedding_bag(ids2, lengths=lengths2, mode="mean", padding_idx=4))
    np.testing.assert_array_equal(got[:, 69:], rt.lookup_dequantized(IDS[:5]))
    assert got[:, 64:69].tobytes() == pool_reference(rt2.lookup_dequantized(ids2), ids2, [0, 1, 3, 3, 3, 5],
                                                     mode="mean", padding_idx=4).tobytes()
    # Errors name the table.
    tables[1]["ids"] = np.array([4, 29, 30, 4, 17])
    out = np.full((5, 133), 3.0, dtype=np.float32)
    with pytest.raises(qemb.IdOutOfRange, match=r"^table 1 \('small'\): id 30 at position 2 \(bag 1\) is past the "
                                                r"last row; ids must be in \[0, 30\)$"):
        qemb.embedding_bags(tables, out=out)
    assert (out == 3.0).all()
    tables[1]["ids"] = ids2
    tables[2]["ids"] = IDS.reshape(-1, 1)
    with pytest.raises(qemb.InvalidArgument, match=r"^table 2 has 12 bags but table 0 has 5; every table of a call "
                                                   r"needs the same number of bags$"):
        qemb.embedding_bags(tables)
    with pytest.raises(qemb.InvalidArgument, match=r"^tables\[0\] has an unknown key 'weights'; the keys are"):
        qemb.embedding_bags([dict(runtime=rt, ids=IDS, weights=WEIGHTS)])
    with pytest.raises(qemb.InvalidArgument, match=r"^tables\[0\]\['runtime'\] must be a qemb.Runtime$"):
        qemb.embedding_bags([dict(runtime=art, ids=IDS, offsets=[0])])
    with pytest.raises(qemb.InvalidArgument, match="^no tables to pool$"):
        qemb.embedding_bags([])


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(offsets=[1, 3]), qemb.InvalidArgument, r"table 0: offsets\[0\] = 1; the first offset must be 0"),
    (dict(offsets=[0, 5, 3]), qemb.InvalidArgument,
     r"table 0: offsets\[2\] = 3 is less than offsets\[1\] = 5; offsets must not decrease"),
    (dict(offsets=[0, 13]), qemb.InvalidArgument, r"table 0: offsets\[1\] = 13 is past the end of the 12 indices"),
    (dict(offsets=[0, 11], include_last_offset=True), qemb.InvalidArgument,
     r"table 0: the last offset, offsets\[1\] = 11, must equal the number of indices \(12\)"),
    (dict(lengths=[5, 8]), qemb.InvalidArgument,
     r"table 0: lengths\[1\] = 8 runs past the end of the 12 indices \(bag 1 starts at 5\)"),
    (dict(lengths=[5, -1, 8]), qemb.InvalidArgument, r"table 0: lengths\[1\] = -1 is negative"),
    (dict(offsets=[0], per_sample_weights=WEIGHTS[:11]), qemb.InvalidArgument,
     r"per_sample_weights has shape \(11,\); it needs the shape of ids, \(12,\)"),
    (dict(offsets=[0], per_sample_weights=WEIGHTS, mode="mean"), qemb.InvalidArgument,
     r"table 0: per-sample weights need pool mode sum \(as in PyTorch, mean takes none\)"),
    (dict(offsets=[0], per_sample_weights=np.arange(12)), qemb.InvalidArgument,
     r"per_sample_weights must be floating point \(float32\); got int64"),
    (dict(offsets=[0], mode="max"), qemb.InvalidArgument, r"unknown pool mode 'max': expected sum or mean"),
    (dict(offsets=[0], padding_idx=512), qemb.InvalidArgument, r"table 0: padding_idx 512 is outside \[-512, 512\)"),
    (dict(offsets=[0], dtype="half"), qemb.InvalidArgument, r"unknown output dtype 'half': expected f32, f16 or bf16"),
    (dict(), qemb.InvalidArgument,
     r"1-D ids need offsets= or lengths= to split them into bags \(or pass 2-D ids, one bag per row\)"),
    (dict(offsets=[0], lengths=[12]), qemb.InvalidArgument, r"give offsets= or lengths=, not both"),
    (dict(lengths=[12], include_last_offset=True), qemb.InvalidArgument,
     r"include_last_offset=True describes offsets=; lengths take no last offset"),
    (dict(offsets=[[0]]), qemb.InvalidArgument, r"offsets must be 1-D; got shape \(1, 1\)"),
    (dict(offsets=[0.0]), qemb.InvalidArgument, r"offsets must be integers \(int32 or int64\); got float64"),
])
def test_bad_input(rt, kwargs, error, message):
    with pytest.raises(error, match="^" + message + "$"):
        rt.embedding_bag(IDS, **kwargs)


def test_bad_ids(rt):
    ids = IDS.copy()
    ids[9] = 512
    out = np.full((5, 64), 3.0, dtype=np.float32)
    with pytest.raises(qemb.IdOutOfRange, match=r"^table 0: id 512 at position 9 \(bag 4\) is past the last row; "
                                                r"ids must be in \[0, 512\)$") as e:
        rt.embedding_bag(ids, OFFSETS[:-1], out=out)
    assert isinstance(e.value, IndexError)
    assert (out == 3.0).all()  # nothing written
    with pytest.raises(qemb.InvalidArgument, match=r"^2-D ids are bags of fixed length, one per row; offsets= and "
                                                   r"lengths= are for 1-D ids$"):
        rt.embedding_bag(IDS.reshape(3, 4), [0, 1, 2])
    with pytest.raises(qemb.InvalidArgument, match=r"^ids must be 1-D \(with offsets= or lengths=\) or 2-D \(one bag "
                                                   r"per row\); got shape \(2, 3, 2\)$"):
        rt.embedding_bag(IDS.reshape(2, 3, 2))


def test_bag_kernel(rt):
    assert rt.bag_kernel == "requant_bag_s4_i64[" + rt.isa + "]"


def test_tables_of_one_artifact(tmp):
    """A multi-table artifact: tables of different dims and schemes pooled in
    one call into [B, sum D], each table's columns at its offset, equal to the
    same table compiled alone."""
    specs = [("user.weight", make_table(rows=50, dim=24, seed=11), "16a4w"),
             ("item.weight", make_table(rows=70, dim=8, seed=12), "16a8w"),
             ("ctx.weight", make_table(rows=20, dim=33, seed=13), "16a4w")]
    ckpt = os.path.join(tmp, "tables.safetensors")
    write_safetensors(ckpt, {name: ("F32", table) for name, table, _ in specs})
    names = [name for name, _, _ in specs]
    run_cli("compile", ckpt, "--tensor", ",".join(names), "--scheme", "16a4w", "--scheme", "item.weight=16a8w",
            "--mode", "fused", "--qnn-sdk-version", "2.48", "--quiet", "-o", os.path.join(tmp, "multi.qemb"))
    multi = qemb.Runtime(os.path.join(tmp, "multi.qemb"))
    assert multi.tables == [dict(name=n, vocab_size=t.shape[0], dim=t.shape[1]) for n, t, _ in specs]
    singles = {}
    for name, _, scheme in specs:
        path = os.path.join(tmp, name + ".qemb")
        run_cli("compile", ckpt, "--tensor", name, "--scheme", scheme, "--mode", "fused", "--qnn-sdk-version", "2.48",
                "--quiet", "-o", path)
        singles[name] = qemb.Runtime(path)
    ids = np.array([0, 19, 3, 3, 7, 19, 1], dtype=np.int64)
    offsets = np.array([0, 2, 2, 7])
    w = np.linspace(-1.5, 2.0, len(ids), dtype=np.float32)
    order = ["ctx.weight", "user.weight", "item.weight"]  # the call's order, not the artifact's
    modes = {"ctx.weight": dict(mode="mean", padding_idx=3), "user.weight": dict(per_sample_weights=w),
             "item.weight": {}}
    got = qemb.embedding_bags([dict(runtime=multi, table=n, ids=ids, offsets=offsets, include_last_offset=True,
                                    **modes[n]) for n in order])
    assert got.shape == (3, 33 + 24 + 8)
    col = 0
    for n in order:
        single = singles[n]
        want = single.embedding_bag(ids, offsets, include_last_offset=True, **modes[n])
        assert got[:, col:col + single.dim].tobytes() == want.tobytes(), n
        ref = dict(weights=w) if n == "user.weight" else dict(modes[n])
        assert want.tobytes() == pool_reference(single.lookup_dequantized(ids), ids, offsets, **ref).tobytes(), n
        assert multi.embedding_bag(ids, offsets, include_last_offset=True, table=n, **modes[n]).tobytes() == \
            want.tobytes(), n
        col += single.dim
    # No silent first table (issue 36): without table= the error lists them;
    # an unknown table lists the artifact's tables.
    with pytest.raises(qemb.InvalidArgument, match=r"^the artifact holds 3 tables \(user.weight, item.weight, "
                                                   r"ctx.weight\); pass table=NAME \(see Runtime.tables\)$"):
        multi.embedding_bag(ids, offsets[:-1])
    with pytest.raises(qemb.NotFound, match=r"^table 1 \('nope'\): the artifact has no table 'nope'; its tables: "
                                            r"user.weight, item.weight, ctx.weight$"):
        qemb.embedding_bags([dict(runtime=multi, table="user.weight", ids=ids, offsets=offsets[:-1]),
                             dict(runtime=multi, table="nope", ids=ids, offsets=offsets[:-1])])
    with pytest.raises(qemb.IdOutOfRange, match=r"^table 0 \('ctx.weight'\): id 20 at position 1 \(bag 0\) is past "
                                                r"the last row; ids must be in \[0, 20\)$"):
        multi.embedding_bag([0, 20], [0], table="ctx.weight")
