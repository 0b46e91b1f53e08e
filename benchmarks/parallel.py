"""Single-node data parallelism through ``dl.Trainer``: step time on 2 devices vs 1 (interleaved).

* CPU: MXNet with two real CPU contexts (its engine can run them concurrently), and torch's CPU
  emulation of ``devices=[cpu(0), cpu(1)]`` (replicas run one after the other: it exists to test
  multi-device code without GPUs, not to be fast), each with the backend's native strategy.
* CUDA (torch, when present): real ``data_parallel`` vs ``per_device_loss`` over all visible GPUs,
  with peak memory per GPU; MXNet (a CUDA build): ``split_and_load`` over all GPU contexts vs one
  CPU context. Skipped cleanly without CUDA (``make gpu-check`` runs these rows).
"""
from __future__ import annotations

from typing import List

import dualdl as dl

from . import models
from .harness import Config, Row, case, compare, time_interleaved, ratio_row


def _trainer(kind: str, s: dict, be: str, devices, strategy=None):
    with dl.use(be):
        dl.seed(0)
        net = models.dl_model(kind, s)
    return dl.Trainer(net, dl.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9), models.dl_loss(kind),
                      devices=devices, strategy=strategy)


def _sync(be: str):
    if be == "mxnet":
        from mxnet import nd
        return nd.waitall
    return lambda: None


@case("data_parallel", "cpu")
def cpu_devices(cfg: Config) -> List[Row]:
    """dl.Trainer on [cpu(0), cpu(1)] vs [cpu(0)], MLP and LeNet, MXNet contexts and torch emulation."""
    rows: List[Row] = []
    for kind in ("mlp", "lenet"):
        s = dict(models.sizes(cfg.quick)[kind])
        s["batch"] = 8 if cfg.quick else 64
        x, y = models.batch(kind, s)
        for be in ("mxnet", "torch"):
            one = _trainer(kind, s, be, [dl.cpu(0)])
            two = _trainer(kind, s, be, [dl.cpu(0), dl.cpu(1)])
            sync = _sync(be)
            with dl.use(be):
                dx, dy = dl.from_numpy(x), dl.from_numpy(y)

            def step1():
                one.train_step(dx, dy)
                sync()

            def step2():
                two.train_step(dx, dy)
                sync()
            rows += compare("data_parallel", {"1 device": step1, "2 devices": step2}, "1 device", cfg,
                            names={"2 devices": f"{kind} / {be} / 2 CPU devices vs 1 ({two.strategy})"},
                            note=f"batch {s['batch']}" + ("; torch emulates cpu(1) (sequential)"
                                                          if be == "torch" else "; two MXNet CPU contexts"),
                            model=kind, backend=be, clock="wall")   # CPU time would hide any overlap
    return rows


@case("data_parallel", "cuda")
def cuda_devices(cfg: Config) -> List[Row]:
    """torch on all GPUs: data_parallel vs per_device_loss, time and peak memory per GPU (CUDA only)."""
    try:
        import torch
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:       # pragma: no cover - torch missing
        n = 0
    if n == 0:
        return [Row(group="data_parallel", name="cuda: data_parallel vs per_device_loss", value=float("nan"),
                    note="skipped: no CUDA device")]
    rows: List[Row] = []
    for kind in ("lenet", "transformer"):
        s = dict(models.sizes(cfg.quick)[kind])
        s["batch"] = (8 if cfg.quick else 256) * n
        x, y = models.batch(kind, s)
        devs = [dl.gpu(i) for i in range(n)]
        axis = 1 if kind == "transformer" else 0
        trainers = {}
        for strat in ("data_parallel", "per_device_loss"):
            with dl.use("torch"):
                dl.seed(0)
                net = models.dl_model(kind, s).to(torch.device("cuda:0"))   # the Trainer's first device
            trainers[strat] = dl.Trainer(net, dl.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9),
                                         models.dl_loss(kind), devices=devs, strategy=strat, batch_axis=axis)
        tx, ty = torch.from_numpy(x).cuda(0), torch.from_numpy(y).cuda(0)
        mem = {}
        for strat, tr in trainers.items():
            for i in range(n):
                torch.cuda.reset_peak_memory_stats(i)
            tr.train_step(tx, ty)
            torch.cuda.synchronize()
            mem[strat] = [torch.cuda.max_memory_allocated(i) for i in range(n)]

        def make(tr):
            def f():
                tr.train_step(tx, ty)
                torch.cuda.synchronize()
            return f
        times = time_interleaved({k: make(v) for k, v in trainers.items()}, cfg.repeats, cfg.warmup,
                                 cfg.min_sample_s)
        rows.append(ratio_row("data_parallel", f"{kind} / cuda x{n} / per_device_loss vs data_parallel", times,
                              "per_device_loss", "data_parallel", note=f"batch {s['batch']}",
                              gpus=n, gpu_name=torch.cuda.get_device_name(0),
                              peak_mem_per_gpu_mb={k: [round(m / 2 ** 20, 1) for m in v] for k, v in mem.items()}))
    return rows


@case("data_parallel", "cuda_mxnet")
def cuda_mxnet(cfg: Config) -> List[Row]:
    """MXNet split_and_load on all GPU contexts vs one CPU context, LeNet (CUDA builds only)."""
    if "mxnet" not in dl.available_backends():
        return [Row(group="data_parallel", name="cuda: mxnet split_and_load on GPUs vs cpu(0)", value=float("nan"),
                    note="skipped: MXNet is not installed")]
    with dl.use("mxnet"):
        n = dl.get_backend("mxnet").gpu_count()
    if n == 0:
        return [Row(group="data_parallel", name="cuda: mxnet split_and_load on GPUs vs cpu(0)", value=float("nan"),
                    note="skipped: MXNet sees no CUDA device")]
    import mxnet as mx
    s = dict(models.sizes(cfg.quick)["lenet"])
    s["batch"] = (8 if cfg.quick else 256) * n
    x, y = models.batch("lenet", s)
    gpus = [dl.gpu(i) for i in range(n)]
    cpu = _trainer("lenet", s, "mxnet", [dl.cpu(0)])
    with dl.use("mxnet"):
        dl.seed(0)
        net = models.dl_model("lenet", s)
        net.to(mx.gpu(0))              # the Trainer replicates it on the other GPUs
    gpu = dl.Trainer(net, dl.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9), models.dl_loss("lenet"),
                     devices=gpus, strategy="split_and_load")
    sync = _sync("mxnet")

    def on(tr):
        def f():
            tr.train_step(x, y)
            sync()
        return f
    return compare("data_parallel", {"cpu(0)": on(cpu), "gpus": on(gpu)}, "cpu(0)", cfg,
                   names={"gpus": f"lenet / mxnet / cuda x{n} (split_and_load) vs cpu(0)"},
                   note=f"batch {s['batch']}", model="lenet", backend="mxnet", gpus=n, clock="wall")
