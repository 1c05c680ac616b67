"""qemb.torch: QuantizedEmbedding returns exactly what `qemb fakequant` writes
for the same weight, QuantizedEmbeddingBag pools like nn.EmbeddingBag over
those values, and quantize_embeddings swaps nested embeddings by their dotted
paths without creating flat attributes."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh --test adds it)")
from torch import nn  # noqa: E402

import qemb  # noqa: E402
from qemb.torch import (QuantizedEmbedding, QuantizedEmbeddingBag, get_submodule, quantize_embeddings,  # noqa: E402
                        set_submodule)
from conftest import make_table, pool_reference, read_safetensors, run_cli, write_safetensors  # noqa: E402


def cli_fakequant(tmp, table, scheme, sdk):
    """`qemb fakequant` of an F32 checkpoint holding `table`."""
    ckpt = os.path.join(tmp, "w.safetensors")
    out = os.path.join(tmp, "fq.safetensors")
    write_safetensors(ckpt, {"embed_tokens.weight": ("F32", table)})
    run_cli("fakequant", ckpt, "--scheme", scheme, "--qnn-sdk-version", sdk, "--quiet", "-o", out)
    values = read_safetensors(out, "embed_tokens.weight")
    os.remove(ckpt)
    os.remove(out)
    return values


def embedding_of(table):
    emb = nn.Embedding(*table.shape)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(table))
    return emb


@pytest.mark.parametrize("scheme", ["16a4w", "16a8w"])
@pytest.mark.parametrize("sdk", ["2.48", "2.37"])
def test_forward_equals_fakequant(tmp, scheme, sdk):
    table = make_table()
    want = cli_fakequant(tmp, table, scheme, sdk)
    q = QuantizedEmbedding.from_embedding(embedding_of(table), scheme=scheme, qnn_sdk_version=sdk)
    assert (q.num_embeddings, q.embedding_dim) == table.shape
    assert q.artifact.scheme == scheme
    ids = torch.arange(table.shape[0])
    y = q(ids)
    assert y.dtype == torch.float32 and y.shape == table.shape
    assert y.numpy().tobytes() == want.tobytes()
    batch = torch.tensor([[3, 1, 4], [1, 5, 9]])
    yb = q(batch)
    assert yb.shape == (2, 3, table.shape[1])
    np.testing.assert_array_equal(yb.numpy(), want[batch.numpy()])
    assert os.listdir(tmp) == []  # the temporary artifact is gone; the runtime keeps its mapping


def test_path_keeps_the_artifact(tmp):
    table = make_table()
    path = os.path.join(tmp, "keep.qemb")
    q = QuantizedEmbedding.from_embedding(embedding_of(table), qnn_sdk_version="2.48", path=path)
    assert os.path.exists(path)
    y = q(torch.tensor([1, 2], dtype=torch.int32))
    np.testing.assert_array_equal(y.numpy(), qemb.Runtime(path).lookup_dequantized([1, 2]))
    with pytest.raises(IndexError, match="token id 96 at position 1 is past the last row"):
        q(torch.tensor([0, 96]))


def test_from_embedding_refuses_max_norm():
    with pytest.raises(qemb.InvalidArgument, match="max_norm"):
        QuantizedEmbedding.from_embedding(nn.Embedding(4, 3, max_norm=1.0))
    with pytest.raises(TypeError, match="nn.Embedding; got Linear"):
        QuantizedEmbedding.from_embedding(nn.Linear(2, 2))


class Block(nn.Module):
    def __init__(self, table):
        super().__init__()
        self.tok = embedding_of(table)
        self.proj = nn.Linear(table.shape[1], 2)


def test_quantize_embeddings_nested_model(tmp):
    t1, t2, t3 = make_table(seed=1), make_table(rows=50, dim=8, seed=2), make_table(rows=20, dim=16, seed=3)
    model = nn.Module()
    model.encoder = Block(t1)
    model.heads = nn.ModuleDict({"aux": nn.Sequential(nn.ReLU(), embedding_of(t2))})
    model.layers = nn.ModuleList([nn.Linear(3, 3), embedding_of(t3)])
    swapped = quantize_embeddings(model, scheme="16a4w", qnn_sdk_version="2.48")
    assert sorted(swapped) == ["encoder.tok", "heads.aux.1", "layers.1"]
    assert isinstance(model.encoder.tok, QuantizedEmbedding)
    assert isinstance(model.heads["aux"][1], QuantizedEmbedding)
    assert isinstance(model.layers[1], QuantizedEmbedding)
    assert isinstance(model.encoder.proj, nn.Linear)
    # Written where it was read: no attribute literally named "a.b.c" anywhere.
    assert all("." not in child for _, m in model.named_modules() for child in m._modules)
    assert "encoder.tok" not in model._modules and not hasattr(model, "encoder.tok")
    for path, table in [("encoder.tok", t1), ("heads.aux.1", t2), ("layers.1", t3)]:
        want = cli_fakequant(tmp, table, "16a4w", "2.48")
        got = get_submodule(model, path)(torch.arange(table.shape[0]))
        assert got.numpy().tobytes() == want.tobytes(), path
    assert not any(isinstance(m, nn.Embedding) for m in model.modules())


def test_set_submodule_errors_name_the_missing_part():
    model = nn.Module()
    model.encoder = Block(make_table())
    with pytest.raises(qemb.NotFound, match="'encoder.nope.tok': no submodule 'nope' under 'encoder'"):
        set_submodule(model, "encoder.nope.tok", nn.ReLU())
    with pytest.raises(qemb.NotFound, match="no submodule 'tik' under 'encoder'; it has \\['proj', 'tok'\\]"):
        get_submodule(model, "encoder.tik")
    assert "encoder.nope.tok" not in model._modules


def bag_of(table, **kwargs):
    bag = nn.EmbeddingBag(*table.shape, **kwargs)
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(table))
    return bag


def bag_input(rows, seed):
    """1-D ids with B bag starts: 40 bags of 0..30 ids, an empty one among them,
    id 5 (a padding candidate) and repeated ids throughout."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 31, 40)
    lengths[7] = 0
    n = int(lengths.sum())
    ids = rng.integers(0, rows, n)
    ids[::6] = 5
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    weights = rng.standard_normal(n).astype(np.float32)
    weights[::11] = 0.0
    return torch.from_numpy(ids), torch.from_numpy(offsets), torch.from_numpy(weights)


