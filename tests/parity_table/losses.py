"""Loss rows: dualdl.losses.<name>(*args, **kwargs)(input, target) on each backend against
torch.nn.<name>, every reduction where it changes the numbers. (CTCLoss: tests/test_losses.py.)"""
from dualdl.testing.spec import idx, loss, pos, unit

P = (4, 3)

ROWS = [
    *[loss(n, [P, P], reduction=r, id=r) for n in ("MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss")
      for r in ("mean", "sum", "none")],
    *[loss("SmoothL1Loss", [(5, 3, 2), (5, 3, 2)], beta=b, reduction=r, id=f"beta {b} {r}")
      for b in (0.5, 0.0) for r in ("mean", "none")],
    *[loss("HuberLoss", [(5, 3, 2), (5, 3, 2)], delta=0.7, reduction=r, id=f"delta 0.7 {r}") for r in ("sum", "none")],
    loss("HuberLoss", [(2, 3, 4), (2, 3, 4)], delta=0.3, id="delta 0.3, 3-d"),
    loss("MSELoss", [(1,), (1,)], id="size 1"),
    *[loss("BCEWithLogitsLoss", [P, unit(*P)], reduction=r, id=r) for r in ("mean", "sum", "none")],
    *[loss("KLDivLoss", [P, unit(*P)], reduction=r, id=r) for r in ("batchmean", "sum", "none")],
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
