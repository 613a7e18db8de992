#!/usr/bin/env python3
"""Keeps the README's code equal to the programs the tests run.

    check_snippets.py [REPO]

Every fenced block of C, C++, Python or Fortran in README.md names its file
in its first line (a comment with examples/readme/<file>) and must be that
file, byte for byte; every such file under examples/readme/ must be a block
of the README. The tests run the files (examples/readme/CMakeLists.txt,
tests/python/test_readme_snippets.py), so the README shows code that runs.
Exit status 1 with the differences otherwise.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path
from typing import Dict, List, Tuple

LANGUAGES = {"c": ".c", "cpp": ".cpp", "python": ".py", "fortran": ".f90"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NAME = re.compile(r"examples/readme/[\w.]+")


def code_blocks(readme: str) -> List[Tuple[int, str, str]]:
    """(line number, language, text) of every fenced block in a checked language."""
    return [(readme.count("\n", 0, match.start()) + 1, match.group(1), match.group(2))
            for match in FENCE.finditer(readme) if match.group(1) in LANGUAGES]


def problems(repo: Path) -> List[str]:
    found: List[str] = []
    shown: Dict[str, int] = {}
    for line, language, text in code_blocks((repo / "README.md").read_text()):
        name = NAME.search(text.partition("\n")[0])
        if name is None:
            found.append(f"README.md:{line}: the {language} block does not name its file "
                         "(examples/readme/...) in its first line")
            continue
        path = repo / name.group()
        shown[name.group()] = line
        if path.suffix != LANGUAGES[language]:
            found.append(f"README.md:{line}: a {language} block names {name.group()}")
        elif not path.is_file():
            found.append(f"README.md:{line}: {name.group()} does not exist")
        elif path.read_text() != text:
            diff = difflib.unified_diff(path.read_text().splitlines(), text.splitlines(),
                                        name.group(), f"README.md:{line}", lineterm="")
            found.append("\n".join(diff))
    for path in sorted((repo / "examples" / "readme").iterdir()):
        relative = path.relative_to(repo).as_posix()
        if path.suffix in LANGUAGES.values() and relative not in shown:
            found.append(f"{relative} is not a block of README.md")
    return found


def main(argv: List[str]) -> int:
    repo = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[2]
    found = problems(repo)
    for problem in found:
        print(problem, file=sys.stderr)
    if not found:
        print("every C, C++, Python and Fortran block of README.md is its file under examples/readme/")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
