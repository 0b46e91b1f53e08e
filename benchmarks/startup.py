"""Start-up costs, each measured in fresh subprocesses (interleaved A B A B ...):

* ``import dualdl``: wall time of the import itself (target <= 50 ms), checked to import no
  framework, next to ``import numpy`` (which dualdl needs) as a reference;
* import to first training step: from the first import to the end of one MLP training step,
  dualdl (``import dualdl`` + write-once model + ``dl.optim``) vs native (``import torch`` /
  ``import mxnet`` + native model + native optimizer), per backend.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, List

from .harness import Config, Row, case, ratio_row, value_row

IMPORT_TARGET_S = 0.050
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_IMPORT = r"""
import sys, time, json
t0 = time.perf_counter()
import {mod}
dt = time.perf_counter() - t0
print(json.dumps({{"t": dt, "frameworks": sorted(m for m in ("torch", "mxnet") if m in sys.modules)}}))
"""

_IMPORT_AFTER_NUMPY = r"""
import sys, time, json
import numpy
t0 = time.perf_counter()
import dualdl
dt = time.perf_counter() - t0
print(json.dumps({"t": dt, "frameworks": sorted(m for m in ("torch", "mxnet") if m in sys.modules)}))
"""

_FIRST_STEP = {
    "dualdl-torch": r"""
import time, json
t0 = time.perf_counter()
import numpy as np
import dualdl as dl
from benchmarks.models import MLP
with dl.use("torch"):
    net = MLP(64, 128, 10)
    x, y = dl.from_numpy(np.ones((32, 64), np.float32)), dl.from_numpy(np.zeros(32, np.int64))
opt = dl.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
loss = dl.losses.CrossEntropyLoss()(net(x), y); opt.zero_grad(); loss.backward(); opt.step()
print(json.dumps({"t": time.perf_counter() - t0}))
""",
    "native-torch": r"""
import time, json
t0 = time.perf_counter()
import numpy as np
import torch
F = torch.nn.functional
net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(),
                          torch.nn.Linear(128, 10))
x, y = torch.from_numpy(np.ones((32, 64), np.float32)), torch.from_numpy(np.zeros(32, np.int64))
opt = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
loss = F.cross_entropy(net(x), y); opt.zero_grad(); loss.backward(); opt.step()
print(json.dumps({"t": time.perf_counter() - t0}))
""",
    "dualdl-mxnet": r"""
import time, json
t0 = time.perf_counter()
import numpy as np
import dualdl as dl
from benchmarks.models import MLP
with dl.use("mxnet"):
    net = MLP(64, 128, 10)
    x, y = dl.from_numpy(np.ones((32, 64), np.float32)), dl.from_numpy(np.zeros(32, np.int64))
opt = dl.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
from mxnet import autograd, nd
opt.zero_grad()
with autograd.record():
    loss = dl.losses.CrossEntropyLoss()(net(x), y)
loss.backward(); opt.step(); nd.waitall()
print(json.dumps({"t": time.perf_counter() - t0}))
""",
    "native-mxnet": r"""
import time, json
t0 = time.perf_counter()
import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(128, activation="relu", in_units=64), gluon.nn.Dense(128, activation="relu", in_units=128),
        gluon.nn.Dense(10, in_units=128))
net.initialize(mx.init.Xavier())
tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 1e-3, "momentum": 0.9})
x, y = nd.array(np.ones((32, 64), np.float32)), nd.array(np.zeros(32, np.float32))
with autograd.record():
    loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
loss.backward(); tr.step(32); nd.waitall()
print(json.dumps({"t": time.perf_counter() - t0}))
""",
}


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_snippet(code: str, timeout: float = 300.0) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                       env=_env(), cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed: {r.stderr.strip()[-1500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def interleave_subprocesses(snippets: Dict[str, str], repeats: int) -> Dict[str, List[dict]]:
    out: Dict[str, List[dict]] = {k: [] for k in snippets}
    labels = list(snippets)
    for r in range(repeats):
        for k in labels[r % len(labels):] + labels[:r % len(labels)]:
            out[k].append(run_snippet(snippets[k]))
    return out


@case("startup", "import")
def import_time(cfg: Config) -> List[Row]:
    """``import dualdl`` in fresh interpreters (no framework may be imported)."""
    n = 2 if cfg.quick else 15
    res = interleave_subprocesses({"dualdl": _IMPORT.format(mod="dualdl"), "numpy": _IMPORT.format(mod="numpy"),
                                   "dualdl-after-numpy": _IMPORT_AFTER_NUMPY}, n)
    fw = sorted({f for d in res["dualdl"] + res["dualdl-after-numpy"] for f in d["frameworks"]})
    note = "no framework imported" if not fw else f"IMPORTED {', '.join(fw)}"
    rows = [value_row("startup", "import dualdl (numpy already imported)",
                      [d["t"] for d in res["dualdl-after-numpy"]], target=IMPORT_TARGET_S,
                      note=note + "; dualdl's own import cost"),
            value_row("startup", "import dualdl (incl. numpy)", [d["t"] for d in res["dualdl"]],
                      note=note + "; numpy's import is most of it (next row)", frameworks_imported=fw),
            value_row("startup", "import numpy (reference)", [d["t"] for d in res["numpy"]])]
    if fw:
        rows[0].ok = rows[1].ok = False
    return rows


@case("startup", "first_step")
def first_step(cfg: Config) -> List[Row]:
    """Import to the end of the first MLP training step, dualdl vs native, per backend."""
    n = 2 if cfg.quick else 5
    rows = []
    for be in ("torch", "mxnet"):
        res = interleave_subprocesses({"dualdl": _FIRST_STEP[f"dualdl-{be}"],
                                       "native": _FIRST_STEP[f"native-{be}"]}, n)
        times = {k: [d["t"] for d in v] for k, v in res.items()}
        rows.append(ratio_row("startup", f"import -> first step / {be}", times, "dualdl", "native",
                              note="fresh interpreter; MLP 64-128-128-10, batch 32", backend=be))
    return rows
