# Type stubs for the qemb package (the extension qemb._qemb and its wrappers).
import os
from typing import Any, Literal, Optional, Sequence, Tuple, TypedDict, Union

import numpy as np
import numpy.typing as npt

__version__: str

_Path = Union[str, os.PathLike[str]]
_Ids = Union[int, Sequence[int], npt.NDArray[np.integer[Any]]]
_Tokens = Union[None, _Path, Sequence[int], npt.NDArray[np.integer[Any]]]
_Table = Any  # a 2-D numpy float32/float16 array or a torch tensor (float32, float16, bfloat16)
_Weights = Union[Sequence[float], npt.NDArray[np.floating[Any]]]
_PoolMode = Literal["sum", "mean"]
_BagDType = Literal["f32", "f16", "bf16"]

class Error(Exception):
    """Base class of every error qemb raises."""

class InvalidArgument(Error, ValueError):
    code: str
class IdOutOfRange(Error, IndexError):
    code: str
class NotFound(Error, FileNotFoundError):
    code: str
class ParseError(Error, ValueError):
    code: str
class Unsupported(Error, ValueError):
    code: str
class IoError(Error, OSError):
    code: str
class CorruptArtifact(Error, ValueError):
    code: str
class VersionError(Error, ValueError):
    code: str
class ValidationError(Error, ValueError):
    code: str
class InternalError(Error, RuntimeError):
    code: str

class CollapseWarning(UserWarning):
    """The compiled (legacy) pattern reads some rows back as a constant."""


class Artifact(dict[str, Any]):
    """The fields of `qemb inspect --json`, as keys and as attributes."""
    scheme: str
    pattern: str
    pattern_reason: str
    sdk_version: Optional[str]
    vocab_size: int
    dim: int
    act_scale: float
    act_offset: int
    ops: list[dict[str, Any]]
    tensors: list[dict[str, Any]]
    kernel: str
    isa: str
    mode: str
    def __getattr__(self, name: str) -> Any: ...

class Runtime:
    """A loaded .qemb artifact serving exact lookups; share it between threads."""
    def __init__(self, path: _Path, *, threads: int = 1, verify: str = "full", reference: bool = False) -> None: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def activation(self) -> Tuple[float, int]:
        """(scale, offset): real = scale * (q + offset)."""
    @property
    def kernel(self) -> str: ...
    @property
    def isa(self) -> str: ...
    @property
    def threads(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def activation_bits(self) -> int:
        """What lookup() returns: 16 (uint16), 8 (uint8) or 0 (float32, a weight-only scheme)."""
    def lookup(self, ids: _Ids, out: Optional[npt.NDArray[Any]] = None, *,
               table: Optional[str] = None) -> npt.NDArray[Any]:
        """The table's own rows of shape ids.shape + (dim,): uint16 or uint8 activations, or a
        weight-only table's float32; out= is written in place. table= names the table (needed
        when the artifact holds several)."""
    def lookup_dequantized(self, ids: _Ids, out: Optional[npt.NDArray[Any]] = None, dtype: str = "f32", *,
                           table: Optional[str] = None) -> npt.NDArray[Any]:
        """Rows y = scale * (q + offset) of shape ids.shape + (dim,): float32 ("f32"),
        float16 ("f16") or bfloat16 bit patterns as uint16 ("bf16"), rounded to nearest even."""
    def describe(self) -> dict[str, Any]:
        """The fields of `qemb inspect --json`."""
    @property
    def tables(self) -> list[dict[str, Any]]:
        """The artifact's tables, in order: [{'name', 'vocab_size', 'dim'}, ...]."""
    @property
    def bag_kernel(self) -> str:
        """The pooled kernel for int64 ids, e.g. 'requant_bag_s4_i64[AVX2]'."""
    def embedding_bag(self, ids: _Ids, offsets: Optional[_Ids] = None, *, include_last_offset: bool = False,
                      lengths: Optional[_Ids] = None, per_sample_weights: Optional[_Weights] = None,
                      mode: _PoolMode = "sum", padding_idx: Optional[int] = None, table: Optional[str] = None,
                      dtype: _BagDType = "f32",
                      out: Optional[npt.NDArray[Any]] = None) -> npt.NDArray[Any]:
        """Pooled rows [B, dim] (nn.EmbeddingBag): float32, float16, or bfloat16 bits as uint16."""
    def embedding_bags_flat(self, indices: _Ids, offsets: _Ids, *,
                            feature_tables: Optional[Sequence[Union[str, int]]] = None,
                            per_sample_weights: Optional[_Weights] = None, mode: _PoolMode = "sum",
                            padding_idx: Optional[int] = None, dtype: _BagDType = "f32",
                            out: Optional[npt.NDArray[Any]] = None) -> npt.NDArray[Any]:
        """F features of B bags in the flat TBE / KeyedJaggedTensor form (offsets of F * B + 1 values,
        feature-major): [B, sum of the features' dims]."""

class _BagTable(TypedDict, total=False):
    runtime: Runtime  # required
    ids: _Ids  # required
    table: str
    offsets: _Ids
    include_last_offset: bool
    lengths: _Ids
    per_sample_weights: _Weights
    mode: _PoolMode
    padding_idx: int
    name: str

def embedding_bags(tables: list[_BagTable], *, dtype: _BagDType = "f32",
                   out: Optional[npt.NDArray[Any]] = None) -> npt.NDArray[Any]:
    """Several tables pooled into one [B, sum of dims] array, each table's columns after the previous ones'."""

def compile(source: Union[_Path, _Table], *, tensor: Union[str, Sequence[str], None] = None, scheme: str = "16a4w",
            pattern: str = "auto", qnn_sdk_version: Optional[str] = None, calibration_tokens: _Tokens = None,
            mode: str = "auto", memory_budget: Optional[int] = None, threads: int = 0, out: _Path,
            name: Optional[str] = None, max_collapsed_rows: Optional[int] = None) -> Artifact:
    """Quantizes a checkpoint's embedding or a 2-D table into the .qemb file `out`."""

def evaluate(source: Union[_Path, _Table], *, tensor: Optional[str] = None, scheme: str = "all",
             qnn_sdk_version: Optional[str] = None, calibration_tokens: _Tokens = None, tokens: _Tokens = None,
             worst_rows: int = 10) -> dict[str, Any]:
    """The object `qemb eval --json` prints."""

def fakequant(source: Union[_Path, _Table], *, tensor: Optional[str] = None, scheme: str = "16a4w",
              pattern: str = "auto", qnn_sdk_version: Optional[str] = None, calibration_tokens: _Tokens = None,
              out: Optional[_Path] = None) -> Union[dict[str, Any], npt.NDArray[np.float32]]:
    """A checkpoint copy with the deployed values written to `out` (returns a dict), or, for a table, those
    values as a float32 array."""
