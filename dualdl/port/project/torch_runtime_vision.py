"""The vision half of a converted project's ``gluon2torch.py`` (copied into the same file as
:mod:`dualdl.port.project.torch_runtime`): Gluon's and gluoncv's image transforms, Gluon's
CIFAR-10/100 files, gluoncv's small utilities, and the models of a model zoo translated at
conversion time (:mod:`dualdl.port.project.zoo` writes them to ``dualdl_models/``). Torch and
numpy only.

What it hides:

* Gluon's transforms take HWC ``NDArray`` images; here HWC numpy arrays (what the datasets
  give), with the same arithmetic (``ToTensor``: ``/ 255`` in float32, ``Normalize``: a
  division by ``std``, not a multiplication: both bitwise equal to MXNet's, measured).
* gluoncv's ``RandomCrop(pad=)`` draws its offsets with Python's ``random.randint`` (mxnet's
  ``image.random_crop``): the same draws here, so a run seeded alike crops alike. Gluon's
  ``RandomFlipLeftRight`` draws with MXNet's own RNG, which torch cannot reproduce: here it
  draws with torch's, or, in a proof (``GLUON2TORCH_RANDOM=path.npz``), replays the Gluon
  run's recorded decisions in order.
* A zoo model (``get_model('cifar_resnet20_v1', classes=10)``) is the translator's torch module
  for that configuration, with Gluon's ``save_parameters`` names, following ``record()``'s
  training mode as Gluon's blocks do.
"""
from __future__ import annotations

import json
import os
import random
import tarfile
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn

from .torch_runtime import _relu, asnumpy, is_training
from .torch_runtime_train import MNIST, _Schedule, gluon_root

# ----------------------------------------------------------------------------- transforms


class Compose:
    """``transforms.Compose([...])``: each transform in turn."""

    def __init__(self, transforms: Sequence[Callable]):
        self.transforms = list(transforms)

    def __call__(self, x: Any) -> Any:
        for t in self.transforms:
            x = t(x)
        return x


def _image(x: Any) -> np.ndarray:
    return asnumpy(x) if isinstance(x, torch.Tensor) else np.asarray(x)


class ToTensor:
    """``transforms.ToTensor()``: HWC (or NHWC) values 0-255 -> CHW float32 in [0, 1]."""

    def __call__(self, x: Any) -> torch.Tensor:
        a = _image(x)
        t = torch.from_numpy(np.ascontiguousarray(np.moveaxis(a, -1, -3)))
        return t.to(torch.float32) / 255.0


class Normalize:
    """``transforms.Normalize(mean, std)`` on CHW float: ``(x - mean) / std`` per channel."""

    def __init__(self, mean: Any = 0.0, std: Any = 1.0):
        self.mean, self.std = mean, std

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        shape = (-1, 1, 1)
        m = torch.as_tensor(self.mean, dtype=x.dtype).reshape(shape)
        s = torch.as_tensor(self.std, dtype=x.dtype).reshape(shape)
        return (x - m) / s


class Cast:
    """``transforms.Cast(dtype)``."""

    def __init__(self, dtype: str = "float32"):
        self.dtype = dtype

    def __call__(self, x: Any) -> Any:
        return _image(x).astype(self.dtype)


class _Replay:
    """The Gluon run's record of the random choices MXNet's RNG made (``GLUON2TORCH_RANDOM``: the
    proof's Gluon record, keys ``random/<kind>``), taken in order."""

    def __init__(self) -> None:
        self.path = os.environ.get("GLUON2TORCH_RANDOM")
        self.draws: Dict[str, List[Any]] = {}
        if self.path:
            with np.load(self.path) as rec:
                self.draws = {k[len("random/"):]: list(rec[k]) for k in rec.files
                              if k.startswith("random/")}

    def take(self, kind: str) -> Optional[Any]:
        if not self.path:
            return None
        left = self.draws.get(kind)
        if not left:
            more = " more" if kind in self.draws else ""
            raise RuntimeError(f"the proof's record {self.path} has no{more} "
                               f"{kind} decisions of the Gluon run (consumed: the runs drew for "
                               f"different samples; none: the Gluon run was not recorded with "
                               f"dualdl.port.project.data_cifar.record_flips)")
        return left.pop(0)


_REPLAY = _Replay()


class RandomFlipLeftRight:
    """``transforms.RandomFlipLeftRight()``: flips HWC images left-right with probability 0.5."""

    def __call__(self, x: Any) -> np.ndarray:
        a = _image(x)
        flip = _REPLAY.take("flip_left_right")
        if flip is None:
            flip = bool(torch.rand(()) < 0.5)
        return np.ascontiguousarray(a[:, ::-1]) if flip else a


