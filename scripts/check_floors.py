#!/usr/bin/env python3
"""Checks the floors of src/ (docs/architecture.md): every #include of a
project header from src/<folder>/ names a header of the same folder, of a
folder on the same floor, or of a lower floor; the layers above the Store
(the top floor) include only the public headers (include/resurgo/), the
ground floor (base/) and their own folder. A folder that is on no floor, or
an include that climbs, fails the check, naming the file, the line and the
floors. `make test` runs it (ctest: architecture.floors).

Usage: scripts/check_floors.py [--print]   (--print: the floors, one per line)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

# Lowest first. A folder may include its own floor and every floor below.
FLOORS = [
    ("ground", ["base"]),
    ("files", ["io", "format", "mpi"]),
    ("nouns", ["core"]),
    ("memory", ["track", "gpu"]),
    ("levels", ["tier"]),
    ("captures", ["capture"]),
    ("pipeline", ["pipeline"]),
    ("jobs", ["job"]),
    ("facade", ["store", "tools"]),
    ("layers", ["auto", "appic", "matrix"]),
]
# The layers above the Store use only the public API, the ground floor and
# their own folder (DESIGN.md, "Data flow and modules").
LAYERS = {"auto", "appic", "matrix"}
LAYER_ALLOWED = {"base"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"')


def floor_of() -> dict:
    return {folder: number for number, (_, folders) in enumerate(FLOORS) for folder in folders}


def check() -> list:
    floors = floor_of()
    problems = []
    folders = sorted(p.name for p in SRC.iterdir() if p.is_dir())
    for folder in folders:
        if folder not in floors:
            problems.append(f"src/{folder}/ is on no floor: add it to FLOORS in scripts/check_floors.py and to "
                            "docs/architecture.md")
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in {".h", ".cpp", ".inl"} or not path.is_file():
            continue
        folder = path.relative_to(SRC).parts[0]
        if folder not in floors:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match or match.group(1) == "resurgo":
                continue
            target = match.group(1)
            where = f"{path.relative_to(ROOT)}:{number}: #include of {target}/"
            if target not in floors:
                problems.append(f"{where}: {target}/ is on no floor")
            elif folder in LAYERS and target not in LAYER_ALLOWED and target != folder:
                problems.append(f"{where}: the layers above the Store include only include/resurgo/, base/ and "
                                "their own folder")
            elif floors[target] > floors[folder]:
                problems.append(f"{where}: floor {floors[target]} ({FLOORS[floors[target]][0]}) is above "
                                f"{folder}/'s floor {floors[folder]} ({FLOORS[floors[folder]][0]})")
    return problems


def main() -> int:
    if "--print" in sys.argv[1:]:
        for number, (name, folders) in enumerate(FLOORS):
            print(f"{number} {name}: {', '.join(folders)}")
        return 0
    problems = check()
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"check_floors: {len(problems)} include(s) break the floors (docs/architecture.md)", file=sys.stderr)
        return 1
    print(f"check_floors: every include in src/ points to its own floor or a lower one ({len(FLOORS)} floors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
