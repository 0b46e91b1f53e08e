"""``optim.step_if_finite(..., meanwhile=...)``, on both adapters: ``meanwhile`` runs once per call,
whether or not the step is applied, after the step is queued (MXNet's guarded operator) or before
the check (MXNet's check-then-step path, torch). dl.Trainer reads the loss and marks the gradients
to add again there; tests/test_mx_trainer_grads.py and test_mx_guarded_step.py check its numbers."""
import importlib

import numpy as np
import pytest

import dualdl as dl

from _trainer_models import MLP, base_weights, data


def _backward(m, backend, x, y, bad: bool):
    """MSE backward through ``m``; ``bad``: gradients NaN (0 * inf)."""
    if backend == "torch":
        import torch
        loss = ((m(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean()
        (loss * float("inf") * 0.0 if bad else loss).backward()
        return
    from mxnet import autograd, nd
    with autograd.record():
        loss = ((m(nd.array(x)) - nd.array(y)) ** 2).mean()
        if bad:
            loss = loss * float("inf") * 0.0
    loss.backward()


def _weights(m, backend):
    if backend == "torch":
        return [p.detach().numpy().copy() for p in m.parameters()]
    from mxnet import nd
    nd.waitall()
    return [p.data().asnumpy() for p in m.parameters()]


@pytest.mark.parametrize("backend, path", [("torch", "check first"), ("mxnet", "guarded"),
                                           ("mxnet", "check first")])
def test_meanwhile_runs_once_between_queueing_the_step_and_reading_its_check(backend, path, monkeypatch):
    from dualdl_mx.fast import kernels
    if path == "guarded" and not kernels.available():
        pytest.skip("dualdl's MXNet kernels could not be built here")
    if path == "check first" and backend == "mxnet":
        monkeypatch.setattr(kernels, "_loaded", False)
    impl = importlib.import_module("dualdl_torch.optim" if backend == "torch" else "dualdl_mx.optim")
    with dl.use(backend):
        m = MLP()
        dl.load_state_dict(m, base_weights("mlp"), strict=True)
        opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    params = list(m.parameters()) if backend == "torch" else list(m.collect_params().values())
    cache: dict = {}
    for s, bad in enumerate((None, False, True, False)):
        x, y, _ = data("mlp", 10, seed=s)
        opt.zero_grad()
        _backward(m, backend, x, y, bool(bad))
        if bad is None:                     # the first step builds the momenta (and MXNet's plan)
            assert impl.step_if_finite(opt, params, cache)
            continue
        before = _weights(m, backend)
        seen = []

        def meanwhile():
            seen.append([not np.array_equal(a, b) for a, b in zip(before, _weights(m, backend))])
        applied = impl.step_if_finite(opt, params, cache, None, meanwhile)
        assert applied is not bad
        assert len(seen) == 1, "meanwhile must run exactly once per call"
        # queued (guarded): a finite step has already been applied when meanwhile waits for it;
        # check first: nothing has been applied yet
        assert all(seen[0]) is (path == "guarded" and not bad)
        assert any(seen[0]) is (path == "guarded" and not bad)
        changed = [not np.array_equal(a, b) for a, b in zip(before, _weights(m, backend))]
        assert all(changed) is (not bad) and any(changed) is (not bad)
    if path == "guarded":
        assert cache["finite_guard"][1] is not None          # the steps did take the guarded operator
