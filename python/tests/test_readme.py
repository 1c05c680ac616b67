"""The README's "From Python" examples run as written, and the type stubs
cover the public API."""
import ast
import os
import re
import subprocess
import sys

import pytest

import qemb

SOURCE_DIR = os.environ.get("QEMB_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def readme_python_blocks():
    text = open(os.path.join(SOURCE_DIR, "README.md")).read()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_has_examples():
    assert len(readme_python_blocks()) == 2


@pytest.mark.parametrize("index", [0, 1])
def test_readme_example_runs(tmp, index):
    code = readme_python_blocks()[index]
    if "import torch" in code:
        pytest.importorskip("torch", reason="python3-torch is not installed")
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(qemb.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp, capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    if index == 0:
        lines = p.stdout.splitlines()
        assert lines[0].startswith("optimized materialize ")
        assert lines[1] == "token id 1000 at position 1 is past the last row; ids must be in [0, 1000)"
    else:
        assert p.stdout.strip() == "torch.Size([3, 8])"


def test_stubs_cover_the_public_api():
    stub = ast.parse(open(os.path.join(os.path.dirname(qemb.__file__), "__init__.pyi")).read())
    names = {n.name for n in stub.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert set(qemb.__all__) <= names, set(qemb.__all__) - names
    runtime = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == "Runtime")
    members = {n.name for n in runtime.body if isinstance(n, ast.FunctionDef)}
    public = {m for m in dir(qemb.Runtime) if not m.startswith("_")}
    assert public <= members, public - members


def test_docstrings():
    for name in ["Runtime", "compile", "evaluate", "fakequant", "Artifact", "Error", "embedding_bags"]:
        assert getattr(qemb, name).__doc__, name
    for name in ["lookup", "lookup_dequantized", "describe", "embedding_bag"]:
        assert getattr(qemb.Runtime, name).__doc__, name
