"""dl.Trainer's step on MXNet as one ``dl_guarded_sgd_mom`` (dualdl_mx/guarded_step): bit for bit
the check-first path on finite steps (two parameter groups, a convolution's weights after an eval
step), a non-finite step not applied (weights, momenta and the plan's learning rate), also right
after a learning-rate change; the operator on its own against ``multi_sgd_mom_update``."""
import os
import subprocess
import sys

import numpy as np
import pytest
from mxnet import nd
from mxnet.base import MXNetError

import dualdl as dl
from dualdl.trainer import NonFiniteLossError
from dualdl_mx.fast import kernels

from _trainer_models import MLP, base_weights, data, make

needs_kernels = pytest.mark.skipif(kernels._compiler() is None, reason="no C++ compiler on PATH")


def _nan_grad_loss(out, y):
    """sqrt(mean(0 * out)) is 0 but its gradient is inf * 0 = NaN."""
    return dl.ops.sqrt(dl.ops.mean(dl.ops.mul(out, 0.0)))


def _state_bits(model, opt):
    """Every weight and every optimizer state array as bytes, with the SGD plan's learning rates,
    read without ``state_dict()`` (which would switch the live state to torch's layout)."""
    ws = [p.data().asnumpy().tobytes() for _, p in sorted(model._collect_params_with_prefix().items())]
    st = [(k, v.asnumpy().tobytes() if isinstance(v, nd.NDArray) else v)
          for g in opt.param_groups for p in g["params"] for k, v in sorted(opt.state.get(p, {}).items())]
    return ws, st


def _run(kind: str, hybrid: bool, guarded: bool, monkeypatch):
    """Six steps, two of them bad, of a model whose parameters are in two groups (their own lr,
    momentum and weight decay); an eval step before each step puts a convolution's weights in
    MKLDNN's layout, which the next training forward turns back."""
    if not guarded:
        monkeypatch.setattr(kernels, "_loaded", False)
    with dl.use("mxnet"):
        m = make(kind, "mxnet")
        dl.load_state_dict(m, base_weights(kind), strict=True)
        if hybrid:
            m.hybridize()
        ps = list(m.parameters())
        opt = dl.optim.SGD([{"params": ps[::2]}, {"params": ps[1::2], "lr": 0.03, "momentum": 0.8, "weight_decay": 0}],
                           lr=0.1, momentum=0.9, weight_decay=1e-3)
        tr = dl.Trainer(m, opt, dl.losses.MSELoss())
    mse = tr.loss_fn
    used = []
    for s in range(6):
        x, y, _ = data(kind, 10, seed=s)
        tr.eval_step(x)
        if s in (2, 4):                       # a bad step; at 4 right after a learning-rate change
            if s == 4:
                opt.param_groups[0]["lr"] = 0.05
            before = _state_bits(m, opt)
            tr.loss_fn = _nan_grad_loss
            with pytest.raises(NonFiniteLossError, match=r"gradient \(largest \|g\|\) nan"):
                tr.train_step(x, y)
            tr.nonfinite = "skip"
            with pytest.warns(RuntimeWarning, match="non-finite gradient"):
                tr.train_step(x, y)
            tr.nonfinite, tr.loss_fn = "raise", mse
            assert _state_bits(m, opt) == before
        tr.train_step(x, y)
        used.append(tr._check_cache.get("finite_guard", (None, None))[1] is not None)
    monkeypatch.undo()
    state = {(i, k): v.asnumpy().tobytes() for i, st in opt.state_dict()["state"].items() for k, v in st.items()
             if hasattr(v, "asnumpy")}
    return _state_bits(m, opt), tr.global_step, used, state


@needs_kernels
@pytest.mark.parametrize("kind", ["mlp", "cnn_bn"])
@pytest.mark.parametrize("hybrid", [False, True])
def test_guarded_steps_match_the_check_first_path_bit_for_bit(kind, hybrid, monkeypatch):
    guarded = _run(kind, hybrid, True, monkeypatch)
    plain = _run(kind, hybrid, False, monkeypatch)
    assert guarded[2][1:] == [True] * 5 and not any(plain[2])      # the guarded step from the 2nd step on
    assert guarded[1] == plain[1] == 6
    assert guarded[0] == plain[0] and guarded[3] == plain[3]


