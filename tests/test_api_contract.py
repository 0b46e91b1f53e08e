"""The contract beyond layers: optimizers, schedulers, losses and the data classes take torch
2.13's parameters (names, kinds, defaults) on both backends, and the signatures the docs write
out use the code's parameter names. Each departure is listed here with its reason."""
import inspect
import pathlib
import re

import pytest
import torch
import torch.utils.data as TD

import dualdl as dl
import dualdl.distributed as ddist
import dualdl.losses as L
import dualdl.losses.functional as LF
import dualdl.optim.lr_scheduler as LS
import dualdl.optim.lr_scheduler_warmup as LW
import dualdl_mx.optim as MO
import dualdl_mx.optim_adaptive as MA
import dualdl_torch.optim as TO
import dualdl_torch.optim_adaptive as TA

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
OPTIMIZERS = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam"]


def params(fn, drop=()):
    return [(p.name, p.kind, type(p.default), p.default) for p in inspect.signature(fn).parameters.values()
            if p.name != "self" and p.name not in drop]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizers_take_torchs_signature_on_both_backends(name):
    """MXNet's implementation takes torch.optim's parameters exactly (``foreach``/``fused`` accepted
    as kernel choices, ``differentiable``/``capturable`` refused when True: test_parity_optim_more)."""
    ref = params(getattr(torch.optim, name).__init__)
    mx = getattr(MO, name, None) or getattr(MA, name)
    to = getattr(TO, name, None) or getattr(TA, name)
    assert params(mx.__init__) == ref
    assert issubclass(to, getattr(torch.optim, name))
    assert params(to.__init__) == ref


def _scheduler_impl(name):
    return getattr(LS, "_" + name, None) or getattr(LW, "_" + name, None) or getattr(LW, name)


@pytest.mark.parametrize("name", LS.__all__)
def test_schedulers_take_torchs_signature(name):
    """torch's scheduler on torch; dualdl's own (same recurrences) on MXNet, same parameters."""
    assert params(_scheduler_impl(name).__init__) == params(getattr(torch.optim.lr_scheduler, name).__init__)


LOSS_DEPARTURES = {"check_log_probs": "CTCLoss/ctc_loss: dualdl checks that log_probs are log-softmax "
                                      "outputs (MXNet's CTC takes logits); check_log_probs=False skips it"}
LOSSES = [n for n in L.__all__ if n.endswith("Loss") and n != "Loss"]


@pytest.mark.parametrize("name", LOSSES)
def test_losses_take_torchs_signature(name):
    assert params(getattr(L, name).__init__, LOSS_DEPARTURES) == params(getattr(torch.nn, name).__init__)


@pytest.mark.parametrize("name", LF.__all__)
def test_functional_losses_take_torchs_signature(name):
    assert params(getattr(LF, name), LOSS_DEPARTURES) == params(getattr(torch.nn.functional, name))


# dualdl's data classes: torch's names; where a parameter differs, why (reproducible, seed-based
# epoch orders on both backends instead of torch.Generator objects; a length is accepted for a dataset)
DATA_DEPARTURES = {
    "RandomSampler": ("seed", "replacement", "num_samples", "generator"),
    "DistributedSampler": ("seed",),          # None: dualdl.random.initial_seed(), else 0 (torch: 0)
    "BatchSampler": ("drop_last",),           # default False (torch: required)
    "DataLoader": ("shuffle", "pin_memory", "generator", "prefetch_factor", "persistent_workers",
                   "pin_memory_device", "in_order", "seed", "backend", "device", "float_dtype"),
}


@pytest.mark.parametrize("name", ["SequentialSampler", "RandomSampler", "BatchSampler", "DistributedSampler",
                                  "DataLoader", "Subset", "TensorDataset"])
def test_data_classes_use_torchs_parameter_names(name):
    drop = DATA_DEPARTURES.get(name, ())
    assert params(getattr(dl.data, name).__init__, drop) == params(getattr(TD, name).__init__, drop)


@pytest.mark.parametrize("owner", [dl.data.DataLoader, dl.data.RandomSampler, dl.data.DistributedSampler,
                                   dl.Trainer])
def test_state_dict_methods_use_the_documented_names(owner):
    """dualdl's resumable objects: ``state_dict()`` and ``load_state_dict(state)`` (docs/data.md,
    docs/training.md)."""
    assert [p[0] for p in params(owner.load_state_dict)] == ["state"]
    assert [p[0] for p in params(owner.state_dict)] == []


def test_renamed_parameters_keep_positional_use():
    assert list(dl.data.DistributedSampler(5, 2, 1, shuffle=False)) == \
        list(dl.data.DistributedSampler(dataset=range(5), num_replicas=2, rank=1, shuffle=False)) == [1, 3, 0]
    a = dl.data.TensorDataset([1, 2], [3, 4])
    assert a[1] == (2, 4)


# `Name(arg, ...)` as the docs write a signature out: the names must be the code's parameters, in order
DOCUMENTED = {"SequentialSampler": dl.data.SequentialSampler, "RandomSampler": dl.data.RandomSampler,
              "BatchSampler": dl.data.BatchSampler, "DistributedSampler": dl.data.DistributedSampler,
              "shard": ddist.shard}


def _documented_signatures():
    for page in sorted(DOCS.glob("*.md")):
        for m in re.finditer(r"`(?:[\w.]+\.)?(\w+)\(([^`()]*)\)(?: -> [^`]*)?`", page.read_text()):
            values = re.findall(r"=\s*([^,]+)", m.group(2))
            if m.group(1) in DOCUMENTED and all(v.strip() in ("None", "True", "False") or
                                                not v.strip().isidentifier() for v in values):
                yield page.name, m.group(1), m.group(2)     # a signature (a call passes names)


def test_the_docs_found_signatures_to_check():
    assert {name for _, name, _ in _documented_signatures()} >= {"SequentialSampler", "DistributedSampler", "shard"}


@pytest.mark.parametrize("page,name,args", list(_documented_signatures()))
def test_documented_signatures_use_the_codes_parameter_names(page, name, args):
    target = DOCUMENTED[name]
    code = [p[0] for p in params(target.__init__ if inspect.isclass(target) else target)]
    written = [a.split("=")[0].strip().lstrip("*") for a in args.split(",") if a.strip() not in ("*", "")]
    assert all(w in code for w in written), f"{page}: {name}({args}) vs {code}"
    assert [c for c in code if c in written] == written, f"{page}: {name}({args}) order vs {code}"
