"""resurgo.adjoint and resurgo.adjoint_pyrevolve: adjoint runs driven by
checkpoint_schedules and pyrevolve, with Resurgo as the checkpoint storage.

The toy model is a chain of nonlinear oscillators, one explicit step
    v' = v + h tanh(W u + p),   u' = u + h v'
and the cost J = c_u . u_N + c_v . v_N. Its adjoint is written by hand and
checked against finite differences; every schedule and storage must then give
the gradient of storing every forward state, bit for bit (recomputation
repeats the same floating-point operations from restored, identical states).
"""

from __future__ import annotations

import tempfile
from typing import Dict, List, Tuple

import numpy as np
import pytest
from checkpoint_schedules import (
    CheckpointAction,
    CheckpointSchedule,
    Copy,
    EndForward,
    EndReverse,
    Forward,
    HRevolve,
    MultistageCheckpointSchedule,
    Move,
    Revolve,
    Reverse,
    SingleDiskStorageSchedule,
    SingleMemoryStorageSchedule,
    StorageType,
    TwoLevelCheckpointSchedule,
)

import resurgo
from resurgo.adjoint import DictStorage, ResurgoStorage, planned_transfers, run

RAM, DISK, WORK, NONE = StorageType.RAM, StorageType.DISK, StorageType.WORK, StorageType.NONE
N_STEPS = 24
SIZE = 12
STEP = 0.1


class Problem:
    """The oscillators' data: coupling W, forcing p, initial state, cost weights."""

    def __init__(self, seed: int = 7) -> None:
        rng = np.random.default_rng(seed)
        self.W = rng.standard_normal((SIZE, SIZE)) / np.sqrt(SIZE)
        self.p = rng.standard_normal(SIZE)
        self.u0 = rng.standard_normal(SIZE)
        self.v0 = rng.standard_normal(SIZE)
        self.c_u = rng.standard_normal(SIZE)
        self.c_v = rng.standard_normal(SIZE)

    def step(self, u: np.ndarray, v: np.ndarray, u_next: np.ndarray, v_next: np.ndarray) -> None:
        np.add(v, STEP * np.tanh(self.W @ u + self.p), out=v_next)
        np.add(u, STEP * v_next, out=u_next)

    def cost(self, p: np.ndarray) -> float:
        u, v = self.u0.copy(), self.v0.copy()
        for _ in range(N_STEPS):
            v = v + STEP * np.tanh(self.W @ u + p)
            u = u + STEP * v
        return float(self.c_u @ u + self.c_v @ v)


class Adjoint:
    """The adjoint variables and the gradient with respect to p."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.lam_u = problem.c_u.copy()
        self.lam_v = problem.c_v.copy()
        self.grad_p = np.zeros(SIZE)

    def step(self, u: np.ndarray) -> None:
        """Adjoint of one forward step whose input position was u."""
        t = np.tanh(self.problem.W @ u + self.problem.p)
        lam_v = self.lam_v + STEP * self.lam_u
        mu = STEP * (1.0 - t * t) * lam_v
        self.grad_p += mu
        self.lam_u = self.lam_u + self.problem.W.T @ mu
        self.lam_v = lam_v

    def gradient(self) -> np.ndarray:
        """dJ/dp followed by dJ/du0 and dJ/dv0."""
        return np.concatenate([self.grad_p, self.lam_u, self.lam_v])


class Oscillators:
    """The AdjointModel: state {u, v} advanced in place; the adjoint of step n
    needs u at step n, kept in adj_deps."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.state = {"u": problem.u0.copy(), "v": problem.v0.copy()}
        self.adj_deps: Dict[int, np.ndarray] = {}
        self.adjoint = Adjoint(problem)
        self.forward_steps = 0

    def forward(self, n0: int, n1: int, *, adj_deps: bool) -> None:
        u, v = self.state["u"], self.state["v"]
        for n in range(n0, n1):
            if adj_deps:
                self.adj_deps[n] = u.copy()
            self.problem.step(u, v, u, v)
            self.forward_steps += 1

    def reverse(self, n1: int, n0: int, *, clear_adj_deps: bool) -> None:
        for n in range(n1 - 1, n0 - 1, -1):
            assert n in self.adj_deps, f"adjoint of step {n} without its forward state"
            self.adjoint.step(self.adj_deps[n])
            if clear_adj_deps:
                del self.adj_deps[n]


@pytest.fixture(scope="module")
def problem() -> Problem:
    return Problem()


