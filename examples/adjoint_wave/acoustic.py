"""A 2-D acoustic wave equation and its exact discrete adjoint.

    u_tt = c(x)^2 ∇²u + source

on an ny x nx grid of spacing h with u = 0 outside the grid (reflecting
boundaries), discretised with the 5-point Laplacian L and explicit leapfrog:

    u[n+1] = 2 u[n] - u[n-1] + (dt/h)^2 c^2 ⊙ (L u[n]) + w[n] e_s

from u[-1] = u[0] = 0, where w is a Ricker wavelet added at the source point
x_s (the source term does not depend on c; its scale only sets the amplitude
of u). Step n (n = 0 .. n_steps-1) turns the state
(u[n-1], u[n]) into (u[n], u[n+1]) and records u[n+1] at the receivers
(trace row n). The misfit is J = 1/2 Σ_n Σ_r (trace[n, r] - observed[n, r])^2.

The adjoint is the transpose of exactly these operations (L is symmetric), so
the gradient dJ/dc is that of the discrete misfit, exact to rounding. With
a[k] = dJ/du[k] (a[n_steps+1] = a[n_steps+2] = 0):

    a[n+1] = 2 a[n+2] - a[n+3] + L((dt/h)^2 c^2 ⊙ a[n+2]) + R^T (trace[n] - observed[n])
    dJ/dc  = 2 c (dt/h)^2 ⊙ Σ_n (L u[n]) ⊙ a[n+1]

so undoing step n needs u[n]: the current field at the start of step n (its
"adjoint dependency"). A checkpoint is the two time levels (u_prev, u_curr).

WaveModel implements resurgo.adjoint's AdjointModel: `state` holds the two
arrays, advanced in place; forward() keeps u[n] for the adjoint when asked;
reverse() runs the adjoint back and accumulates the gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np

FIELDS = ("u_prev", "u_curr")
COURANT = 0.5  # c dt / h; leapfrog with the 5-point Laplacian is stable below 1/sqrt(2)


def array_module(prefer_gpu: bool = True) -> Any:
    """CuPy when it imports and sees a GPU, NumPy otherwise."""
    if prefer_gpu:
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() > 0:
                return cupy
        except Exception:  # no CuPy, no driver or no device: all mean "use NumPy"
            pass
    return np


def ricker(n_steps: int, dt: float, peak_frequency: float) -> np.ndarray:
    """Ricker wavelet sampled at the steps, delayed by one period so it starts near 0."""
    t = np.arange(n_steps) * dt - 1.0 / peak_frequency
    arg = (math.pi * peak_frequency * t) ** 2
    return (1.0 - 2.0 * arg) * np.exp(-arg)


@dataclass(frozen=True)
class Survey:
    """Grid, time axis and acquisition geometry of one shot."""

    shape: Tuple[int, int]  # (ny, nx); row 0 is the surface
    spacing: float  # h, metres
    dt: float  # seconds
    n_steps: int
    source: Tuple[int, int]  # (row, column)
    receivers: np.ndarray  # (n_receivers, 2) distinct (row, column) indices
    peak_frequency: float  # Hz, of the Ricker wavelet

    def __post_init__(self) -> None:
        ny, nx = self.shape
        rows, cols = self.receivers[:, 0], self.receivers[:, 1]
        inside = (rows >= 0) & (rows < ny) & (cols >= 0) & (cols < nx)
        if not inside.all() or not (0 <= self.source[0] < ny and 0 <= self.source[1] < nx):
            raise ValueError(f"source {self.source} or a receiver lies outside the "
                             f"{ny} x {nx} grid")
        # The adjoint injects all residuals with one fancy-indexed add, which
        # counts a repeated receiver once.
        if len({(int(r), int(c)) for r, c in self.receivers}) != len(self.receivers):
            raise ValueError("two receivers share a grid point; give each its own point")


def make_survey(shape: Tuple[int, int], n_steps: int, *, spacing: float = 10.0,
                max_velocity: float = 3000.0, min_velocity: float = 1500.0) -> Survey:
    """A surface shot: source in the middle of row 2, a receiver on every 4th column
    of row 2, dt at Courant number COURANT, peak frequency giving 10 points per
    wavelength at min_velocity."""
    ny, nx = shape
    if ny < 8 or nx < 8:
        raise ValueError(f"grid {ny} x {nx} is too small for the survey (8 x 8 at least)")
    columns = np.arange(2, nx - 2, 4)
    receivers = np.stack([np.full_like(columns, 2), columns], axis=1)
    return Survey(shape=(ny, nx), spacing=spacing, dt=COURANT * spacing / max_velocity,
                  n_steps=n_steps, source=(2, nx // 2), receivers=receivers,
                  peak_frequency=min_velocity / (10.0 * spacing))


def layered_velocity(shape: Tuple[int, int], top: float = 1500.0,
                     bottom: float = 3000.0) -> np.ndarray:
    """Velocity growing linearly with depth (the smooth background model)."""
    ny, nx = shape
    return np.repeat(np.linspace(top, bottom, ny)[:, None], nx, axis=1)


def with_anomaly(velocity: np.ndarray, contrast: float = 300.0) -> np.ndarray:
    """velocity plus a Gaussian blob a third of the way down (the "true" model)."""
    ny, nx = velocity.shape
    rows, cols = np.mgrid[0:ny, 0:nx]
    width = max(ny, nx) / 12.0
    blob = np.exp(-((rows - ny / 3.0) ** 2 + (cols - nx / 2.0) ** 2) / (2.0 * width ** 2))
    return velocity + contrast * blob


def laplacian(u, out) -> None:
    """out = L u (5-point stencil without 1/h^2, u = 0 outside the grid). L is
    symmetric, so this is also its transpose."""
    out[...] = u
    out *= -4.0
    out[1:, :] += u[:-1, :]
    out[:-1, :] += u[1:, :]
    out[:, 1:] += u[:, :-1]
    out[:, :-1] += u[:, 1:]


class WaveModel:
    """Forward and adjoint of one shot of `survey` in the velocity model `velocity`
    (an AdjointModel: see the module docstring). `observed` traces default to
    zeros, which makes J half the energy of the synthetic traces."""

    def __init__(self, survey: Survey, velocity, observed=None, *, xp: Any = None):
        self.xp = array_module() if xp is None else xp
        xp = self.xp
        self.survey = survey
        if tuple(velocity.shape) != survey.shape:
            raise ValueError(f"velocity has shape {tuple(velocity.shape)}; the survey grid "
                             f"is {survey.shape}")
        self.velocity = xp.asarray(velocity, dtype=xp.float64)
        scale = (survey.dt / survey.spacing) ** 2
        self._coef = scale * self.velocity * self.velocity
        self._source = ricker(survey.n_steps, survey.dt, survey.peak_frequency)
        self._receivers = (xp.asarray(survey.receivers[:, 0]), xp.asarray(survey.receivers[:, 1]))
        n_receivers = len(survey.receivers)
        self.observed = (xp.zeros((survey.n_steps, n_receivers)) if observed is None
                         else xp.asarray(observed, dtype=xp.float64))
        if self.observed.shape != (survey.n_steps, n_receivers):
            raise ValueError(f"observed traces have shape {self.observed.shape}; the survey "
                             f"records {(survey.n_steps, n_receivers)}")
        self.state: Dict[str, Any] = {name: xp.zeros(survey.shape) for name in FIELDS}
        self.traces = xp.zeros((survey.n_steps, n_receivers))
        self.steps_advanced = 0  # forward steps run, recomputations included
        self._scratch = xp.empty(survey.shape)
        self._adj_deps: Dict[int, Any] = {}
        self._adjoint: Optional[_AdjointState] = None

    # ------------------------------------------------------------- forward
    def forward(self, n0: int, n1: int, *, adj_deps: bool) -> None:
        """Advance `state` from the start of step n0 to the start of step n1;
        when adj_deps, keep u[n] for n0 <= n < n1 for the adjoint."""
        self._check_steps("forward", n0, n1)
        for n in range(n0, n1):
            if adj_deps:
                self._adj_deps[n] = self.state["u_curr"].copy()
            self._step(n)

    def keep_adj_dep_of_last_step(self, n: int) -> None:
        """Keep u[n] from the state right after step n ran (it is then u_prev):
        for drivers such as pyrevolve that run one forward step before each
        adjoint step without saying it feeds the adjoint."""
        self._adj_deps[n] = self.state["u_prev"].copy()

    def _step(self, n: int) -> None:
        u_prev, u_curr, nxt = self.state["u_prev"], self.state["u_curr"], self._scratch
        laplacian(u_curr, nxt)
        nxt *= self._coef
        nxt += u_curr
        nxt += u_curr
        nxt -= u_prev
        nxt[self.survey.source] += self._source[n]
        u_prev[...] = u_curr
        u_curr[...] = nxt
        self.traces[n] = u_curr[self._receivers]
        self.steps_advanced += 1

    def misfit(self) -> float:
        """J of the traces recorded so far (complete once the forward reached n_steps)."""
        residual = self.traces - self.observed
        return 0.5 * float((residual * residual).sum())

    # ------------------------------------------------------------- adjoint
    def reverse(self, n1: int, n0: int, *, clear_adj_deps: bool) -> None:
        """Run the adjoint from the start of step n1 back to the start of step n0
        with the kept u[n], n0 <= n < n1; drop them when clear_adj_deps."""
        self._check_steps("reverse", n0, n1)
        if self._adjoint is None:
            self._adjoint = _AdjointState(self.xp, self.survey.shape, self.survey.n_steps)
        if n1 != self._adjoint.step:
            raise RuntimeError(f"reverse({n1}, {n0}): the adjoint is at step "
                               f"{self._adjoint.step}; it runs backwards without gaps")
        missing = [n for n in range(n0, n1) if n not in self._adj_deps]
        if missing:
            raise RuntimeError(f"reverse({n1}, {n0}): no forward data for steps {missing}; "
                               "run forward(..., adj_deps=True) over them first")
        for n in range(n1 - 1, n0 - 1, -1):
            self._reverse_step(n, self._adj_deps[n])
            if clear_adj_deps:
                del self._adj_deps[n]

    def _reverse_step(self, n: int, u_n) -> None:
        adj, tmp = self._adjoint, self._scratch
        a_n2, a_n3, a_n1 = adj.a_next, adj.a_after, adj.spare  # a[n+2], a[n+3], free
        self.xp.multiply(a_n2, self._coef, out=tmp)
        laplacian(tmp, a_n1)
        a_n1 += a_n2
        a_n1 += a_n2
        a_n1 -= a_n3
        a_n1[self._receivers] += self.traces[n] - self.observed[n]
        laplacian(u_n, tmp)
        tmp *= a_n1
        adj.gradient_sum += tmp
        adj.a_next, adj.a_after, adj.spare = a_n1, a_n2, a_n3
        adj.step = n

    def gradient(self):
        """dJ/dc (same shape as velocity), once the adjoint has reached step 0."""
        if self._adjoint is None or self._adjoint.step != 0:
            at = self.survey.n_steps if self._adjoint is None else self._adjoint.step
            raise RuntimeError(f"the gradient needs the adjoint back at step 0; it is at {at}")
        scale = 2.0 * (self.survey.dt / self.survey.spacing) ** 2
        return scale * self.velocity * self._adjoint.gradient_sum

    def _check_steps(self, what: str, n0: int, n1: int) -> None:
        if not 0 <= n0 <= n1 <= self.survey.n_steps:
            raise ValueError(f"{what}: steps {n0}..{n1} are not within "
                             f"0..{self.survey.n_steps} in order")


class _AdjointState:
    """At adjoint step s: a[s+1] (a_next), a[s+2] (a_after), a spare buffer and
    the running sum of (L u[n]) ⊙ a[n+1]."""

    def __init__(self, xp: Any, shape: Tuple[int, int], n_steps: int):
        self.a_next = xp.zeros(shape)
        self.a_after = xp.zeros(shape)
        self.spare = xp.empty(shape)
        self.gradient_sum = xp.zeros(shape)
        self.step = n_steps


# --------------------------------------------------------------- drivers
def record(survey: Survey, velocity, *, xp: Any = None):
    """The traces of a forward run in `velocity` (the "observed" data)."""
    model = WaveModel(survey, velocity, xp=xp)
    model.forward(0, survey.n_steps, adj_deps=False)
    return model.traces


def store_everything_gradient(model: WaveModel):
    """The reference: one forward over every step keeping each u[n] in memory,
    then the whole adjoint; returns (J, dJ/dc)."""
    n = model.survey.n_steps
    model.forward(0, n, adj_deps=True)
    model.reverse(n, 0, clear_adj_deps=True)
    return model.misfit(), model.gradient()
