"""qemb for PyTorch: drop-in, runtime-backed replacements for nn.Embedding
and nn.EmbeddingBag.

    from qemb.torch import QuantizedEmbedding, QuantizedEmbeddingBag, quantize_embeddings
    qemb_emb = QuantizedEmbedding.from_embedding(model.embed_tokens, scheme="16a4w", qnn_sdk_version="2.48")
    qemb_bag = QuantizedEmbeddingBag.from_embedding_bag(model.user_bag, qnn_sdk_version="2.48")
    quantize_embeddings(model, scheme="16a4w", qnn_sdk_version="2.48")  # every one of both, in place

QuantizedEmbedding's forward(ids) returns rows bit-identical to
`qemb fakequant` of the same weight, looked up by qemb's runtime: the ids
tensor is read in place and the output tensor shares the runtime's numpy
result (no copy of the table). QuantizedEmbeddingBag's forward(input,
offsets, per_sample_weights) pools those rows with nn.EmbeddingBag's
conventions, summing in float32 in index order. Both return the dtype of the
weight they were made from (float16 and bfloat16 models get float16 and
bfloat16 rows, rounded once from the float32 result) unless told otherwise.

Both behave as torch modules: the artifact's bytes are a buffer in
state_dict ("qemb_artifact", uint8), so torch.save / torch.load,
load_state_dict, copy.deepcopy and pickling keep the table; `.weight` is the
dequantized table (a fresh, read-only copy: writing to it changes nothing);
from_file(path) serves an artifact already on disk. Tracing (torch.jit.trace,
torch.onnx.export) would bake one lookup's output into the graph as a
constant, so forward refuses under tracing: export with `qemb export-onnx`.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

import torch
from torch import nn

import qemb

__all__ = ["QuantizedEmbedding", "QuantizedEmbeddingBag", "quantize_embeddings", "get_submodule", "set_submodule"]


def _compile_weight(weight, path, threads, options):
    """(runtime, artifact, artifact bytes) for a weight; without a path the
    artifact is a temporary file, removed at once (the runtime keeps its
    mapping)."""
    if path is not None:
        artifact = qemb.compile(weight, out=path, **options)
        return qemb.Runtime(path, threads=threads), artifact, _read_bytes(path)
    with tempfile.TemporaryDirectory(prefix="qemb-") as tmp:
        tmp_path = os.path.join(tmp, "embedding.qemb")
        artifact = qemb.compile(weight, out=tmp_path, **options)
        return qemb.Runtime(tmp_path, threads=threads), artifact, _read_bytes(tmp_path)


def _read_bytes(path) -> torch.Tensor:
    with open(path, "rb") as f:
        data = bytearray(f.read())
    return torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)


def _runtime_from_bytes(data: torch.Tensor, threads: int) -> qemb.Runtime:
    """A runtime over artifact bytes (a state_dict buffer): written to a
    temporary file, opened (checked and mapped), and the file removed."""
    if not isinstance(data, torch.Tensor) or data.dtype != torch.uint8 or data.dim() != 1:
        raise qemb.InvalidArgument("qemb_artifact must be a 1-D uint8 tensor holding a .qemb file's bytes")
    with tempfile.TemporaryDirectory(prefix="qemb-") as tmp:
        tmp_path = os.path.join(tmp, "embedding.qemb")
        with open(tmp_path, "wb") as f:
            f.write(data.detach().cpu().contiguous().numpy().tobytes())
        return qemb.Runtime(tmp_path, threads=threads)


_OUT_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def _out_dtype(dtype):
    if dtype is None:
        return torch.float32
    if dtype not in _OUT_DTYPES:
        raise qemb.InvalidArgument(f"dtype {dtype}: qemb returns torch.float32, torch.float16 or torch.bfloat16")
    return dtype


def _as_torch(array, dtype) -> torch.Tensor:
    if dtype == torch.bfloat16:  # bfloat16 bits as uint16: torch reads them as int16, then views them
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def _refuse_tracing(module):
    if torch.jit.is_scripting():  # pragma: no cover (forward is not scriptable; kept for clarity)
        raise qemb.Unsupported("qemb modules cannot be scripted")
    if torch._C._get_tracing_state() is not None:
        raise qemb.Unsupported(
            f"{type(module).__name__} runs qemb's runtime outside torch's graph, so torch.jit.trace and "
            "torch.onnx.export would bake one lookup's output into the model as a constant; export the embedding "
            "with `qemb export-onnx` (docs/onnx-export.md says how to splice it into the model's ONNX)")


class _RuntimeModule(nn.Module):
    """What both modules share: the runtime, its artifact's bytes as the
    state_dict buffer `qemb_artifact`, pickling, `.weight` and the output dtype."""

    def _init_runtime(self, runtime, artifact, data, dtype, threads):
        self.runtime = runtime
        self.artifact = artifact if artifact is not None else qemb.Artifact(runtime.describe())
        self.num_embeddings = runtime.vocab_size
        self.embedding_dim = runtime.dim
        self.dtype = _out_dtype(dtype)
        self._threads = threads
        self.register_buffer("qemb_artifact", data if data is not None else _read_bytes(runtime.path))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # The artifact is replaced whole (its size follows the one loaded) and
        # the runtime reopened over it; torch's own copy_ would need equal sizes.
        key = prefix + "qemb_artifact"
        if key in state_dict:
            try:
                data = state_dict[key].detach().cpu().clone()
                runtime = _runtime_from_bytes(data, getattr(self, "_threads", 1))
            except qemb.Error as e:
                error_msgs.append(f"{key}: not a .qemb artifact qemb can open: {e}")
            else:
                self.qemb_artifact = data
                self._adopt(runtime)
        super()._load_from_state_dict({k: v for k, v in state_dict.items() if k != key}, prefix, local_metadata,
                                      strict, missing_keys, unexpected_keys, error_msgs)
        if key in state_dict and key in missing_keys:
            missing_keys.remove(key)

    def _adopt(self, runtime):
        self.runtime = runtime
        self.artifact = qemb.Artifact(runtime.describe())
        self.num_embeddings = runtime.vocab_size
        self.embedding_dim = runtime.dim

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("runtime", None)  # a mapping: rebuilt from the buffer
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._adopt(_runtime_from_bytes(self.qemb_artifact, getattr(self, "_threads", 1)))

    @property
    def weight(self) -> torch.Tensor:
        """The dequantized table [num_embeddings, embedding_dim] in the output
        dtype: what forward returns for every id. A fresh copy each time,
        without gradients; writing to it changes nothing."""
        ids = torch.arange(self.num_embeddings, dtype=torch.int64).numpy()
        return _as_torch(self.runtime.lookup_dequantized(ids, dtype=_OUT_DTYPES[self.dtype]), self.dtype)


class QuantizedEmbedding(_RuntimeModule):
    """An embedding lookup served by a qemb Runtime (inference only: no gradients)."""

    def __init__(self, runtime: qemb.Runtime, artifact: qemb.Artifact | None = None, padding_idx=None, *,
                 dtype=None, artifact_bytes: torch.Tensor | None = None, threads=1):
        super().__init__()
        self._init_runtime(runtime, artifact, artifact_bytes, dtype, threads)
        self.padding_idx = padding_idx

    @classmethod
    def from_file(cls, path, *, padding_idx=None, dtype=None, threads=1) -> "QuantizedEmbedding":
        """Serves the .qemb artifact at `path` (one table)."""
        runtime = qemb.Runtime(path, threads=threads)
        return cls(runtime, None, padding_idx, dtype=dtype, threads=threads)

    @classmethod
    def from_embedding(cls, embedding: nn.Embedding, *, scheme="16a4w", qnn_sdk_version=None, mode="auto",
                       pattern="auto", calibration_tokens=None, path=None, threads=1,
                       dtype=None) -> "QuantizedEmbedding":
        """Compiles embedding.weight (float32, float16 or bfloat16) and serves it.

        path: where to keep the .qemb artifact; by default a temporary file,
        removed at once (the runtime keeps its mapping).
        dtype: of the rows forward returns; by default the weight's own."""
        if not isinstance(embedding, nn.Embedding):
            raise TypeError(f"from_embedding takes an nn.Embedding; got {type(embedding).__name__}")
        if embedding.max_norm is not None:
            raise qemb.InvalidArgument("nn.Embedding with max_norm renormalizes rows on lookup; "
                                       "qemb serves fixed rows, so set max_norm=None first")
        options = dict(scheme=scheme, qnn_sdk_version=qnn_sdk_version, mode=mode, pattern=pattern,
                       calibration_tokens=calibration_tokens)
        runtime, artifact, data = _compile_weight(embedding.weight.detach(), path, threads, options)
        return cls(runtime, artifact, embedding.padding_idx, dtype=dtype or embedding.weight.dtype,
                   artifact_bytes=data, threads=threads)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        _refuse_tracing(self)
        if not isinstance(ids, torch.Tensor):
            ids = torch.as_tensor(ids)
        if ids.device.type != "cpu":
            raise qemb.InvalidArgument(f"ids are on {ids.device}; qemb looks up on the CPU")
        return _as_torch(self.runtime.lookup_dequantized(ids.numpy(), dtype=_OUT_DTYPES[self.dtype]), self.dtype)

    def extra_repr(self) -> str:
        a = self.artifact
        return (f"{self.num_embeddings}, {self.embedding_dim}, scheme={a.get('scheme')}, "
                f"pattern={a.get('pattern')}, dtype={self.dtype}, kernel={self.runtime.kernel}")


