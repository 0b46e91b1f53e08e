"""State dicts on MXNet: structural names from the block tree (what ``save_parameters`` uses),
with dualdl layers' torch-vocabulary parameter names."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, Tuple

import numpy as np
from mxnet import gluon, nd


def is_model(obj: Any) -> bool:
    return isinstance(obj, gluon.Block)


def _items(model: gluon.Block):
    return model._collect_params_with_prefix().items()


def state_dict(model: gluon.Block) -> "OrderedDict[str, nd.NDArray]":
    """Parameters first, then buffers (grad_req 'null'), like torch's ordering by kind per module.
    Waits for MXNet's engine first: after a forward outside ``record()``, MKLDNN reorders a
    (transposed) convolution's weight in place asynchronously, and reading the weight meanwhile
    raised "We can't generate TBlob for MKLDNN data" or crashed the process (measured:
    ConvTranspose2d(dilation=2), within 300 create-forward-read rounds; none after waiting)."""
    nd.waitall()
    return OrderedDict((k, p.data(p.list_ctx()[0]).detach()) for k, p in _items(model))


def state_targets(model: gluon.Block) -> Dict[str, Tuple[Tuple[int, ...], np.dtype]]:
    out = OrderedDict()
    for k, p in _items(model):
        if p.shape is None or any(s == 0 for s in p.shape):
            raise RuntimeError(f"parameter {k} of {type(model).__name__} is not initialised yet "
                               f"(deferred shape {p.shape}); run one forward pass first")
        out[k] = (tuple(p.shape), np.dtype(p.dtype))
    return out


def assign(model: gluon.Block, arrays: Dict[str, np.ndarray]) -> None:
    """Copy each (validated) host array straight into every context's existing NDArray: no new
    device arrays (``set_data(nd.array(a))`` allocates and copies twice; on a 403 MB model that
    was 1.1-3x ``load_parameters``)."""
    params = dict(_items(model))
    for k, a in arrays.items():
        for d in params[k].list_data():
            d[:] = a                          # one host-to-device copy, cast to the parameter's dtype
