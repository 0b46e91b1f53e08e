"""Runs inside benchmarks/.venv-keras: Keras 3 (torch backend) train_on_batch vs a native torch
step for the same MLP and LeNet, interleaved; prints one JSON line with the rows.

argv[1]: JSON config {"quick", "repeats", "warmup", "min_sample_s"}. Imports only the harness
(stdlib) from the repository, not dualdl.
"""
from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import keras  # noqa: E402

from benchmarks.harness import ratio_row, time_interleaved  # noqa: E402

LR = 1e-3


def sizes(quick: bool) -> dict:
    if quick:
        return {"mlp": dict(batch=8, d_in=16, d_h=16, d_out=4), "lenet": dict(batch=4)}
    return {"mlp": dict(batch=32, d_in=64, d_h=128, d_out=10), "lenet": dict(batch=32)}


def keras_model(kind: str, s: dict):
    L = keras.layers
    if kind == "mlp":
        m = keras.Sequential([keras.Input((s["d_in"],)), L.Dense(s["d_h"], activation="relu"),
                              L.Dense(s["d_h"], activation="relu"), L.Dense(s["d_out"])])
    else:
        m = keras.Sequential([keras.Input((1, 28, 28)),
                              L.Conv2D(6, 5, padding="same", activation="relu", data_format="channels_first"),
                              L.MaxPooling2D(2, data_format="channels_first"),
                              L.Conv2D(16, 5, activation="relu", data_format="channels_first"),
                              L.MaxPooling2D(2, data_format="channels_first"),
                              L.Flatten(), L.Dense(120, activation="relu"), L.Dense(84, activation="relu"),
                              L.Dense(10)])
    m.compile(optimizer=keras.optimizers.SGD(LR, momentum=0.9),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def torch_model(kind: str, s: dict):
    nn = torch.nn
    if kind == "mlp":
        return nn.Sequential(nn.Linear(s["d_in"], s["d_h"]), nn.ReLU(), nn.Linear(s["d_h"], s["d_h"]), nn.ReLU(),
                             nn.Linear(s["d_h"], s["d_out"]))
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(),
                         nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def main() -> None:
    cfg = json.loads(sys.argv[1])
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    rng = np.random.default_rng(0)
    rows = []
    for kind, s in sizes(cfg["quick"]).items():
        B = s["batch"]
        shape = (B, s["d_in"]) if kind == "mlp" else (B, 1, 28, 28)
        x = rng.standard_normal(shape).astype(np.float32)
        y = rng.integers(0, 10 if kind == "lenet" else s["d_out"], B).astype(np.int64)
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        km = keras_model(kind, s)
        tm = torch_model(kind, s)
        opt = torch.optim.SGD(tm.parameters(), lr=LR, momentum=0.9)

        def native():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(tm(tx), ty)
            loss.backward()
            opt.step()

        def keras_step():
            km.train_on_batch(x, y)

        times = time_interleaved({"native": native, "keras": keras_step}, cfg["repeats"], cfg["warmup"],
                                 cfg["min_sample_s"])
        row = ratio_row("peer", f"{kind} / torch / keras {keras.__version__} train_on_batch", times, "keras",
                        "native", note=f"batch {B}; KERAS_BACKEND=torch", model=kind, backend="torch")
        rows.append(row.to_dict())
    print(json.dumps({"rows": rows, "versions": {"keras": keras.__version__, "torch": torch.__version__,
                                                 "numpy": np.__version__}}))


if __name__ == "__main__":
    main()
