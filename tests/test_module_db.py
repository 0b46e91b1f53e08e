"""torch's own module tests (``module_db``) as a peer test suite (issue 34): every entry dualdl.nn
has, on torch, MXNet and MXNet hybridized, against torch.nn from the same weights (forward, input
and parameter gradients; float32 and float64; train mode, and eval mode where torch's entry says the
two differ). The harness and its statuses: tests/_module_db.py. ``pytest -s`` prints the table.

Asserted: no mismatch and no raw framework error on any candidate; a refusal only where it is
dualdl's declared policy (:data:`ALLOWED_REFUSALS`); at least 100 of the 114 entries covered, the
others listed with the reason in :data:`NOT_COVERED`."""
import re

import pytest

pytest.importorskip("torch")
pytest.importorskip("mxnet")
pytest.importorskip("expecttest")

import _module_db as M  # noqa: E402

DB = M.module_db()
NAMES = [M.entry_name(i) for i in DB]
# entries dualdl.nn does not have, and why
NOT_COVERED = {}
# refusals that are dualdl's declared policy: (candidates, message pattern, why)
ALLOWED_REFUSALS = [
    (("torch", "mxnet", "mxnet:hybridized"), r"got an input with no elements",
     "an empty batch: MXNet 1.x's operators cannot run on a 0 in the shape, so dualdl refuses it on "
     "both backends (docs/differences.md)"),
    (("mxnet", "mxnet:hybridized"), r"cannot be honoured on the mxnet backend",
     "a declared _dl_cannot of the MXNet adapter (the reason is in the message)"),
]
TABLE = M.Table()


@pytest.fixture(scope="module", autouse=True)
def _print_table():
    yield
    if TABLE.outcomes:
        print("\n\ntorch's module_db through dualdl.nn (tests/_module_db.py)\n" + M.report(TABLE, list(M.CANDIDATES)))


def _allowed(o: "M.Outcome") -> bool:
    return any(o.candidate in cands and re.search(pattern, o.detail) for cands, pattern, _ in ALLOWED_REFUSALS)


def test_coverage():
    missing = sorted(n for n, i in zip(NAMES, DB) if not M.covered(i))
    assert missing == sorted(NOT_COVERED), (
        f"entries without a dualdl.nn layer: {missing}; declared: {sorted(NOT_COVERED)}")
    assert len(DB) - len(missing) >= 100, f"{len(DB) - len(missing)}/{len(DB)} entries covered"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(NAMES) - set(NOT_COVERED)))
def test_entry(name):
    table = M.run([name])
    TABLE.outcomes += table.outcomes
    bad = [o for o in table.outcomes if o.status in ("mismatch", "raw")
           or (o.status == "refused" and not _allowed(o))]
    assert table.outcomes, f"{name}: no input was run"
    assert any(o.status == "match" for o in table.outcomes), f"{name}: nothing matched"
    assert not bad, f"{name}: {len(bad)} failing cases, e.g.\n" + "\n".join(
        f"  {o.candidate} [{o.index} {o.dtype} {o.mode}] {o.status}: {o.detail}" for o in bad[:8])


def test_docs_table_names_the_covered_entries():
    """docs/parity.md's module_db block (``python tests/_module_db.py --write-docs``) lists the
    entries the code covers and those it does not."""
    text = open(M.DOCS).read()
    assert M.BEGIN in text and M.END in text, "docs/parity.md has no module_db block: run --write-docs"
    block = text.split(M.BEGIN, 1)[1].split(M.END, 1)[0]
    covered = sorted(n for n, i in zip(NAMES, DB) if M.covered(i))
    line = next(ln for ln in block.splitlines() if ln.startswith("Covered entries:"))
    assert line == "Covered entries: " + ", ".join(f"`{n}`" for n in sorted(set(covered))) + "."
    assert f"| torch | {len(covered)}/{len(DB)} |" in block
