"""The project converter's table for MXNet's numpy interface (mx.np / npx) and d2l's helpers:
same form as :mod:`dualdl.port.project.table` (``API``: qualified Gluon name -> replacement
expression; ``METHODS``: method name -> (kind, target); ``TODO``: prefix -> why not converted),
merged there; ``CALLS`` holds :func:`convert_np_call`.

``OPS`` lists the ``mx.np`` / ``npx`` functions that are operators: each goes to the translator's op
registry (``oplib.lookup(op)``, the entry a traced ``_npi_tanh`` node also takes), with the numpy
function's positional parameters (``"x"`` an array input, ``"*"`` a list of arrays, any other name
an MXNet attribute, so ``npx.one_hot(x, 28)`` is ``depth=28``). Array creation (``np.array``,
``np.zeros``: float32 unless told, on ``ctx``), ``np.dot`` (the registry needs the ranks the
source lacks; so do ``np.transpose`` without axes and ``npx.batch_dot``) and ``npx.set_np`` go to
:mod:`dualdl.port.project.torch_runtime_numpy`."""
from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

_NP, _NPX = "mxnet.np.", "mxnet.npx."
API: Dict[str, str] = {
    _NPX + "set_np": "g2t.set_np", _NPX + "reset_np": "g2t.set_np",
    _NPX + "cpu": "g2t.cpu", _NPX + "gpu": "g2t.gpu", _NPX + "num_gpus": "g2t.num_gpus",
    _NPX + "waitall": "g2t.waitall",
    _NP + "ndarray": "torch.Tensor", _NP + "array": "g2t.np_array",
    _NP + "zeros": "g2t.np_zeros", _NP + "ones": "g2t.np_ones", _NP + "dot": "g2t.np_dot",
    _NP + "transpose": "g2t.np_transpose", _NP + "arange": "g2t.np_arange",
    _NP + "full": "g2t.np_full", _NP + "linspace": "g2t.np_linspace", _NP + "eye": "g2t.np_eye",
    _NPX + "batch_dot": "g2t.npx_batch_dot",
    _NP + "zeros_like": "torch.zeros_like", _NP + "ones_like": "torch.ones_like",
    _NP + "random.normal": "g2t.np_random_normal", _NP + "random.uniform": "g2t.np_random_uniform",
    _NP + "random.seed": "torch.manual_seed",
    _NP + "float32": "torch.float32", _NP + "float64": "torch.float64",
    _NP + "int32": "torch.int32", _NP + "int64": "torch.int64",
    # ``dataset = gluon.data.vision`` (d2l's load_data_fashion_mnist): the module as a value
    "mxnet.gluon.data.vision": "g2t.vision",
}

#: ``p.list_ctx()`` and ``p.data()`` of a Gluon Parameter (torch's parameter is its own data)
METHODS: Dict[str, Tuple[str, str]] = {
    "list_ctx": ("fn", "g2t.list_ctx"), "data": ("fn", "g2t.data"),
}

TODO: Dict[str, str] = {
    **{_NP + f: "MXNet's max/min give every tied element the gradient; the registry's torch twin "
                "is a helper class (TiedMax) the converter does not write into a project yet"
       for f in ("max", "min", "amax", "amin")},
    _NP + "random": "this mx.np.random function has no torch twin in gluon2torch yet",
}

_UNARY = ("tanh", "exp", "log", "sin", "cos", "sqrt", "abs", "square", "sign", "floor", "ceil",
          "reciprocal", "sinh", "cosh", "log1p", "expm1", "arctan", "log2", "log10", "arcsin",
          "arccos", "tan", "trunc")