class RandomCrop:
    """gluoncv's ``transforms.RandomCrop(size, pad)``: zero padding (``np.pad``, then float32
    as ``nd.array`` makes it), offsets ``random.randint(0, w - cw)`` then ``(0, h - ch)``."""

    def __init__(self, size: Any, pad: Any = None, interpolation: int = 2):
        self.size = (size, size) if isinstance(size, (int, float, np.generic)) else tuple(size)
        self.pad = ((pad, pad), (pad, pad), (0, 0)) if isinstance(pad, int) else pad

    def __call__(self, x: Any) -> np.ndarray:
        a = _image(x)
        if self.pad:
            a = np.pad(a, self.pad, mode="constant", constant_values=0).astype(np.float32)
        h, w = a.shape[:2]
        sw, sh = self.size
        if sh > h:
            sw, sh = sw * h / sh, h
        if sw > w:
            sw, sh = w, sh * w / sw
        cw, ch = int(sw), int(sh)
        x0 = random.randint(0, w - cw)
        y0 = random.randint(0, h - ch)
        if (cw, ch) != tuple(self.size):
            raise NotImplementedError("RandomCrop larger than the image resizes with OpenCV's "
                                      "interpolation: not converted")
        return a[y0:y0 + ch, x0:x0 + cw]


# ----------------------------------------------------------------------------- CIFAR files
class CIFAR10(MNIST):
    """``gluon.data.vision.CIFAR10(root, train)``: the binary batches Gluon reads from ``root``
    (``data_batch_1..5.bin`` / ``test_batch.bin``, or the ``cifar-10-binary.tar.gz`` holding
    them); images ``(32, 32, 3)`` uint8, labels int32; ``root`` defaults to Gluon's
    ``$MXNET_HOME/datasets/cifar10``. Item access is MNIST's (both are Gluon's
    ``_DownloadedDataset``: ``transform(data, label)``)."""
    _namespace, _label_byte, _files = "cifar10", 0, (
        [f"data_batch_{i}.bin" for i in range(1, 6)], ["test_batch.bin"])
    _archive = "cifar-10-binary.tar.gz"

    def __init__(self, root: Optional[str] = None, train: bool = True,
                 transform: Optional[Callable] = None, **_: Any):
        root = gluon_root(root, "datasets", self._namespace)
        names = self._files[0 if train else 1]
        if not all(os.path.exists(os.path.join(root, n)) for n in names):
            archive = os.path.join(root, self._archive)
            if not os.path.exists(archive):
                raise FileNotFoundError(f"{type(self).__name__}: {names} are missing in {root}; "
                                        f"put the dataset's binary files (or {self._archive}) "
                                        f"there")
            with tarfile.open(archive) as tar:
                tar.extractall(root)
        data, label = [], []
        for n in names:
            with open(os.path.join(root, n), "rb") as f:
                raw = np.frombuffer(f.read(), dtype=np.uint8)
            raw = raw.reshape(-1, 3072 + 1 + (self._label_byte > 0))
            data.append(raw[:, -3072:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
            label.append(raw[:, self._label_byte].astype(np.int32))
        self._data, self._label = np.concatenate(data), np.concatenate(label)
        self._transform = transform


class CIFAR100(CIFAR10):
    """``gluon.data.vision.CIFAR100(root, fine_label, train)``: ``train.bin`` / ``test.bin``."""
    _namespace, _files = "cifar100", (["train.bin"], ["test.bin"])
    _archive = "cifar-100-binary.tar.gz"

    def __init__(self, root: Optional[str] = None, fine_label: bool = False, train: bool = True,
                 transform: Optional[Callable] = None, **_: Any):
        self._label_byte = 1 if fine_label else 0
        super().__init__(root, train, transform)


# ----------------------------------------------------------------------------- gluoncv utilities
def makedirs(path: str) -> None:
    """gluoncv's ``utils.makedirs``: ``os.makedirs`` that accepts an existing folder."""
    os.makedirs(os.path.expanduser(path), exist_ok=True)


def check_version(min_version: str, warning_only: bool = False, library: Any = None) -> bool:
    """gluoncv's ``utils.check_version``: a converted project has no gluoncv to check."""
    return True


class TrainingHistory:
    """gluoncv's ``utils.TrainingHistory``: the history kept alike; ``plot`` draws it with
    matplotlib (as gluoncv does), imported when called."""

    def __init__(self, labels: Sequence[str]):
        self.labels, self.l, self.epochs = list(labels), len(labels), 0
        self.history: Dict[str, List[float]] = {lb: [] for lb in self.labels}

    def update(self, values: Sequence[float]) -> None:
        assert len(values) == self.l
        for lb, v in zip(self.labels, values):
            self.history[lb].append(v)
        self.epochs += 1

    def plot(self, labels: Optional[Sequence[str]] = None, colors: Optional[Sequence[str]] = None,
             y_lim: Any = (0, 1), save_path: Optional[str] = None,
             legend_loc: str = "upper right") -> None:
        import importlib
        plt = importlib.import_module("matplotlib.pyplot")
        labels = list(labels or self.labels)
        colors = list(colors or [f"C{i}" for i in range(len(labels))])
        plt.ylim(y_lim)
        lines = [plt.plot(list(range(self.epochs)), self.history[lb], c, label=lb)[0]
                 for lb, c in zip(labels, colors)]
        plt.legend(tuple(lines), labels, loc=legend_loc)
        if save_path is None:
            plt.show()
        else:
            plt.savefig(os.path.expanduser(save_path))


class LRScheduler(_Schedule):
    """gluoncv's ``utils.LRScheduler(mode, base_lr, target_lr, niters, nepochs, iters_per_epoch,
    offset, power, step_iter, step_epoch, step_factor)``: one piece of the recipe's ``GluonCVLR``,
    its arguments resolved as gluoncv does (``nepochs * iters_per_epoch`` iterations, step epochs
    in iterations, a constant mode's target its base). Given to a Trainer that also sets
    ``learning_rate``, that becomes ``base_lr`` (Gluon's optimizer overwrites it)."""

    def __init__(self, mode: str, base_lr: float = 0.1, target_lr: float = 0, niters: int = 0,
                 nepochs: int = 0, iters_per_epoch: int = 0, offset: int = 0, power: float = 2,
                 step_iter: Optional[Sequence[int]] = None,
                 step_epoch: Optional[Sequence[int]] = None,
                 step_factor: float = 0.1, baselr: Optional[float] = None,
                 targetlr: Optional[float] = None):
        base_lr = baselr if baselr is not None and base_lr == 0.1 else base_lr
        target_lr = targetlr if targetlr is not None and target_lr == 0 else target_lr
        step = step_iter
        if nepochs * iters_per_epoch > 0:
            niters = nepochs * iters_per_epoch
            if step_epoch is not None:
                step = [s * iters_per_epoch for s in step_epoch]
        self.niters, self.offset = niters, offset
        self.piece = dict(mode=mode, base_lr=base_lr, target_lr=base_lr if mode == "constant"
                          else target_lr, niters=niters, offset=offset, power=power, step=step,
                          step_factor=step_factor)

    def pieces(self) -> List[dict]:
        return [dict(self.piece, offset=self.offset)]

    def build(self, optimizer: Any, learning_rate: Optional[float]) -> Any:
        pieces = self.pieces()
        if learning_rate is not None and type(self) is LRScheduler:
            pieces[0]["base_lr"] = learning_rate
        return globals()["GluonCVLR"](optimizer, pieces)


class LRSequential(LRScheduler):
    """gluoncv's ``utils.LRSequential([LRScheduler(...), ...])``: the pieces one after another
    (each one's ``offset`` the iterations before it), e.g. a linear warmup then a cosine decay."""

    def __init__(self, schedulers: Sequence[LRScheduler]):
        assert len(schedulers) > 0
        self.schedulers, count = list(schedulers), 0
        for sch in self.schedulers:
            sch.offset = count
            count += sch.niters

    def pieces(self) -> List[dict]:
        return [p for sch in self.schedulers for p in sch.pieces()]


# ----------------------------------------------------------------------------- zoo models
#: keyword arguments of a zoo factory that do not change the model (where it lives)
ZOO_IGNORED = ("ctx", "root")


def zoo_key(args: Sequence[Any], kwargs: Dict[str, Any],
            ignore: Sequence[str] = ZOO_IGNORED) -> str:
    """One string per model configuration: the call's arguments without those in ``ignore``."""
    kw = sorted((k, v) for k, v in kwargs.items() if k not in ignore)
    return repr((tuple(args), tuple(kw)))


def _zoo_index() -> List[Dict[str, Any]]:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dualdl_models", "index.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def zoo(factory: str) -> Callable[..., Any]:
    """A model zoo's factory (``gluoncv.model_zoo.get_model``, ``vision.resnet18_v1``, ...): the
    configurations translated when the project was converted (``dualdl_models/``)."""
    def build(*args: Any, **kwargs: Any) -> Any:
        for e in _zoo_index():
            if e["factory"] == factory and e["key"] == zoo_key(args, kwargs, e["ignore"]):
                return _zoo_model(e, args, kwargs)
        call = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
        kw = ",".join(f"{k}={v!r}" for k, v in kwargs.items() if k not in ZOO_IGNORED)
        spec = (str(args[0]) if args else "") + (":" + kw if kw else "")
        raise ValueError(f"{factory}({call}) was not translated when this project was converted; "
                         f"convert it again with --zoo {spec!r}")
    return build


def _zoo_model(entry: Dict[str, Any], args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
    import importlib.util
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dualdl_models")
    spec = importlib.util.spec_from_file_location(f"dualdl_models.{entry['module']}",
                                                  os.path.join(folder, entry["module"] + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if os.environ.get("GLUON2TORCH_DTYPE") == "float64" and os.environ.get("GLUON2TORCH_RECORD"):
        _watch_kinks(mod)
    model = getattr(mod, entry["class"])()
    if os.environ.get("GLUON2TORCH_DTYPE") == "float64" and os.environ.get("GLUON2TORCH_RECORD"):
        for m in model.modules():
            if type(m) is nn.ReLU:
                m.forward = _relu
    gluon_names(model, entry.get("rename", {}))
    model.register_forward_pre_hook(_follow_record)
    if entry.get("returns"):
        return globals()[entry["returns"]](model, entry.get("extra"), args, kwargs)
    return model


class _KinkRelu:
    """A translated module's ``torch`` / ``F`` whose ``relu`` is gluon2torch's (the same values;
    in the proof's float64 run it notes ReLU inputs within float32 rounding of 0)."""

    def __init__(self, real: Any):
        self._real = real

    def __getattr__(self, name: str) -> Any:
        if name == "relu":
            return lambda x, inplace=False: _relu(x)
        return getattr(self._real, name)


def _watch_kinks(module: Any) -> None:
    """The proof's float64 run: the translated zoo model's ReLUs note their kinks as gluon2torch's
    own layers do (:func:`_relu`), so that a float32 failure across one is named (and settled)."""
    for name in ("torch", "F"):
        if name in vars(module):
            setattr(module, name, _KinkRelu(vars(module)[name]))


def _follow_record(module: nn.Module, args: tuple) -> None:
    """Gluon's training mode is ``autograd.record()``'s, torch's the module's own flag."""
    module.train(is_training())


def gluon_names(model: nn.Module, rename: Dict[str, str]) -> None:
    """Rename a translated module's tensors to Gluon's ``save_parameters`` names (``{torch key:
    Gluon key}``: BatchNorm's ``weight``/``bias`` are Gluon's ``gamma``/``beta``; a Gluon name on
    a child path, gluonnlp's ``attention_cell.proj_query.bias`` for the translated
    ``attention_cell.query_bias``, gets plain containers for the missing modules). The torch name
    stays readable as an alias (the translated forward reads it); a tensor Gluon has no
    counterpart of (``num_batches_tracked``) leaves the state_dict."""
    aliases: Dict[int, Any] = {}
    dropped: set = set()
    for tk, gk in rename.items():
        path, _, leaf = tk.rpartition(".")
        gpath, _, gleaf = (gk or "").rpartition(".")
        mod = model.get_submodule(path) if path else model
        if not gk:
            mod._non_persistent_buffers_set.add(leaf)
            dropped.add(tk)
            continue
        if gpath != path and not (path == "" or gpath.startswith(path + ".")):
            raise ValueError(f"{tk} -> {gk}: a Gluon name outside the torch tensor's module")
        rest = gpath[len(path):].lstrip(".")
        owner = mod
        for seg in filter(None, rest.split(".")):
            if seg not in owner._modules:
                owner.add_module(seg, nn.Module())
            owner = owner._modules[seg]
        store = mod._parameters if leaf in mod._parameters else mod._buffers
        (owner._parameters if store is mod._parameters else owner._buffers)[gleaf] = store.pop(leaf)
        aliases.setdefault(id(mod), (mod, {}))[1][leaf] = (rest, gleaf)
    if dropped:         # torch's BatchNorm puts num_batches_tracked back into what it loads
        model.register_load_state_dict_post_hook(lambda m, keys: keys.unexpected_keys.__init__(
            [k for k in keys.unexpected_keys if k not in dropped]))
    for mod, names in aliases.values():
        props = {t: property(lambda self, r=r, g=g: getattr(
            self.get_submodule(r) if r else self, g)) for t, (r, g) in names.items()}
        mod.__class__ = type(type(mod).__name__, (type(mod),), props)
