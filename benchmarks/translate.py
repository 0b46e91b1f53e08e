"""``dl.port.translate`` (Gluon block -> PyTorch source + weights + float64 proof): seconds to
translate and verify each model of the translate corpus (tests/_translate_corpus.py, one case per
family), and how it grows with depth (model-zoo resnet18/50/101/152_v1 at 2x3x64x64). For scale:
issue 32 reports the ONNX route (export, then convert to torch) at 50-100 s per CNN.

Each value is one translate + verify (``report.seconds``: translate is building the generated
source, verify is writing the files, importing them and running the five checks in float64), after
a warm-up translation in the same process (imports). Models are built with random init."""
from __future__ import annotations

import os
import re
import sys
import tempfile
from typing import Iterator, List

from .harness import Config, Row, case

_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")


def _corpus():
    if _TESTS not in sys.path:
        sys.path.insert(0, _TESTS)
    import _translate_corpus
    return _translate_corpus


def _warm(tmp: str) -> None:
    """One small translation first: the imports (torch, safetensors, the generated-module loader)."""
    corpus = _corpus()
    corpus.run_case(corpus.BY_NAME["proj:dcgan_G"], tmp)


def _row(name: str, o, **extra) -> Row:
    total = (o.translate_s or 0.0) + (o.verify_s or 0.0) if o.status in ("ok", "failed-check") else o.seconds
    note = {"ok": "ok", "failed-check": "proof failed", "refused": "refused (TranslationError)",
            "rejected": "inputs rejected (ValueError)", "raw": "RAW ERROR", "build": "not built"}[o.status]
    cpu = o.report.seconds.get("cpu") if o.report is not None else None
    if o.status in ("ok", "failed-check"):
        note += (f"; translate {o.translate_s:.2f} s + verify {o.verify_s:.2f} s (process CPU {cpu:.2f} s); "
                 f"max rel diff {o.max_rel:.2g}")
    else:
        note += f": {o.detail[:120]}"
    return Row(group="translate", name=name, value=total, unit="s", note=note,
               extra=dict(status=o.status, translate_s=o.translate_s, verify_s=o.verify_s, cpu_s=cpu,
                          max_rel_diff=o.max_rel, family=o.family, **extra))


def _family_case(family: str):
    def run(cfg: Config) -> Iterator[List[Row]]:
        corpus = _corpus()
        if family not in {c.family for c in corpus.CASES}:
            raise ValueError(f"benchmarks/translate.py FAMILIES has {family!r}, which the corpus does not")
        cases = [c for c in corpus.CASES if c.family == family and not (cfg.quick and c.slow)]
        if cfg.quick:
            cases = cases[:2]
        with tempfile.TemporaryDirectory() as tmp:
            _warm(tmp)
            for c in cases:
                yield [_row(c.name, corpus.run_case(c, tmp))]
    run.__doc__ = f"translate + verify seconds per model of the corpus family {family!r}"
    return run


#: The corpus families (tests/_translate_corpus.py), one case each. Listed here so that loading the
#: benchmark cases imports no framework (every case worker loads all case modules).
FAMILIES = ("model zoo", "gluoncv cifar", "gluoncv classification", "gluoncv segmentation", "gluoncv detection",
            "gluoncv pose", "gluoncv video", "gluonnlp", "public projects", "d2l (numpy interface)")


def _register() -> None:
    for family in FAMILIES:
        slug = re.sub(r"\W+", "_", family).strip("_")
        case("translate", f"corpus_{slug}")(_family_case(family))


@case("translate", "depth")
def depth(cfg: Config) -> Iterator[List[Row]]:
    """translate + verify seconds of model-zoo resnet18/50/101/152_v1 (2x3x64x64): growth with depth."""
    import numpy as np
    corpus = _corpus()
    names = ["resnet18_v1", "resnet50_v1"] if cfg.quick else ["resnet18_v1", "resnet50_v1", "resnet101_v1",
                                                               "resnet152_v1"]
    with tempfile.TemporaryDirectory() as tmp:
        _warm(tmp)
        for n in names:
            c = corpus.Case(f"zoo:{n}", "model zoo", corpus.zoo(n, (2, 3, 64, 64)))
            o = corpus.run_case(c, tmp)
            params = layers = None
            if o.report is not None:
                params = int(sum(np.prod(m["shape"]) for m in o.report.mapping if m.get("shape")))
                layers = sum(1 for m in o.report.mapping if len(m.get("shape") or []) == 4)
            yield [_row(f"{n} (2x3x64x64, {layers} convs, {params / 1e6:.1f} M params)" if params else n, o,
                        params=params, convs=layers)]


_register()
