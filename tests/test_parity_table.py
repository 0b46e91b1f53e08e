"""The parity table (tests/parity_table/): for every row, the dualdl entry on torch, on MXNet and on
MXNet hybridized against PyTorch's own torch.nn / torch.nn.functional, from the same random weights
and inputs: forward, input and parameter gradients, the weights after one SGD step (train mode),
forward and gradients in eval mode, in float32 (|d| <= 1e-5 x max(1, |ref|)) and float64 (1e-12).
Measured maxima per row are printed as a table with ``pytest -s``."""
import numpy as np
import pytest

from dualdl.nn import LAYERS
from dualdl.testing.spec import CANDIDATES, run_spec

from parity_table import ROWS

pytest.importorskip("torch")
pytest.importorskip("mxnet")

RESULTS = {}
# entries without a row, and why
NO_ROW = {
    "ModuleList": "not callable (containers API: tests/test_nn_layers.py)",
    "ModuleDict": "not callable (containers API: tests/test_nn_layers.py)",
    "PositionalEncoding": "dualdl's own layer, torch has none (tests/test_parity_transformer.py)",
    "CTCLoss": "needs normalised log-probs and lengths: against torch in tests/test_losses.py",
    **dict.fromkeys([f"Lazy{kind}{n}d" for kind in ("Conv", "ConvTranspose") for n in (1, 2, 3)],
                    "materialized at the first call; against torch in tests/test_nn_conv_pool_more.py and "
                    "torch's module_db (tests/test_module_db.py)"),
}


@pytest.fixture(scope="module", autouse=True)
def _print_table():
    yield
    cands = list(CANDIDATES)
    print("\n\nparity table: max abs (max rel to the largest reference value) against torch.nn / F")
    print(f"| entry | dtype | " + " | ".join(cands) + " |")
    for (label, dtype), r in RESULTS.items():
        cells = [f"{r.max_abs[c]:.1e} ({r.max_rel[c]:.1e})" if c in r.max_abs else "-" for c in cands]
        print(f"| {label} | {dtype} | " + " | ".join(cells) + " |")


def _ids():
    seen = {}
    out = []
    for row in ROWS:
        key = f"{row.kind}:{row.label}"
        seen[key] = seen.get(key, 0) + 1
        out.append(key if seen[key] == 1 else f"{key}#{seen[key]}")
    return out


@pytest.mark.parametrize("row", ROWS, ids=_ids())
def test_row(row):
    failures = []
    for dtype in ("float32", "float64") if "float64" in row.checks else ("float32",):
        r = run_spec(row, dtype)
        RESULTS[(f"{row.kind} {row.label}", dtype)] = r
        failures += [f"{dtype}: {f}" for f in r.failures]
        for k in r.known:
            print(f"{row.label} {dtype} known: {k}")
        assert r.max_abs, f"{row.label} {dtype}: nothing was compared"
    assert not failures, f"{row.label}:\n  " + "\n  ".join(failures)


def test_every_layer_op_and_loss_has_a_row():
    """Adding an entry to dualdl is adding its row: an entry without one (and without a reason in
    NO_ROW) fails here."""
    from dualdl import losses, ops
    have = {(r.kind, r.name) for r in ROWS}
    entries = [("layer", n) for n in LAYERS] + [("op", n) for n in ops.__all__] + \
              [("loss", n) for n in dir(losses) if n.endswith("Loss") and isinstance(getattr(losses, n), type)
               and issubclass(getattr(losses, n), losses.Loss) and n != "Loss" and not n.startswith("_")]
    missing = [f"{k} {n}" for k, n in entries if (k, n) not in have and n not in NO_ROW]
    assert not missing, f"entries without a parity-table row (add one to tests/parity_table/): {missing}"


def test_check_parity_by_backend_name():
    """check_parity's reference and candidate are backend names: torch against MXNet hybridized,
    and the roles swapped (MXNet as reference), give the same small differences."""
    from dualdl import nn
    from dualdl.testing import check_parity

    def factory():
        return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))

    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    hyb = check_parity(factory, x, candidate="mxnet:hybridized", locate=False)
    swapped = check_parity(factory, x, reference="mxnet", candidate="torch", locate=False)
    assert hyb.passed and swapped.passed
    assert "mxnet model hybridized" in hyb.notes and "reference mxnet, candidate torch" in swapped.notes
    assert max(d.max_abs for d in hyb.diffs) < 1e-5 and max(d.max_abs for d in swapped.diffs) < 1e-5
    with pytest.raises(ValueError, match="hybridized"):
        check_parity(factory, x, candidate="mxnet:compiled")


def test_the_table_check_can_fail():
    """A wrong reference, a perturbed weight, a wrong output dtype and a stale known divergence are
    reported as failures;
    a tolerance override without a reason is refused."""
    import torch
    from dualdl.testing.spec import In, Intermittent, layer, op
    wrong = run_spec(layer("ReLU", (4, 3), ref=torch.nn.Sigmoid))
    assert any("output[0]" in f for f in wrong.failures)
    off_by_eps = run_spec(op("mul", (4, 3), 1.0 + 1e-9, ref=lambda a, b: a * 1.0), "float64")
    assert off_by_eps.failures, "1e-9 relative off must fail the float64 check"
    wrong_dtype = run_spec(op("eye", In((1,), grad=False), call=lambda f, x: f(3, dtype=x.dtype), checks=("train",),
                              ref=lambda n, dtype: torch.eye(n, dtype=torch.float64)))
    assert all(any(f.startswith(f"{c} train output[0]: dtype float32, reference float64") for f in wrong_dtype.failures)
               for c in ("torch", "mxnet")), wrong_dtype.failures
    stale = run_spec(layer("ReLU", (4, 3), known={"float32 mxnet": "made up"}))
    assert any("no longer occurs" in f for f in stale.failures)
    absent = run_spec(layer("ReLU", (4, 3), known={"float32 mxnet": Intermittent("made up")}))
    assert not absent.failures and not absent.known, absent.failures
    with pytest.raises(ValueError, match="needs a reason"):
        layer("ReLU", (4, 3), tol=1e-3)
    with pytest.raises(ValueError, match="unknown checks"):
        layer("ReLU", (4, 3), checks=("train", "speed"))
