#!/usr/bin/env python3
"""Draws bench/results/ci_time.png from the phase table of
bench/results/ci_time.md (the figures bench/ci_time.sh printed, one column
per commit): one stacked bar per commit, one colour per phase, and the
15-minute budget of `make test`.

    .venv/bin/python bench/ci_time_plot.py [TABLE.md] [OUT.png]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List, Tuple

from _common import RESULTS, pyplot

BUDGET_SECONDS = 15 * 60


def read_table(path: Path) -> Tuple[List[str], Dict[str, List[int]]]:
    """The commits (header cells) and each phase's seconds per commit."""
    rows = [line for line in path.read_text().splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    phases: Dict[str, List[int]] = {}
    for row in rows[1:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if cells[0].startswith("**total**"):
            continue
        # "—": the phase did not exist at that commit (make test changed).
        phases[cells[0]] = [0 if cell == "—" else int(cell) for cell in cells[1:]]
    return header[1:], phases


def main() -> None:
    table = Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS / "ci_time.md"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else RESULTS / "ci_time.png"
    commits, phases = read_table(table)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 2.2 + 0.6 * len(commits)))
    left = [0] * len(commits)
    for name, seconds in phases.items():
        ax.barh(commits, seconds, left=left, label=name)
        left = [a + b for a, b in zip(left, seconds)]
    ax.axvline(BUDGET_SECONDS, color="k", linestyle="--", label="15 minutes")
    ax.invert_yaxis()
    ax.set_xlabel("seconds of wall time (make test on a fresh clone, 2 cores)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