def _cpu(name, t):
    if not isinstance(t, torch.Tensor):
        t = torch.as_tensor(t)
    if t.device.type != "cpu":
        raise qemb.InvalidArgument(f"{name} is on {t.device}; qemb looks up on the CPU")
    return t.detach()


class QuantizedEmbeddingBag(_RuntimeModule):
    """A pooled lookup (nn.EmbeddingBag, mode "sum" or "mean") served by a
    qemb Runtime (inference only: no gradients).

    forward(input, offsets=None, per_sample_weights=None) follows
    nn.EmbeddingBag: 1-D input with offsets (B bag starts, or B + 1 with
    include_last_offset=True), or 2-D input [B, L] without offsets;
    per_sample_weights (mode "sum") has the shape of input; ids equal to
    padding_idx add nothing and do not count in the mean; an empty bag gives
    zeros. Returns [B, embedding_dim] in the output dtype (the weight's:
    float32, or float16/bfloat16 rounded once from the float32 sums). With include_last_offset, ids
    after offsets[-1] are ignored, as nn.EmbeddingBag does; a mean of the last
    bag then divides by that bag's own count (nn.EmbeddingBag 1.13 counts to
    the end of input)."""

    def __init__(self, runtime: qemb.Runtime, artifact: qemb.Artifact | None = None, mode="mean",
                 include_last_offset=False, padding_idx=None, *, dtype=None,
                 artifact_bytes: torch.Tensor | None = None, threads=1):
        super().__init__()
        if mode not in ("sum", "mean"):
            raise qemb.Unsupported(f"mode '{mode}': qemb pools bags by sum or mean")
        self._init_runtime(runtime, artifact, artifact_bytes, dtype, threads)
        self.mode = mode
        self.include_last_offset = include_last_offset
        self.padding_idx = padding_idx

    @classmethod
    def from_embedding_bag(cls, bag: nn.EmbeddingBag, *, scheme="16a4w", qnn_sdk_version=None, mode="auto",
                           pattern="auto", calibration_tokens=None, path=None,
                           threads=1, dtype=None) -> "QuantizedEmbeddingBag":
        """Compiles bag.weight (float32, float16 or bfloat16) and serves it with
        bag's pooling (mode, include_last_offset, padding_idx). `mode` here is
        the compile mode, as for QuantizedEmbedding.from_embedding.

        path: where to keep the .qemb artifact; by default a temporary file,
        removed at once (the runtime keeps its mapping)."""
        if not isinstance(bag, nn.EmbeddingBag):
            raise TypeError(f"from_embedding_bag takes an nn.EmbeddingBag; got {type(bag).__name__}")
        if bag.max_norm is not None:
            raise qemb.InvalidArgument("nn.EmbeddingBag with max_norm renormalizes rows on lookup; "
                                       "qemb serves fixed rows, so set max_norm=None first")
        if bag.mode not in ("sum", "mean"):
            raise qemb.Unsupported(f"nn.EmbeddingBag mode '{bag.mode}': qemb pools bags by sum or mean")
        options = dict(scheme=scheme, qnn_sdk_version=qnn_sdk_version, mode=mode, pattern=pattern,
                       calibration_tokens=calibration_tokens)
        runtime, artifact, data = _compile_weight(bag.weight.detach(), path, threads, options)
        return cls(runtime, artifact, bag.mode, bag.include_last_offset, bag.padding_idx,
                   dtype=dtype or bag.weight.dtype, artifact_bytes=data, threads=threads)

    @classmethod
    def from_file(cls, path, *, mode="mean", include_last_offset=False, padding_idx=None, dtype=None,
                  threads=1) -> "QuantizedEmbeddingBag":
        """Serves the .qemb artifact at `path` (one table) with this pooling."""
        runtime = qemb.Runtime(path, threads=threads)
        return cls(runtime, None, mode, include_last_offset, padding_idx, dtype=dtype, threads=threads)

    def forward(self, input: torch.Tensor, offsets: torch.Tensor | None = None,
                per_sample_weights: torch.Tensor | None = None) -> torch.Tensor:
        _refuse_tracing(self)
        input = _cpu("input", input)
        if per_sample_weights is not None:
            per_sample_weights = _cpu("per_sample_weights", per_sample_weights)
            if per_sample_weights.shape != input.shape:
                raise qemb.InvalidArgument(f"per_sample_weights has shape {tuple(per_sample_weights.shape)}; "
                                           f"it needs the shape of input, {tuple(input.shape)}")
        if input.dim() == 2:
            # As nn.EmbeddingBag does: fixed-length bags become offsets, to which
            # include_last_offset then applies.
            if offsets is not None:
                raise qemb.InvalidArgument("2-D input is a batch of fixed-length bags, one per row; "
                                           "offsets must be None")
            offsets = torch.arange(0, input.numel(), max(input.size(1), 1), dtype=torch.int64)
            input = input.reshape(-1)
            if per_sample_weights is not None:
                per_sample_weights = per_sample_weights.reshape(-1)
        elif input.dim() == 1:
            if offsets is None:
                raise qemb.InvalidArgument("1-D input needs offsets (a 1-D tensor of bag starts)")
            offsets = _cpu("offsets", offsets)
        else:
            raise qemb.InvalidArgument(f"input must be 1-D (with offsets) or 2-D; got {input.dim()}-D")
        if self.include_last_offset and offsets.dim() == 1 and offsets.numel() > 0:
            # nn.EmbeddingBag ends the last bag at offsets[-1], ignoring any ids after it.
            end = int(offsets[-1])
            if 0 <= end < input.numel():
                input = input[:end]
                if per_sample_weights is not None:
                    per_sample_weights = per_sample_weights[:end]
        out = self.runtime.embedding_bag(
            input.numpy(), offsets.numpy(), include_last_offset=self.include_last_offset,
            per_sample_weights=None if per_sample_weights is None else per_sample_weights.numpy(),
            mode=self.mode, padding_idx=self.padding_idx, dtype=_OUT_DTYPES[self.dtype])
        return _as_torch(out, self.dtype)

    def extra_repr(self) -> str:
        a = self.artifact
        return (f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode}, scheme={a.get('scheme')}, "
                f"pattern={a.get('pattern')}, kernel={self.runtime.bag_kernel}")


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
    """Replaces every nn.Embedding and nn.EmbeddingBag inside `model` (at any
    depth) by a QuantizedEmbedding or QuantizedEmbeddingBag of the same weight,
    in place. Returns {dotted path: replacement}. Every table is compiled
    before any is swapped, so on an error the model is left unchanged. A model
    that is itself an nn.Embedding or nn.EmbeddingBag cannot be replaced in
    place: it is refused (use QuantizedEmbedding.from_embedding(model))."""
    if isinstance(model, (nn.Embedding, nn.EmbeddingBag)):
        kind = "QuantizedEmbedding.from_embedding" if isinstance(model, nn.Embedding) \
            else "QuantizedEmbeddingBag.from_embedding_bag"
        raise qemb.InvalidArgument(
            f"the model is itself an {type(model).__name__}, which quantize_embeddings cannot replace in place; "
            f"use {kind}(model) and keep what it returns")
    options = dict(scheme=scheme, qnn_sdk_version=qnn_sdk_version, mode=mode, pattern=pattern, threads=threads)
    replacements = {}
    for name, m in model.named_modules():
        if name and isinstance(m, nn.Embedding):
            replacements[name] = QuantizedEmbedding.from_embedding(m, **options)
        elif name and isinstance(m, nn.EmbeddingBag):
            replacements[name] = QuantizedEmbeddingBag.from_embedding_bag(m, **options)
    for p, module in replacements.items():
        set_submodule(model, p, module)
    return replacements