@pytest.mark.parametrize("scheme, sdk", [("16a4w", "2.48"), ("16a8w", "2.37")])
@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("padding_idx", [None, 5])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_bag_equals_nn_embedding_bag(scheme, sdk, mode, padding_idx, include_last_offset):
    """nn.EmbeddingBag over the dequantized table (the values `qemb fakequant`
    gives) pools to the same bits, with 1-D input and offsets and with 2-D input."""
    table = make_table()
    config = dict(mode=mode, padding_idx=padding_idx, include_last_offset=include_last_offset)
    q = QuantizedEmbeddingBag.from_embedding_bag(bag_of(table, **config), scheme=scheme, qnn_sdk_version=sdk)
    assert (q.num_embeddings, q.embedding_dim, q.mode) == (*table.shape, mode)
    deployed = q.runtime.lookup_dequantized(np.arange(table.shape[0]))
    ref = bag_of(deployed, **config)
    ids, offsets, weights = bag_input(table.shape[0], seed=len(scheme) + len(mode))
    if include_last_offset:
        offsets = torch.cat([offsets, torch.tensor([len(ids)])])
    grid = ids[:60].reshape(12, 5)
    # 2-D input is 12 bags of 5; include_last_offset reads its 12 starts as 11
    # bags ending at 55 (PyTorch's conversion). There nn.EmbeddingBag 1.13
    # divides the last bag's mean by the 10 ids left in the input instead of
    # its own 5, and with a padding_idx corrupts its heap, so it is asked for
    # the same bags in 1-D.
    grid_ref = (ids[:55], torch.arange(0, 56, 5)) if include_last_offset else (grid,)
    for inputs, ref_inputs in [((ids, offsets), None), ((ids.to(torch.int32), offsets.to(torch.int32)), None),
                               ((grid,), grid_ref)]:
        got = q(*inputs)
        want = ref(*(ref_inputs or inputs)).detach()
        assert got.dtype == torch.float32 and got.shape == want.shape
        assert got.numpy().tobytes() == want.numpy().tobytes()
    if mode == "sum":
        # Weighted: PyTorch's kernel fuses w * y + acc into one rounding where the
        # contract rounds the product first, so torch agrees to within those
        # roundings, and the contract's reference agrees to the bit.
        got = q(ids, offsets, weights)
        want = ref(ids, offsets, per_sample_weights=weights).detach()
        starts = offsets.numpy() if include_last_offset else np.append(offsets.numpy(), len(ids))
        rows = deployed[ids.numpy()]
        terms = np.abs(weights.numpy()[:, None] * rows)
        bound = np.stack([terms[a:b].sum(0) for a, b in zip(starts[:-1], starts[1:])]) * 2.0**-22
        assert (np.abs(got.numpy() - want.numpy()) <= bound).all()
        assert got.numpy().tobytes() == pool_reference(rows, ids.numpy(), starts, weights=weights.numpy(),
                                                       padding_idx=padding_idx).tobytes()


