"""Helpers shared by the Python tests (imported as `helpers`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Tuple

import numpy as np

from resurgo import _core


def run_cli(*args: object, cwd=None) -> subprocess.CompletedProcess:
    """The `resurgo` command-line tool run in a new process (its output as
    text, at most 120 s)."""
    return subprocess.run([sys.executable, "-m", "resurgo", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def container_name(version: int, rank: int = 0) -> str:
    return f"v{version:010d}.r{rank:06d}.rsg"


@dataclass
class Dirs:
    root: Path
    l2: Path
    l4: Path

    def kw(self, **extra):
        """Overrides that point both directory levels at this test's dirs."""
        out = dict(local_path=str(self.l2), persistent_path=str(self.l4), persistent_every=1)
        out.update(extra)
        return out

    def level_dir(self, level: int, store: str) -> Path:
        return (self.l2 if level == 2 else self.l4) / store

    def file(self, level: int, store: str, version: int, rank: int = 0) -> Path:
        return self.level_dir(level, store) / container_name(version, rank)

    def files(self, level: int, store: str) -> List[Path]:
        d = self.level_dir(level, store)
        return sorted(d.glob("v*.rsg")) if d.is_dir() else []


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        assert len(byte) == 1, f"offset {offset} beyond the end of {path}"
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x5A]))
        f.flush()
        os.fsync(f.fileno())


def flip_chunk_byte(path: Path, chunk: int = 0) -> None:
    """Flips one byte inside the stored bytes of a chunk (not the header), so
    the header and index still parse and only the chunk checksum fails."""
    info = _core.inspect(str(path))
    record = info.chunks[chunk]
    assert record.stored_length > 0
    flip_byte(path, record.file_offset + record.stored_length // 2)


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-for-bit equality (NaN payloads and -0.0 included)."""
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def kill_after_lines(command: List[str], enough: Callable[[List[str]], bool],
                     timeout: float) -> Tuple[List[str], int, str]:
    """Runs `command`, reads the lines it prints until `enough(lines)` holds,
    then kills it with SIGKILL (a child whose output ends first is left to
    exit). Returns the lines, its return code and its standard error. A
    watchdog kills a child still running after `timeout` seconds."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    lines: List[str] = []
    try:
        while not enough(lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
        else:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stderr = proc.stderr.read()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    return lines, proc.returncode, stderr