@pytest.fixture(scope="module")
def reference(problem) -> np.ndarray:
    """The gradient from storing every forward state."""
    model = Oscillators(problem)
    model.forward(0, N_STEPS, adj_deps=True)
    model.reverse(N_STEPS, 0, clear_adj_deps=True)
    return model.adjoint.gradient()


def test_the_toy_adjoint_matches_finite_differences(problem, reference):
    direction = np.random.default_rng(1).standard_normal(SIZE)
    eps = 1e-6
    difference = (problem.cost(problem.p + eps * direction) - problem.cost(problem.p - eps * direction)) / (2 * eps)
    assert reference[:SIZE] @ direction == pytest.approx(difference, rel=1e-7)


# -- checkpoint_schedules ------------------------------------------------------

SCHEDULES = {
    "revolve": lambda: Revolve(N_STEPS, 3),
    "multistage-ram-disk": lambda: MultistageCheckpointSchedule(N_STEPS, 2, 3),
    "hrevolve": lambda: HRevolve(N_STEPS, 2, 3),
    "online-two-level": lambda: TwoLevelCheckpointSchedule(5, 2, binomial_storage=RAM),
    "online-two-level-disk": lambda: TwoLevelCheckpointSchedule(7, 3, binomial_storage=DISK),
    "online-single-memory": lambda: SingleMemoryStorageSchedule(),
}
MOVES_EVERY_CHECKPOINT = {"revolve", "multistage-ram-disk"}  # HRevolve and TwoLevel leave some behind


def make_storage(kind: str, model: Oscillators, tmp_path):
    if kind == "dict":
        return DictStorage(model.state)
    return ResurgoStorage("adjoint", model.state, disk_path=str(tmp_path / "disk"))


@pytest.mark.parametrize("storage_kind", ["dict", "resurgo"])
@pytest.mark.parametrize("schedule_name", list(SCHEDULES))
def test_every_schedule_gives_the_gradient_of_storing_every_state(schedule_name, storage_kind, problem, reference, tmp_path):
    model = Oscillators(problem)
    with make_storage(storage_kind, model, tmp_path) as storage:
        stats = run(SCHEDULES[schedule_name](), model, storage, n_steps=N_STEPS)
        if storage_kind == "resurgo" and schedule_name in MOVES_EVERY_CHECKPOINT:
            assert {kind: store.versions() for kind, store in storage.stores.items()} == {kind: [] for kind in storage.stores}
    assert model.adjoint.gradient().tobytes() == reference.tobytes()
    assert not model.adj_deps
    if schedule_name != "online-single-memory":
        assert stats.saves > 0 and stats.loads > 0
        assert model.forward_steps > N_STEPS  # it did recompute from checkpoints


@pytest.mark.parametrize("schedule_name", ["multistage-ram-disk", "hrevolve"])
def test_ram_and_disk_checkpoints_go_to_their_own_stores(schedule_name, problem, tmp_path):
    model = Oscillators(problem)
    with ResurgoStorage("split", model.state, disk_path=str(tmp_path / "disk")) as storage:
        run(SCHEDULES[schedule_name](), model, storage, n_steps=N_STEPS)
        assert set(storage.stores) == {RAM, DISK}
        assert storage.stores[RAM].name == "split-ram" and storage.stores[DISK].name == "split-disk"
        assert all(record.at(resurgo.L2) is None for record in storage.stores[RAM].stats())
        assert all(record.at(resurgo.L2) is not None for record in storage.stores[DISK].stats())


class Recorder:
    """Records the versions Store.prefetch is given and Store.restart restores."""

    def __init__(self, monkeypatch) -> None:
        self.prefetched: Dict[str, List[List[int]]] = {}
        self.restarted: Dict[str, List[int]] = {}
        prefetch, restart = resurgo.Store.prefetch, resurgo.Store.restart

        def recording_prefetch(store, versions):
            self.prefetched.setdefault(store.name, []).append(list(versions))
            return prefetch(store, versions)

        def recording_restart(store, version=None):
            self.restarted.setdefault(store.name, []).append(version)
            return restart(store, version)

        monkeypatch.setattr(resurgo.Store, "prefetch", recording_prefetch)
        monkeypatch.setattr(resurgo.Store, "restart", recording_restart)


