"""The torch side of the proof: the generated module built from Gluon's values (no random init
drawn), run in eval mode and for one backward and plain SGD step in train mode. Hides how torch
differs from the Gluon run it is compared with: torch's layer init draws random numbers Gluon's
values replace at once (``skip_random_init``), its functional dropout draws masks Gluon's
dropout (set to 0) does not (``no_functional_dropout``), and a tensor a module makes "float32
unless asked" (``npx.one_hot``, ``np.zeros``: written as torch's default dtype) follows the run's
dtype, as in a float64 Gluon run (``default_dtype``)."""
from __future__ import annotations

import contextlib
import importlib.util
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

__all__ = ["load_generated", "torch_state", "skip_random_init", "no_functional_dropout", "default_dtype",
           "torch_inputs", "flat", "as_numpy", "TorchRun"]


def load_generated(path: str, class_name: str):
    """Import the generated file afresh from its path (no dualdl, no mxnet) and return the class."""
    name = f"_dualdl_translated_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop(name, None)
    spec.loader.exec_module(module)
    return getattr(module, class_name)


def torch_state(entries: List[Any], dtype=None, values: Optional[Dict[int, np.ndarray]] = None
                ) -> Dict[str, Any]:
    """The torch state_dict built from the current Gluon values, or from ``values`` (id(param) ->
    array; shared where the dtype matches, except non-trainable ones, which torch's train forward
    updates in place); tied entries share one tensor."""
    import torch
    out, by_param = {}, {}
    for e in entries:
        if e.param is not None:
            if id(e.param) not in by_param:
                a = e.param.data().asnumpy() if values is None else values[id(e.param)]
                copy = values is not None and e.param.grad_req == "null"
                by_param[id(e.param)] = torch.from_numpy(a.astype(dtype or a.dtype, copy=copy))
            out[e.torch_key] = by_param[id(e.param)]
        elif isinstance(e.value, np.ndarray):   # an array the block holds (a position table) as a buffer
            a = np.array(e.value)
            out[e.torch_key] = torch.from_numpy(a.astype(dtype or a.dtype) if a.dtype.kind == "f" else a)
        else:                                    # num_batches_tracked
            out[e.torch_key] = torch.tensor(e.value, dtype=torch.long)
    return out


