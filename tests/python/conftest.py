"""Shared fixtures of the Python suite.

Every test gets its own L2 (local) and L4 (persistent) directories under
pytest's tmp_path and runs with tmp_path as working directory and TMPDIR, so
nothing is ever written into the repository or the user's /tmp/resurgo-<uid>.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import Dirs  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path, monkeypatch):
    for key in list(os.environ):
        if key.startswith("RESURGO_"):
            monkeypatch.delenv(key)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)


@pytest.fixture
def dirs(tmp_path) -> Dirs:
    return Dirs(root=tmp_path, l2=tmp_path / "l2", l4=tmp_path / "l4")
