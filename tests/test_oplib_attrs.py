"""One parser for MXNet node attributes (issue 41): ``gate.attr_value`` judges a symbol's attribute
text for :class:`gate.Attrs` and is what the op registry's translations read through
``parse_attr``; an attacker's attribute (code in a string, deep nesting, a ``str`` subclass that
chooses its own text) is a one-line ``TranslationError`` on both callers, never evaluated."""
import ast
import json

import pytest

from dualdl.port.translate.errors import TranslationError
from dualdl.port.translate.gate import Attrs, attr_value
from dualdl.port.translate.gate import parse_attr as gate_parse_attr
from dualdl.port.translate.oplib import Expr, OpNode, parse_attr, translate_op
from dualdl.port.translate.oplib import base as oplib_base


class _Chooser(str):
    """A str subclass whose text is not what ``str`` holds: formatting it would write its own text."""

    def __str__(self):
        return "__import__('os').getcwd()"

    __repr__ = __format__ = lambda self, *a: self.__str__()


ATTACKS = {
    "code": "__import__('os').system('touch P')",
    "code in a tuple": "(0, __import__('os'))",
    "a call in a list": "[1, exec('1')]",
    "a conditional": "1 if True else 2",
    "nested 10 deep": "(" * 10 + "1," + ",)" * 9 + ")",
    "nested 150 deep": "[" * 150 + "]" * 150,
    "nested 3000 deep": "(" * 3000 + ")" * 3000,
    "too long": "(" + "1, " * 3000 + ")",
    "a dunder word": "float32.__class__",
    "a str subclass": _Chooser("1"),
    "not text": 1.5,
}


@pytest.mark.parametrize("key", sorted(ATTACKS))
def test_an_attackers_attribute_is_refused_by_both_callers(key):
    text = ATTACKS[key]
    with pytest.raises(ValueError):
        attr_value(text)
    errors = []
    for read in (lambda: Attrs({"axis": text}, "squeeze", "n1")["axis"],        # the graph readers' gate
                 lambda: parse_attr(text),                                       # the op registry's reader
                 lambda: translate_op(OpNode("squeeze", "n1", {"axis": text}, in_shapes=[(2, 1, 3)]), [Expr("x")]),
                 lambda: translate_op(OpNode("squeeze", "n1", Attrs({"axis": text}, "squeeze", "n1"),
                                             in_shapes=[(2, 1, 3)]), [Expr("x")])):
        with pytest.raises(TranslationError) as e:
            read()
        errors.append(str(e.value))
    for msg in errors:
        assert len(msg.splitlines()) == 1 and "export it again" in msg, msg
        assert "getcwd" not in msg          # the subclass's own text is never what is shown
    assert "node 'n1': its attribute 'axis'" in errors[0] and "node 'n1': its attribute 'axis'" in errors[3]


def test_the_op_registry_has_no_parser_of_its_own():
    assert oplib_base.parse_attr is parse_attr is gate_parse_attr


def _old_parse(v):
    """What oplib's own parser returned before it became the gate's (literal_eval, else the text)."""
    if v in ("True", "true", "False", "false", "None"):
        return {"True": True, "true": True, "False": False, "false": False, "None": None}[v]
    try:
        return ast.literal_eval(v)
    except (ValueError, SyntaxError):
        return v


def test_every_attribute_of_real_exports_parses_as_before():
    """Every attribute text of real model-zoo exports (legacy and numpy-interface ops: conv, pooling,
    BatchNorm, Dense, reshape codes...) reads the same value through the one parser as through the
    old second one: one parser, nothing a real model holds refused."""
    mx = pytest.importorskip("mxnet")
    from mxnet.gluon.model_zoo import vision
    texts = set()
    for net in (vision.mobilenet_v2_0_25(), vision.squeezenet1_1(), vision.resnet18_v2()):
        for n in json.loads(net(mx.sym.var("data")).tojson())["nodes"]:
            texts.update(v for k, v in (n.get("attrs") or {}).items() if not k.startswith("__"))
    assert len(texts) >= 25, sorted(texts)
    for t in sorted(texts):
        assert parse_attr(t) == _old_parse(t) and type(parse_attr(t)) is type(_old_parse(t)), t
    assert parse_attr("inf") == float("inf") and parse_attr(None, (1,)) == (1,)
