"""The proof over the real run: the Gluon script and its converted PyTorch script each run for
``steps`` updates, unmodified, in their own processes, on the same data (a synthetic dataset
in the files the script reads), from the same initial weights, and every update is compared:
the batch, the learning rate, the loss, each gradient as the update uses it and each weight
after it.

Hides what differs between two runs of "the same" script: the Gluon side's weights come from
MXNet's RNG (the converted run starts from the Gluon run's initial weights:
``GLUON2TORCH_LOAD``); the shuffling order comes from numpy's global RNG on both sides (seeded
alike); the data files are served locally (``gluon_driver``). Float32 on both sides; the verdict
by measured rounding: the converted script runs a third time in float64, and each row of the
Gluon float32 run must lie within ``ROUNDING_RATIO`` x torch's own float32 distance from it (or
float32's resolution of the update's loss and largest tensor of that kind). Where that fails,
the Gluon script runs again in float64 too and the two float64 runs decide (the float32
allowance scaled to float64): rounding that crossed a ReLU's or a max-pool's kink is then
proven, and named. Without float64 runs: ``atol + rtol * max|gluon|`` (defaults 1e-6, 1e-4).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

__all__ = ["ScriptProof", "prove_scripts"]

#: what the proof sets in the Gluon run it starts (dualdl/config.py lists them); never inherited from the caller
_GLUON_RUN_VARIABLES = ("DUALDL_PROOF_RECORD", "DUALDL_PROOF_STEPS", "DUALDL_PROOF_SEED",
                        "DUALDL_PROOF_DTYPE")


@dataclass
class ScriptProof:
    steps: int
    passed: bool = False
    max_diff: Dict[str, float] = field(default_factory=dict)     # kind -> max abs difference
    first_failure: str = ""
    seconds: Dict[str, float] = field(default_factory=dict)
    torch_modules: List[str] = field(default_factory=list)
    evidence: str = "float32 only (atol + rtol * scale)"
    usage: float = 0.0          # the largest row distance / its allowance (float64 evidence)
    note: str = ""              # how a pass was reached (float32 rounding across a kink)
    max_diff64: Dict[str, float] = field(default_factory=dict)   # gluon64 - torch64, by kind

    def summary(self) -> str:
        diffs = ", ".join(f"{k} {v:.3g}" for k, v in self.max_diff.items())
        t = ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items())
        return (f"proof over {self.steps} update(s) by {self.evidence}: "
                f"{'passed' if self.passed else 'FAILED'} (max abs gluon32 - torch32: {diffs}; "
                f"worst row {self.usage:.3g}x its allowance; {t})" +
                (f"; first failure: {self.first_failure}" if self.first_failure else "") +
                (f"; {self.note}" if self.note else ""))


def _run(cmd: Sequence[str], env: Dict[str, str], cwd: str, timeout: float) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(list(cmd), env=env, cwd=cwd, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-6:])
        name = next((os.path.basename(c) for c in cmd if c.endswith(".py")), cmd[-1])
        raise RuntimeError(f"{name} failed "
                           f"(exit {r.returncode}):\n{tail}")
    return time.perf_counter() - t0


def prove_scripts(gluon_script: str, torch_script: str, workdir: str, steps: int = 4,
                  args: Sequence[str] = (), seed: int = 0, atol: float = 1e-6,
                  rtol: float = 1e-4, timeout: float = 600.0,
                  python: Optional[str] = None, float64: bool = True,
                  nproc: int = 1) -> ScriptProof:
    """Run both scripts in ``workdir`` (their data folders there, e.g. ``write_mnist(workdir +
    '/data')``) for ``steps`` updates and compare every update (see the module docstring).
    ``nproc`` > 1: the converted script runs as that many torch.distributed processes (``dualdl
    launch``, gloo on CPU), one per device of its ``split_and_load`` list, rank 0 recorded."""
    py = python or sys.executable
    g_rec, t_rec = os.path.join(workdir, "gluon_run.npz"), os.path.join(workdir, "torch_run.npz")
    base = {k: v for k, v in os.environ.items() if not k.startswith("GLUON2TORCH_") and k not in _GLUON_RUN_VARIABLES}
    proof = ScriptProof(steps)
    # MXNET_HOME: the datasets' default roots (``$MXNET_HOME/datasets/<name>``) in the proof's
    # folder, on both sides, where the writers put them (proof_data), never the user's cache
    base["MXNET_HOME"] = os.path.abspath(workdir)
    g_env = dict(base, DUALDL_PROOF_RECORD=g_rec, DUALDL_PROOF_STEPS=str(steps),
                 DUALDL_PROOF_SEED=str(seed), MXNET_ENGINE_TYPE="NaiveEngine")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    g_env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [base.get("PYTHONPATH")] if p])
    gluon_cmd = [py, "-m", "dualdl.port.project.gluon_driver", os.path.abspath(gluon_script), *args]
    proof.seconds["gluon run"] = _run(gluon_cmd, g_env, workdir, timeout)
    t_env = dict(base, GLUON2TORCH_RECORD=t_rec, GLUON2TORCH_STEPS=str(steps),
                 GLUON2TORCH_SEED=str(seed), GLUON2TORCH_LOAD=g_rec + ".init.npz",
                 GLUON2TORCH_RANDOM=g_rec,     # the random choices the Gluon run recorded
                 PYTHONPATH=os.path.dirname(os.path.abspath(torch_script)))
    torch_cmd = [py, os.path.abspath(torch_script), *args]
    if nproc > 1:                       # the launcher imports dualdl; the ranks do not
        torch_cmd = [py, "-m", "dualdl", "launch", "--nproc", str(nproc), "--backend", "torch",
                     "--timeout", str(timeout), *torch_cmd[1:]]
        t_env["PYTHONPATH"] = os.pathsep.join([t_env["PYTHONPATH"], root])
    proof.seconds["torch run"] = _run(torch_cmd, t_env, workdir, timeout)
    t64 = None
    if float64:
        t64_rec = os.path.join(workdir, "torch64_run.npz")
        proof.seconds["torch float64 run"] = _run(
            torch_cmd, dict(t_env, GLUON2TORCH_RECORD=t64_rec, GLUON2TORCH_DTYPE="float64"),
            workdir, timeout)
        t64 = np.load(t64_rec)
    g, t = np.load(g_rec), np.load(t_rec)
    proof.torch_modules = [str(m) for m in t["modules"]] if "modules" in t.files else []
    _compare(proof, g, t, steps, atol, rtol, t64, nproc)
    if not proof.passed and t64 is not None and VALUE_FAILURE in proof.first_failure:
        g64_rec = os.path.join(workdir, "gluon64_run.npz")
        env = dict(g_env, DUALDL_PROOF_RECORD=g64_rec, DUALDL_PROOF_DTYPE="float64")
        try:
            proof.seconds["gluon float64 run"] = _run(gluon_cmd, env, workdir, timeout)
        except RuntimeError as e:
            last = str(e).strip().splitlines()[-1][:160]
            proof.first_failure += f"; the Gluon script has no float64 run to settle it ({last})"
            return proof
        _float64_both(proof, np.load(g64_rec), t, t64, steps, nproc)
    return proof


#: how much further from float64 MXNet's float32 run may land than torch's float32 run (as
#: dualdl.testing.native_reference's ROUNDING_RATIO: MXNet's float32 log_softmax)
ROUNDING_RATIO = 64.0
_EPS32 = float(np.finfo(np.float32).eps)


def _scales(rec: Any, keys: Sequence[str]) -> Dict[str, float]:
    """The largest magnitude of each kind of row (``grad``, ``param``...) among ``keys``."""
    scale: Dict[str, float] = {}
    for k in keys:
        v = np.abs(np.asarray(rec[k], np.float64))
        kind = k.split("/")[1]
        scale[kind] = max(scale.get(kind, 0.0), float(v.max()) if v.size else 0.0)
    return scale


def _compare(proof: ScriptProof, g: Any, t: Any, steps: int, atol: float, rtol: float,
             t64: Any = None, nproc: int = 1) -> None:
    bad = [m for m in proof.torch_modules if m in ("mxnet", "gluonnlp", "gluoncv", "dualdl")]
    if bad:
        proof.first_failure = f"the converted run imported {bad}"
        return
    failed: set = set()
    for s in range(steps):
        gk = sorted(k for k in g.files if k.startswith(f"{s}/"))
        if not gk:
            proof.first_failure = f"the Gluon run made {s} update(s), not {steps}"
            return
        # a tensor is judged on the scale of all tensors of its kind in the update: a gradient
        # through a train-mode BatchNorm (a conv bias before it) cancels to rounding noise
        # (1e-5 on gluon_cnn_bn.py), and so does the weight it updates
        scale = _scales(g, gk)
        # the floor as check_native_training's reference rows: float32's resolution of the
        # update's loss and of the value (a gradient rounds like the loss terms it sums: a BERT
        # classifier bias, 7.3e-7 from float64 where eps32 * |grad| is 5e-9)
        loss = abs(float(t64[f"{s}/loss"])) if t64 is not None and f"{s}/loss" in t64.files else 0.0
        for k in gk:
            kind = k.split("/")[1]
            if k not in t.files:
                if nproc > 1 and kind == "input":
                    continue                # a block call on another process's device
                proof.first_failure = f"update {s}: the converted run has no {k[len(str(s)) + 1:]}"
                return
            a, b = np.asarray(g[k], np.float64), np.asarray(t[k], np.float64)
            if a.shape != b.shape:
                proof.first_failure = (f"update {s}: {k[len(str(s)) + 1:]} has shape "
                                       f"{a.shape} in Gluon, {b.shape} in torch")
                return
            d = float(np.abs(a - b).max()) if a.size else 0.0
            proof.max_diff[kind] = max(proof.max_diff.get(kind, 0.0), d)
            tol = 0.0 if kind == "batch" else atol + rtol * scale.get(kind, 0.0)
            if t64 is not None and kind != "batch" and k in t64.files:
                # by measured rounding: Gluon's float32 run against the converted script run
                # in float64, within ROUNDING_RATIO x torch's own float32 distance from it
                r = np.asarray(t64[k], np.float64)
                own = float(np.abs(b - r).max()) if r.size else 0.0
                d = float(np.abs(a - r).max()) if r.size else 0.0
                tol = ROUNDING_RATIO * max(own, _EPS32 * _floor(kind, scale.get(kind, 0.0), loss))
                proof.evidence = "float64 run of the converted script"
                proof.usage = max(proof.usage, d / tol if tol else (0.0 if d == 0 else np.inf))
            if d > tol:
                failed.add((s, kind))
            if d > tol and not proof.first_failure:
                how = ("is {:.3g} from the converted script's float64 run (allowance {:.3g}: {:g}x "
                       "torch's own float32 distance)" if t64 is not None and kind != "batch"
                       else "differs by {:.3g} (tolerance {:.3g})")
                proof.first_failure = (f"update {s}: {k[len(str(s)) + 1:]} " +
                                       how.format(d, tol, ROUNDING_RATIO) +
                                       (": the batches differ (data or shuffling order)"
                                        if kind == "batch" else ""))
    proof.passed = not proof.first_failure
    if not proof.passed and t64 is not None:
        proof.first_failure += _kinks(proof.first_failure, t64, failed)


KINK_NOTE = " -- likely float32 rounding across a kink"
#: a row whose value left its float32 allowance (not a missing row, a shape, a batch)
VALUE_FAILURE = " from the converted script's float64 run"
_EPS64 = float(np.finfo(np.float64).eps)


def _floor(kind: str, scale: float, loss: float) -> float:
    """The scale below which a row's rounding is resolution, not amplification: the update's
    largest tensor of that kind, and for gradients and the loss the loss itself (a gradient
    rounds like the loss terms it sums: check_native_training's reference rows)."""
    return max(scale, loss if kind in ("grad", "loss") else 0.0)


def _float64_both(proof: ScriptProof, g64: Any, t32: Any, t64: Any, steps: int,
                  nproc: int = 1) -> None:
    """A float32 verdict that failed, settled in float64 on both sides: the Gluon script ran again
    in float64 (``DUALDL_PROOF_DTYPE``: ``gluon_driver._float64_run``, the float32 run's initial
    weights and batches cast), and every row of every update must lie within the float32
    allowance scaled to float64 (``64 max(|t32 - t64| eps64/eps32, eps64 floor)``: the run's own
    amplification of rounding, measured by torch's float32 distance, applied to float64
    rounding) of the converted script's float64 run; batches exactly. Then both programs compute
    the same updates and the float32 failure was float32 rounding (across a kink, where the
    float64 run noted one): proven, with a note saying so."""
    worst, row, diffs = 0.0, "", {}
    for s in range(steps):
        keys = [k for k in g64 if k.startswith(f"{s}/") and k.split("/")[1] != "kinks"]
        if not keys:
            row = f"update {s}: the Gluon float64 run made {s} update(s)"
            break
        scale = _scales(g64, keys)
        loss = abs(float(t64[f"{s}/loss"])) if f"{s}/loss" in t64 else 0.0
        for k in keys:
            kind = k.split("/")[1]
            if k not in t64:
                if kind != "input" or nproc == 1:
                    row = row or f"update {s}: the converted float64 run has no {k[len(str(s)) + 1:]}"
                continue
            a, b = np.asarray(g64[k], np.float64), np.asarray(t64[k], np.float64)
            if a.shape != b.shape:
                row = row or f"update {s}: {k[len(str(s)) + 1:]} has shape {a.shape} / {b.shape}"
                continue
            d = float(np.abs(a - b).max()) if a.size else 0.0
            diffs[kind] = max(diffs.get(kind, 0.0), d)
            own = (float(np.abs(np.asarray(t32[k], np.float64) - b).max())
                   if k in t32 and np.shape(t32[k]) == b.shape and b.size else 0.0)
            tol = 0.0 if kind == "batch" else ROUNDING_RATIO * max(
                own * _EPS64 / _EPS32, _EPS64 * _floor(kind, scale[kind], loss))
            worst = max(worst, d / tol if tol else (0.0 if d == 0 else np.inf))
            if d > tol and not row:
                row = f"update {s}: {k[len(str(s)) + 1:]} differs by {d:.3g} (allowance {tol:.3g})"
    proof.max_diff64 = diffs
    if row:
        proof.first_failure += f"; the float64 runs of both scripts differ too: {row}"
        return
    failure = proof.first_failure.split(KINK_NOTE)[0]
    s = int(failure.split()[1].rstrip(":")) if failure.startswith("update ") else 0
    where = sorted({n.split(":")[0].split(" in ", 1)[1] for n in
                    (str(x) for x in t64[f"{s}/kinks"]) if " in " in n.split(":")[0]}) \
        if f"{s}/kinks" in t64 else []
    d64 = ", ".join(f"{k} {v:.2g}" for k, v in diffs.items() if k != "batch")
    how = (f"float32 rounding crossed a kink at {', '.join(where) or 'a ReLU/max-pool'} in "
           f"update {s}" if KINK_NOTE in proof.first_failure else
           f"float32 rounding moved Gluon's float32 run past its allowance from update {s}")
    proof.note = (f"{how} (Gluon's float32 run: {failure}); every update proven by the float64 "
                  f"runs of both scripts (max abs gluon64 - torch64: {d64}; worst row "
                  f"{worst:.2g}x its allowance)")
    proof.passed, proof.first_failure = True, ""
    proof.evidence, proof.usage = "float64 on both sides", worst


def _kinks(failure: str, t64: Any, failed: set) -> str:
    """The cause to name when the float64 run had inputs within float32 rounding of a kink (a
    ReLU at 0, a max-pool's two largest) that carried a gradient, at or before the failing update:
    a float32 run that lands on the kink's other side drops or moves that gradient (a jump, not
    rounding; measured on gluon_cnn_bn.py: a ReLU input +4.0e-7 in float64 is -2.7e-6 after
    MXNet's float32 BatchNorm, 7.8e-6 from float64 where torch's is 1.0e-6, and the conv weight's
    gradient jumps by 5.9e-3). Exact ties are no cause: both route to the window's first.
    Named only where a gradient fails first and that update's loss agrees (a kink moves the
    forward by rounding only; a model converted wrong shows in the loss)."""
    if not failure.startswith("update ") or " grad/" not in failure:
        return ""
    s = int(failure.split()[1].rstrip(":"))
    if (s, "loss") in failed:
        return ""
    seen = [f"update {u}: " + "; ".join(str(k) for k in t64[f"{u}/kinks"])
            for u in range(s + 1) if f"{u}/kinks" in t64.files]
    if not seen:
        return ""
    return (" -- likely float32 rounding across a kink, not a conversion error: the converted "
            "script's float64 run had " + " | ".join(seen) + "; a float32 run (MXNet's rounds "
            "BatchNorm ~8x coarser than torch's) can land on the other side and drop or move that "
            "gradient; prove again with another --seed (other batches) or on the real data")