def skip_random_init():
    """A torch function mode in which ``Tensor.normal_`` / ``uniform_`` (what torch's layer init
    draws) do nothing: the module's memory stays untouched until our values replace it. Unlike
    building on the ``meta`` device, values a module computes in ``__init__`` stay real, and torch
    does not import ``torch._dynamo`` (1.5 s) for meta-device ``normal_``."""
    import torch
    from torch.overrides import TorchFunctionMode
    skip = {torch.Tensor.normal_, torch.Tensor.uniform_}

    class SkipRandomInit(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in skip:
                return args[0]
            return func(*args, **(kwargs or {}))

    return SkipRandomInit()


def no_functional_dropout():
    """A torch function mode in which ``F.dropout`` calls written in a generated forward (MXNet's
    Dropout op) return their input, as ``nn.Dropout`` modules get p = 0 for the train check."""
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode
    skip = {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout}

    class NoDropout(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in skip:
                return args[0] if args else kwargs["input"]
            return func(*args, **(kwargs or {}))

    return NoDropout()


@contextlib.contextmanager
def default_dtype(dtype) -> Iterator[None]:
    """torch's default dtype set to ``dtype`` (a float numpy dtype) for the run. MXNet makes one-hots,
    zeros and ranges float32 unless asked, and the generated code writes them in torch's default
    dtype: in the float64 run they are float64, as every other tensor of that run (d2l's RNNLM feeds
    ``npx.one_hot(X.T)`` of int ids to its RNN)."""
    import torch
    want = torch.float64 if np.dtype(dtype) == np.float64 else torch.float32
    old = torch.get_default_dtype()
    if want == old:
        yield
        return
    torch.set_default_dtype(want)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def torch_inputs(inputs: Sequence[Any], dtype) -> List[Any]:
    """The sample inputs as torch tensors (integer ids int64, the rest ``dtype``), nesting kept."""
    import torch
    out = []
    for x in inputs:
        if isinstance(x, (list, tuple)):
            out.append(type(x)(torch_inputs(x, dtype)))
            continue
        a = np.asarray(x)
        out.append(torch.from_numpy(a.astype(np.int64) if a.dtype.kind in "iu" else a.astype(dtype)))
    return out


def flat(o: Any) -> List[Any]:
    """Nested outputs (tuples, lists) as one flat list, in order."""
    if isinstance(o, (list, tuple)):
        return [v for e in o for v in flat(e)]
    return [o]


def as_numpy(outs: Any, fw: str) -> List[np.ndarray]:
    """Flat outputs of one framework (``"torch"`` or ``"mx"``) as numpy arrays."""
    if fw == "torch":
        return [o.detach().numpy() for o in flat(outs)]
    return [o.asnumpy() for o in flat(outs)]


class TorchRun:
    """The generated module in one dtype: built from the Gluon values, run in eval mode on
    ``inputs``, then (``train_step``) one backward and one plain SGD step in train mode on
    ``train_inputs`` (``inputs`` unless given: a batch-2 sample where ``inputs`` has batch 1), what
    ``torch.optim.SGD(lr)`` does without momentum (importing torch.optim costs seconds)."""

    def __init__(self, torch_cls, entries, values, inputs, dtype, train_inputs=None):
        self.dtype = dtype
        with skip_random_init():   # seconds on resnet50 / BERT-base; every value is replaced below
            self.model = torch_cls()
        self.inputs = torch_inputs(inputs, dtype)
        self.train_inputs = self.inputs if train_inputs is None else torch_inputs(train_inputs, dtype)
        self.lr_mult: Dict[str, float] = {}   # torch key -> the Gluon parameter's lr_mult
        self.load(entries, values)

    def load(self, entries, values) -> None:
        """Put ``values`` (id(param) -> array) into the module and run it in eval mode (``eval_out``):
        one module serves the checks of the block's own weights and of the randomised ones."""
        state = torch_state(entries, self.dtype, values)
        if any(e.tied_to for e in entries):
            self.model.load_state_dict(state, strict=True)
        else:   # take our tensors as they are
            self.model.load_state_dict(state, strict=True, assign=True)
        if self.dtype == np.float64:
            self.model.double()
        self.model.eval()
        self.eval_out: List[np.ndarray] = as_numpy(self.forward(), "torch")

    def forward(self, inputs=None) -> Any:
        """One forward (no gradient) in the run's dtype, in the module's current mode."""
        import torch
        with torch.no_grad(), default_dtype(self.dtype):
            return self.model(*(self.inputs if inputs is None else inputs))

    def train_step(self, proj, n, lr):
        import torch
        for m in self.model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
            if isinstance(m, torch.nn.RNNBase):
                m.dropout = 0.0
        self.model.train()
        with no_functional_dropout(), default_dtype(self.dtype):   # dropout 0 on both sides (masks differ)
            outs = flat(self.model(*self.train_inputs))
        loss = sum((o * torch.from_numpy(r.astype(self.dtype))).sum() for o, r in zip(outs, proj)) / n
        self.model.zero_grad()
        if loss.requires_grad:    # outputs that no parameter reaches (a topk mask) have no gradient
            loss.backward()
        self.train_out = [o.detach().numpy() for o in outs]
        named = dict(self.model.named_parameters(remove_duplicate=False))
        self.grads = {k: None if p.grad is None else p.grad.numpy() for k, p in named.items()}
        self.lr = lr
        self.named, self.state = named, self.model.state_dict()

    def step(self, key: str) -> float:
        """MXNet's update uses lr x the parameter's lr_mult, as a float32 attribute."""
        return float(np.float32(self.lr * self.lr_mult.get(key, 1.0)))

    def after(self, key: str) -> np.ndarray:
        """A tensor after the SGD step, computed when compared (the weights are not stepped in
        place: they may share memory with the Gluon values the checks still need)."""
        import torch
        p = self.named.get(key)
        if p is not None and p.grad is not None:
            return torch.add(p.detach(), p.grad, alpha=-self.step(key)).numpy()
        return self.state[key].numpy()

    def grad(self, key: str, shape) -> np.ndarray:
        """The gradient of a parameter (zeros where no output reaches it)."""
        g = self.grads[key]
        return np.zeros(shape, self.dtype) if g is None else g

    def keeps_biased(self, key: str) -> bool:
        """A generated BatchNorm with ``running_var_estimate = "biased"`` (translate(batchnorm="gluon"))."""
        mods = self.__dict__.setdefault("_modules_by_name", dict(self.model.named_modules()))
        m = mods.get(key.rsplit(".", 1)[0] if "." in key else "")
        return getattr(m, "running_var_estimate", None) == "biased"
