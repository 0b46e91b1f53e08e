"""Porting a ~100M-parameter native Gluon model to its native torch twin with ``dualdl.port``:
mapping + verification time, next to mapping only (``verify=False``) and to the hand-written
copy a user would otherwise write (``asnumpy`` -> ``torch.from_numpy`` -> ``load_state_dict``,
no proof). Interleaved over repeats."""
from __future__ import annotations

from typing import List

import numpy as np

from .harness import Config, Row, case, compare


def _models(layers: int, width: int):
    import mxnet as mx
    import torch
    from mxnet.gluon import nn as gnn
    g = gnn.HybridSequential()
    for _ in range(layers):
        g.add(gnn.Dense(width, in_units=width, activation="relu"))
    g.initialize(mx.init.Xavier())
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return g, torch.nn.Sequential(*mods)


@case("port", "gluon_to_torch")
def gluon_to_torch(cfg: Config) -> List[Row]:
    """dl.port.port_gluon_to_torch on a 24 x Linear(2048, 2048) model (100.7 M parameters)."""
    import torch
    import dualdl as dl
    layers, width = (2, 32) if cfg.quick else (24, 2048)
    g, t = _models(layers, width)
    x = np.random.default_rng(0).standard_normal((2, width)).astype(np.float32)
    params = sum(int(np.prod(p.shape)) for p in g.collect_params().values())

    def by_hand():
        sd = {k: torch.from_numpy(p.data().asnumpy())          # same order: weight, bias per layer
              for k, p in zip(t.state_dict(), g.collect_params().values())}
        t.load_state_dict(sd)

    def port_verified():
        rep = dl.port.port_gluon_to_torch(g, t, x)
        assert rep.ok, rep.message

    def port_unverified():
        rep = dl.port.port_gluon_to_torch(g, t, x, verify=False)
        assert rep.complete, rep.message

    rep = dl.port.port_gluon_to_torch(g, t, x)
    runs = Config(quick=cfg.quick, repeats=2 if cfg.quick else 3, warmup=0, min_sample_s=0.0)
    rows = compare("port", {"by hand": by_hand, "port (verify=True)": port_verified,
                            "port (verify=False)": port_unverified}, "by hand", runs,
                   names={"port (verify=True)": "port_gluon_to_torch, verify=True (vs hand-written copy)",
                          "port (verify=False)": "port_gluon_to_torch, mapping only (vs hand-written copy)"},
                   note=f"{params / 1e6:.1f} M params; max abs diff {rep.max_abs_diff:.2e}",
                   params=params, max_abs_diff=rep.max_abs_diff, max_rel_diff=rep.max_rel_diff)
    return rows
