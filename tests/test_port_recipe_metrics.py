"""translate_recipe(metrics=...): the written make_metric() (plain torch) gives mx.metric's numbers
on real random predictions over several batches: counts equal exactly, float32 reductions within
float32 rounding (torch and numpy sum in different orders)."""
import math

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

from dualdl.port.recipe import RecipeError, translate_recipe  # noqa: E402

#: float32 reductions: numpy's pairwise sum vs torch's; measured <= 2.4e-7 relative
REL = 1e-6


def _batches(n_batches=5, batch=16, classes=6, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_batches):
        logits = rng.standard_normal((batch + i, classes)).astype(np.float32)
        prob = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        label = rng.integers(0, classes, batch + i).astype(np.float32)
        out.append((label, prob.astype(np.float32)))
    return out


def _both(metric, batches, as_list=False):
    mod = translate_recipe(metrics=metric).load()
    ours = mod.make_metric()
    for label, pred in batches:
        if as_list:
            metric.update([mx.nd.array(label)], [mx.nd.array(pred)])
            ours.update([torch.from_numpy(label)], [torch.from_numpy(pred)])
        else:
            metric.update(mx.nd.array(label), mx.nd.array(pred))
            ours.update(torch.from_numpy(label), torch.from_numpy(pred))
    return metric, ours


def _close(a, b):
    if isinstance(a, (list, tuple)):
        return all(_close(x, y) for x, y in zip(a, b)) and len(a) == len(b)
    return a == b or abs(a - b) <= REL * abs(a)


@pytest.mark.parametrize("make", [
    lambda: mx.metric.Accuracy(), lambda: mx.metric.TopKAccuracy(top_k=3),
    lambda: mx.metric.CrossEntropy(), lambda: mx.metric.NegativeLogLikelihood(),
    lambda: mx.metric.Perplexity(ignore_label=None), lambda: mx.metric.Perplexity(ignore_label=2),
], ids=["acc", "top3", "ce", "nll", "ppl", "ppl-ignore"])
def test_classification_metrics_equal_mxnet(make):
    metric, ours = _both(make(), _batches(), as_list=True)
    (n1, v1), (n2, v2) = metric.get(), ours.get()
    assert n1 == n2
    assert _close(v1, v2), (v1, v2)
    assert _close(metric.get_global()[1], ours.get_global()[1])
    if "acc" in n1:
        assert v1 == v2  # counts: exact


@pytest.mark.parametrize("average", ["macro", "micro"])
def test_f1_binary_equals_mxnet(average):
    batches = _batches(classes=2, seed=3)
    metric, ours = _both(mx.metric.F1(average=average), batches)
    assert metric.get() == ours.get()
    assert metric.get_global() == ours.get_global()


@pytest.mark.parametrize("cls", ["MAE", "MSE", "RMSE"])
def test_regression_metrics_average_per_batch_like_mxnet(cls):
    rng = np.random.default_rng(5)
    batches = [(rng.standard_normal(n).astype(np.float32),
                rng.standard_normal(n).astype(np.float32)) for n in (7, 13, 4, 30)]
    metric, ours = _both(getattr(mx.metric, cls)(), batches)
    assert metric.get()[0] == ours.get()[0]
    assert _close(metric.get()[1], ours.get()[1]), (metric.get(), ours.get())
    # MXNet's accounting: the mean of per-batch values, not the value over all samples
    label = np.concatenate([b[0] for b in batches])
    pred = np.concatenate([b[1] for b in batches])
    pooled = {"MAE": np.abs(label - pred).mean(), "MSE": ((label - pred) ** 2).mean(),
              "RMSE": math.sqrt(((label - pred) ** 2).mean())}[cls]
    assert abs(ours.get()[1] - pooled) > 1e-4


def test_loss_and_composite_and_reset():
    comp = mx.metric.CompositeEvalMetric()
    for m in (mx.metric.Accuracy(), mx.metric.TopKAccuracy(top_k=2), mx.metric.CrossEntropy()):
        comp.add(m)
    metric, ours = _both(comp, _batches(seed=7))
    names1, values1 = metric.get()
    names2, values2 = ours.get()
    assert names1 == names2 == ["accuracy", "top_k_accuracy_2", "cross-entropy"]
    assert _close(values1, values2)
    ours.reset()
    assert all(math.isnan(v) for v in ours.get()[1])
    loss_m = mx.metric.Loss()
    mod = translate_recipe(metrics=[mx.metric.Loss()]).load()
    ours = mod.make_metric()
    rng = np.random.default_rng(2)
    for _ in range(4):
        losses = rng.random(9).astype(np.float32)
        loss_m.update(None, [mx.nd.array(losses)])
        ours.update(None, [torch.from_numpy(losses)])
    assert _close(loss_m.get()[1], ours.get()[1][0])


def test_metric_names_as_mx_metric_create_takes_them():
    mod = translate_recipe(metrics=["acc", "ce"]).load()
    assert mod.make_metric().get()[0] == ["accuracy", "cross-entropy"]
    with pytest.raises(RecipeError, match="mx.metric.create refuses"):
        translate_recipe(metrics="no-such-metric")


def test_unsupported_metric_is_named():
    with pytest.raises(RecipeError, match="MCC has no translation"):
        translate_recipe(metrics=mx.metric.MCC())
