"""qemb.torch modules behave like torch modules: the table lives in
state_dict and survives torch.save/torch.load, load_state_dict, deepcopy and
pickling; `.weight` is the dequantized table; the output dtype follows the
weight's; tracing refuses instead of baking a constant; a root nn.Embedding is
refused by quantize_embeddings."""
import copy
import io
import os
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh --test adds it)")
from torch import nn  # noqa: E402

import qemb  # noqa: E402
from qemb.torch import QuantizedEmbedding, QuantizedEmbeddingBag, quantize_embeddings  # noqa: E402
from conftest import make_table  # noqa: E402

IDS = torch.tensor([[0, 5, 17], [63, 5, 2]])


def embedding_of(table, dtype=torch.float32):
    emb = nn.Embedding(*table.shape).to(dtype)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(table).to(dtype))
    return emb


@pytest.fixture
def quantized():
    return QuantizedEmbedding.from_embedding(embedding_of(make_table(64, 24, seed=3)), qnn_sdk_version="2.48")


def test_state_dict_holds_the_artifact(quantized, tmp):
    sd = quantized.state_dict()
    assert list(sd) == ["qemb_artifact"]
    assert sd["qemb_artifact"].dtype == torch.uint8 and bytes(sd["qemb_artifact"][:4].tolist()) == b"QEMB"
    want = quantized(IDS)
    path = os.path.join(tmp, "model.pt")
    torch.save(nn.Sequential(quantized), path)  # the whole module, pickled
    loaded = torch.load(path)
    assert torch.equal(loaded[0](IDS), want)
    assert loaded[0].artifact["pattern"] == "optimized"
    torch.save(quantized.state_dict(), path)
    other = QuantizedEmbedding.from_embedding(embedding_of(make_table(10, 8, seed=9)), qnn_sdk_version="2.48")
    assert other.load_state_dict(torch.load(path)) is not None
    assert (other.num_embeddings, other.embedding_dim) == (64, 24)
    assert torch.equal(other(IDS), want)


def test_load_state_dict_refuses_bytes_that_are_no_artifact(quantized):
    with pytest.raises(RuntimeError, match="qemb_artifact: not a .qemb artifact qemb can open: "):
        quantized.load_state_dict({"qemb_artifact": torch.zeros(100, dtype=torch.uint8)})
    assert quantized(IDS).shape == (2, 3, 24)  # the module kept its own table
    with pytest.raises(RuntimeError, match="Missing key"):
        quantized.load_state_dict({})


def test_deepcopy_and_pickle(quantized):
    want = quantized(IDS)
    for clone in (copy.deepcopy(quantized), pickle.loads(pickle.dumps(quantized))):
        assert clone.runtime is not quantized.runtime
        assert torch.equal(clone(IDS), want)
    buf = io.BytesIO()
    torch.save(quantized, buf)
    buf.seek(0)
    assert torch.equal(torch.load(buf)(IDS), want)


def test_weight_is_the_dequantized_table(quantized):
    w = quantized.weight
    assert w.shape == (64, 24) and w.dtype == torch.float32 and not w.requires_grad
    assert torch.equal(w[IDS], quantized(IDS))
    w.zero_()  # a copy: the table is unchanged
    assert torch.equal(quantized.weight[IDS], quantized(IDS))
    model = nn.Sequential(nn.Embedding(64, 24), nn.Linear(24, 2))
    quantize_embeddings(model, qnn_sdk_version="2.48")
    assert model[0].weight.shape == (64, 24)  # get_input_embeddings().weight works


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_output_dtype_follows_the_weight(dtype):
    table = make_table(64, 24, seed=4)
    emb = QuantizedEmbedding.from_embedding(embedding_of(table, dtype), qnn_sdk_version="2.48")
    as_f32 = QuantizedEmbedding.from_embedding(embedding_of(table, dtype), qnn_sdk_version="2.48",
                                               dtype=torch.float32)
    out = emb(IDS)
    assert out.dtype == dtype and emb.weight.dtype == dtype
    assert torch.equal(out, as_f32(IDS).to(dtype))  # rounded once from the float32 rows
    bag = nn.EmbeddingBag(64, 24, mode="sum").to(dtype)
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(table).to(dtype))
    qbag = QuantizedEmbeddingBag.from_embedding_bag(bag, qnn_sdk_version="2.48")
    qbag32 = QuantizedEmbeddingBag.from_embedding_bag(bag, qnn_sdk_version="2.48", dtype=torch.float32)
    pooled = qbag(IDS)
    assert pooled.dtype == dtype and torch.equal(pooled, qbag32(IDS).to(dtype))
    assert torch.equal(copy.deepcopy(qbag)(IDS), pooled)


def test_from_file(tmp):
    emb = embedding_of(make_table(64, 24, seed=5))
    path = os.path.join(tmp, "e.qemb")
    q = QuantizedEmbedding.from_embedding(emb, qnn_sdk_version="2.48", path=path)
    again = QuantizedEmbedding.from_file(path, padding_idx=3)
    assert again.padding_idx == 3 and torch.equal(again(IDS), q(IDS))
    bag = QuantizedEmbeddingBag.from_file(path, mode="sum")
    assert torch.equal(bag(IDS), q(IDS).sum(dim=1))
    with pytest.raises(qemb.NotFound):
        QuantizedEmbedding.from_file(os.path.join(tmp, "missing.qemb"))


def test_tracing_refuses_instead_of_baking_a_constant(quantized):
    model = nn.Sequential(quantized)
    with pytest.raises(qemb.Unsupported, match="would bake one lookup's output into the model as a constant; "
                                               "export the embedding with `qemb export-onnx`"):
        torch.jit.trace(model, (IDS,))
    bag = QuantizedEmbeddingBag.from_embedding_bag(nn.EmbeddingBag(64, 24, mode="sum"), qnn_sdk_version="2.48")
    with pytest.raises(qemb.Unsupported, match="QuantizedEmbeddingBag runs qemb's runtime outside torch's graph"):
        torch.jit.trace(bag, (IDS,))
    assert quantized(IDS).shape == (2, 3, 24)  # untraced calls still run


def test_a_root_embedding_is_refused_not_ignored():
    with pytest.raises(qemb.InvalidArgument, match=r"the model is itself an Embedding, which quantize_embeddings "
                                                   r"cannot replace in place; use QuantizedEmbedding.from_embedding"):
        quantize_embeddings(nn.Embedding(8, 4))
    with pytest.raises(qemb.InvalidArgument, match="QuantizedEmbeddingBag.from_embedding_bag"):
        quantize_embeddings(nn.EmbeddingBag(8, 4))
