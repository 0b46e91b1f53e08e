"""The training half of a converted project's ``gluon2torch.py`` (see
:mod:`dualdl.port.project.torch_runtime`, copied into the same file): parameters and Gluon's
deferred initialization, initializers, checkpoints, the Trainer and its schedules, Gluon's
datasets and DataLoader order, and the proof's recorder. Torch and numpy only; names such as
``GluonSGD``, ``xavier_``, ``GluonBatchSampler`` and ``asnumpy`` come from the other sources of
that file."""
from __future__ import annotations

import gzip
import os
import struct
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np
import torch
from torch import nn

from .torch_runtime import _KINKS, _TRAINING, _WHERE, asnumpy
from .torch_runtime_dist import (allreduce_grads, allreduce_sum, broadcast_parameters, dist_rank,
                                 rank_device)

# ----------------------------------------------------------------------------- parameters
class ParameterDict(dict):
    """``block.collect_params()``: Gluon's keys (``0.weight``) to torch parameters."""

    def zero_grad(self) -> None:
        for p in self.values():
            p.grad = None

    def setattr(self, name: str, value: Any) -> None:
        for p in self.values():
            if name == "grad_req":
                p.requires_grad_(value != "null")
                p._grad_req = p.grad_req = value
            elif name == "lr_mult":
                p._lr_mult = p.lr_mult = float(value)
            elif name == "wd_mult":
                p._wd_mult = p.wd_mult = float(value)

    def initialize(self, init: Any = None, ctx: Any = None, force_reinit: bool = False) -> None:
        """``net.collect_params().initialize(init, ctx)``: the block's ``initialize``."""
        if getattr(self, "block", None) is None:
            raise NotImplementedError("collect_params().initialize: call initialize(net, init)")
        initialize(self.block, init, ctx, force_reinit)

    def save(self, filename: str, strip_prefix: str = "") -> None:
        """``collect_params().save(f)``: these parameters by key, in torch's format."""
        torch.save({k: p.detach() for k, p in self.items()}, filename)

    def load(self, filename: str, ctx: Any = None, allow_missing: bool = False,
             ignore_extra: bool = False, restore_prefix: str = "", **_: Any) -> None:
        """``collect_params().load(f, ctx)``: what :meth:`save` wrote, copied in place by key."""
        copy_by_key(self, torch.load(filename, map_location="cpu"),
                    f"collect_params().load({filename!r})", allow_missing, ignore_extra)


def copy_by_key(state: Dict[str, torch.Tensor], saved: Dict[str, Any], where: str,
                allow_missing: bool, ignore_extra: bool) -> None:
    """Gluon's load by key: ``saved``'s tensors or numpy arrays copied in place into ``state``'s,
    a key missing (batch norm's ``num_batches_tracked`` aside: Gluon has none) or extra refused
    unless allowed as in Gluon."""
    missing = [k for k in state if k not in saved and not k.endswith("num_batches_tracked")]
    extra = [k for k in saved if k not in state]
    if (missing and not allow_missing) or (extra and not ignore_extra):
        raise ValueError(f"{where}: {len(missing)} parameter(s) missing ({missing[:3]}), "
                         f"{len(extra)} extra ({extra[:3]}); pass allow_missing=/ignore_extra= "
                         f"as in Gluon")
    with torch.no_grad():
        for k, t in state.items():
            if k in saved:
                t.copy_(torch.as_tensor(saved[k]))


def collect_params(block: nn.Module, select: Optional[str] = None) -> ParameterDict:
    import re
    out = ParameterDict((k, p) for k, p in block.named_parameters())
    if select is not None:
        pat = re.compile(select)
        out = ParameterDict((k, p) for k, p in out.items() if pat.match(k))
    out.block = block                # Gluon's dict holds the running statistics too
    for p in out.values():           # Gluon's Parameter attributes, which scripts read and set
        if "grad_req" not in p.__dict__:
            p.grad_req = "write" if p.requires_grad else "null"
        p.__dict__.setdefault("wd_mult", 1.0)
        p.__dict__.setdefault("lr_mult", 1.0)
    return out