_REDUCE = ("axis", "dtype", "out", "keepdims")
#: qualified numpy-interface function -> (registry op, positional parameters)
OPS: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    **{_NP + f: (f"_npi_{f}", ("x",)) for f in _UNARY},
    **{_NP + f: (f"_npi_{f}", ("x", "x")) for f in (
        "add", "subtract", "multiply", "true_divide", "maximum", "minimum", "power", "matmul",
        "equal", "not_equal", "greater", "greater_equal", "less", "less_equal")},
    _NP + "divide": ("_npi_true_divide", ("x", "x")),
    _NP + "sum": ("_np_sum", ("x",) + _REDUCE), _NP + "mean": ("_npi_mean", ("x",) + _REDUCE),
    _NP + "argmax": ("_npi_argmax", ("x", "axis")), _NP + "argmin": ("_npi_argmin", ("x", "axis")),
    _NP + "reshape": ("_np_reshape", ("x", "newshape")),
    _NP + "expand_dims": ("_npi_expand_dims", ("x", "axis")),
    _NP + "squeeze": ("_np_squeeze", ("x", "axis")), _NP + "tile": ("_npi_tile", ("x", "reps")),
    _NP + "repeat": ("_np_repeat", ("x", "repeats", "axis")),
    _NP + "cumsum": ("_np_cumsum", ("x", "axis", "dtype", "out")),
    _NP + "prod": ("_np_prod", ("x",) + _REDUCE), _NP + "flip": ("_npi_flip", ("x", "axis")),
    _NP + "clip": ("_npi_clip", ("x", "a_min", "a_max")),
    _NP + "concatenate": ("_npi_concatenate", ("*", "axis")),
    _NP + "stack": ("_npi_stack", ("*", "axis")),
    _NPX + "relu": ("_npx_relu", ("x",)), _NPX + "sigmoid": ("_npx_sigmoid", ("x",)),
    _NPX + "softmax": ("_npx_softmax", ("x", "axis")),
    _NPX + "log_softmax": ("_npx_log_softmax", ("x", "axis")),
    _NPX + "one_hot": ("_npx_one_hot", ("x", "depth", "on_value", "off_value", "dtype")),
}

_COMMUTATIVE = ("add", "multiply", "maximum", "minimum")


_STAND_IN = 987654301


def _literal(node: Any) -> bool:
    import ast
    import libcst as cst
    try:
        ast.literal_eval(cst.Module([]).code_for_node(node))
    except (ValueError, SyntaxError):
        return False
    return True


def _number(node: Any) -> bool:
    import libcst as cst
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


#: keyword names of the numpy signatures that are array inputs, not MXNet attributes
_INPUT_KEYWORDS = ("a", "x", "x1", "x2", "data", "arrays", "seq")


def convert_np_call(qualified: str, call: Any, converter: Any) -> Any:
    """An ``mx.np``/``npx`` operator call (:data:`OPS`) through the op registry: positional
    arguments named by the numpy signature (attributes as keywords, a list of arrays as the
    inputs), the registry's ``F.`` (its ``torch.nn.functional``) spelled out. None for a name
    :data:`OPS` lacks; the call unchanged under a TODO line when the registry refuses it."""
    import libcst as cst
    from .table import normalize
    spec = OPS.get(normalize(qualified))
    if spec is None:
        return None
    op, params = spec
    inputs: List[Any] = []
    keywords: List[Any] = []
    why = ""
    for i, a in enumerate(call.args):
        if a.star:
            why = "*args of an operator call"
        elif a.keyword is not None:
            if a.keyword.value in _INPUT_KEYWORDS:
                inputs.append(a.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT))
            elif a.keyword.value in params:
                keywords.append(a)
            else:                 # an attribute the registry would not read: never drop it
                why = f"keyword {a.keyword.value}= is none of its attributes {params[1:]}"
        elif i >= len(params):
            why = f"argument {i + 1}: the numpy signature has {len(params)} positional parameters"
        elif params[i] == "x":
            inputs.append(a)
        elif params[i] == "*":
            if not isinstance(a.value, (cst.List, cst.Tuple)):
                why = "a sequence of arrays that is no list or tuple literal"
            else:
                inputs += [cst.Arg(e.value) for e in a.value.elements]
        else:
            keywords.append(a.with_changes(keyword=cst.Name(params[i]), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""),
                whitespace_after=cst.SimpleWhitespace(""))))
        if why:
            converter.todo(call, qualified.replace("mxnet.", "mx.", 1), why)
            return call
    code = cst.Module([]).code_for_node
    if params == ("x", "x") and len(inputs) == 2 and not keywords:
        num = [_number(a.value) for a in inputs]
        if num[0] and not num[1] and op.split("_npi_")[-1] in _COMMUTATIVE:
            inputs.reverse()
            num.reverse()
        if num[1] and not num[0]:         # MXNet takes a Python number: the op's _scalar twin
            op += "_scalar"
            keywords = [cst.Arg(inputs.pop().value, keyword=cst.Name("scalar"))]
    held = []       # an input that is no name, written as one (the registry may use it twice)
    for k, a in enumerate(inputs):
        if not isinstance(a.value, cst.Name):
            name = f"_a{k}"
            held.append((name, code(a.value), isinstance(a.value, (cst.Attribute, cst.Call,
                                                                   cst.Subscript))))
            inputs[k] = a.with_changes(value=cst.Name(name))
    for k, a in enumerate(keywords):      # an attribute that is an expression (depth=len(vocab)):
        if not _literal(a.value):         # an integer stand-in the registry passes through
            stand_in = str(_STAND_IN + k)
            held.append((stand_in, code(a.value), False))
            keywords[k] = a.with_changes(value=cst.Integer(stand_in))
    plain = call.with_changes(args=[a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                                    for a in inputs + keywords])
    new = converter._op_call(call, plain, op, qualified)
    if new is plain:                     # refused: the TODO line is written, the source kept
        return call
    text = re.sub(r"(?<![\w.])F\.", "torch.nn.functional.", code(new))
    lost = [h for h in held if h[0].isdigit() and len(re.findall(rf"\b{h[0]}\b", text)) != 1]
    if lost:
        converter.todo(call, qualified.replace("mxnet.", "mx.", 1),
                       f"the attribute {lost[0][1]} is computed on by the registry: give a literal")
        return call
    twice = [h for h in held if len(re.findall(rf"\b{h[0]}\b", text)) > 1]
    for name, src, atomic in held:
        if (name, src, atomic) not in twice:
            text = re.sub(rf"(?<=[(\[,=] ){name}(?=[,)\]])|(?<=[(\[=]){name}(?=[,)\]])",
                          lambda _m: src, text)          # a whole argument: no parentheses
            text = re.sub(rf"\b{name}\b", lambda _m: src if atomic else f"({src})", text)
    import ast
    import builtins
    known = {n.id for n in ast.walk(ast.parse(code(call))) if isinstance(n, ast.Name)}
    helper = sorted({n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)} - known -
                    {"torch", "g2t"} - {h[0] for h in held} - set(dir(builtins)))
    if helper:            # the registry's twin is a helper definition a project does not hold
        converter.todo(call, qualified.replace("mxnet.", "mx.", 1),
                       f"its torch twin needs the registry's helper {helper[0]}, not written "
                       f"into a project yet")
        return call
    if twice:
        text = (f"(lambda {', '.join(h[0] for h in twice)}: {text})"
                f"({', '.join(h[1] for h in twice)})")
    return new if text == code(new) else cst.parse_expression(text)


