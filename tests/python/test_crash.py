"""Restart after SIGKILL of a process in the middle of checkpointing."""

from __future__ import annotations

import signal
import sys
import textwrap

import numpy as np
import pytest

import resurgo
from helpers import kill_after_lines, run_cli

SIZE = 1 << 17  # int64 elements: 1 MiB per version

CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import resurgo

    l2, l4, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    a = np.zeros(size, dtype=np.int64)
    base = np.arange(size, dtype=np.int64)
    with resurgo.Store("crash", local_path=l2, persistent_path=l4) as store:
        store.protect("a", a)
        step = 0
        while True:
            np.multiply(base, 31, out=a)
            a += step * 1_000_003
            store.metadata = b"step=%d" % step
            store.checkpoint(step)
            store.wait(step, level=2)
            print(step, flush=True)
            step += 1
    """
)


def expected(version: int) -> np.ndarray:
    return np.arange(SIZE, dtype=np.int64) * 31 + version * 1_000_003


@pytest.mark.parametrize("lines_before_kill", [3, 12])
def test_restart_after_sigkill(dirs, lines_before_kill):
    lines, returncode, stderr = kill_after_lines(
        [sys.executable, "-c", CHILD, str(dirs.l2), str(dirs.l4), str(SIZE)],
        lambda lines: len(lines) >= lines_before_kill, timeout=60)
    reported = [int(line) for line in lines]
    assert len(reported) == lines_before_kill, f"child died early: {stderr}"
    assert returncode == -signal.SIGKILL
    assert reported == list(range(lines_before_kill))
    durable = reported[-1]

    a = np.zeros(SIZE, dtype=np.int64)
    with resurgo.Store("crash", **dirs.kw()) as store:
        store.protect("a", a)
        latest = store.latest()
        assert latest is not None and latest >= durable
        restored = store.restart()
        assert restored >= durable
        assert np.array_equal(a, expected(restored))
        assert store.metadata == b"step=%d" % restored
        # the store keeps going after the crash
        store.checkpoint(restored + 1)
        store.wait(level=4)
        assert store.latest() == restored + 1

    # Every visible container file is complete: writes are atomic.
    result = run_cli("verify", dirs.root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 damaged" in result.stdout
