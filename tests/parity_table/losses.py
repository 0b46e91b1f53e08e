"""Loss rows: dualdl.losses.<name>(*args, **kwargs)(input, target) on each backend against
torch.nn.<name>, every reduction where it changes the numbers. (CTCLoss: tests/test_losses.py;
the losses as modules, dualdl.nn.<name>, and torch's own module_db inputs: tests/test_losses_nn.py.)"""
import numpy as np

from dualdl.testing.spec import In, idx, loss, pos, unit

P = (4, 3)

# SYM: also on Symbols, in a hybridized block (the losses that need NDArrays, or an (N, C) input
# there, leave it out)
SYM = frozenset({"train", "float64", "hybridize"})

ROWS = [
    *[loss(n, [P, P], reduction=r, checks=SYM, id=r) for n in ("MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss")
      for r in ("mean", "sum", "none")],
    *[loss("SmoothL1Loss", [(5, 3, 2), (5, 3, 2)], beta=b, reduction=r, id=f"beta {b} {r}")
      for b in (0.5, 0.0) for r in ("mean", "none")],
    *[loss("HuberLoss", [(5, 3, 2), (5, 3, 2)], delta=0.7, reduction=r, id=f"delta 0.7 {r}") for r in ("sum", "none")],
    loss("HuberLoss", [(2, 3, 4), (2, 3, 4)], delta=0.3, id="delta 0.3, 3-d"),
    loss("MSELoss", [(1,), (1,)], id="size 1"),
    *[loss("BCEWithLogitsLoss", [P, unit(*P)], reduction=r, checks=SYM, id=r) for r in ("mean", "sum", "none")],
    *[loss("KLDivLoss", [P, unit(*P)], reduction=r, checks=SYM, id=r) for r in ("batchmean", "sum", "none")],
    loss("KLDivLoss", [P, P], reduction="batchmean", log_target=True, id="log_target"),
    *[loss(n, [(6, 5), idx((6,), 5)], reduction=r, id=r) for n in ("NLLLoss", "CrossEntropyLoss")
      for r in ("mean", "sum", "none")],
    loss("CrossEntropyLoss", [(3, 5, 4), idx((3, 4), 5)], id="(N,C,d)"),
    loss("CrossEntropyLoss", [(6, 5), idx((6,), 5)], label_smoothing=0.15, id="label_smoothing"),
    loss("CrossEntropyLoss", [(6, 5), idx((6,), 5)], ignore_index=1, id="ignore_index"),
    loss("CrossEntropyLoss", [(6, 5), unit(6, 5)], id="probability targets"),
    loss("NLLLoss", [(1, 2), idx((1,), 2)], id="batch 1"),
    loss("BCEWithLogitsLoss", [P, unit(*P)], pos_weight=None, id="pos_weight None"),
    loss("L1Loss", [pos(2, 2), pos(2, 2)], id="positive"),
]



def _signs(f, a, b, y):
    """MarginRanking/CosineEmbedding targets are -1/+1: drawn as 0/1 class indices, mapped here
    (torch tensor: .float(); NDArray/Symbol: astype)."""
    return f(a, b, (y * 2 - 1).float() if hasattr(y, "float") else (y * 2 - 1).astype("float32"))


ROWS += [
    *[loss("BCELoss", [unit(*P), unit(*P)], reduction=r, id=r) for r in ("mean", "sum", "none")],
    *[loss("MarginRankingLoss", [(6,), (6,), idx((6,), 2)], margin=m, reduction=r, call=_signs,
           id=f"margin {m} {r}") for m in (0.0, 0.3) for r in ("mean", "none")],
    *[loss("CosineEmbeddingLoss", [(5, 4), (5, 4), idx((5,), 2)], margin=m, reduction=r, call=_signs,
           id=f"margin {m} {r}") for m in (0.0, 0.2) for r in ("mean", "sum")],
    *[loss("TripletMarginLoss", [(4, 5), (4, 5), (4, 5)], margin=1.0, p=p, swap=s, reduction=r,
           id=f"p {p} swap {s} {r}") for p in (2.0, 1.0) for s in (False, True) for r in ("mean", "none")],
    *[loss("PoissonNLLLoss", [P, pos(*P)], log_input=li, full=fu, reduction=r, id=f"log_input {li} full {fu} {r}")
      for li, fu in ((True, False), (True, True)) for r in ("mean", "none")],
    loss("PoissonNLLLoss", [pos(*P), pos(*P)], log_input=False, id="log_input False"),
    *[loss("GaussianNLLLoss", [P, P, pos(*P)], full=fu, reduction=r, id=f"full {fu} {r}")
      for fu in (False, True) for r in ("mean", "none")],
    loss("GaussianNLLLoss", [P, P, pos(4, 1)], id="var (N, 1)"),
]



def _class_weight(C):
    """A per-class weight for the constructor: a torch tensor for torch.nn, numpy for dualdl."""
    w = np.linspace(0.5, 2.0, C).astype(np.float32)

    def make(nn):
        if nn.__name__.startswith("torch"):
            import torch
            return torch.tensor(w)
        return w
    return make


def _labels(f, x, y):
    """Multi-label targets: every other row ends at column 2 (its first negative entry, torch's
    convention); the drawn indices may repeat a class, which torch counts twice."""
    if hasattr(y, "clone"):
        y = y.clone()
        y[::2, 2] = -1
    else:
        from mxnet import nd
        a = y.asnumpy()
        a[::2, 2] = -1
        y = nd.array(a, dtype=a.dtype)
    return f(x, y)


# the margin losses of issue 34
ROWS += [
    *[loss("MultiMarginLoss", [(5, 4), idx((5,), 4)], p=p, margin=m, reduction=r, checks=SYM,
           id=f"p {p} margin {m} {r}") for p, m in ((1, 1.0), (2, 0.5)) for r in ("mean", "sum", "none")],
    loss("MultiMarginLoss", [(5, 4), idx((5,), 4)], lambda nn: (2, 0.7, _class_weight(4)(nn)), id="weight p 2"),
    loss("MultiMarginLoss", [(4,), idx((), 4)], reduction="sum", id="unbatched"),
    *[loss("MultiLabelMarginLoss", [(4, 5), idx((4, 5), 5)], reduction=r, call=_labels, id=r)
      for r in ("mean", "sum", "none")],
    *[loss("SoftMarginLoss", [(4, 3), (4, 3)], reduction=r, checks=SYM, id=r) for r in ("mean", "sum", "none")],
    *[loss("MultiLabelSoftMarginLoss", [(4, 3), unit(4, 3)], reduction=r, checks=SYM, id=r)
      for r in ("mean", "sum", "none")],
    loss("MultiLabelSoftMarginLoss", [(2, 3, 4), unit(2, 3, 4)], lambda nn: (_class_weight(4)(nn),),
         reduction="none", id="weight 3-d"),
    *[loss("HingeEmbeddingLoss", [(4, 3), In((4, 3), "ties", grad=False)], margin=m, reduction=r, checks=SYM,
           id=f"margin {m} {r}") for m in (1.0, 0.5) for r in ("mean", "none")],
]