def initialize(block: nn.Module, init: Any = None, ctx: Any = None,
               force_reinit: bool = False) -> None:
    """``block.initialize(init)``: applied at the first forward, when lazy shapes are known
    (Gluon's deferred initialization), by Gluon's rules (weights ``init``, biases 0, BatchNorm
    1/0; the default initializer ``Uniform(0.07)``). ``GLUON2TORCH_LOAD=path.npz`` loads those
    arrays by name instead (a proof replaying another run's initial weights)."""
    init = init if init is not None else Uniform()
    block = getattr(block, "block", block)   # net.collect_params().initialize(...): the block
    if ctx is not None:
        block.to(rank_device(ctx))      # a process of several: its own device of the list
    pending = block.__dict__.get("_g2t_init")
    if pending is not None or block.__dict__.get("_g2t_initialized"):
        if not force_reinit:            # Gluon warns and keeps the first initialization
            import warnings
            warnings.warn(f"{type(block).__name__} is already initialized, ignoring; set "
                          f"force_reinit=True to re-initialize (as Gluon)", stacklevel=2)
            return
        if pending is not None:
            pending.remove()            # the earlier, not yet applied initialization
        else:                           # shapes known: re-initialize now
            _apply_init(block, init)
            broadcast_parameters(block)
            return

    def hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
        handle.remove()
        module.__dict__["_g2t_init"], module.__dict__["_g2t_initialized"] = None, True
        if _float64():
            module.double()
        if any(isinstance(p, nn.parameter.UninitializedParameter) for p in module.parameters()):
            was = _TRAINING[-1]
            _TRAINING[-1] = False
            with torch.no_grad():
                module(*args, **kwargs)
            _TRAINING[-1] = was
        _apply_init(module, init)
        broadcast_parameters(module)    # several processes: rank 0's weights (one Gluon model)
        if _float64() and os.environ.get("GLUON2TORCH_RECORD"):     # the kink notes' layer names
            for name, m in module.named_modules():
                m.register_forward_pre_hook(
                    lambda _m, _a, n=f"layer {name} ({type(m).__name__})" if name else "":
                    _WHERE.__setitem__(0, n))
    handle = block.register_forward_pre_hook(hook, with_kwargs=True)
    block.__dict__["_g2t_init"] = handle


def _float64() -> bool:
    """``GLUON2TORCH_DTYPE=float64``: the proof's float64 run (the model and the batches)."""
    return os.environ.get("GLUON2TORCH_DTYPE") == "float64"


def _apply_init(block: nn.Module, init: Any) -> None:
    load = os.environ.get("GLUON2TORCH_LOAD")
    with torch.no_grad():
        if load:       # the weights only: Gluon's running statistics were read after a forward
            arrays = np.load(load)
            for k, v in block.named_parameters():
                if k in arrays.files:
                    v.copy_(torch.from_numpy(arrays[k]))
            return
        for name, p in block.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if getattr(p, "_gluon_init", None) is not None:   # the parameter's own initializer
                p._gluon_init(p)
            elif leaf == "bias" or leaf == "beta":
                p.zero_()
            elif leaf == "gamma" or (leaf == "weight" and p.dim() == 1):
                p.fill_(1.0)
            else:
                init(p)


class Uniform:
    def __init__(self, scale: float = 0.07):
        self.scale = scale

    def __call__(self, t: torch.Tensor) -> None:
        uniform_(t, self.scale)


class Normal:
    def __init__(self, sigma: float = 0.01):
        self.sigma = sigma

    def __call__(self, t: torch.Tensor) -> None:
        normal_(t, self.sigma)