@pytest.mark.parametrize("schedule_name", ["multistage-ram-disk", "hrevolve", "online-two-level-disk"])
def test_prefetch_names_every_disk_load_in_the_order_of_the_restarts(schedule_name, problem, reference, tmp_path, monkeypatch):
    recorder = Recorder(monkeypatch)
    model = Oscillators(problem)
    with ResurgoStorage("ahead", model.state, disk_path=str(tmp_path / "disk")) as storage:
        run(SCHEDULES[schedule_name](), model, storage, n_steps=N_STEPS)
    restarted = recorder.restarted["ahead-disk"]
    assert recorder.prefetched == {"ahead-disk": [restarted]}
    assert model.adjoint.gradient().tobytes() == reference.tobytes()


def test_without_prefetch_nothing_is_announced(problem, reference, tmp_path, monkeypatch):
    recorder = Recorder(monkeypatch)
    model = Oscillators(problem)
    with ResurgoStorage("plain", model.state, disk_path=str(tmp_path / "disk"), prefetch=False) as storage:
        run(SCHEDULES["multistage-ram-disk"](), model, storage, n_steps=N_STEPS)
    assert recorder.prefetched == {} and recorder.restarted["plain-disk"]
    assert model.adjoint.gradient().tobytes() == reference.tobytes()


def test_planned_transfers_follow_the_actions():
    actions = [
        Forward(0, 2, True, False, RAM),
        Copy(0, RAM, DISK),
        Move(0, RAM, NONE),
        Forward(2, 3, False, True, WORK),
        EndForward(),
        Reverse(3, 2, True),
        Move(0, DISK, WORK),
    ]
    assert [tuple(t) for t in planned_transfers(actions)] == [
        ("save", 0, RAM),
        ("load", 0, RAM),
        ("save", 0, DISK),
        ("load", 0, DISK),
    ]


class Scripted(CheckpointSchedule):
    """A schedule that yields the given actions (for actions no installed
    schedule produces, and for bad ones)."""

    def __init__(self, max_n: int, actions: List[CheckpointAction]) -> None:
        super().__init__(max_n)
        self._script = actions

    def _iterator(self):
        yield from self._script

    @property
    def is_exhausted(self):
        return False

    def uses_storage_type(self, storage_type):
        return storage_type in (RAM, DISK)


def copy_between_storages(n: int) -> List[CheckpointAction]:
    """Checkpoint 0 goes to RAM, is copied to DISK and deleted from RAM; the
    reverse recomputes from the DISK copy."""
    return [
        Forward(0, n - 1, True, False, RAM),
        Copy(0, RAM, DISK),
        Move(0, RAM, NONE),
        Forward(n - 1, n, False, True, WORK),
        EndForward(),
        Reverse(n, n - 1, True),
        Move(0, DISK, WORK),
        Forward(0, n - 1, False, True, WORK),
        Reverse(n - 1, 0, True),
        EndReverse(),
    ]


@pytest.mark.parametrize("storage_kind", ["dict", "resurgo"])
def test_copies_between_ram_and_disk_and_deletes(storage_kind, problem, reference, tmp_path):
    model = Oscillators(problem)
    with make_storage(storage_kind, model, tmp_path) as storage:
        stats = run(Scripted(N_STEPS, copy_between_storages(N_STEPS)), model, storage, n_steps=N_STEPS)
    assert model.adjoint.gradient().tobytes() == reference.tobytes()
    assert (stats.saves, stats.loads) == (2, 2)


# -- bad input ----------------------------------------------------------------

class Unknown(CheckpointAction):
    pass


@pytest.mark.parametrize(
    "actions, message",
    [
        ([Unknown(3)], "unsupported checkpoint_schedules action Unknown(3)"),
        ([Forward(0, 1, False, True, DISK)], "Forward(0, 1, False, True, StorageType.DISK)"),
        ([Forward(0, 1, True, False, WORK)], "Forward(0, 1, True, False, StorageType.WORK)"),
        ([Copy(0, WORK, RAM)], "Copy(0, StorageType.WORK, StorageType.RAM)"),
        ([Forward(0, 1, True, False, RAM), Copy(0, RAM, RAM)], "Copy(0, StorageType.RAM, StorageType.RAM)"),
        ([Forward(0, 1, True, False, RAM), Copy(0, RAM, NONE)], "Copy(0, StorageType.RAM, StorageType.NONE)"),
        ([Forward(2, 3, False, False, WORK)], "starts at step 2, but the model is at step 0"),
        ([Forward(0, N_STEPS + 1, False, False, WORK)], f"goes past n_steps={N_STEPS}"),
        ([Forward(0, 1, False, True, WORK), EndForward()], "EndForward() at step 1"),
        ([Forward(0, 1, False, True, WORK), Reverse(1, 0, True)], f"the adjoint is at step {N_STEPS}"),
        ([EndReverse()], f"the adjoint at step {N_STEPS}, not 0"),
    ],
)
@pytest.mark.parametrize("storage_kind", ["dict", "resurgo"])
def test_unsupported_or_inconsistent_actions_are_named(actions, message, storage_kind, problem, tmp_path):
    model = Oscillators(problem)
    with make_storage(storage_kind, model, tmp_path) as storage:
        with pytest.raises(resurgo.InvalidArgumentError) as error:
            run(Scripted(N_STEPS, actions), model, storage, n_steps=N_STEPS)
    assert message in str(error.value)


