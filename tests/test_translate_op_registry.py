"""The one op registry (dualdl/port/translate/oplib): every operator MXNet 1.9.1 registers that a
forward can record has an entry (translated, refused with its reason, or not applicable), aliases
share one classification, every translation has a measured sample (tests/_op_cases.py), the proof's
float32 facts come from the registry, one decorator signature serves built-in and user
translations, and a duplicate registration is refused."""
import ctypes
import os
import sys

import pytest

mx = pytest.importorskip("mxnet")

from dualdl.port.translate import registry  # noqa: E402
from dualdl.port.translate.oplib import OpNode, entries, float32_ops, lookup, translate_op  # noqa: E402
from dualdl.port.translate.oplib.base import Expr, op  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _op_cases import CASES, ELSEWHERE  # noqa: E402


def _mxnet_ops():
    """MXNet's registered operator names without the backward ops, grouped by alias (one handle)."""
    from mxnet.base import _LIB, OpHandle, c_str, check_call
    groups = {}
    from dualdl_mx.fast.kernels import OPERATORS   # dualdl's own kernels, once an MXNet layer loaded them
    for name in mx.operator.get_all_registered_operators():
        if "_backward" in name or name in OPERATORS:
            continue
        h = OpHandle()
        check_call(_LIB.NNGetOpHandle(c_str(name), ctypes.byref(h)))
        groups.setdefault(h.value, []).append(name)
    return groups


def test_every_registered_op_is_classified_and_no_other():
    groups = _mxnet_ops()
    names = {n for g in groups.values() for n in g}
    ours = {e.name for e in entries() if not e.user or e.replaces is not None}   # a user's own op names aside
    assert sorted(names - ours) == [], "MXNet ops without a registry entry (classify them in oplib/)"
    assert sorted(ours - names) == [], "registry entries MXNet 1.9.1 does not register"
    for g in groups.values():     # an alias is what MXNet stores for the same op: one classification
        statuses = {n: lookup(n).status for n in g}
        assert len(set(statuses.values())) == 1, statuses
    for e in entries():     # a refusal says why; a translation has its torch form for the docs
        assert e.torch.strip() if e.status == "translated" else len(e.reason) > 20, e


def test_counts_per_family():
    from collections import Counter
    c = Counter((e.family, e.status) for e in entries())
    print("MEASURED op counts", dict(sorted(c.items())))
    assert c[("legacy", "translated")] >= 250 and c[("numpy", "translated")] >= 150
    assert c[("contrib", "translated")] >= 12


def test_every_translation_has_a_measured_sample():
    sampled = {id(lookup(n).translate) for n in CASES if lookup(n).translate is not None}
    missing = [e.name for e in entries() if e.status == "translated" and not e.user
               and id(e.translate) not in sampled and e.name not in ELSEWHERE]
    assert missing == [], "translated ops with no case in tests/_op_cases.py"


def test_float32_facts_come_from_the_registry():
    from dualdl.port.translate.verify import FLOAT32_INTERNAL_OPS, FLOAT32_ONLY_OPS
    assert FLOAT32_ONLY_OPS == float32_ops("only") and FLOAT32_INTERNAL_OPS == float32_ops("internal")
    assert {"_contrib_interleaved_matmul_selfatt_qk", "InstanceNorm", "LRN"} <= FLOAT32_ONLY_OPS
    assert {"LeakyReLU", "erfinv", "gammaln", "erf"} <= FLOAT32_INTERNAL_OPS
    # a float32_only fact is MXNet's own refusal of float64 (measured here for one of them)
    x = mx.nd.ones((1, 2, 3, 3), dtype="float64")
    with pytest.raises(mx.base.MXNetError):
        mx.nd.LRN(x, nsize=3).asnumpy()


def _node(op_name, n=1):
    return OpNode(op_name, "n", {}, in_shapes=[(2, 3)] * n, out_shapes=[(2, 3)])


def test_user_translation_same_signature_duplicate_refused_replace_and_restore():
    assert translate_op(_node("log1p"), [Expr("x")]) == "torch.log1p(x)"
    with pytest.raises(ValueError, match="already has a built-in translation.*replace=True"):
        registry.register_translation("log1p", lambda args, attrs, node: f"torch.log(1 + {args[0]})")
    registry.register_translation("log1p", lambda args, attrs, node: f"torch.log(1 + {args[0]})", replace=True)
    try:
        e = translate_op(_node("log1p"), [Expr("x")])
        assert e == "torch.log(1 + x)" and not e.atomic and e.p() == "(torch.log(1 + x))"
        with pytest.raises(ValueError, match="already has a user translation"):
            registry.register_translation("log1p", lambda args, attrs, node: "x")
    finally:
        registry.unregister_translation("log1p")
    assert translate_op(_node("log1p"), [Expr("x")]) == "torch.log1p(x)"
    # a built-in translation has the user signature: (args: torch expressions, attrs: strings, node)
    assert lookup("log1p").translate([Expr("x")], {}, _node("log1p")) == "torch.log1p(x)"
    # a refused op takes a user translation without replace=True
    registry.register_translation("_random_uniform_like", lambda args, attrs, node: f"torch.rand_like({args[0]})")
    try:
        assert translate_op(_node("_random_uniform_like"), [Expr("x")]) == "torch.rand_like(x)"
    finally:
        registry.unregister_translation("_random_uniform_like")
    assert lookup("_random_uniform_like").status == "refused"


def test_builtin_duplicate_refused_and_refusal_says_why():
    with pytest.raises(ValueError, match="registered twice"):
        op("relu")(lambda a, attrs, node: Expr("x"))
    from dualdl.port.translate import TranslationError
    with pytest.raises(TranslationError, match="random sampler.*pass them in"):
        translate_op(_node("_random_uniform_like"), [Expr("x")])
    with pytest.raises(TranslationError, match="not part of a forward.*optimizer update"):
        translate_op(_node("sgd_update", 2), [Expr("w"), Expr("g")])
    with pytest.raises(TranslationError, match="no torch translation"):
        translate_op(_node("no_such_op"), [Expr("x")])


def test_docs_page_is_generated_from_the_registry():
    from dualdl.port.translate.oplib.docs import PAGE, ops_page
    assert PAGE.read_text() == ops_page(), "docs/translate-ops.md is stale: python -m dualdl.port.translate.oplib.docs"
