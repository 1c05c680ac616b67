"""qemb for PyTorch: a drop-in, runtime-backed replacement for nn.Embedding.

    from qemb.torch import QuantizedEmbedding, quantize_embeddings
    qemb_emb = QuantizedEmbedding.from_embedding(model.embed_tokens, scheme="16a4w", qnn_sdk_version="2.48")
    quantize_embeddings(model, scheme="16a4w", qnn_sdk_version="2.48")  # every nn.Embedding, in place

forward(ids) returns float32 rows bit-identical to `qemb fakequant` of the
same weight, looked up by qemb's runtime: the ids tensor is read in place and
the output tensor shares the runtime's numpy result (no copy of the table).
"""
from __future__ import annotations

import os
import tempfile

import torch
from torch import nn

import qemb

__all__ = ["QuantizedEmbedding", "quantize_embeddings", "get_submodule", "set_submodule"]


class QuantizedEmbedding(nn.Module):
    """An embedding lookup served by a qemb Runtime (inference only: no gradients)."""

    def __init__(self, runtime: qemb.Runtime, artifact: qemb.Artifact | None = None, padding_idx=None):
        super().__init__()
        self.runtime = runtime
        self.artifact = artifact if artifact is not None else qemb.Artifact(runtime.describe())
        self.num_embeddings = runtime.vocab_size
        self.embedding_dim = runtime.dim
        self.padding_idx = padding_idx

    @classmethod
    def from_embedding(cls, embedding: nn.Embedding, *, scheme="16a4w", qnn_sdk_version=None, mode="auto",
                       pattern="auto", calibration_tokens=None, path=None, threads=1) -> "QuantizedEmbedding":
        """Compiles embedding.weight (float32, float16 or bfloat16) and serves it.

        path: where to keep the .qemb artifact; by default a temporary file,
        removed at once (the runtime keeps its mapping)."""
        if not isinstance(embedding, nn.Embedding):
            raise TypeError(f"from_embedding takes an nn.Embedding; got {type(embedding).__name__}")
        if embedding.max_norm is not None:
            raise qemb.InvalidArgument("nn.Embedding with max_norm renormalizes rows on lookup; "
                                       "qemb serves fixed rows, so set max_norm=None first")
        weight = embedding.weight.detach()
        options = dict(scheme=scheme, qnn_sdk_version=qnn_sdk_version, mode=mode, pattern=pattern,
                       calibration_tokens=calibration_tokens)
        if path is not None:
            artifact = qemb.compile(weight, out=path, **options)
            return cls(qemb.Runtime(path, threads=threads), artifact, embedding.padding_idx)
        with tempfile.TemporaryDirectory(prefix="qemb-") as tmp:
            tmp_path = os.path.join(tmp, "embedding.qemb")
            artifact = qemb.compile(weight, out=tmp_path, **options)
            runtime = qemb.Runtime(tmp_path, threads=threads)
        return cls(runtime, artifact, embedding.padding_idx)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor):
            ids = torch.as_tensor(ids)
        if ids.device.type != "cpu":
            raise qemb.InvalidArgument(f"ids are on {ids.device}; qemb looks up on the CPU")
        return torch.from_numpy(self.runtime.lookup_dequantized(ids.numpy()))

    def extra_repr(self) -> str:
        a = self.artifact
        return (f"{self.num_embeddings}, {self.embedding_dim}, scheme={a.get('scheme')}, "
                f"pattern={a.get('pattern')}, kernel={self.runtime.kernel}")


def _resolve(model: nn.Module, path: str):
    """The one path resolver behind get_submodule and set_submodule: the
    parent module of a dotted path and the last component."""
    if not path:
        raise qemb.InvalidArgument("the path is empty; name a submodule, e.g. 'model.embed_tokens'")
    parts = path.split(".")
    parent = model
    for i, part in enumerate(parts[:-1]):
        child = parent._modules.get(part)
        if child is None:
            raise qemb.NotFound(f"'{path}': no submodule '{part}' under '{'.'.join(parts[:i]) or '<root>'}'; "
                                f"it has {sorted(parent._modules)}")
        parent = child
    if parts[-1] not in parent._modules:
        raise qemb.NotFound(f"'{path}': no submodule '{parts[-1]}' under '{'.'.join(parts[:-1]) or '<root>'}'; "
                            f"it has {sorted(parent._modules)}")
    return parent, parts[-1]


def get_submodule(model: nn.Module, path: str) -> nn.Module:
    """The submodule a dotted path names ("encoder.layers.0.embed")."""
    parent, name = _resolve(model, path)
    return parent._modules[name]


def set_submodule(model: nn.Module, path: str, module: nn.Module) -> None:
    """Replaces the submodule a dotted path names, resolved exactly as
    get_submodule does: it never creates an attribute literally named "a.b.c"."""
    parent, name = _resolve(model, path)
    setattr(parent, name, module)


def quantize_embeddings(model: nn.Module, *, scheme="16a4w", qnn_sdk_version=None, mode="auto", pattern="auto",
                        threads=1) -> dict:
    """Replaces every nn.Embedding inside `model` (at any depth) by a
    QuantizedEmbedding of the same weight, in place. Returns {dotted path:
    QuantizedEmbedding}. Every table is compiled before any is swapped, so
    on an error the model is left unchanged."""
    paths = [name for name, m in model.named_modules() if name and isinstance(m, nn.Embedding)]
    replacements = {p: QuantizedEmbedding.from_embedding(get_submodule(model, p), scheme=scheme,
                                                         qnn_sdk_version=qnn_sdk_version, mode=mode,
                                                         pattern=pattern, threads=threads) for p in paths}
    for p, module in replacements.items():
        set_submodule(model, p, module)
    return replacements
