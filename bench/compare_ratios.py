#!/usr/bin/env python3
"""Compares the ratio tables of two results files of one benchmark (a build
before a change, and after it): every numeric cell of the named sections'
tables, before and after, after / before, and whether the change is within
the tolerance (5 %: issue 25's "performance unchanged"). A cell written
"median [min–max]" also gives the run's own spread, so that a change larger
than the tolerance whose medians each lie inside the other run's min–max
(the repeats of the two runs overlap: noise this machine cannot tell from
a change) is told apart from one outside.

    .venv/bin/python bench/compare_ratios.py BEFORE.md AFTER.md --section TITLE [--section TITLE...]
        [--label TEXT] [--out TABLE.md] [--plot OUT.png]

Prints (or appends to --out) a Markdown table; --plot draws after / before
per row with the tolerance band.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from _common import pyplot

TOLERANCE = 0.05
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
SPREAD = re.compile(r"\[\s*([-+\d.e]+)\s*[^\d\s\]]+\s*([-+\d.e]+)\s*\]")


@dataclass
class Cell:
    median: float
    spread: Optional[Tuple[float, float]]  # min, max when the cell gives them


def parse_cell(text: str) -> Optional[Cell]:
    """The first number of a cell (a ratio, "0.92 (met)", "1.06 [0.94–1.25]"),
    and its [min–max] when there is one; None for a cell without a number
    or whose numbers carry units (times: not ratios)."""
    if re.search(r"\d\s*(ms|µs|s|GiB|MiB|KiB)\b", text):
        return None
    found = NUMBER.search(text)
    if not found:
        return None
    spread = SPREAD.search(text)
    return Cell(float(found.group()), (float(spread.group(1)), float(spread.group(2))) if spread else None)


def section_tables(path: Path, title: str) -> Dict[Tuple[str, str], Cell]:
    """(row, column) -> cell for every table under the heading `title`."""
    lines = path.read_text().splitlines()
    heading = next((i for i, line in enumerate(lines) if line.lstrip("#").strip() == title), None)
    if heading is None:
        sys.exit(f"compare_ratios.py: {path} has no section '{title}'")
    cells: Dict[Tuple[str, str], Cell] = {}
    header: List[str] = []
    for line in lines[heading + 1:]:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            header = []
            continue
        row = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not header:
            header = row
            continue
        if set("".join(row)) <= set("-: "):
            continue
        for column, text in zip(header[1:], row[1:]):
            if column.lower() == "target":  # the goal, the same in both files
                continue
            cell = parse_cell(text)
            if cell is not None:
                cells[(row[0], column)] = cell
    return cells


def verdict(before: Cell, after: Cell) -> str:
    change = after.median / before.median - 1 if before.median else 0.0
    if abs(change) <= TOLERANCE:
        return "within 5 %"
    within_each_other = all(
        other.spread[0] <= cell.median <= other.spread[1]
        for cell, other in ((after, before), (before, after)) if other.spread)
    if within_each_other and (before.spread or after.spread):
        return "outside 5 %, each median inside the other run's min–max"
    return "outside 5 %"


def compare(before_path: Path, after_path: Path, titles: List[str]) -> List[Tuple[str, str, Cell, Cell]]:
    rows = []
    for title in titles:
        before = section_tables(before_path, title)
        after = section_tables(after_path, title)
        for key, cell in before.items():
            if key in after:
                rows.append((title, f"{key[0]} — {key[1]}", cell, after[key]))
    return rows


def table(rows, label: str) -> List[str]:
    lines = [f"### {label}", "", "| section | ratio | before | after | after / before | |",
             "|---|---|---:|---:|---:|---|"]
    for title, name, before, after in rows:
        quotient = after.median / before.median if before.median else float("nan")
        lines.append(f"| {title} | {name} | {before.median:g} | {after.median:g} | {quotient:.3f} | "
                     f"{verdict(before, after)} |")
    within = sum(1 for _, _, b, a in rows if verdict(b, a) == "within 5 %")
    lines += ["", f"{within} of {len(rows)} ratios within 5 %.", ""]
    return lines


def plot(rows, label: str, out: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 1.5 + 0.28 * len(rows)))
    quotients = [a.median / b.median if b.median else 1.0 for _, _, b, a in rows]
    names = [name if len(name) < 70 else name[:67] + "..." for _, name, _, _ in rows]
    ax.barh(range(len(rows)), [q - 1 for q in quotients], left=1, color="tab:blue")
    ax.axvspan(1 - TOLERANCE, 1 + TOLERANCE, color="tab:green", alpha=0.15, label="±5 %")
    ax.axvline(1, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("after / before (medians)")
    ax.set_title(label, fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--section", action="append", required=True, help="a heading whose tables hold ratios")
    ap.add_argument("--label", default="", help="what is compared (a heading for the table)")
    ap.add_argument("--out", type=Path, help="append the table to this file instead of printing it")
    ap.add_argument("--plot", type=Path, help="draw after / before per ratio into this PNG")
    args = ap.parse_args()
    rows = compare(args.before, args.after, args.section)
    if not rows:
        sys.exit("compare_ratios.py: no ratio is in both files' sections")
    label = args.label or f"{args.before} → {args.after}"
    text = "\n".join(table(rows, label)) + "\n"
    if args.out:
        with args.out.open("a") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    if args.plot:
        plot(rows, label, args.plot)


if __name__ == "__main__":
    main()
