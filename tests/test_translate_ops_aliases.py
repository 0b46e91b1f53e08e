"""Every name the op registry translates is measured against MXNet 1.9.1's own op (issue 41). The
names without a case of their own in tests/_op_cases.py share their translation with one that has
(aliases: ``_Plus``/``elemwise_add``, ``_npx_relu``/``relu``, ``_sparse_abs``/``abs``, ``max_axis``
/``max``...): each runs its sibling's cases under its *own* MXNet name, value and gradient in
float64 and float32 (tests/test_translate_op_values.py's ``check_op``), so an alias whose MXNet
kernel differs (``BatchNorm_v1`` refuses float64) cannot hide behind its sibling's test."""
import collections
import os
import sys

import pytest

pytest.importorskip("mxnet")
pytest.importorskip("torch")

from dualdl.port.translate.oplib import entries  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import test_translate_op_values as values  # noqa: E402
from _op_cases import CASES, Case  # noqa: E402

#: the sibling whose cases an alias takes where the first one's are not what MXNet's op accepts
#: (``_Mul`` is elementwise: ``broadcast_mul``'s broadcasting shapes are refused)
SIBLING = {"_Div": "elemwise_div", "_div": "elemwise_div", "_sparse_elemwise_div": "elemwise_div",
           "_Minus": "elemwise_sub", "_minus": "elemwise_sub", "_sub": "elemwise_sub",
           "_sparse_elemwise_sub": "elemwise_sub", "_Mul": "elemwise_mul", "_mul": "elemwise_mul",
           "_sparse_elemwise_mul": "elemwise_mul", "_sparse_dot": "dot"}
#: attributes an alias requires beyond its sibling's (SyncBatchNorm's cross-device key)
EXTRA_ATTRS = {"_contrib_SyncBatchNorm": {"key": "k"}}
#: the sibling's cases an alias's MXNet kernel takes (BatchNorm_v1: 4-D data only)
ONLY_CASES = {"BatchNorm_v1": [0]}
#: translations measured against MXNet by whole-block tests (inputs an op case cannot draw)
MEASURED_ELSEWHERE = {"_contrib_ROIAlign": "tests/test_translate_roi.py",
                      "_contrib_box_nms": "tests/test_translate_box.py",
                      "_contrib_box_non_maximum_suppression": "tests/test_translate_box.py"}


def _aliases():
    """{alias: (sibling, its cases)} for every translated name without cases of its own."""
    translated = [e for e in entries() if e.status == "translated" and not e.user]
    by_fn = collections.defaultdict(list)
    for e in translated:
        by_fn[e.translate].append(e.name)
    out = {}
    for e in translated:
        if e.name in CASES or e.name in MEASURED_ELSEWHERE:
            continue
        sibs = [n for n in by_fn[e.translate] if n in CASES]
        same = [n for n in sibs if values._is_np(n) == values._is_np(e.name)] or sibs
        sib = SIBLING.get(e.name, same[0] if same else None)
        cases = [Case(c.inputs, dict(c.attrs, **EXTRA_ATTRS.get(e.name, {})), c.tol64)
                 for k, c in enumerate(CASES.get(sib, [])) if k in ONLY_CASES.get(e.name, [k])]
        out[e.name] = (sib, cases)
    return out


ALIASES = _aliases()


def test_every_translated_name_is_measured_against_mxnet():
    translated = {e.name for e in entries() if e.status == "translated" and not e.user}
    own, alias = translated & set(CASES), {n for n, (_, cases) in ALIASES.items() if cases}
    assert not translated - own - alias - set(MEASURED_ELSEWHERE), sorted(translated - own - alias)
    assert len(own) >= 390 and len(alias) >= 220, (len(own), len(alias), len(translated))


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_alias_value_and_gradient(name):
    values.check_op(name, ALIASES[name][1])
