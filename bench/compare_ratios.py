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
        [--again BEFORE_AGAIN.md] [--label TEXT] [--out TABLE.md] [--plot OUT.png]

With --again (the before build measured once more, after the after build:
before, after, before again), "before" is the mean of the two before runs,
so that a drift of the machine during the three runs cancels to first
order, and the two before runs' difference is the same build's own
variation between runs: a change larger than the tolerance but smaller than
that variation is marked as such (this machine cannot tell it from noise).

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


@dataclass
class Row:
    title: str
    name: str
    before: Cell
    after: Cell
    again: Optional[Cell] = None  # the before build's second run


def reference(row: Row) -> float:
    return row.before.median if row.again is None else (row.before.median + row.again.median) / 2


def own_variation(row: Row) -> Optional[float]:
    """|before again / before - 1|: how much one build's ratio moved between two runs."""
    if row.again is None or not row.before.median:
        return None
    return abs(row.again.median / row.before.median - 1)


def verdict(row: Row) -> str:
    before, after = row.before, row.after
    base = reference(row)
    change = after.median / base - 1 if base else 0.0
    if abs(change) <= TOLERANCE:
        return "within 5 %"
    variation = own_variation(row)
    if variation is not None:
        if abs(change) <= variation:
            return "outside 5 %, within the before build's own variation between runs"
        return "outside 5 %"
    within_each_other = all(
        other.spread[0] <= cell.median <= other.spread[1]
        for cell, other in ((after, before), (before, after)) if other.spread)
    if within_each_other and (before.spread or after.spread):
        return "outside 5 %, each median inside the other run's min–max"
    return "outside 5 %"


def compare(before_path: Path, after_path: Path, titles: List[str], again_path: Optional[Path]) -> List[Row]:
    rows = []
    for title in titles:
        before = section_tables(before_path, title)
        after = section_tables(after_path, title)
        again = section_tables(again_path, title) if again_path else {}
        for key, cell in before.items():
            if key in after and (again_path is None or key in again):
                rows.append(Row(title, f"{key[0]} — {key[1]}", cell, after[key], again.get(key)))
    return rows


def table(rows: List[Row], label: str) -> List[str]:
    with_again = any(row.again is not None for row in rows)
    again_header = " before again | before again / before |" if with_again else ""
    quotient_header = "after / mean of the before runs" if with_again else "after / before"
    lines = [f"### {label}", "", f"| section | ratio | before |{again_header} after | {quotient_header} | |",
             "|---|---|---:|" + ("---:|---:|" if with_again else "") + "---:|---:|---|"]
    for row in rows:
        base = reference(row)
        quotient = row.after.median / base if base else float("nan")
        again = (f" {row.again.median:g} | {row.again.median / row.before.median:.3f} |"
                 if row.again is not None and row.before.median else "")
        lines.append(f"| {row.title} | {row.name} | {row.before.median:g} |{again} {row.after.median:g} | "
                     f"{quotient:.3f} | {verdict(row)} |")
    verdicts = [verdict(row) for row in rows]
    within = verdicts.count("within 5 %")
    lines += ["", f"{within} of {len(rows)} ratios within 5 %."]
    if with_again:
        noise = sum(1 for v in verdicts if "own variation" in v)
        lines[-1] += (f" {noise} more moved by more than 5 % but less than the before build's own ratio moved "
                      f"between its two runs; {len(rows) - within - noise} moved by more than both.")
    lines.append("")
    return lines


def plot(rows, label: str, out: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 1.5 + 0.28 * len(rows)))
    quotients = [row.after.median / reference(row) if reference(row) else 1.0 for row in rows]
    names = [row.name if len(row.name) < 70 else row.name[:67] + "..." for row in rows]
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
    ap.add_argument("--again", type=Path, help="the before build's results once more, measured after the after build")
    ap.add_argument("--label", default="", help="what is compared (a heading for the table)")
    ap.add_argument("--out", type=Path, help="append the table to this file instead of printing it")
    ap.add_argument("--plot", type=Path, help="draw after / before per ratio into this PNG")
    args = ap.parse_args()
    rows = compare(args.before, args.after, args.section, args.again)
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
