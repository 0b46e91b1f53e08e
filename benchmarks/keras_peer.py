"""The peer: the same MLP and CNN (LeNet) in Keras 3 on its torch backend, as a ratio to native torch.

Keras lives in its own virtualenv (``benchmarks/.venv-keras``, created on first use with
``torch==2.13.0`` from the local wheel, keras, and numpy<1.24 like the main venv) so it never
touches dualdl's environment. The Keras steps and the native torch steps they are divided by are
timed interleaved in the same subprocess (``_keras_worker.py``). If the venv cannot be built the
peer is skipped with a message.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from typing import List, Optional, Tuple

from .harness import Config, Row, case

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(HERE, ".venv-keras")
REQUIREMENTS = ["torch==2.13.0", "keras>=3,<4", "numpy<1.24"]
STAMP = os.path.join(VENV, ".dualdl-keras-installed")


def _python(root: str = VENV) -> str:
    return os.path.join(root, "bin", "python")


def ensure_venv(log=print, timeout: float = 900.0) -> Tuple[Optional[str], str]:
    """(python of the Keras venv, "") or (None, why it could not be built)."""
    py = _python()
    if os.path.exists(STAMP) and os.path.exists(py):
        return py, ""
    try:
        log(f"[keras] creating {VENV} (torch 2.13.0 + keras; first run only, a few minutes)")
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
        r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", *REQUIREMENTS],
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ERROR")] or r.stderr.strip().splitlines()[-3:]
            return None, f"pip install {' '.join(REQUIREMENTS)} failed: {' '.join(errors)[-500:]}"
        r = subprocess.run([py, "-c", "import keras, torch"], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, KERAS_BACKEND="torch"))
        if r.returncode != 0:
            return None, f"keras does not import in {VENV}: {r.stderr.strip()[-500:]}"
        with open(STAMP, "w") as f:
            f.write(" ".join(REQUIREMENTS) + "\n")
        return py, ""
    except subprocess.TimeoutExpired:
        return None, f"installing keras took longer than {timeout:.0f} s"
    except Exception as e:        # no venv module, no disk, ...
        return None, f"{type(e).__name__}: {e}"


def run_worker(py: str, cfg: Config, timeout: float = 600.0) -> List[Row]:
    env = dict(os.environ, KERAS_BACKEND="torch", PYTHONPATH=os.path.dirname(HERE),
               OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    args = [py, os.path.join(HERE, "_keras_worker.py"), json.dumps(
        {"quick": cfg.quick, "repeats": cfg.repeats, "warmup": cfg.warmup, "min_sample_s": cfg.min_sample_s})]
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"keras worker failed (rc {r.returncode}): {r.stderr.strip()[-1500:]}")
    payload = json.loads(r.stdout.strip().splitlines()[-1])
    rows = [Row(**d) for d in payload["rows"]]
    for row in rows:
        row.extra["versions"] = payload["versions"]
    return rows


@case("peer", "keras")
def keras_peer(cfg: Config) -> List[Row]:
    """Keras 3 (torch backend) MLP and LeNet vs native torch, in its own venv."""
    if not cfg.keras:
        return [Row(group="peer", name="keras", value=float("nan"), unit="s", note="skipped (--no-keras)")]
    py, why = ensure_venv(log=lambda m: print(m, file=sys.stderr, flush=True))
    if py is None:
        print(f"[keras] peer skipped: {why}", file=sys.stderr, flush=True)
        return [Row(group="peer", name="keras", value=float("nan"), unit="s", note=f"skipped: {why}")]
    try:
        return run_worker(py, cfg)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:   # the peer is optional
        why = str(e).strip().splitlines()[-1][:300] if str(e).strip() else type(e).__name__
        print(f"[keras] peer skipped: {e}", file=sys.stderr, flush=True)
        return [Row(group="peer", name="keras", value=float("nan"), unit="s", note=f"skipped: {why}")]