class Xavier:
    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg", magnitude: float = 3):
        self.args = (rnd_type, factor_type, magnitude)

    def __call__(self, t: torch.Tensor) -> None:
        xavier_(t, tuple(t.shape), *self.args)


class Zero:
    def __call__(self, t: torch.Tensor) -> None:
        t.zero_()


class One:
    def __call__(self, t: torch.Tensor) -> None:
        t.fill_(1.0)


class Constant:
    def __init__(self, value: float):
        self.value = value

    def __call__(self, t: torch.Tensor) -> None:
        t.fill_(self.value)


def save_parameters(block: nn.Module, filename: str, deduplicate: bool = False) -> None:
    """``block.save_parameters(f)``: the state_dict under Gluon's keys, in torch's format."""
    torch.save(block.state_dict(), filename)


def load_parameters(block: nn.Module, filename: str, ctx: Any = None, **_: Any) -> None:
    block.load_state_dict(torch.load(filename, map_location=ctx if ctx is not None else "cpu"))


# ----------------------------------------------------------------------------- schedules
class _Schedule:
    """``mx.lr_scheduler.*Scheduler(...)``: its arguments, made a ``Gluon*LR`` torch scheduler by
    the Trainer (Gluon's schedule lives in the optimizer; ``base_lr`` becomes the Trainer's
    ``learning_rate`` when both are given, as Gluon's optimizer sets it)."""
    torch_class = ""

    def __init__(self, *args: Any, **kwargs: Any):
        self.args, self.kwargs = args, kwargs

    def build(self, optimizer: Any, learning_rate: Optional[float]) -> Any:
        kw = dict(self.kwargs)
        if learning_rate is not None:
            if self.torch_class in ("GluonPolyLR", "GluonCosineLR"):
                kw.setdefault("base_lr_orig", kw.get("base_lr", 0.01))
            kw["base_lr"] = learning_rate
        return globals()[self.torch_class](optimizer, *self.args, **kw)


class FactorScheduler(_Schedule):
    torch_class = "GluonFactorLR"


class MultiFactorScheduler(_Schedule):
    torch_class = "GluonMultiFactorLR"


class PolyScheduler(_Schedule):
    torch_class = "GluonPolyLR"


class CosineScheduler(_Schedule):
    torch_class = "GluonCosineLR"


# ----------------------------------------------------------------------------- trainer
_OPTIMIZERS = {"sgd": "GluonSGD", "nag": "GluonNAG", "adam": "GluonAdam",
               "bertadam": "GluonBERTAdam"}


