"""``mx.metric`` objects as source: ``make_metric()`` rebuilds the same metric (composite
included) from the torch-only classes of torch_src/metrics.py."""
from __future__ import annotations

from typing import Any, List

from .emit import RecipeError, SourceFile, lit

_SRC = "dualdl.port.recipe.torch_src.metrics"


def _ctor(m: Any, used: List[str]) -> str:
    import mxnet as mx
    M = mx.metric
    kind = type(m).__name__
    if isinstance(m, M.CompositeEvalMetric):
        used.append("CompositeEvalMetric")
        inner = ", ".join(_ctor(c, used) for c in m.metrics)
        return f"CompositeEvalMetric([{inner}], name={lit(m.name)})"
    simple = {"Accuracy": lambda: f"Accuracy(axis={lit(m.axis)}, name={lit(m.name)})",
              "TopKAccuracy": lambda: "TopKAccuracy(top_k={}, name={})".format(
                  lit(m.top_k), lit(m.name[:-len(f"_{m.top_k}")])),
              "CrossEntropy": lambda: f"CrossEntropy(eps={lit(m.eps)}, name={lit(m.name)})",
              "NegativeLogLikelihood": lambda: f"NegativeLogLikelihood(eps={lit(m.eps)}, "
                                               f"name={lit(m.name)})",
              "F1": lambda: f"F1(name={lit(m.name)}, average={lit(m.average)})",
              "MAE": lambda: f"MAE(name={lit(m.name)})",
              "MSE": lambda: f"MSE(name={lit(m.name)})",
              "RMSE": lambda: f"RMSE(name={lit(m.name)})",
              "Perplexity": lambda: f"Perplexity(ignore_label={lit(m.ignore_label)}, "
                                    f"axis={lit(m.axis)}, name={lit(m.name)})",
              "Loss": lambda: f"Loss(name={lit(m.name)})"}
    if kind not in simple or type(m).__module__ != "mxnet.metric":
        raise RecipeError(f"metric {type(m).__module__}.{kind} has no translation; supported: "
                          f"{', '.join(sorted(simple))}, CompositeEvalMetric")
    used.append(kind)
    return simple[kind]()


def emit_metrics(sf: SourceFile, metric: Any) -> None:
    """``metric``: an ``mx.metric`` object, a list of them (made a CompositeEvalMetric), or the
    names ``mx.metric.create`` takes ('acc', ['acc', 'top_k_acc'], ...)."""
    import mxnet as mx
    if isinstance(metric, str) or (isinstance(metric, (list, tuple))
                                   and any(isinstance(m, str) for m in metric)):
        try:  # 'acc', ['acc', 'ce'], as mx.metric.create takes them
            metric = mx.metric.create(list(metric) if isinstance(metric, tuple) else metric)
        except (ValueError, AssertionError, KeyError) as e:
            raise RecipeError(f"metrics={metric!r}: mx.metric.create refuses it ({e})") from None
    if isinstance(metric, (list, tuple)):
        comp = mx.metric.CompositeEvalMetric()
        for m in metric:
            comp.add(m)
        metric = comp
    used: List[str] = []
    expr = _ctor(metric, used)
    deps = ["_as_list", "_pairs", "_as_column", "EvalMetric"]
    if "F1" in used:
        deps.append("_Binary")
    if "NegativeLogLikelihood" in used:
        deps.append("CrossEntropy")
    if any(k in used for k in ("MSE", "RMSE")):
        deps.append("MAE")
    sf.use(_SRC, deps + list(dict.fromkeys(used)))
    sf.add(f'''
def make_metric() -> EvalMetric:
    """The Gluon script's evaluation metric: ``update(labels, preds)``, ``get()``, ``reset()``
    as in mx.metric, with MXNet's accounting."""
    return {expr}
''', "make_metric")