def _sgd_case(rng, sizes):
    ws = [(rng.standard_normal(n) * 10 ** rng.uniform(-3, 2)).astype(np.float32) for n in sizes]
    gs = [(rng.standard_normal(n) * 10 ** rng.uniform(-6, 3)).astype(np.float32) for n in sizes]
    ms = [(rng.standard_normal(n) * 10 ** rng.uniform(-5, 1)).astype(np.float32) for n in sizes]
    return ws, gs, ms


def _guarded_sgd(ws, gs, ms, lrs, wds, momenta, rescales, checked=(), slot=990):
    w, g, m = ([nd.array(a) for a in arrays] for arrays in (ws, gs, ms))
    args = [a for t in zip(w, g, m) for a in t]
    flag = nd.dl_guarded_sgd_mom(*args, *checked, lrs=tuple(lrs), wds=tuple(wds), momenta=tuple(momenta),
                                 rescales=tuple(rescales), num_weights=len(w), num_checked=len(checked), slot=slot)
    return flag.asnumpy()[0], [a.asnumpy() for a in w], [a.asnumpy() for a in m]


@needs_kernels
def test_guarded_sgd_mom_is_multi_sgd_mom_update_bit_for_bit():
    """Per weight, its own lr, weight decay, momentum and rescale, against multi_sgd_mom_update
    called with each weight's values; sizes over the 65536-element blocks; momenta and rescales
    whose decimal strings dmlc's parser rounds differently from strtof (parsed with strtof, the
    results differ)."""
    assert kernels.available()
    rng = np.random.default_rng(0)
    sizes = [1, 7, 1000, 65536, 65537, 200003]
    ws, gs, ms = _sgd_case(rng, sizes)
    lrs = [0.1, 3e-4, 0.0123, 1e-3, 0.5, 2.5e-05]
    wds = [0.0, 1e-4, 5e-4, 0.0, 2.2e-05, 1e-2]
    momenta = [0.9, 2.328093876202697e-05, 0.9000000000000001, 0.0, 0.99, 5.3161571521044015e-06]
    rescales = [1.0, 0.0625, 2.257612183773704e-07, 1 / 3, 8.767507207524373e-08, 1 / 24]
    flag, w, m = _guarded_sgd(ws, gs, ms, lrs, wds, momenta, rescales, checked=[nd.array([1.5], dtype="float64")])
    assert flag == 1.0
    for i in range(len(sizes)):
        ref_w, ref_m = nd.array(ws[i]), nd.array(ms[i])
        nd.multi_sgd_mom_update(ref_w, nd.array(gs[i]), ref_m, lrs=(lrs[i],), wds=(wds[i],), momentum=momenta[i],
                                rescale_grad=rescales[i], num_weights=1, out=[ref_w])
        assert ref_w.asnumpy().tobytes() == w[i].tobytes(), i
        assert ref_m.asnumpy().tobytes() == m[i].tobytes(), i
        assert not np.array_equal(m[i], ms[i])          # a step was taken


@needs_kernels
def test_guarded_sgd_mom_writes_nothing_when_an_element_is_not_finite():
    assert kernels.available()
    rng = np.random.default_rng(1)
    ws, gs, ms = _sgd_case(rng, [5, 17, 70000])
    hp = ([0.1] * 3, [1e-3] * 3, [0.9] * 3, [1.0] * 3)
    cases = [(1, 0, np.nan), (0, 4, np.inf), (2, 69999, -np.inf), (2, 65536, np.nan)]
    for t, i, bad in cases:
        g = [a.copy() for a in gs]
        g[t][i] = bad
        flag, w, m = _guarded_sgd(ws, g, ms, *hp)
        assert flag == 0.0
        assert all(a.tobytes() == b.tobytes() for a, b in zip(w + m, ws + ms))
    for loss in (nd.array([np.nan], dtype="float64"), nd.array([0.0, np.inf])):     # a checked loss
        flag, w, m = _guarded_sgd(ws, gs, ms, *hp, checked=[nd.array([1.0]), loss])
        assert flag == 0.0 and all(a.tobytes() == b.tobytes() for a, b in zip(w + m, ws + ms))
    g = [a.copy() for a in gs]
    g[1][3] = 3e38                                   # huge but finite: no false alarm
    assert _guarded_sgd(ws, g, ms, *hp)[0] == 1.0


