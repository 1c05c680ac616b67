"""qemb: per-channel-quantized embedding tables with exact, fast lookups.

    import numpy as np, qemb
    table = np.random.default_rng(0).standard_normal((1000, 64), dtype=np.float32)
    info = qemb.compile(table, scheme="16a4w", qnn_sdk_version="2.48", out="table.qemb")
    rt = qemb.Runtime("table.qemb")
    rows = rt.lookup(np.array([[1, 2], [3, 4]]))        # uint16, shape (2, 2, 64)
    vals = rt.lookup_dequantized([1, 2, 3])              # float32, shape (3, 64)
    bags = rt.embedding_bag([1, 2, 3, 4], [0, 3])        # pooled (EmbeddingBag), shape (2, 64)

Every error is a qemb.Error, and also the builtin that fits (IdOutOfRange is
an IndexError, a corrupt file a ValueError, a missing one a FileNotFoundError).
qemb.torch has drop-in nn.Embedding and nn.EmbeddingBag replacements.
"""
from __future__ import annotations

import warnings

from . import _qemb
from ._qemb import (  # noqa: F401
    CorruptArtifact,
    Error,
    IdOutOfRange,
    InternalError,
    InvalidArgument,
    IoError,
    NotFound,
    ParseError,
    Runtime,
    Unsupported,
    ValidationError,
    VersionError,
    __version__,
    embedding_bags,
    evaluate as _evaluate,
    fakequant as _fakequant,
)

__all__ = [
    "Artifact", "Runtime", "compile", "embedding_bags", "evaluate", "fakequant", "CollapseWarning",
    "Error", "InvalidArgument", "IdOutOfRange", "NotFound", "ParseError", "Unsupported", "IoError",
    "CorruptArtifact", "VersionError", "ValidationError", "InternalError",
]


class CollapseWarning(UserWarning):
    """The compiled pattern wipes rows out: the legacy pattern (an old or
    unknown QNN SDK) reads rows whose scale is under 1/(2 qmax) of the largest
    back as a constant. Target QNN SDK >= 2.48 (qnn_sdk_version="2.48") for the
    optimized pattern, or pass max_collapsed_rows=0 to make it an error.
    Filter it like any warning: warnings.simplefilter("error", qemb.CollapseWarning)."""


def _warn_collapse(artifact, stacklevel):
    tables = artifact.get("tables") or [artifact]
    for t in tables:
        n = t.get("collapsed_rows") or 0
        if n > 0:
            where = f"table {t.get('name')!r}: " if len(tables) > 1 else ""
            warnings.warn(
                f"{where}the legacy pattern collapses {n} of {t.get('vocab_size')} rows "
                f"({100.0 * n / t.get('vocab_size'):.2f}%) of this {t.get('scheme')} table to a constant; "
                f"target QNN SDK >= 2.48 (qnn_sdk_version=\"2.48\") for the optimized pattern, which loses none "
                f"(max_collapsed_rows=0 makes this an error)",
                CollapseWarning, stacklevel=stacklevel + 1)