class Trainer:
    """``gluon.Trainer(params, optimizer, optimizer_params)``: Gluon's exact update rule (the
    ``Gluon*`` optimizers), ``step(batch_size)`` rescaling by ``1/batch_size``, then the used
    gradients cleared (Gluon's ``backward`` overwrites them; ``grad_req='add'`` keeps them)."""

    def __init__(self, params: Any, optimizer: str, optimizer_params: Optional[dict] = None,
                 kvstore: Any = None, **_: Any):
        kw = dict(optimizer_params or {})
        name = str(optimizer).lower()
        if name not in _OPTIMIZERS:
            raise ValueError(f"gluon.Trainer optimizer {optimizer!r} has no torch translation "
                             f"here (one of {sorted(_OPTIMIZERS)})")
        schedule = kw.pop("lr_scheduler", None)
        given_lr = kw.get("learning_rate")
        self._params = list(params.values() if isinstance(params, dict) else params)
        self._names = (dict(params) if isinstance(params, dict) else
                       {str(i): p for i, p in enumerate(self._params)})
        self._block = getattr(params, "block", None)
        args = dict(lr=kw.pop("learning_rate", 0.01 if name in ("sgd", "nag") else 0.001),
                    weight_decay=kw.pop("wd", 0.0), rescale_grad=kw.pop("rescale_grad", 1.0),
                    clip_gradient=kw.pop("clip_gradient", None))
        if name in ("sgd", "nag"):
            args["momentum"] = kw.pop("momentum", 0.0)
        else:
            args["betas"] = (kw.pop("beta1", 0.9), kw.pop("beta2", 0.999))
            args["eps"] = kw.pop("epsilon", None)
        kw.pop("multi_precision", None)
        if kw:
            raise ValueError(f"gluon.Trainer {optimizer!r} options {sorted(kw)} have no torch "
                             f"translation here")
        self._optimizer = globals()[_OPTIMIZERS[name]](self._params, **args)
        self._wd, self._wd_mults = args["weight_decay"], [1.0] * len(self._params)
        self._scheduler = schedule.build(self._optimizer, given_lr) if schedule is not None else None
        self._updates = 0

    def _init_optimizer(self, optimizer: str, optimizer_params: dict) -> None:
        """Gluon's private ``trainer._init_optimizer(name, params)`` (scripts of MXNet 1.0's time
        anneal with it): a new optimizer, fresh state, on the same parameters."""
        params = ParameterDict(self._names)
        params.block = self._block
        self.__init__(params, optimizer, optimizer_params)

    @property
    def learning_rate(self) -> float:
        """Gluon's ``trainer.learning_rate``: with a schedule, its value at the updates made."""
        if self._scheduler is not None:
            return float(self._scheduler.gluon_lr(self._updates))
        return float(self._optimizer.param_groups[0]["lr"])

    def set_learning_rate(self, lr: float) -> None:
        if self._scheduler is not None:
            raise UserWarning("set_learning_rate with an lr_scheduler: the schedule decides the lr")
        for g in self._optimizer.param_groups:
            g["lr"] = lr

    def _regroup(self) -> None:
        """Gluon reads each parameter's ``wd_mult`` at every update (finetune_classifier.py sets
        it after making the Trainer): one param group per ``wd_mult``, weight decay ``wd *
        wd_mult`` (the optimizer's per-parameter state is kept)."""
        mults = [float(getattr(p, "wd_mult", getattr(p, "_wd_mult", 1.0))) for p in self._params]
        if mults == self._wd_mults:
            return
        self._wd_mults = mults
        base = {k: v for k, v in self._optimizer.param_groups[0].items() if k != "params"}
        groups: dict = {}
        for p, m in zip(self._params, mults):
            groups.setdefault(m, []).append(p)
        self._optimizer.param_groups = [dict(base, params=ps, weight_decay=self._wd * m)
                                        for m, ps in groups.items()]

    def allreduce_grads(self) -> None:
        """The gradients summed over the devices: one process has them complete; several
        (``torch_runtime_dist``) all-reduce them."""
        allreduce_grads(self._params)

    def step(self, batch_size: float, ignore_stale_grad: bool = False) -> None:
        self.allreduce_grads()
        self.update(batch_size)

    def update(self, batch_size: float, ignore_stale_grad: bool = False) -> None:
        self._regroup()
        _RECORDER.before_update(self, batch_size)
        self._optimizer.step(batch_size=batch_size)
        self._updates += 1
        if self._scheduler is not None:
            self._scheduler.step()
        for p in self._params:
            if getattr(p, "grad_req", getattr(p, "_grad_req", "write")) == "write":
                p.grad = None
        _RECORDER.after_update(self)


# ----------------------------------------------------------------------------- data
class Dataset:
    """``gluon.data.Dataset``: ``transform(fn)`` (``fn(*item)``) and ``transform_first(fn)``."""

    def transform(self, fn: Callable, lazy: bool = True) -> "Dataset":
        return _Transformed(self, fn, False)

    def transform_first(self, fn: Callable, lazy: bool = True) -> "Dataset":
        return _Transformed(self, fn, True)


class _Transformed(Dataset):
    def __init__(self, data: Any, fn: Callable, first: bool):
        self._data, self._fn, self._first = data, fn, first

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, i: int) -> Any:
        item = self._data[i]
        if self._first:
            return (self._fn(item[0]),) + tuple(item[1:]) if isinstance(item, tuple) else self._fn(item)
        return self._fn(*item) if isinstance(item, tuple) else self._fn(item)


