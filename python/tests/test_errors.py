"""Every library error becomes a qemb.Error subclass that is also the builtin
that fits, carrying the library's message unchanged (the same text the CLI
prints), and nothing is written to `out` on an error."""
import os

import numpy as np
import pytest

import qemb
from conftest import cli_error_message, make_table, run_cli

CLASSES = {  # class: (builtin it also is, ErrorCode's to_string)
    qemb.InvalidArgument: (ValueError, "invalid argument"),
    qemb.IdOutOfRange: (IndexError, "out of range"),
    qemb.NotFound: (FileNotFoundError, "not found"),
    qemb.ParseError: (ValueError, "parse error"),
    qemb.Unsupported: (ValueError, "unsupported"),
    qemb.IoError: (OSError, "I/O error"),
    qemb.CorruptArtifact: (ValueError, "corrupt"),
    qemb.VersionError: (ValueError, "SDK version error"),
    qemb.ValidationError: (ValueError, "validation error"),
    qemb.InternalError: (RuntimeError, "internal error"),
}


def test_hierarchy():
    assert issubclass(qemb.Error, Exception)
    for cls, (builtin, code) in CLASSES.items():
        assert issubclass(cls, qemb.Error) and issubclass(cls, builtin), cls
        assert cls.code == code
        assert cls.__module__ == "qemb"
        assert cls.__doc__
    assert issubclass(qemb.NotFound, OSError)


def test_missing_artifact(tmp):
    path = os.path.join(tmp, "missing.qemb")
    with pytest.raises(qemb.NotFound) as e:
        qemb.Runtime(path)
    assert isinstance(e.value, FileNotFoundError)
    _, _, err = run_cli("run", path, "--tokens", "1", check=False)
    assert str(e.value) == cli_error_message(err)


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign"])
def test_corrupt_artifact(tmp, damage):
    path = os.path.join(tmp, "a.qemb")
    qemb.compile(make_table(), qnn_sdk_version="2.48", out=path)
    data = bytearray(open(path, "rb").read())
    if damage == "truncate":
        data = data[:len(data) // 2]
    elif damage == "flip":
        data[len(data) // 3] ^= 0x40
    else:
        data[:8] = b"NOTQEMB!"
    open(path, "wb").write(bytes(data))
    with pytest.raises(qemb.CorruptArtifact) as e:
        qemb.Runtime(path)
    assert isinstance(e.value, ValueError)
    _, _, err = run_cli("inspect", path, check=False)
    assert str(e.value) == cli_error_message(err)


# The option fields these cases' messages name, as the command line names them.
CLI_FLAGS = {"CompileOptions.pattern = ": "--pattern ", "CompileOptions.qnn_sdk_version": "--qnn-sdk-version",
             "(qnn_sdk_version)": "(--qnn-sdk-version)"}


def test_compile_errors_write_nothing(tmp, table_checkpoint):
    table, ckpt = table_checkpoint
    out = os.path.join(tmp, "out.qemb")
    cases = [
        (qemb.ValidationError, dict(source=ckpt, pattern="optimized", qnn_sdk_version="2.37"),
         ["--pattern", "optimized", "--qnn-sdk-version", "2.37"]),
        (qemb.InvalidArgument, dict(source=ckpt, scheme="3a1w"), ["--scheme", "3a1w"]),
        (qemb.NotFound, dict(source=ckpt, tensor="model.nope.weight"), ["--tensor", "model.nope.weight"]),
        (qemb.VersionError, dict(source=ckpt, qnn_sdk_version="two"), ["--qnn-sdk-version", "two"]),
    ]
    for cls, kwargs, flags in cases:
        with pytest.raises(cls) as e:
            qemb.compile(kwargs.pop("source"), out=out, **kwargs)
        assert not os.path.exists(out)
        _, _, err = run_cli("compile", ckpt, *flags, "-o", out, check=False)
        # A value the command line refuses (usage error) says the parser's
        # message after the flag; the library prefixes the same message, and
        # names the option fields the command line gives as its flags.
        message = str(e.value)
        for field, flag in CLI_FLAGS.items():
            message = message.replace(field, flag)
        assert message.endswith(cli_error_message(err)), cls
        assert not os.path.exists(out)
    bad = table.copy()
    bad[5, 7] = np.nan
    with pytest.raises(qemb.InvalidArgument, match="row 5"):
        qemb.compile(bad, qnn_sdk_version="2.48", out=out)
    with pytest.raises(qemb.Unsupported, match="^the table has dtype float64; expected float32 or float16$"):
        qemb.compile(table.astype(np.float64), out=out)
    with pytest.raises(qemb.InvalidArgument, match="^the table must be 2-D \\[vocab, dim\\]; got 1 dimensions$"):
        qemb.compile(table[0], out=out)
    with pytest.raises(qemb.InvalidArgument, match="^compile needs out= \\(the .qemb path to write\\)$"):
        qemb._qemb.compile(table)
    assert os.listdir(tmp) == []


def test_existing_output_survives_a_failed_compile(tmp, table_checkpoint):
    _, ckpt = table_checkpoint
    out = os.path.join(tmp, "keep.qemb")
    open(out, "wb").write(b"precious")
    with pytest.raises(qemb.ValidationError):
        qemb.compile(ckpt, pattern="optimized", qnn_sdk_version="2.37", out=out)
    assert open(out, "rb").read() == b"precious"
    assert os.listdir(tmp) == ["keep.qemb"]


def test_fakequant_and_evaluate_errors(tmp, table_checkpoint):
    table, ckpt = table_checkpoint
    with pytest.raises(qemb.InvalidArgument, match="^fakequant of a checkpoint needs out="):
        qemb.fakequant(ckpt)
    with pytest.raises(qemb.InvalidArgument):
        qemb.evaluate(ckpt, scheme="8a3w")
    with pytest.raises(qemb.IdOutOfRange, match="96"):
        qemb.evaluate(table, tokens=[1, 96])
    with pytest.raises(qemb.NotFound):
        qemb.fakequant(os.path.join(tmp, "none.safetensors"), out=os.path.join(tmp, "o.safetensors"))
    assert os.listdir(tmp) == []