class Artifact(dict):
    """An artifact's description: the fields of `qemb inspect --json` (scheme,
    pattern, pattern_reason, sdk_version, vocab_size, dim, act_scale,
    act_offset, ops, tensors, kernel, isa, mode, ...), as a dict whose keys
    are also attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _table(source):
    """(array, dtype hint) for a 2-D table: numpy float32/float16 as is, a
    torch tensor viewed without copying (bfloat16 as its raw bits)."""
    mod = type(source).__module__
    if mod == "torch" or mod.startswith("torch."):
        import torch
        t = source.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy(), "BF16"
        return t.numpy(), None
    return source, None


def _float32(source):
    import numpy as np
    array, hint = _table(source)
    if hint == "BF16":
        import torch
        return source.detach().cpu().to(torch.float32).numpy()
    array = np.asarray(array)
    return array.astype(np.float32) if array.dtype == np.float16 else array


def compile(source, *, tensor=None, scheme="16a4w", pattern="auto", qnn_sdk_version=None,
            calibration_tokens=None, mode="auto", memory_budget=None, threads=0, out, name=None,
            max_collapsed_rows=None) -> Artifact:
    """Quantizes a table and writes the .qemb artifact `out`; returns its description.

    source              a safetensors checkpoint path, or a 2-D table: a numpy
                        float32/float16 array or a torch tensor (float32,
                        float16, bfloat16), read in place
    tensor              the checkpoint's embedding tensor (default: found by name),
                        or a list of tensor names, globs and TENSOR=NAME specs:
                        one artifact of several tables (as `qemb compile --tensor`)
    scheme              "16a4w" (default), "16a8w", "16a2w", "8a4w", "8a8w", "8a2w"
                        (uint16 / uint8 activations) or "w4", "w8", "w2"
                        (weight-only: float outputs); docs/schemes.md
    pattern             "auto", "optimized" or "legacy"
    qnn_sdk_version     the target SDK, e.g. "2.48" (default: from QNN_SDK_ROOT)
    calibration_tokens  ids (or a token file) whose rows define the activation range
    mode                "materialize", "fused" or "auto" (fused above memory_budget bytes)
    threads             threads that quantize rows (0 = one per core)
    name                node name of the lowered ops (default "embedding")
    max_collapsed_rows  None: rows the deployed pattern collapses are reported
                        (the result's "collapsed_rows") with a CollapseWarning;
                        N >= 0: more than N is a ValidationError, nothing written

    The file appears only when complete; on any error nothing is written.
    """
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        array, hint = source, None
    else:
        array, hint = _table(source)
    artifact = Artifact(_qemb.compile(array, tensor=tensor, scheme=scheme, pattern=pattern,
                                      qnn_sdk_version=qnn_sdk_version, calibration_tokens=calibration_tokens,
                                      mode=mode, memory_budget=memory_budget, threads=threads, out=out,
                                      name=name, dtype=hint, max_collapsed_rows=max_collapsed_rows))
    _warn_collapse(artifact, stacklevel=2)
    return artifact


def evaluate(source, *, tensor=None, scheme="all", qnn_sdk_version=None, calibration_tokens=None,
             tokens=None, worst_rows=10) -> dict:
    """What quantization costs, for each scheme and both patterns: the object
    `qemb eval --json` prints (tensor, dtype, file, vocab_size, dim,
    rows_evaluated, activation, target, results[...]).

    source is a checkpoint path or a 2-D table (numpy or torch); tokens limits
    the evaluated rows to those ids; scheme is one scheme (see compile) or
    "all": every scheme, each with its bits per value.
    """
    if not (isinstance(source, str) or hasattr(source, "__fspath__")):
        source = _float32(source)
    return _evaluate(source, tensor=tensor, scheme=scheme, qnn_sdk_version=qnn_sdk_version,
                     calibration_tokens=calibration_tokens, tokens=tokens, worst_rows=worst_rows)


def fakequant(source, *, tensor=None, scheme="16a4w", pattern="auto", qnn_sdk_version=None,
              calibration_tokens=None, out=None):
    """The values the deployed lookup returns, in float.

    For a checkpoint path: writes a copy to `out` in which the embedding holds
    those values (in its own dtype; every other byte unchanged), and returns a
    dict (tensor, dtype, rows, dim, pattern, pattern_reason, act_scale,
    act_offset). For a 2-D table (numpy or torch): returns them as a float32
    numpy array of the same shape.
    """
    if not (isinstance(source, str) or hasattr(source, "__fspath__")):
        source = _float32(source)
    return _fakequant(source, tensor=tensor, scheme=scheme, pattern=pattern, qnn_sdk_version=qnn_sdk_version,
                      calibration_tokens=calibration_tokens, out=out)