def test_an_online_schedule_keeping_adjoint_data_on_disk_is_refused(problem):
    model = Oscillators(problem)
    with pytest.raises(resurgo.InvalidArgumentError, match=r"write_adj_deps needs StorageType.WORK"):
        run(SingleDiskStorageSchedule(), model, DictStorage(model.state), n_steps=N_STEPS)


def test_a_schedule_for_another_number_of_steps_is_refused(problem):
    model = Oscillators(problem)
    with pytest.raises(resurgo.InvalidArgumentError, match=r"max_n=10 steps, not n_steps=24"):
        run(Revolve(10, 2), model, DictStorage(model.state), n_steps=N_STEPS)


@pytest.mark.parametrize("storage_kind", ["dict", "resurgo"])
@pytest.mark.parametrize("storage", [RAM, DISK])
def test_loading_a_step_never_saved_names_step_and_storage(storage_kind, storage, problem, tmp_path):
    model = Oscillators(problem)
    with make_storage(storage_kind, model, tmp_path) as checkpoints:
        checkpoints.save(0, storage)
        with pytest.raises(resurgo.NotFoundError, match=rf"load: step 5 is not held in {storage!r} \(held: \[0\]\)"):
            checkpoints.load(5, storage, delete=False)
        checkpoints.load(0, storage, delete=True)
        with pytest.raises(resurgo.NotFoundError, match=rf"delete: step 0 is not held in {storage!r} \(held: \[\]\)"):
            checkpoints.delete(0, storage)


@pytest.mark.parametrize("storage_kind", ["dict", "resurgo"])
def test_work_is_not_a_storage(storage_kind, problem, tmp_path):
    model = Oscillators(problem)
    with make_storage(storage_kind, model, tmp_path) as checkpoints:
        with pytest.raises(resurgo.InvalidArgumentError, match=r"save: storage StorageType.WORK holds no checkpoints"):
            checkpoints.save(0, WORK)


@pytest.mark.parametrize("key, value", [("local_keep", 2), ("local_durable", True)])
def test_resurgo_storage_refuses_overrides_of_its_own_route(problem, key, value):
    model = Oscillators(problem)
    with ResurgoStorage("route", model.state, **{key: value}) as storage:
        with pytest.raises(resurgo.InvalidArgumentError, match=rf"{key} set by the adjoint storage itself"):
            storage.save(0, DISK)


def test_a_scratch_l2_restores_what_it_saved(tmp_path):
    """local_durable=False (the DISK store's files): versions are committed
    and restored as on a durable L2, and a bad value names the key."""
    array = np.zeros(4096)
    with resurgo.Store("scratch", local_path=str(tmp_path / "l2"), local_durable=False, local_keep=2,
                       persistent_every=0) as store:
        store.protect("a", array)
        for version in range(4):
            array[:] = version
            store.checkpoint(version)
        store.wait()
        assert [info.version for info in store.versions()][-2:] == [2, 3]
        array[:] = -1
        assert store.restart(2) == 2
        assert np.all(array == 2)
    with pytest.raises(resurgo.ConfigError, match=r"local_durable"):
        resurgo.Store("bad", local_path=str(tmp_path / "l2"), local_durable="perhaps")


def test_close_discards_the_checkpoints_a_schedule_leaves(problem, tmp_path):
    model = Oscillators(problem)
    with ResurgoStorage("left", model.state, disk_path=str(tmp_path / "disk")) as storage:
        run(SCHEDULES["hrevolve"](), model, storage, n_steps=N_STEPS)  # copies its DISK checkpoints, never moves them
        assert len(storage.stores[DISK].versions()) == 3
    assert list((tmp_path / "disk" / "left-disk").glob("*.rsg")) == []