CALLS = [convert_np_call]


def whole_array_write(original: Any, updated: Any, converter: Any) -> Any:
    """``x[:] = v`` / ``x[:] *= v`` (d2l's ``sgd``: ``param[:] = param - lr * param.grad / n``)
    -> ``with g2t.unrecorded(): x[:] = v``: MXNet records nothing outside ``autograd.record()``,
    torch refuses an in-place write on a leaf that requires grad. None for any other line."""
    import libcst as cst
    st = updated.body[0] if len(updated.body) == 1 else None
    if isinstance(st, cst.Assign) and len(st.targets) == 1:
        target = st.targets[0].target
    elif isinstance(st, cst.AugAssign):
        target = st.target
    else:
        return None
    whole = isinstance(target, cst.Subscript) and len(target.slice) == 1 and \
        isinstance(target.slice[0].slice, cst.Slice) and \
        all(getattr(target.slice[0].slice, k) is None for k in ("lower", "upper", "step"))
    if not whole:
        return None
    return cst.With(items=[cst.WithItem(cst.parse_expression("g2t.unrecorded()"))],
                    body=cst.SimpleStatementSuite(body=[st],
                                                  trailing_whitespace=updated.trailing_whitespace),
                    leading_lines=updated.leading_lines)


def discarded_detach(original: Any, updated: Any, converter: Any) -> Any:
    """A discarded ``s.detach()`` (d2l's ``train_epoch_ch8``: ``for s in state: s.detach()``)
    -> ``s.detach_()``: a no-op in MXNet, which never backpropagates into an earlier
    ``record()`` graph; torch would ("backward through the graph a second time"). A kept one
    (``h = h.detach()``) is left alone (None)."""
    import libcst as cst
    body = updated.body[0] if len(updated.body) == 1 else None
    if not (isinstance(body, cst.Expr) and isinstance(body.value, cst.Call) and
            isinstance(body.value.func, cst.Attribute) and not body.value.args and
            body.value.func.attr.value == "detach"):
        return None
    func = body.value.func.with_changes(attr=cst.Name("detach_"))
    return updated.with_changes(body=[body.with_changes(value=body.value.with_changes(func=func))])


STATEMENTS = [discarded_detach, whole_array_write]
