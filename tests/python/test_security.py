"""Checkpoint contents are data, never code: nothing in the resurgo package
unpickles or evaluates what it reads."""

from __future__ import annotations

import ast
from pathlib import Path

import resurgo

PACKAGE = Path(resurgo.__file__).resolve().parent
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "marshal", "shelve", "joblib"}
UNSAFE_CALLS = {"eval", "exec", "compile", "__import__"}


def findings(source: str, name: str):
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            yield from (f"{name}:{node.lineno} imports {a.name}" for a in node.names
                        if a.name.split(".")[0] in UNSAFE_MODULES)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES:
            yield f"{name}:{node.lineno} imports from {node.module}"
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in UNSAFE_CALLS:
                yield f"{name}:{node.lineno} calls {node.func.id}"
            if isinstance(node.func, ast.Attribute) and node.func.attr in {"load", "loads"} and \
                    isinstance(node.func.value, ast.Name) and node.func.value.id in {"torch", "np", "numpy"}:
                yield f"{name}:{node.lineno} calls {node.func.value.id}.{node.func.attr}"
            for keyword in node.keywords:
                if keyword.arg == "allow_pickle":
                    yield f"{name}:{node.lineno} passes allow_pickle"


def test_the_checker_finds_what_it_looks_for():
    sample = "import pickle\nfrom marshal import loads\neval('1')\nnp.load(f, allow_pickle=True)\n"
    assert len(list(findings(sample, "sample.py"))) == 5


def test_package_never_unpickles_or_evaluates():
    files = sorted(PACKAGE.rglob("*.py"))
    assert any(f.name == "cli.py" for f in files)
    found = [line for f in files for line in findings(f.read_text(), str(f.relative_to(PACKAGE)))]
    assert found == []