def test_resurgo_storage_without_disk_path_cleans_its_temporary_directory(problem, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmpdir"))  # tempfile reads TMPDIR only once
    model = Oscillators(problem)
    with ResurgoStorage("scratch", model.state) as storage:
        run(SCHEDULES["online-two-level-disk"](), model, storage, n_steps=N_STEPS)
        assert list((tmp_path / "tmpdir").glob("resurgo-adjoint-*"))
    assert not list((tmp_path / "tmpdir").glob("resurgo-adjoint-*"))


# -- Store.prefetch / discard, the API underneath -------------------------------

def disk_store(tmp_path, name="consume"):
    array = np.zeros(64)
    store = resurgo.Store(name, local_path=str(tmp_path / "l2"), local_every=1, local_keep=0,
                          persistent_every=0, memory_every=0, memory_capacity="1MiB")
    store.protect("a", array)
    return store, array


def test_discard_of_an_unknown_or_discarded_version(tmp_path):
    store, array = disk_store(tmp_path)
    with store:
        store.checkpoint(0)
        with pytest.raises(resurgo.NotFoundError, match=r"\b7\b"):
            store.discard(7)
        store.discard(0)
        with pytest.raises(resurgo.StateError, match=r"\b0\b"):
            store.discard(0)
        with pytest.raises(resurgo.NotFoundError, match=r"\b0\b"):
            store.restart(0)


def test_prefetch_of_versions_not_written_yet_fetches_them_once_written(tmp_path):
    store, array = disk_store(tmp_path)
    with store:
        store.prefetch([2, 1, 0])
        for version in range(3):
            array[:] = version
            store.checkpoint(version)
        store.wait()
        for version in (2, 1, 0):
            array[:] = -1
            assert store.restart(version) == version
            assert np.all(array == version)
            store.discard(version)
        assert store.versions() == []


# -- pyrevolve -------------------------------------------------------------------

pyrevolve = pytest.importorskip("pyrevolve")
from resurgo import adjoint_pyrevolve  # noqa: E402
from resurgo.adjoint_pyrevolve import ResurgoRevolveStorage, ResurgoRevolver  # noqa: E402


class Buffered:
    """The oscillators as Devito lays out a time function: two time levels,
    the state at step t in level t % 2, a step reads one level and writes the
    other (so the reverse of step t still finds u at t after recomputing it)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.u = np.zeros((2, SIZE))
        self.v = np.zeros((2, SIZE))
        self.u[0], self.v[0] = problem.u0, problem.v0
        self.adjoint = Adjoint(problem)


class BufferedForward(pyrevolve.Operator):
    def __init__(self, model: Buffered) -> None:
        self.model = model

    def apply(self, t_start: int, t_end: int) -> None:
        u, v = self.model.u, self.model.v
        for t in range(t_start, t_end):
            a, b = t % 2, (t + 1) % 2
            self.model.problem.step(u[a], v[a], u[b], v[b])


class BufferedReverse(pyrevolve.Operator):
    def __init__(self, model: Buffered) -> None:
        self.model = model

    def apply(self, t_start: int, t_end: int) -> None:
        for t in range(t_end - 1, t_start - 1, -1):
            self.model.adjoint.step(self.model.u[t % 2])


def halves(level: np.ndarray) -> List[np.ndarray]:
    """Two non-contiguous views (columns 0-1 and 2-3 of a 3 x 4 grid)
    covering a time level, each row of each contiguous as NumpyStorage needs."""
    grid = level.reshape(3, 4)
    return [grid[:, :2], grid[:, 2:]]


# The arrays a Checkpoint hands over for the time levels u[t % 2], v[t % 2]:
# views that change with the step (as Devito's), contiguous or not.
LAYOUTS = {
    "views": lambda u, v: [u, v],
    "strided": lambda u, v: [*halves(u), *halves(v)],
    "mixed": lambda u, v: [u, *halves(v)],
}


class BufferedCheckpoint(pyrevolve.Checkpoint):
    def __init__(self, model: Buffered, layout: str = "views", dtype=np.float64) -> None:
        self.model = model
        self.layout = LAYOUTS[layout]
        self._dtype = dtype

    @property
    def dtype(self):
        return self._dtype

    @property
    def size(self):
        return 2 * SIZE

    def get_data(self, timestep):
        return self.layout(self.model.u[timestep % 2], self.model.v[timestep % 2])

    def get_data_location(self, timestep):
        return self.get_data(timestep)


def pyrevolve_gradient(problem: Problem, revolver_class, layout: str = "views", dtype=np.float64,
                       **options) -> Tuple[np.ndarray, object]:
    model = Buffered(problem)
    revolver = revolver_class(BufferedCheckpoint(model, layout, dtype), BufferedForward(model), BufferedReverse(model), 4,
                              N_STEPS, **options)
    revolver.apply_forward()
    revolver.apply_reverse()
    return model.adjoint.gradient(), revolver


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "disk"])
def test_pyrevolve_with_resurgo_is_bit_identical_to_its_numpy_storage(on_disk, problem, reference, tmp_path):
    numpy_gradient, _ = pyrevolve_gradient(problem, pyrevolve.Revolver)
    options = dict(name="revolver", disk_path=str(tmp_path / "disk")) if on_disk else {}
    resurgo_gradient, revolver = pyrevolve_gradient(problem, ResurgoRevolver, **options)
    assert resurgo_gradient.tobytes() == numpy_gradient.tobytes()
    assert resurgo_gradient.tobytes() == reference.tobytes()
    assert revolver.resurgo_storage.store is None  # closed with the reverse pass
    assert revolver.profiler.counts["storage"]["copy_load"] > 0


@pytest.mark.parametrize("layout", ["strided", "mixed"])
@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "disk"])
def test_pyrevolve_with_resurgo_stages_only_what_the_store_cannot_take(layout, on_disk, problem, reference, tmp_path):
    numpy_gradient, _ = pyrevolve_gradient(problem, pyrevolve.Revolver, layout)
    options = dict(disk_path=str(tmp_path / "disk")) if on_disk else {}
    resurgo_gradient, _ = pyrevolve_gradient(problem, ResurgoRevolver, layout, **options)
    assert resurgo_gradient.tobytes() == numpy_gradient.tobytes() == reference.tobytes()


def test_pyrevolve_with_resurgo_casts_as_its_numpy_storage(problem, reference):
    """Checkpoints of float32: both storages round the float64 state."""
    numpy_gradient, _ = pyrevolve_gradient(problem, pyrevolve.Revolver, dtype=np.float32)
    resurgo_gradient, _ = pyrevolve_gradient(problem, ResurgoRevolver, dtype=np.float32)
    assert resurgo_gradient.tobytes() == numpy_gradient.tobytes()
    assert resurgo_gradient.tobytes() != reference.tobytes()  # the rounding did happen


class Counted:
    """Records the calls of a function (np.copyto, Store.protect) and makes them."""

    def __init__(self, call) -> None:
        self.call, self.calls = call, []

    def __call__(self, *args, **kwargs):
        self.calls.append(args)
        return self.call(*args, **kwargs)


def pointings(monkeypatch, store) -> List[str]:
    """The labels of the regions ``store`` protects or points at other
    memory of their size (Store._repoint) from now on, in order."""
    labels: List[str] = []

    def recorded(call):
        def record(label, *args, **kwargs):
            labels.append(label)
            return call(label, *args, **kwargs)
        return record

    for name in ("protect", "_repoint"):
        monkeypatch.setattr(store, name, recorded(getattr(store, name)))
    return labels


def test_store_repoint_moves_a_region_to_memory_of_its_size_and_protects_anything_else_anew(tmp_path, monkeypatch):
    """Store._repoint, ResurgoRevolveStorage's way of pointing a region at a
    moved array: the next checkpoint reads the new memory, a restart writes
    it, the old one is left alone; an array of another shape or dtype takes
    unprotect and protect."""
    levels = np.arange(3 * 4, dtype=np.float64).reshape(3, 4)
    with resurgo.Store("repoint", local_path=str(tmp_path), memory_every=1, local_every=0, persistent_every=0) as store:
        store.protect("u", levels[0])
        store.checkpoint(0)
        with monkeypatch.context() as patch:
            patch.setattr(store, "protect", None)  # not protect's general route
            store._repoint("u", levels[1], levels[1].ctypes.data)
        store.checkpoint(1)
        levels[:] = -1
        store.restart(0)
        np.testing.assert_array_equal(levels[1], np.arange(4.0))
        np.testing.assert_array_equal(levels[0], np.full(4, -1.0))
        store.restart(1)
        np.testing.assert_array_equal(levels[1], np.arange(4.0, 8.0))
        for version, other in enumerate((np.zeros(8), np.zeros(4, np.float32), np.zeros((2, 2))), start=2):
            store._repoint("u", other, other.ctypes.data)
            store.checkpoint(version)
            region, = store.describe(version).regions
            assert (region.bytes, region.dtype, region.shape) == (other.nbytes, other.dtype.name, other.shape)


def test_pyrevolve_storage_copies_contiguous_arrays_straight_and_protects_moved_ones_only(monkeypatch):
    """Arrays of at least adjoint_pyrevolve._REPOINT_BYTES (32 bytes here)."""
    monkeypatch.setattr(adjoint_pyrevolve, "_REPOINT_BYTES", 32)
    levels = np.arange(3 * 2 * 4, dtype=np.float64).reshape(3, 2, 4)  # a time buffer: 3 levels of 2 fields
    saved = levels.copy()
    storage = ResurgoRevolveStorage(8, 3, np.float64, name="direct")
    try:
        assert storage.store is None  # opens with the first arrays
        copies = Counted(np.copyto)
        monkeypatch.setattr(np, "copyto", copies)
        storage.save(0, list(levels[0]))
        store = storage.store
        pointed = pointings(monkeypatch, store)
        storage.save(1, [levels[0][0], levels[0][1]])  # new views of the memory protected
        assert pointed == []
        storage.save(2, list(levels[1]))  # the next time level
        assert pointed == ["checkpoint.0", "checkpoint.1"]
        levels[:] = 0
        storage.load(0, list(levels[2]))  # restored straight into another level
        storage.load(2, list(levels[0]))
        assert copies.calls == []
        np.testing.assert_array_equal(levels[2], saved[0])
        np.testing.assert_array_equal(levels[0], saved[1])
        for version in store.versions():
            regions = sorted((r.label, r.bytes, r.dtype) for r in store.describe(version.version).regions)
            assert regions == [("checkpoint.0", 32, "float64"), ("checkpoint.1", 32, "float64")]
    finally:
        storage.close()


def test_pyrevolve_storage_copies_small_arrays_that_move_instead_of_pointing_their_regions_anew(monkeypatch):
    """Devito hands views of a time buffer whose levels rotate: below
    _REPOINT_BYTES a moved array goes through its region's staging array,
    which the region points at once, not at every step."""
    levels = np.arange(3 * 2 * 4, dtype=np.float64).reshape(3, 2, 4)
    saved = levels.copy()
    storage = ResurgoRevolveStorage(8, 4, np.float64, name="rotating")
    try:
        storage.save(0, list(levels[0]))  # the first arrays: protected as they are
        store = storage.store
        pointed = pointings(monkeypatch, store)
        storage.save(1, list(levels[1]))
        assert pointed == ["checkpoint.0", "checkpoint.1"]  # onto the staging arrays
        storage.save(2, list(levels[2]))
        storage.save(3, list(levels[0]))
        assert len(pointed) == 2, "a region on its staging array stays there"
        levels[:] = 0
        for slot, level in ((0, 1), (1, 2), (2, 0), (3, 1)):
            storage.load(slot, list(levels[level]))
            np.testing.assert_array_equal(levels[level], saved[slot % 3])
        assert len(pointed) == 2
    finally:
        storage.close()


def test_pyrevolve_storage_stages_arrays_it_cannot_protect_with_the_same_regions(monkeypatch):
    storage = ResurgoRevolveStorage(8, 3, np.float64, name="staged")
    try:
        rng = np.random.default_rng(3)
        contiguous = rng.random(4)
        cast, strided, frozen = rng.random(4).astype(np.float32), rng.random(8)[::2], rng.random(4)
        frozen.flags.writeable = False
        copies = Counted(np.copyto)
        monkeypatch.setattr(np, "copyto", copies)
        storage.save(0, [contiguous, cast])
        storage.save(1, [strided, frozen])
        assert len(copies.calls) == 3  # one each for the cast, strided and read-only arrays
        store = storage.store
        # A region protected again goes last in the table: the same regions, in another order.
        tables = {tuple(sorted((r.label, r.bytes, r.dtype, r.shape) for r in store.describe(v.version).regions))
                  for v in store.versions()}
        assert tables == {(("checkpoint.0", 32, "float64", (4,)), ("checkpoint.1", 32, "float64", (4,)))}
        out = [np.empty(4), np.empty(4, np.float32)]
        storage.load(0, out)
        np.testing.assert_array_equal(out[0], contiguous)
        np.testing.assert_array_equal(out[1], cast)
        out = [np.empty(8)[::2], np.empty((2, 2))]  # a slot restores into arrays of its sizes, whatever their shapes
        storage.load(1, out)
        np.testing.assert_array_equal(out[0], strided)
        np.testing.assert_array_equal(out[1].ravel(), frozen)
    finally:
        storage.close()


def test_pyrevolve_storage_refuses_to_restore_into_arrays_of_other_sizes(tmp_path):
    storage = ResurgoRevolveStorage(8, 2, np.float64, name="sized", disk_path=str(tmp_path / "disk"))
    try:
        storage.save(0, [np.ones(4), np.full(4, 2.0)])
        storage.save(1, [np.full(8, 3.0)])
        out = [np.zeros(3), np.zeros(5)]
        with pytest.raises(resurgo.InvalidArgumentError,
                           match=r"load on pyrevolve storage 'sized': slot 0 holds checkpoint arrays of \[4, 4\] entries, "
                                 r"but the arrays to restore into have \[3, 5\]; a slot restores only into arrays of the sizes it saved"):
            storage.load(0, out)
        with pytest.raises(resurgo.InvalidArgumentError, match=r"slot 1 holds checkpoint arrays of \[8\] entries, but .* \[4, 4\]"):
            storage.load(1, [np.zeros(4), np.zeros(4)])
        assert not out[0].any() and not out[1].any()  # untouched
        out = [np.zeros(4), np.zeros(4)]
        storage.load(0, out)
        np.testing.assert_array_equal(out, [np.ones(4), np.full(4, 2.0)])
        with pytest.raises(resurgo.InvalidArgumentError, match=r"checkpoint array 1 is empty"):
            storage.save(1, [np.ones(8), np.ones(0)])
    finally:
        storage.close()
    with pytest.raises(resurgo.InvalidArgumentError, match=r"pyrevolve storage 'sized' is closed"):
        storage.save(0, [np.ones(8)])


def test_pyrevolve_prefetch_names_the_restores_in_order(problem, tmp_path, monkeypatch):
    recorder = Recorder(monkeypatch)
    pyrevolve_gradient(problem, ResurgoRevolver, name="slots", disk_path=str(tmp_path / "disk"))
    assert recorder.prefetched == {"slots": [recorder.restarted["slots"]]}


def test_pyrevolve_storage_refuses_a_checkpoint_larger_than_its_slots(tmp_path):
    storage = ResurgoRevolveStorage(4, 2, np.float64, name="small")
    try:
        with pytest.raises(resurgo.InvalidArgumentError, match=r"more than size_ckp=4 entries"):
            storage.save(0, [np.zeros(3), np.zeros(3)])
        with pytest.raises(resurgo.NotFoundError, match=r"load: slot 1 is not held in pyrevolve storage 'small' \(held: \[\]\)"):
            storage.load(1, [np.zeros(4)])
    finally:
        storage.close()



def test_pyrevolve_multilevel_revolver_with_resurgo_storages(problem, reference, tmp_path):
    from pyrevolve.pyrevolve import MultiLevelRevolver
    from pyrevolve.storage import NumpyStorage

    def gradient(levels) -> np.ndarray:
        model = Buffered(problem)
        revolver = MultiLevelRevolver(BufferedCheckpoint(model), BufferedForward(model), BufferedReverse(model), N_STEPS, levels)
        revolver.apply_forward()
        revolver.apply_reverse()
        return model.adjoint.gradient()

    size = 2 * SIZE
    numpy_levels = [NumpyStorage(size, 2, np.float64), NumpyStorage(size, 3, np.float64, wd=2, rd=2)]
    resurgo_levels = [
        ResurgoRevolveStorage(size, 2, np.float64, name="level-ram"),
        ResurgoRevolveStorage(size, 3, np.float64, name="level-disk", disk_path=str(tmp_path / "disk"), wd=2, rd=2),
    ]
    try:
        assert gradient(resurgo_levels).tobytes() == gradient(numpy_levels).tobytes() == reference.tobytes()
        assert resurgo_levels[1].store.stats() and all(r.at(resurgo.L2) is not None for r in resurgo_levels[1].store.stats())
    finally:
        for storage in resurgo_levels:
            storage.close()
