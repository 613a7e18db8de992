"""Loads of versions saved a moment before, on the adjoint disk stores
(issue 27): a version still on its way to its L2 directory is copied from
the capture's staging buffer instead of waiting for its commit
(docs/adjoint.md, "Prefetch and discard"). Whether a load meets its version
in flight depends on the disk's speed; whichever way it is served, the
bytes must be the ones saved, and the gradient of an adjoint run the one
of pyrevolve's own storage, bit for bit."""

from __future__ import annotations

from typing import List

import numpy as np
import pytest

import resurgo
from resurgo.adjoint import disk_store

pyrevolve = pytest.importorskip("pyrevolve")
from resurgo.adjoint_pyrevolve import ResurgoRevolver  # noqa: E402

SIZE = 64 * 1024  # float64 entries per field: two 512 KiB fields per checkpoint
STEPS = 60
SLOTS = 6


def restart_levels(monkeypatch) -> List[int]:
    """The level each Store.restart read its version from, in order."""
    levels: List[int] = []
    restart = resurgo.Store.restart

    def recording(self, *args, **kwargs):
        version = restart(self, *args, **kwargs)
        levels.append(self.last_restart.level)
        return version

    monkeypatch.setattr(resurgo.Store, "restart", recording)
    return levels


class Model:
    """u' = u + h * sin(v), v' = v + h * u, as Devito lays a time function out:
    the state at step t in time level t % 2. The adjoint accumulates, per
    step, a digest of the forward state it was given, so that a wrong byte
    anywhere changes the result."""

    def __init__(self) -> None:
        rng = np.random.default_rng(3)
        self.u = np.zeros((2, SIZE))
        self.v = np.zeros((2, SIZE))
        self.u[0], self.v[0] = rng.standard_normal(SIZE), rng.standard_normal(SIZE)
        self.weights = rng.standard_normal(SIZE)
        self.gradient = np.zeros(STEPS)


class Forward(pyrevolve.Operator):
    def __init__(self, model: Model) -> None:
        self.model = model

    def apply(self, t_start: int, t_end: int) -> None:
        u, v = self.model.u, self.model.v
        for t in range(t_start, t_end):
            a, b = t % 2, (t + 1) % 2
            np.add(u[a], 0.01 * np.sin(v[a]), out=u[b])
            np.add(v[a], 0.01 * u[a], out=v[b])


class Reverse(pyrevolve.Operator):
    def __init__(self, model: Model) -> None:
        self.model = model

    def apply(self, t_start: int, t_end: int) -> None:
        for t in range(t_end - 1, t_start - 1, -1):
            level = t % 2
            self.model.gradient[t] = self.model.weights @ self.model.u[level] + self.model.weights @ self.model.v[level]


class Checkpoint(pyrevolve.Checkpoint):
    def __init__(self, model: Model) -> None:
        self.model = model

    @property
    def dtype(self):
        return np.float64

    @property
    def size(self):
        return 2 * SIZE

    def get_data(self, timestep):
        return [self.model.u[timestep % 2], self.model.v[timestep % 2]]

    def get_data_location(self, timestep):
        return self.get_data(timestep)


def gradient(revolver_class, **options) -> np.ndarray:
    model = Model()
    revolver = revolver_class(Checkpoint(model), Forward(model), Reverse(model), SLOTS, STEPS, **options)
    revolver.apply_forward()
    revolver.apply_reverse()
    return model.gradient


def test_revolve_on_disk_gives_the_gradient_of_numpy_storage_bit_for_bit(tmp_path, monkeypatch):
    expected = gradient(pyrevolve.Revolver)
    levels = restart_levels(monkeypatch)
    got = gradient(ResurgoRevolver, name="turns", disk_path=str(tmp_path / "disk"))
    assert got.tobytes() == expected.tobytes()
    assert levels, "the reverse pass restored nothing"
    assert set(levels) <= {resurgo.L1, resurgo.L2}, levels


def test_a_version_restored_right_after_its_save_holds_the_saved_bytes(tmp_path):
    state = {"u": np.zeros(SIZE), "v": np.zeros(SIZE)}
    levels = []
    with disk_store("just-saved", state, str(tmp_path / "disk")) as store:
        for version in range(24):
            state["u"][:] = np.arange(SIZE) + version
            state["v"][:] = -version
            store.checkpoint(version)
            state["u"][:] = 0
            state["v"][:] = 0
            assert store.restart(version) == version
            levels.append(store.last_restart.level)
            assert np.array_equal(state["u"], np.arange(SIZE) + version), version
            assert np.all(state["v"] == -version), version
            assert store.last_restart.bytes == 2 * SIZE * 8
        store.wait()
        for version in range(24):
            state["u"][:] = 0
            assert store.restart(version) == version
            assert store.last_restart.level == resurgo.L2
            assert np.array_equal(state["u"], np.arange(SIZE) + version), version
    assert set(levels) <= {resurgo.L1, resurgo.L2}, levels