class ArrayDataset(Dataset):
    def __init__(self, *arrays: Any):
        self._arrays = [asnumpy(a) if isinstance(a, torch.Tensor) else a for a in arrays]

    def __len__(self) -> int:
        return len(self._arrays[0])

    def __getitem__(self, i: int) -> Any:
        items = tuple(a[i] for a in self._arrays)
        return items if len(items) > 1 else items[0]


def gluon_root(root: Optional[str], *default: str) -> str:
    """``root``, else Gluon's default folder ``$MXNET_HOME/<default...>`` (``~/.mxnet``), with
    ``~`` expanded."""
    return os.path.expanduser(root or os.path.join(os.environ.get("MXNET_HOME", "~/.mxnet"),
                                                   *default))


class MNIST(Dataset):
    """``gluon.data.vision.MNIST(root, train)``: the same gzip idx files Gluon reads from
    ``root`` (``train-images-idx3-ubyte.gz`` ...): images ``(28, 28, 1)`` uint8, labels int32,
    as numpy arrays (Gluon's NDArray methods the transforms use work on them)."""
    _files = {True: ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
              False: ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}

    _namespace = "mnist"

    def __init__(self, root: Optional[str] = None, train: bool = True,
                 transform: Optional[Callable] = None):
        root = gluon_root(root, "datasets", self._namespace)
        images, labels = (os.path.join(root, f) for f in self._files[bool(train)])
        if not (os.path.exists(images) and os.path.exists(labels)):
            raise FileNotFoundError(f"{type(self).__name__}: {images} and {labels} are missing; "
                                    f"put the dataset's gzip idx files in {root}")
        with gzip.open(labels, "rb") as f:
            struct.unpack(">II", f.read(8))
            self._label = np.frombuffer(f.read(), dtype=np.uint8).astype(np.int32)
        with gzip.open(images, "rb") as f:
            _, n, rows, cols = struct.unpack(">IIII", f.read(16))
            self._data = np.frombuffer(f.read(), dtype=np.uint8).reshape(n, rows, cols, 1)
        self._transform = transform

    def __len__(self) -> int:
        return len(self._label)

    def __getitem__(self, i: int) -> Any:
        if self._transform is not None:
            return self._transform(self._data[i], self._label[i])
        return self._data[i], self._label[i]


class FashionMNIST(MNIST):
    _namespace = "fashion-mnist"


def default_batchify_fn(items: List[Any]) -> Any:
    """Gluon's default batchify: stack samples (tuples field by field) into tensors."""
    first = items[0]
    if isinstance(first, tuple):
        return [default_batchify_fn([it[i] for it in items]) for i in range(len(first))]
    out = (torch.stack(items) if isinstance(first, torch.Tensor) else
           torch.from_numpy(np.ascontiguousarray(np.stack([np.asarray(x) for x in items]))))
    return out.double() if _float64() and out.is_floating_point() else out


class DataLoader:
    """``gluon.data.DataLoader(dataset, batch_size, shuffle, last_batch, batchify_fn)`` in Gluon's
    order (``np.random.shuffle`` each epoch: ``np.random.seed`` reproduces it)."""

    def __init__(self, dataset: Any, batch_size: Optional[int] = None, shuffle: bool = False,
                 sampler: Any = None, last_batch: Optional[str] = None, batch_sampler: Any = None,
                 batchify_fn: Optional[Callable] = None, num_workers: int = 0, **_: Any):
        self._dataset = dataset
        if batch_sampler is None:
            sampler = sampler if sampler is not None else (
                GluonRandomSampler(len(dataset)) if shuffle else GluonSequentialSampler(len(dataset)))
            batch_sampler = GluonBatchSampler(sampler, batch_size, last_batch or "keep")
        self._batch_sampler = batch_sampler
        self._batchify = batchify_fn or default_batchify_fn

    def __len__(self) -> int:
        return len(self._batch_sampler)

    def __iter__(self) -> Iterator[Any]:
        for idx in self._batch_sampler:
            batch = self._batchify([self._dataset[i] for i in idx])
            _RECORDER.batch(batch)
            yield batch


