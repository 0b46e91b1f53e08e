"""docs/translate-ops.md, generated from the op registry: ``python -m dualdl.port.translate.oplib.docs``
writes it (tests/test_translate_op_registry.py fails when the page is stale)."""
from __future__ import annotations

import pathlib
import sys
from collections import Counter

from . import entries

__all__ = ["ops_page", "PAGE"]

PAGE = pathlib.Path(__file__).resolve().parents[4] / "docs" / "translate-ops.md"
_FAMILIES = (("legacy", "Legacy (`mx.nd` / `mx.sym` / `F`)"), ("numpy", "Numpy interface (`mx.np` / `mx.npx`)"),
             ("contrib", "Contrib (`F.contrib`)"), ("sparse", "Sparse API names (`_sparse_*`)"))
_STATUSES = ("translated", "refused", "not applicable")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _fact(e) -> str:
    note = f": {e.float32_note}" if e.float32_note else ""
    if e.float32_only:
        return "float32 only (MXNet refuses float64 on CPU)" + note
    if e.float32_internal:
        return "float32 inside, on float64 data" + _cell(note)
    return ""


def ops_page() -> str:
    """The page's text: counts per family, then one row per MXNet operator name."""
    es = list(entries())
    counts = Counter((e.family, e.status) for e in es)
    lines = ["# Translated operators", "",
             "<!-- generated from the op registry (dualdl/port/translate/oplib) by "
             "`python -m dualdl.port.translate.oplib.docs`; do not edit -->", "",
             "Every operator MXNet 1.9.1 registers (its backward ops aside) has one entry in dualdl's op "
             "registry: **translated** (the torch form below, measured against MXNet's op in float64 and "
             "float32, values and gradients: tests/test_translate_op_values.py), **refused** (why, and what "
             "to do instead) or **not applicable** (not part of a model's forward: optimizer updates, data "
             "loading, graph plumbing). A float32 fact is what the proof needs to judge a model using the "
             "op. An op's aliases (`relu`, `_npx_relu`, `_sparse_relu`) share one translation; "
             "`dualdl.port.register_translation(op, fn)` adds one for a refused op (`replace=True` replaces a "
             "built-in one).", "",
             "| Family | Translated | Refused | Not applicable | All |", "|---|---:|---:|---:|---:|"]
    for fam, title in _FAMILIES:
        row = [counts[(fam, s)] for s in _STATUSES]
        lines.append(f"| {title} | {' | '.join(str(v) for v in row)} | {sum(row)} |")
    tot = [sum(counts[(f, s)] for f, _ in _FAMILIES) for s in _STATUSES]
    lines.append(f"| **All** | {' | '.join(str(v) for v in tot)} | {sum(tot)} |")
    for fam, title in _FAMILIES:
        lines += ["", f"## {title}", "", "| Operator | Status | Torch form, or why not | float32 |", "|---|---|---|---|"]
        for e in es:
            if e.family == fam:
                what = e.torch if e.status == "translated" else e.reason
                lines.append(f"| `{e.name}` | {e.status} | {_cell(what)} | {_fact(e)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    PAGE.write_text(ops_page())
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
