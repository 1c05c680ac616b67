"""qemb.torch: QuantizedEmbedding returns exactly what `qemb fakequant` writes
for the same weight, and quantize_embeddings swaps nested embeddings by their
dotted paths without creating flat attributes."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh --test adds it)")
from torch import nn  # noqa: E402

import qemb  # noqa: E402
from qemb.torch import QuantizedEmbedding, get_submodule, quantize_embeddings, set_submodule  # noqa: E402
from conftest import make_table, read_safetensors, run_cli, write_safetensors  # noqa: E402


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
