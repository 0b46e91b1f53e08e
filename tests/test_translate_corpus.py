"""dl.port.translate on the corpus of issue 32 (tests/_translate_corpus.py): real Gluon models of
every family -- model zoo, gluoncv classification / cifar / segmentation / detection / pose /
video, gluonnlp, d2l's numpy-interface code, public Gluon projects -- at small inputs with random
init. Each model either translates with the proof (``report.ok``; the generated file imports only
torch) or, where it is documented as refused, raises a TranslationError naming the op or construct,
the block and its path. Never a raw exception; a known proof failure is asserted to be reported
as not ok (the report never says ok about wrong code)."""
import ast
import os
import sys

import pytest

pytest.importorskip("mxnet")
pytest.importorskip("torch")
pytest.importorskip("safetensors")
pytest.importorskip("gluonnlp")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _translate_corpus as corpus  # noqa: E402

MIN_OK = 71   # 71 of 72 (98.6 %): the run of session 28 (SSD ok)


def _params():
    out = []
    for c in corpus.CASES:
        marks = [pytest.mark.slow] if c.slow else []
        if c.expect == "bug":          # a known raw error, named in docs/translate.md (passes once fixed)
            marks.append(pytest.mark.xfail(strict=False, reason=c.note))
        out.append(pytest.param(c, id=c.name, marks=marks))
    return out


def _imports(path):
    tree = ast.parse(open(path).read())
    return {n.names[0].name.split(".")[0] if isinstance(n, ast.Import) else n.module.split(".")[0]
            for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))}


@pytest.mark.parametrize("case", _params())
def test_corpus_model(case, tmp_path):
    if case.family.startswith("gluoncv"):
        pytest.importorskip("portalocker")
    out = corpus.run_case(case, str(tmp_path))
    print(f"{out.status} {out.seconds:.1f}s {out.detail}")
    assert out.status not in ("raw", "build"), f"{case.name}: {out.status}: {out.detail}"
    if case.expect in ("ok", "bug"):
        assert out.status == "ok", f"{case.name}: {out.detail}"
        assert out.report.max_rel_diff is not None
        if out.report.dtype == "float64":      # float32 proofs are judged by measured rounding instead
            assert out.report.max_rel_diff < 1e-4
        assert _imports(out.report.source_path) == {"torch"}
    elif case.expect == "refused":
        assert out.status == "refused", f"{case.name}: expected a TranslationError, got {out.status}: {out.detail}"
        for word in case.names:
            assert word in out.detail, f"{case.name}: the refusal should name {word!r}: {out.detail}"
        assert " at " in out.detail or "top block" in out.detail          # where in the tree
    elif case.expect == "rejected":      # translate's own one-line ValueError about the sample inputs
        assert out.status == "rejected", f"{case.name}: {out.status}: {out.detail}"
        for word in case.names:
            assert word in out.detail, f"{case.name}: {word!r} not in {out.detail}"
    else:                                # "not-ok": a documented proof failure, reported as such
        assert case.expect == "not-ok", case.expect
        assert out.status in ("failed-check", "ok"), f"{case.name}: {out.status}: {out.detail}"
        if out.status == "ok":           # fixed since the docs' run: then it must be a real ok
            assert _imports(out.report.source_path) == {"torch"}
        else:
            assert not out.report.ok
            for word in case.names:
                assert word in out.detail, f"{case.name}: {word!r} not in {out.detail}"


def test_corpus_covers_every_family_and_the_bar():
    """Issue 32's bar: every family present, >= 9 of 10 declared to translate with the proof
    (each declaration is enforced by test_corpus_model)."""
    families = {c.family for c in corpus.CASES}
    for f in ("model zoo", "gluoncv cifar", "gluoncv classification", "gluoncv segmentation",
              "gluoncv detection", "gluoncv pose", "gluoncv video", "gluonnlp", "public projects",
              "d2l (numpy interface)"):
        assert f in families, f
    ok = sum(c.expect == "ok" for c in corpus.CASES)
    # issue 32 asks for >= 9 of 10; MIN_OK is what the final run measured (docs/translate.md)
    assert ok >= MIN_OK, f"{ok}/{len(corpus.CASES)}"
    for c in corpus.CASES:
        assert c.expect in ("ok", "refused", "rejected", "not-ok", "bug"), c
        assert c.expect == "ok" or c.note, f"{c.name}: say why it is {c.expect}"
    fast = {c.family for c in corpus.CASES if not c.slow}
    assert families - fast == set(), f"no fast representative: {families - fast}"


def test_bench_has_one_case_per_family():
    """benchmarks/translate.py (make bench) lists the families without importing the corpus."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from benchmarks.translate import FAMILIES
    assert set(FAMILIES) == {c.family for c in corpus.CASES}
