"""The README's Python code run as its reader would run it: the program of
"Usage" killed with SIGKILL and run again, the adjoint fragment inside a real
model, and the command-line tool on what the program left, as docs/start.md
shows it. examples/readme/ holds the code; tests/readme/check_snippets.py
(ctest readme_snippets) keeps it equal to README.md's blocks."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
README_CODE = REPO / "examples" / "readme"
sys.path.insert(0, str(REPO / "tests" / "readme"))

import restart_check  # noqa: E402  (tests/readme/restart_check.py)
from test_adjoint import N_STEPS, Oscillators, Problem  # noqa: E402
from helpers import run_cli


def test_the_program_continues_after_sigkill_and_after_it_finished(tmp_path):
    """Uninterrupted, killed at a random moment then run again, run once more
    after it finished: the same last line each time; a store that cannot open
    makes it exit non-zero with the reason (restart_check.py)."""
    restart_check.check_program(tmp_path / "runs", [sys.executable, str(README_CODE / "readme.py")])

    # docs/start.md: the CLI on the store the runs left.
    store = tmp_path / "runs" / "interrupted" / "l2" / "heat"
    listing = run_cli("ls", str(store))
    assert listing.returncode == 0, listing.stderr
    assert "1000" in listing.stdout
    verified = run_cli("verify", str(store))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_the_adjoint_fragment_gives_the_gradient_of_storing_every_state():
    reference = Oscillators(Problem())
    reference.forward(0, N_STEPS, adj_deps=True)
    reference.reverse(N_STEPS, 0, clear_adj_deps=True)

    model = Oscillators(Problem())
    fragment = runpy.run_path(str(README_CODE / "adjoint.py"), init_globals={"model": model, "n_steps": N_STEPS})
    assert fragment["stats"].saves > 0 and fragment["stats"].loads > 0  # through the store
    np.testing.assert_array_equal(model.adjoint.gradient(), reference.adjoint.gradient())
    assert model.forward_steps > N_STEPS  # Revolve recomputed steps from the stored states