# ----------------------------------------------------------------------------- the proof's recorder
class _Recorder:
    """Per-update records for ``dualdl convert-project --prove`` (off unless
    ``GLUON2TORCH_RECORD=path.npz``): the batch, the learning rate, each gradient as the update
    uses it (``grad / batch_size``) and each weight after it; ``GLUON2TORCH_STEPS`` updates."""

    def __init__(self) -> None:
        self.path = os.environ.get("GLUON2TORCH_RECORD")
        self.limit = int(os.environ.get("GLUON2TORCH_STEPS", "0") or 0)
        self.rec: dict = {}
        self.n = 0
        self.last: Any = None
        self.losses = [0.0, 0.0]         # this update's per-sample loss sum and count
        if os.environ.get("GLUON2TORCH_SEED"):      # the proof's seed of Gluon's numpy shuffling
            import random
            random.seed(int(os.environ["GLUON2TORCH_SEED"]))   # Python's random: gluoncv's crops
            np.random.seed(int(os.environ["GLUON2TORCH_SEED"]))

    def loss(self, x: torch.Tensor) -> None:
        """Every ``backward`` of the update (one per device or micro-batch): the mean over all."""
        if self.path:
            self.losses[0] += float(x.detach().double().sum())
            self.losses[1] += x.numel()

    def batch(self, b: Any) -> None:
        if self.path:
            self.last = b

    def before_update(self, trainer: Trainer, bs: float) -> None:
        if not self.path:
            return
        names = trainer._names
        if trainer._block is not None:   # a tied weight under each of Gluon's keys, as the driver's
            ids = {id(p) for p in names.values()}
            names = {k: p for k, p in trainer._block.named_parameters(remove_duplicate=False)
                     if id(p) in ids}
        s = self.n
        if self.last is not None:
            for i, a in enumerate(self.last if isinstance(self.last, (list, tuple)) else [self.last]):
                self.rec[f"{s}/batch/{i}"] = asnumpy(a).copy()
        self.last = None                # as the Gluon driver: no batch row without a new batch
        total, count = allreduce_sum(self.losses)           # over the processes, if several
        if count:
            self.rec[f"{s}/loss"] = np.float64(total / count)
        self.losses = [0.0, 0.0]
        self.rec[f"{s}/lr"] = np.float64(trainer.learning_rate)
        for k, p in names.items():
            if p.grad is not None:
                self.rec[f"{s}/grad/{k}"] = asnumpy(p.grad) / bs
        if _KINKS:      # the float64 run's near-kink inputs (torch_runtime._kink_margin)
            self.rec[f"{s}/kinks"] = np.array(_KINKS)

    def after_update(self, trainer: Trainer) -> None:
        if not self.path:
            return
        state = dict(trainer._names)
        if trainer._block is not None:          # weights and running statistics, as Gluon's
            state = {k: v for k, v in trainer._block.state_dict().items() if k in state or
                     not k.endswith("num_batches_tracked")}
        for k, p in state.items():
            self.rec[f"{self.n}/param/{k}"] = asnumpy(p).copy()   # not a view of the weight
        _KINKS.clear()
        self.n += 1
        if self.limit and self.n >= self.limit:
            import sys
            self.rec["modules"] = np.array(sorted({m.split(".")[0] for m in sys.modules}))
            if dist_rank() == 0:        # several processes: rank 0 holds Gluon's device 0
                np.savez(self.path, **self.rec)
            raise SystemExit(0)         # several processes: all leave together (_leave)


_RECORDER = _Recorder()