@needs_kernels
def test_guarded_sgd_mom_says_what_is_wrong():
    assert kernels.available()
    w, g, m = nd.zeros((3,)), nd.zeros((3,)), nd.zeros((3,))
    with pytest.raises(MXNetError, match="lrs, wds, momenta and rescales must each hold num_weights"):
        nd.dl_guarded_sgd_mom(w, g, m, lrs=(0.1, 0.2), wds=(0.0,), momenta=(0.9,), rescales=(1.0,),
                              num_weights=1, num_checked=0, slot=989).wait_to_read()
    with pytest.raises(MXNetError, match="gradient and momentum must have its shape"):
        nd.dl_guarded_sgd_mom(w, nd.zeros((4,)), m, lrs=(0.1,), wds=(0.0,), momenta=(0.9,), rescales=(1.0,),
                              num_weights=1, num_checked=0, slot=989).wait_to_read()
    with pytest.raises(MXNetError, match="float32 weights, gradients and momenta"):
        nd.dl_guarded_sgd_mom(w, g, nd.zeros((3,), dtype="float64"), lrs=(0.1,), wds=(0.0,), momenta=(0.9,),
                              rescales=(1.0,), num_weights=1, num_checked=0, slot=989).wait_to_read()


@needs_kernels
def test_the_checks_result_without_waiting_for_the_operators_after_it():
    """dl_finite_guard_wait gives the check of the slot's step queued since dl_finite_guard_arm:
    -1 (after its timeout) before one is queued, then 1 or 0 as the flag says; the operators
    queued after it need not have run."""
    assert kernels.available()
    arm, wait = kernels.guard_waiter()
    rng = np.random.default_rng(2)
    ws, gs, ms = _sgd_case(rng, [15])
    w, g, m = nd.array(ws[0]), nd.array(gs[0]), nd.array(ms[0])
    arm(992)
    assert wait(992, 1) == -1                        # armed, nothing queued: times out
    for bad in (False, True, False):
        g[1] = np.nan if bad else 1.0
        arm(992)
        flag = nd.dl_guarded_sgd_mom(w, g, m, lrs=(0.1,), wds=(0.0,), momenta=(0.9,), rescales=(1.0,),
                                     num_weights=1, num_checked=0, slot=992)
        later = nd.dot(nd.ones((512, 512)), nd.ones((512, 512)))   # queued after the step
        assert wait(992, 5000) == (0 if bad else 1) == flag.asnumpy()[0]
        later.wait_to_read()


def _inf_loss(out, y):
    """The MSE plus an infinite constant: a non-finite loss whose gradients are all finite."""
    return dl.ops.add(dl.losses.MSELoss()(out, y), float("inf"))


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
@pytest.mark.parametrize("hybrid", [False, True])
def test_a_non_finite_loss_with_finite_gradients_is_not_applied(backend, hybrid):
    """The Trainer reads the loss after the step is queued (MXNet): the guard checks the loss too,
    so the step is undone bit for bit, and training goes on exactly as if the batch never came."""
    if hybrid and backend == "torch":
        pytest.skip("hybridize is MXNet's")

    def build():
        with dl.use(backend):
            m = MLP()
            dl.load_state_dict(m, base_weights("mlp"), strict=True)
            if hybrid:
                m.hybridize()
            opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
            return m, opt, dl.Trainer(m, opt, dl.losses.MSELoss())
    m, opt, tr = build()
    m2, opt2, tr2 = build()
    bits = (lambda: _state_bits(m, opt)) if backend == "mxnet" else \
        (lambda: [t.detach().numpy().tobytes() for t in m.state_dict().values()])
    for s in range(4):
        x, y, _ = data("mlp", 10, seed=s)
        if s == 2:
            before = bits()
            tr.loss_fn = _inf_loss
            with pytest.raises(NonFiniteLossError, match="non-finite loss inf"):
                tr.train_step(x, y)
            assert bits() == before and tr.global_step == 2
            tr.loss_fn = tr2.loss_fn
        assert tr.train_step(x, y) == tr2.train_step(x, y)
    assert tr.global_step == tr2.global_step == 4 and [k for st in tr.skipped_steps for k in st] == ["step", "loss"]
    final = bits()
    m, opt = m2, opt2
    assert final == bits()


