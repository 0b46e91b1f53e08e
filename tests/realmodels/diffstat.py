"""How much of each real model file its write-once twin changes: lines of the original (the
attribution header left out) replaced or added in the twin (difflib), per file and in total.
``python tests/realmodels/diffstat.py`` prints the table (docs/writing-once.md shows it)."""
from __future__ import annotations

import difflib
import os
from typing import List, NamedTuple, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))


class FileStat(NamedTuple):
    file: str
    original: int        # lines of the original's code (non-blank, header left out)
    changed: int         # of them, lines the twin replaces or removes


def body(path: str) -> List[str]:
    """The file's lines after its leading comment header (attribution or twin note)."""
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    return lines[i:]


def pairs(name: str) -> List[Tuple[str, str]]:
    """The changed (original line(s), twin line(s)) hunks of one file, as text."""
    a, b = body(os.path.join(HERE, "originals", name)), body(os.path.join(HERE, "twins", name))
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append(("\n".join(a[i1:i2]), "\n".join(b[j1:j2])))
    return out


def stats() -> List[FileStat]:
    out = []
    for name in sorted(os.listdir(os.path.join(HERE, "originals"))):
        if not name.endswith(".py"):
            continue
        a, b = body(os.path.join(HERE, "originals", name)), body(os.path.join(HERE, "twins", name))
        changed = 0
        for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag in ("replace", "delete"):
                changed += sum(1 for line in a[i1:i2] if line.strip())
        out.append(FileStat(name, sum(1 for line in a if line.strip()), changed))
    return out


if __name__ == "__main__":
    rows = stats()
    for s in rows:
        print(f"{s.file:28s} {s.original:5d} {s.changed:4d}  {100 * s.changed / s.original:5.1f} %")
    t, c = sum(s.original for s in rows), sum(s.changed for s in rows)
    print(f"{'total':28s} {t:5d} {c:4d}  {100 * c / t:5.1f} %")
