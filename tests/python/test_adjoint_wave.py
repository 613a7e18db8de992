"""The adjoint wave example (examples/adjoint_wave/acoustic.py): checkpointed
gradients equal the store-everything one bit for bit, and the gradient is
the derivative of the misfit (central finite differences)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from checkpoint_schedules import MultistageCheckpointSchedule, Revolve

from resurgo.adjoint import DictStorage, ResurgoStorage, run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "adjoint_wave"))
import acoustic as wave  # noqa: E402  (the example, not a package)

SHAPE = (64, 64)
N_STEPS = 150
PIECE = 2 << 20  # per version, more than its container takes in the memory level: room to spare


@pytest.fixture(scope="module")
def shot():
    survey = wave.make_survey(SHAPE, N_STEPS)
    background = wave.layered_velocity(SHAPE)
    observed = wave.record(survey, wave.with_anomaly(background), xp=np)
    misfit, gradient = wave.store_everything_gradient(
        wave.WaveModel(survey, background, observed, xp=np))
    return survey, background, observed, misfit, gradient


def model_of(shot, velocity=None):
    survey, background, observed, _, _ = shot
    return wave.WaveModel(survey, background if velocity is None else velocity, observed, xp=np)


def test_reference_gradient_is_not_trivial(shot):
    _, _, _, misfit, gradient = shot
    assert misfit > 0
    assert np.isfinite(gradient).all()
    assert np.count_nonzero(gradient) > gradient.size // 2


@pytest.mark.parametrize("case", ["revolve-resurgo", "revolve-resurgo-no-prefetch",
                                  "multistage-resurgo-disk", "revolve-dict"])
def test_checkpointed_gradient_is_bit_identical(shot, case, tmp_path):
    model = model_of(shot)
    room = sum(array.nbytes for array in model.state.values()) + PIECE  # memory for one version
    if case == "revolve-dict":
        schedule, storage = Revolve(N_STEPS, 8), DictStorage(model.state)
    elif case == "multistage-resurgo-disk":
        schedule = MultistageCheckpointSchedule(N_STEPS, 3, 6)
        storage = ResurgoStorage("wave", model.state, ram_capacity=4 * room,
                                 disk_path=str(tmp_path), prefetch_capacity=2 * room)
    else:
        schedule = Revolve(N_STEPS, 8)
        storage = ResurgoStorage("wave", model.state, ram_capacity=9 * room,
                                 prefetch=case == "revolve-resurgo")
    with storage:
        stats = run(schedule, model, storage, n_steps=N_STEPS)
    _, _, _, misfit, gradient = shot
    assert stats.loads == N_STEPS - 1  # every reverse step but the first restarts
    assert model.steps_advanced > N_STEPS  # the schedule recomputed
    assert model.misfit() == misfit
    assert np.array_equal(model.gradient(), gradient)


def misfit_at(shot, velocity) -> float:
    model = model_of(shot, velocity)
    model.forward(0, N_STEPS, adj_deps=False)
    return model.misfit()


def test_gradient_matches_central_differences(shot):
    """The error of (J(c + e d) - J(c - e d)) / 2e against <dJ/dc, d> is O(e^2):
    it falls by 4 each time e halves."""
    _, background, _, _, gradient = shot
    direction = np.random.default_rng(10).standard_normal(SHAPE)
    predicted = float((gradient * direction).sum())
    errors = []
    for step in (0.5, 0.25, 0.125):
        central = (misfit_at(shot, background + step * direction)
                   - misfit_at(shot, background - step * direction)) / (2 * step)
        errors.append(abs(central - predicted) / abs(predicted))
    assert errors[-1] < 0.02, errors
    for coarse, fine in zip(errors, errors[1:]):
        assert 3.5 < coarse / fine < 4.5, errors


def test_reverse_without_forward_data_names_the_steps(shot):
    model = model_of(shot)
    model.forward(0, N_STEPS - 2, adj_deps=False)
    model.forward(N_STEPS - 2, N_STEPS, adj_deps=True)
    with pytest.raises(RuntimeError, match=r"the adjoint is at step 150"):
        model.reverse(N_STEPS - 1, N_STEPS - 2, clear_adj_deps=True)
    with pytest.raises(RuntimeError, match=r"no forward data for steps \[147\]"):
        model.reverse(N_STEPS, N_STEPS - 3, clear_adj_deps=True)
    with pytest.raises(RuntimeError, match="needs the adjoint back at step 0"):
        model.gradient()