def test_bag_follows_pytorch_edge_conventions():
    table = make_table()
    bag = bag_of(table, mode="sum", include_last_offset=True)
    q = QuantizedEmbeddingBag.from_embedding_bag(bag, qnn_sdk_version="2.48")
    ref = bag_of(q.runtime.lookup_dequantized(np.arange(table.shape[0])), mode="sum", include_last_offset=True)
    ids = torch.tensor([1, 2, 3, 4, 5, 6])
    # The last offset ends the last bag; ids after it are ignored.
    for offsets in [torch.tensor([0, 2, 4]), torch.tensor([0, 2, 6]), torch.tensor([0, 0])]:
        np.testing.assert_array_equal(q(ids, offsets).numpy(), ref(ids, offsets).detach().numpy())
    # In a mean, the last bag counts its own ids (nn.EmbeddingBag counts up to the end of the input).
    q.mode = "mean"
    np.testing.assert_array_equal(q(ids, torch.tensor([0, 2, 4]))[1].numpy(),
                                  q.runtime.embedding_bag([3, 4], [0], mode="mean")[0])
    q.mode = "sum"
    # 2-D input becomes B bag starts, which include_last_offset reads as B - 1 bags.
    grid = ids.reshape(3, 2)
    assert q(grid).shape == ref(grid).shape == (2, table.shape[1])
    np.testing.assert_array_equal(q(grid).numpy(), ref(grid).detach().numpy())


def test_bag_errors():
    table = make_table()
    q = QuantizedEmbeddingBag.from_embedding_bag(bag_of(table, mode="mean"), qnn_sdk_version="2.48")
    with pytest.raises(qemb.InvalidArgument, match="^1-D input needs offsets"):
        q(torch.tensor([1, 2]))
    with pytest.raises(qemb.InvalidArgument, match="^2-D input is a batch of fixed-length bags, one per row; "
                                                   "offsets must be None$"):
        q(torch.tensor([[1, 2]]), torch.tensor([0]))
    with pytest.raises(qemb.InvalidArgument, match="per-sample weights need pool mode sum"):
        q(torch.tensor([1, 2]), torch.tensor([0]), torch.tensor([1.0, 2.0]))
    with pytest.raises(qemb.InvalidArgument, match=r"^per_sample_weights has shape \(1,\); it needs the shape of "
                                                   r"input, \(2,\)$"):
        q(torch.tensor([1, 2]), torch.tensor([0]), torch.tensor([1.0]))
    with pytest.raises(IndexError, match=r"^table 0: id 96 at position 1 \(bag 0\) is past the last row"):
        q(torch.tensor([0, 96]), torch.tensor([0]))
    with pytest.raises(qemb.Unsupported, match="^nn.EmbeddingBag mode 'max': qemb pools bags by sum or mean$"):
        QuantizedEmbeddingBag.from_embedding_bag(nn.EmbeddingBag(4, 3, mode="max"))
    with pytest.raises(qemb.InvalidArgument, match="max_norm"):
        QuantizedEmbeddingBag.from_embedding_bag(nn.EmbeddingBag(4, 3, max_norm=1.0))
    with pytest.raises(TypeError, match="nn.EmbeddingBag; got Embedding"):
        QuantizedEmbeddingBag.from_embedding_bag(nn.Embedding(4, 3))


def test_quantize_embeddings_swaps_bags_too():
    t1, t2 = make_table(seed=4), make_table(rows=40, dim=12, seed=5)
    model = nn.Module()
    model.tok = embedding_of(t1)
    model.towers = nn.ModuleList([bag_of(t2, mode="sum", padding_idx=3)])
    swapped = quantize_embeddings(model, qnn_sdk_version="2.48")
    assert sorted(swapped) == ["tok", "towers.0"]
    assert isinstance(model.tok, QuantizedEmbedding) and isinstance(model.towers[0], QuantizedEmbeddingBag)
    assert (model.towers[0].mode, model.towers[0].padding_idx) == ("sum", 3)
    assert "kernel=" in repr(model.towers[0])