@needs_kernels
def test_the_guard_checks_each_steps_loss_array():
    """``step_if_finite(losses=...)``: the guard's loss slot takes each call's array."""
    from dualdl_mx.fast.guarded_step import step_if_finite
    with dl.use("mxnet"):
        m = MLP()
        opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x, y, _ = data("mlp", 10, seed=0)
    params = list(m.collect_params().values())
    cache = {}
    for loss, applied in ((1.0, True), (np.nan, False), (2.0, True), (-np.inf, False), (3.0, True)):
        from mxnet import autograd
        with autograd.record():
            out = ((m(nd.array(x)) - nd.array(y)) ** 2).mean()
        out.backward()
        before = _state_bits(m, opt)
        assert step_if_finite(opt, params, cache, [nd.array([loss])]) is applied
        assert (_state_bits(m, opt) == before) is not applied
    assert cache["finite_guard"][1] is not None           # one guard, its loss slot set per call


_THREADS = """
import ctypes, numpy as np
from mxnet import nd
from dualdl_mx.fast import kernels
assert kernels.available()
rng = np.random.default_rng(3)
sizes = [300000, 7, 200000]                       # over the size at which the operator forks
ws, gs, ms = ([(rng.standard_normal(n) * s).astype(np.float32) for n in sizes] for s in (1.0, 1e-2, 1e-1))
hp = dict(lrs=(0.1, 0.2, 0.3), wds=(1e-4, 0.0, 1e-3), momenta=(0.9, 0.8, 0.7), rescales=(1.0, 0.5, 0.25))
def run(g):
    w, m = [nd.array(a) for a in ws], [nd.array(a) for a in ms]
    args = [a for t in zip(w, [nd.array(a) for a in g], m) for a in t]
    flag = nd.dl_guarded_sgd_mom(*args, num_weights=3, num_checked=0, slot=993, **hp).asnumpy()[0]
    return flag, [a.asnumpy() for a in w + m]
flag, got = run(gs)
same = flag == 1.0
for i in range(3):
    rw, rm = nd.array(ws[i]), nd.array(ms[i])
    nd.multi_sgd_mom_update(rw, nd.array(gs[i]), rm, lrs=(hp["lrs"][i],), wds=(hp["wds"][i],),
                            momentum=hp["momenta"][i], rescale_grad=hp["rescales"][i], num_weights=1, out=[rw])
    same = same and rw.asnumpy().tobytes() == got[i].tobytes() and rm.asnumpy().tobytes() == got[3 + i].tobytes()
bad = [a.copy() for a in gs]
bad[2][199999] = np.nan                           # in the last block of the last weight
flag, after = run(bad)
untouched = flag == 0.0 and all(a.tobytes() == b.tobytes() for a, b in zip(after, ws + ms))
print("threads", ctypes.CDLL("libgomp.so.1").omp_get_max_threads(), "same", same, "untouched", untouched)
"""


@needs_kernels
@pytest.mark.parametrize("threads", ["1", "2"])
def test_guarded_sgd_mom_on_several_threads(threads):
    """With OMP_NUM_THREADS=2 the operator splits 500K elements over two threads: the update is
    still multi_sgd_mom_update's bit for bit, and a NaN in the last block still leaves every array
    as it was."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", _THREADS], capture_output=True, text=True, timeout=240,
                          env=dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS=threads))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"threads {threads} same True untouched True" in done.stdout, done.stdout + done.stderr[-2000:]
