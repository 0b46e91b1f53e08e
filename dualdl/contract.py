"""The adapter contract: every module an adapter package provides and every name in it that the
neutral package calls, with a one-line meaning and the signature dualdl calls it with.

This is data (edit it here when an adapter gains or loses a name); ``ADAPTER_MODULES`` in
:mod:`dualdl.backend` derives from it, and ``tests/test_contract.py`` checks both adapters against
it: every module imports, every name exists, and every function/class accepts the contract's
parameters (same names, order and kinds; an adapter may add optional parameters, ``*args`` or
``**kwargs``). The tensor functions of ``core.Backend`` are the abstract methods of
:class:`dualdl.backend.Backend` itself. Nothing here imports a framework.

Signatures are written as source text, ``=...`` marking a parameter with a default (its value is
the adapter's business); :func:`stub` turns one into a function whose ``inspect.signature`` can be
compared.
"""
from __future__ import annotations

import inspect
from typing import Dict, List, NamedTuple, Optional

__all__ = ["Name", "CONTRACT", "PARALLEL", "stub", "contract_signature", "signature_mismatch",
           "check_adapter"]


class Name(NamedTuple):
    """One name an adapter module must provide."""
    kind: str                   # "function", "class" or "object"
    signature: Optional[str]    # parameters as source text, e.g. "(x, dim=...)"; None for objects
    meaning: str


def fn(signature: str, meaning: str) -> Name:
    return Name("function", signature, meaning)


def cls(signature: str, meaning: str) -> Name:
    """A class; ``signature`` is its constructor's (without ``self``)."""
    return Name("class", signature, meaning)


# nn: the write-once base and what dualdl.nn calls besides the layers. The layers (every name in
# dualdl.nn.layers.LAYERS, with its signature) are declared there and checked against both adapters by
# tests/test_layer_contract.py: one registry, not two.
NN: Dict[str, Name] = {
    "Module": cls("()",
        "the base class of write-once modules (``torch.nn.Module`` / Gluon ``HybridBlock`` mixin)"),
    "make_parameter": fn("(data, requires_grad=...)",
        "a native parameter holding a copy of the numpy array ``data``"),
    "factory_kwargs": fn("(layer, device, dtype)",
        "torch's ``device=``/``dtype=`` as the native values plus the scope to build the layer in"),
}

# ops: tensor functions (``dualdl.ops`` dispatches here by tensor type)
OPS: Dict[str, Name] = {
    "relu": fn("(x)", "``torch.relu`` semantics on native tensors"),
    "sigmoid": fn("(x)", "``torch.sigmoid`` semantics on native tensors"),
    "tanh": fn("(x)", "``torch.tanh`` semantics on native tensors"),
    "gelu": fn("(x, approximate=...)", "``torch.nn.functional.gelu`` semantics on native tensors"),
    "leaky_relu": fn("(x, negative_slope=...)",
        "``torch.nn.functional.leaky_relu`` semantics on native tensors"),
    "elu": fn("(x, alpha=...)", "``torch.nn.functional.elu`` semantics on native tensors"),
    "silu": fn("(x)", "``torch.nn.functional.silu`` semantics on native tensors"),
    "softmax": fn("(x, dim)", "``torch.softmax`` semantics on native tensors"),
    "log_softmax": fn("(x, dim)", "``torch.log_softmax`` semantics on native tensors"),
    "matmul": fn("(a, b)", "``torch.matmul`` semantics on native tensors"),
    "linear": fn("(x, weight, bias=...)", "``torch.nn.functional.linear`` semantics on native tensors"),
    "add": fn("(a, b)", "``torch.add`` semantics on native tensors"),
    "sub": fn("(a, b)", "``torch.sub`` semantics on native tensors"),
    "mul": fn("(a, b)", "``torch.mul`` semantics on native tensors"),
    "div": fn("(a, b)", "``torch.div`` semantics on native tensors"),
    "pow": fn("(x, exponent)", "``torch.pow`` semantics on native tensors"),
    "exp": fn("(x)", "``torch.exp`` semantics on native tensors"),
    "log": fn("(x)", "``torch.log`` semantics on native tensors"),
    "sqrt": fn("(x)", "``torch.sqrt`` semantics on native tensors"),
    "abs": fn("(x)", "``torch.abs`` semantics on native tensors"),
    "clamp": fn("(x, min=..., max=...)", "``torch.clamp`` semantics on native tensors"),
    "zeros_like": fn("(x)", "``torch.zeros_like`` semantics on native tensors"),
    "ones_like": fn("(x)", "``torch.ones_like`` semantics on native tensors"),
    "where": fn("(cond, a, b)", "``torch.where`` semantics on native tensors"),
    "masked_fill": fn("(x, mask, value)", "``torch.masked_fill`` semantics on native tensors"),
    "dropout": fn("(x, p=..., training=...)", "``torch.nn.functional.dropout`` semantics on native tensors"),
    "cat": fn("(tensors, dim=...)", "``torch.cat`` semantics on native tensors"),
    "stack": fn("(tensors, dim=...)", "``torch.stack`` semantics on native tensors"),
    "split": fn("(x, split_size_or_sections, dim=...)", "``torch.split`` semantics on native tensors"),
    "chunk": fn("(x, chunks, dim=...)", "``torch.chunk`` semantics on native tensors"),
    "transpose": fn("(x, dim0, dim1)", "``torch.transpose`` semantics on native tensors"),
    "permute": fn("(x, dims)", "``torch.permute`` semantics on native tensors"),
    "reshape": fn("(x, shape)", "``torch.reshape`` semantics on native tensors"),
    "flatten": fn("(x, start_dim=..., end_dim=...)", "``torch.flatten`` semantics on native tensors"),
    "squeeze": fn("(x, dim=...)", "``torch.squeeze`` semantics on native tensors"),
    "unsqueeze": fn("(x, dim)", "``torch.unsqueeze`` semantics on native tensors"),
    "sum": fn("(x, dim=..., keepdim=...)", "``torch.sum`` semantics on native tensors"),
    "mean": fn("(x, dim=..., keepdim=...)", "``torch.mean`` semantics on native tensors"),
    "max": fn("(x, dim=..., keepdim=...)", "``torch.max`` semantics on native tensors"),
    "min": fn("(x, dim=..., keepdim=...)", "``torch.min`` semantics on native tensors"),
    "argmax": fn("(x, dim=..., keepdim=...)", "``torch.argmax`` semantics on native tensors"),
    "argmin": fn("(x, dim=..., keepdim=...)", "``torch.argmin`` semantics on native tensors"),
    "embedding": fn("(input, weight)", "``torch.nn.functional.embedding`` semantics on native tensors"),
    "one_hot": fn("(x, num_classes=...)", "``torch.nn.functional.one_hot`` semantics on native tensors"),
    # issue 14's ops (indexing, shapes, reductions, creation, functional layers)
    "clip": fn("(x, min=..., max=...)", "``dl.ops.clip`` (torch's semantics) on native tensors"),
    "gather": fn("(input, dim, index, *, sparse_grad=...)",
        "``dl.ops.gather`` (torch's semantics) on native tensors"),
    "index_select": fn("(input, dim, index)",
        "``dl.ops.index_select`` (torch's semantics) on native tensors"),
    "take_along_dim": fn("(input, indices, dim=...)",
        "``dl.ops.take_along_dim`` (torch's semantics) on native tensors"),
    "topk": fn("(input, k, dim=..., largest=..., sorted=...)",
        "``dl.ops.topk`` (torch's semantics) on native tensors"),
    "sort": fn("(input, dim=..., descending=..., stable=...)",
        "``dl.ops.sort`` (torch's semantics) on native tensors"),
    "argsort": fn("(input, dim=..., descending=..., stable=...)",
        "``dl.ops.argsort`` (torch's semantics) on native tensors"),
    "expand": fn("(input, *sizes)", "``dl.ops.expand`` (torch's semantics) on native tensors"),
    "repeat": fn("(input, *repeats)", "``dl.ops.repeat`` (torch's semantics) on native tensors"),
    "tile": fn("(input, dims)", "``dl.ops.tile`` (torch's semantics) on native tensors"),
    "flip": fn("(input, dims)", "``dl.ops.flip`` (torch's semantics) on native tensors"),
    "roll": fn("(input, shifts, dims=...)", "``dl.ops.roll`` (torch's semantics) on native tensors"),
    "pad": fn("(input, pad, mode=..., value=...)", "``dl.ops.pad`` (torch's semantics) on native tensors"),
    "tril": fn("(input, diagonal=...)", "``dl.ops.tril`` (torch's semantics) on native tensors"),
    "triu": fn("(input, diagonal=...)", "``dl.ops.triu`` (torch's semantics) on native tensors"),
    "cumsum": fn("(input, dim, *, dtype=...)", "``dl.ops.cumsum`` (torch's semantics) on native tensors"),
    "cumprod": fn("(input, dim, *, dtype=...)", "``dl.ops.cumprod`` (torch's semantics) on native tensors"),
    "norm": fn("(input, p=..., dim=..., keepdim=..., dtype=...)",
        "``dl.ops.norm`` (torch's semantics) on native tensors"),
    "var": fn("(input, dim=..., *, correction=..., keepdim=...)",
        "``dl.ops.var`` (torch's semantics) on native tensors"),
    "std": fn("(input, dim=..., *, correction=..., keepdim=...)",
        "``dl.ops.std`` (torch's semantics) on native tensors"),
    "logsumexp": fn("(input, dim, keepdim=...)",
        "``dl.ops.logsumexp`` (torch's semantics) on native tensors"),
    "erf": fn("(input)", "``dl.ops.erf`` (torch's semantics) on native tensors"),
    "maximum": fn("(input, other)", "``dl.ops.maximum`` (torch's semantics) on native tensors"),
    "minimum": fn("(input, other)", "``dl.ops.minimum`` (torch's semantics) on native tensors"),
    "isnan": fn("(input)", "``dl.ops.isnan`` (torch's semantics) on native tensors"),
    "isfinite": fn("(input)", "``dl.ops.isfinite`` (torch's semantics) on native tensors"),
    "einsum": fn("(equation, *operands)", "``dl.ops.einsum`` (torch's semantics) on native tensors"),
    "bmm": fn("(input, mat2)", "``dl.ops.bmm`` (torch's semantics) on native tensors"),
    "baddbmm": fn("(input, batch1, batch2, *, beta=..., alpha=...)",
        "``dl.ops.baddbmm`` (torch's semantics) on native tensors"),
    "outer": fn("(input, vec2)", "``dl.ops.outer`` (torch's semantics) on native tensors"),
    "eye": fn("(n, m, dtype, device)", "``dl.ops.eye`` (torch's semantics) on native tensors"),
    "linspace": fn("(start, end, steps, dtype, device)",
        "``dl.ops.linspace`` (torch's semantics) on native tensors"),
    # parameters and models (dualdl.params): torch's methods that Gluon's classes lack
    "model_to_dtype": fn("(model, dtype)", "cast a model's floating parameters and buffers in place; the model"),
    "numel": fn("(p)", "number of elements of a parameter or tensor"),
    "requires_grad": fn("(p)", "whether a parameter takes a gradient"),
    "requires_grad_": fn("(p, flag=...)", "freeze/unfreeze a parameter in place"),
    "grad": fn("(p)", "a parameter's gradient (MXNet: summed over its contexts) or None"),
    "add_": fn("(p, other, alpha=...)", "``p += alpha * other`` in place outside autograd (every context)"),
    # random tensors (dualdl.random): drawn from the backend's generator, which dualdl.seed seeds
    "rand": fn("(size, dtype, device)", "uniform [0, 1) tensor of ``size`` (a graph node while MXNet traces)"),
    "randn": fn("(size, dtype, device)", "standard normal tensor of ``size`` (a graph node while MXNet traces)"),
    "randint": fn("(low, high, size, dtype, device)", "integers uniform in [low, high) of ``size``"),
    "rand_like": fn("(input, dtype=...)", "``torch.rand_like`` on a native tensor (MXNet: Symbols too)"),
    "randn_like": fn("(input, dtype=...)", "``torch.randn_like`` on a native tensor (MXNet: Symbols too)"),
    "randint_like": fn("(input, low, high, dtype=...)", "``torch.randint_like`` on a native tensor"),
    "multinomial": fn("(input, num_samples, replacement=...)", "``torch.multinomial`` (int64 indices)"),
    "bernoulli": fn("(input, p=...)", "``torch.bernoulli``: 1 with probability input (or p), input's dtype"),
    "normal_": fn("(tensor, mean=..., std=...)", "fill a tensor/parameter in place, outside autograd"),
    "uniform_": fn("(tensor, a=..., b=...)", "fill a tensor/parameter in place, outside autograd"),
    "interpolate": fn("(input, size=..., scale_factor=..., mode=..., align_corners=..., recompute_scale_factor=..., antialias=...)",
        "``dl.ops.interpolate`` (torch's semantics) on native tensors"),
    "conv2d": fn("(input, weight, bias=..., stride=..., padding=..., dilation=..., groups=...)",
        "``dl.ops.conv2d`` (torch's semantics) on native tensors"),
    "max_pool2d": fn("(input, kernel_size, stride=..., padding=..., dilation=..., ceil_mode=..., return_indices=...)",
        "``dl.ops.max_pool2d`` (torch's semantics) on native tensors"),
    "avg_pool2d": fn("(input, kernel_size, stride=..., padding=..., ceil_mode=..., count_include_pad=..., divisor_override=...)",
        "``dl.ops.avg_pool2d`` (torch's semantics) on native tensors"),
    "batch_norm": fn("(input, running_mean, running_var, weight=..., bias=..., training=..., momentum=..., eps=...)",
        "``dl.ops.batch_norm`` (torch's semantics) on native tensors"),
    "layer_norm": fn("(input, normalized_shape, weight=..., bias=..., eps=...)",
        "``dl.ops.layer_norm`` (torch's semantics) on native tensors"),
    "group_norm": fn("(input, num_groups, weight=..., bias=..., eps=...)",
        "``dl.ops.group_norm`` (torch's semantics) on native tensors"),
    "scaled_dot_product_attention": fn("(query, key, value, attn_mask=..., dropout_p=..., is_causal=..., *, scale=..., enable_gqa=...)",
        "``dl.ops.scaled_dot_product_attention`` (torch's semantics) on native tensors"),
}

# losses: loss functions (``dualdl.losses`` / ``dualdl.losses.gluon`` dispatch here)
LOSSES: Dict[str, Name] = {
    "reduce": fn("(loss, reduction)",
        "PyTorch's reduction: 'mean' over all elements, 'sum', or 'none' (unchanged)."),
    "mse_loss": fn("(input, target, reduction=...)", "``F.mse_loss``"),
    "l1_loss": fn("(input, target, reduction=...)", "``F.l1_loss``"),
    "smooth_l1_loss": fn("(input, target, reduction=..., beta=...)", "``F.smooth_l1_loss``"),
    "huber_loss": fn("(input, target, reduction=..., delta=...)", "``F.huber_loss``"),
    "binary_cross_entropy_with_logits": fn("(input, target, weight=..., pos_weight=..., reduction=...)",
        "``F.binary_cross_entropy_with_logits``"),
    "kl_div": fn("(input, target, reduction=..., log_target=...)", "``F.kl_div``"),
    "nll_loss": fn("(input, target, weight=..., ignore_index=..., reduction=...)", "``F.nll_loss``"),
    "cross_entropy": fn("(input, target, weight=..., ignore_index=..., reduction=..., label_smoothing=...)",
        "``F.cross_entropy`` (class indices or probabilities, label smoothing)"),
    "ctc_loss": fn(
        "(log_probs, targets, input_lengths, target_lengths, blank=..., reduction=..., zero_infinity=..., "
        "check_log_probs=...)",
        "``F.ctc_loss`` (log-probabilities TNC)"),
    "gluon_l2_loss": fn("(pred, label, sample_weight=..., weight=..., batch_axis=...)",
        "Gluon ``L2Loss``'s numbers (per-sample, halved square)"),
    "gluon_l1_loss": fn("(pred, label, sample_weight=..., weight=..., batch_axis=...)",
        "Gluon ``L1Loss``'s numbers"),
    "gluon_huber_loss": fn("(pred, label, sample_weight=..., rho=..., weight=..., batch_axis=...)",
        "Gluon ``HuberLoss``'s numbers"),
    "gluon_sigmoid_bce_loss": fn(
        "(pred, label, sample_weight=..., pos_weight=..., from_sigmoid=..., weight=..., batch_axis=...)",
        "Gluon ``SigmoidBinaryCrossEntropyLoss``'s numbers"),
    "gluon_softmax_ce_loss": fn(
        "(pred, label, sample_weight=..., axis=..., sparse_label=..., from_logits=..., weight=..., "
        "batch_axis=...)",
        "Gluon ``SoftmaxCrossEntropyLoss``'s numbers"),
    "gluon_ctc_loss": fn(
        "(pred, label, pred_lengths=..., label_lengths=..., sample_weight=..., layout=..., "
        "label_layout=..., weight=...)",
        "Gluon ``CTCLoss``'s numbers (infeasible samples get a zero gradient)"),
    "multi_margin_loss": fn("(input, target, p=..., margin=..., weight=..., reduction=...)", "``F.multi_margin_loss``"),
    "multilabel_margin_loss": fn("(input, target, reduction=...)", "``F.multilabel_margin_loss``"),
    "soft_margin_loss": fn("(input, target, reduction=...)", "``F.soft_margin_loss``"),
    "multilabel_soft_margin_loss": fn("(input, target, weight=..., reduction=...)",
        "``F.multilabel_soft_margin_loss``"),
    "hinge_embedding_loss": fn("(input, target, margin=..., reduction=...)", "``F.hinge_embedding_loss``"),
    "linear_cross_entropy": fn(
        "(input, linear_weight, target, linear_bias=..., weight=..., reduction=..., ignore_index=..., "
        "label_smoothing=..., options=...)",
        "``torch.nn.LinearCrossEntropyLoss``'s function: cross-entropy of ``input @ linear_weight.T + bias``"),
    "loss_modules": fn("()", "name -> the adapter's loss module class of each ``dualdl.nn`` loss"),
}

# optim: optimizers with torch's signatures and gradient utilities
OPTIM: Dict[str, Name] = {
    "SGD": cls(
        "(params, lr=..., momentum=..., dampening=..., weight_decay=..., nesterov=..., *, maximize=..., "
        "foreach=..., differentiable=..., fused=...)",
        "Implements stochastic gradient descent (optionally with momentum)."),
    "Adam": cls(
        "(params, lr=..., betas=..., eps=..., weight_decay=..., amsgrad=..., *, foreach=..., maximize=..., "
        "capturable=..., differentiable=..., fused=..., decoupled_weight_decay=...)",
        "Implements Adam algorithm."),
    "AdamW": cls(
        "(params, lr=..., betas=..., eps=..., weight_decay=..., amsgrad=..., *, maximize=..., foreach=..., "
        "capturable=..., differentiable=..., fused=...)",
        "Implements AdamW algorithm, where weight decay does not accumulate in the momentum nor variance."),
    "RMSprop": cls(
        "(params, lr=..., alpha=..., eps=..., weight_decay=..., momentum=..., centered=..., "
        "capturable=..., foreach=..., maximize=..., differentiable=...)",
        "Implements RMSprop algorithm."),
    "clip_grad_norm_": fn("(params, max_norm, norm_type=...)",
        "``torch.nn.utils.clip_grad_norm_`` (all device copies scaled)"),
    "clip_grad_value_": fn("(params, clip_value)",
        "``torch.nn.utils.clip_grad_value_`` on every gradient copy"),
    "grad_maxima": fn("(params)",
        "the largest ``|g|`` of the gradients per (dtype, device); NaN if any element is NaN"),
    "grads_finite": fn("(params, cache=...)", "whether every gradient element is finite"),
    "step_if_finite": fn("(optimizer, params, cache=..., losses=...)",
        "one ``optimizer.step()`` only if every gradient element of ``params`` is finite, and the "
        "step's loss (``losses``: what ``Replicas.run(..., read=False)`` returned) too; returns "
        "whether it was applied (where not, the model and optimizer state are unchanged)"),
}

# optim_adaptive: the adaptive optimizers (``dl.optim.Adagrad`` ...)
OPTIM_ADAPTIVE: Dict[str, Name] = {
    "Adagrad": cls(
        "(params, lr=..., lr_decay=..., weight_decay=..., initial_accumulator_value=..., eps=..., "
        "foreach=..., *, maximize=..., differentiable=..., fused=...)",
        "Implements Adagrad algorithm."),
    "Adadelta": cls(
        "(params, lr=..., rho=..., eps=..., weight_decay=..., foreach=..., *, capturable=..., "
        "maximize=..., differentiable=...)",
        "Implements Adadelta algorithm."),
    "Adamax": cls(
        "(params, lr=..., betas=..., eps=..., weight_decay=..., foreach=..., *, maximize=..., "
        "differentiable=..., capturable=...)",
        "Implements Adamax algorithm (a variant of Adam based on infinity norm)."),
    "NAdam": cls(
        "(params, lr=..., betas=..., eps=..., weight_decay=..., momentum_decay=..., "
        "decoupled_weight_decay=..., *, foreach=..., maximize=..., capturable=..., differentiable=...)",
        "Implements NAdam algorithm."),
}

# optim_lamb: the LAMB optimizer
OPTIM_LAMB: Dict[str, Name] = {
    "LAMB": cls(
        "(params, lr=..., betas=..., eps=..., weight_decay=..., bias_correction=..., lower_bound=..., "
        "upper_bound=..., *, maximize=...)",
        "Layer-wise adaptive moments (You et al. 2019), MXNet 1.9.1's formula."),
}

# state: state dicts (``dualdl.state``, checkpoints)
STATE: Dict[str, Name] = {
    "is_model": fn("(obj)",
        "whether ``obj`` is this framework's model (``torch.nn.Module`` / Gluon ``Block``)"),
    "state_dict": fn("(model)", "parameters then buffers by structural name, as native tensors (detached)"),
    "state_targets": fn("(model)", "name -> native parameter/buffer a state dict is loaded into"),
    "assign": fn("(model, arrays)",
        "copy validated host arrays into the model's existing parameters/buffers"),
}

# distributed: multi-process training (``dualdl.distributed``)
DISTRIBUTED: Dict[str, Name] = {
    "init": fn("(*, world_size=..., timeout=...)",
        "join the process group / kvstore this process was launched into"),
    "is_distributed": fn("()", "whether this process is part of an initialised multi-process job"),
    "rank": fn("()", "this process's rank"),
    "world_size": fn("()", "the number of processes"),
    "barrier": fn("()", "block until every process reaches this call"),
    "shutdown": fn("()", "leave the process group"),
    "broadcast_parameters": fn("(params, src=...)", "copy rank ``src``'s parameter values to every process"),
    "wrap_model": fn("(model, **kwargs)",
        "the model as the framework trains it distributed (DDP on torch, unchanged on MXNet)"),
    "gradient_reduction": fn("()", "who sums gradients over processes (``'ddp'``, ``'kvstore'`` ...)"),
    "kvstore": fn("()", "the kvstore to hand a Gluon Trainer (``None`` on torch)"),
    "DistributedEnvError": cls("(*args, **kwargs)",
        "The environment of a distributed process is missing, inconsistent or leaked in."),
}

# ============================================================================================
# what the Trainer and the data-parallel helpers call: autograd, gradients, buffers, RNG state,
# replicas and the distributed reducer, one adapter module per concern
PARALLEL: Dict[str, Dict[str, Name]] = {
    "autograd": {
        "record": fn("(train_mode=...)",
            "context manager: autograd recording (``autograd.record`` / grad enabled) in train or eval mode"),
        "no_grad": fn("()", "context manager: no autograd recording"),
        "backward": fn("(losses, grads, retain_graph)",
            "Backpropagate each loss; a non-scalar loss backpropagates its sum (MXNet's rule)."),
    },
    "grads": {
        "trainable": fn("(model)", "``(name, parameter)`` of the parameters with gradients"),
        "model_devices": fn("(model)",
            "The one device holding the model's tensors (``cpu(0)`` for an empty model)."),
        "zero_grad": fn("(params, cache=...)",
            "``grad = None`` (torch's default ``set_to_none=True``): an unused parameter stays None."),
        "allreduce_grads": fn("(params)",
            "sum the gradients of every device copy into every copy (a no-op where replicas share one parameter)"),
        "scale_grads": fn("(params, factor)", "multiply every gradient (all copies) by ``factor``"),
        "stale": fn("(named)", "Names of parameters with no gradient since the last zero_grad."),
        "overwrite_next_backward": fn("(params, cache=...)",
            "what :func:`zero_grad` gives for a step with exactly one backward (dl.Trainer without "
            "accumulation): the next backward's gradients, none for an unused parameter; follow it "
            "with :func:`accumulate_again`"),
        "accumulate_again": fn("(params, cache=...)",
            "after that backward: later backwards add into the gradients again (torch's rule); "
            "which gradients are fresh is kept"),
    },
    "buffers": {
        "snapshot_buffers": fn("(model)",
            "a copy of the model's buffers (BatchNorm running stats) to restore later"),
        "restore_buffers": fn("(model, snap)", "put a :func:`snapshot_buffers` copy back"),
        "sync_buffers": fn("(model)",
            "copy replica 0's buffers to every device copy (a no-op where one module holds them)"),
    },
    "rng": {
        "rng_state": fn("()",
            "the framework RNG state to save in a checkpoint (``None`` where it cannot be read)"),
        "set_rng_state": fn("(state)", "restore :func:`rng_state`'s value"),
    },
    "replicas": {
        "split_to": fn("(a, axis, sizes, devices)",
            "Pieces of ``a`` of the given sizes along ``axis``, piece i on devices[i]."),
        "Replicas": cls("(model, devices, strategy)",
            "Runs forward, loss and backward of one batch over ``devices`` with a strategy: "
            "``run(xs, x_axes, ys, y_axes, out_axis, sizes, loss_fn, objective, read=True)`` returns "
            "the loss as a float, or with ``read=False`` a value for ``loss_value(...)`` and "
            "``optim.step_if_finite(losses=...)`` (MXNet: not read yet)."),
    },
    "reducer": {
        "DistReducer": cls("(model, named)", "sums gradients over the processes of a distributed job"),
    },
}
# ============================================================================================

# testing: what the one parity runner (dualdl.testing.runners) needs per backend. A backend that
# can be the parity table's reference also provides ``native_entry(kind, name)`` and
# ``native_namespace()`` (its framework's own layers/functions; torch's today).
TESTING: Dict[str, Name] = {
    "tensor": fn("(a, grad=...)", "a native tensor owning a copy of ``a`` (integers as the index dtype)"),
    "to_numpy": fn("(t)", "a numpy copy of a native tensor"),
    "is_float": fn("(t)", "whether ``t`` has a floating dtype"),
    "numel": fn("(t)", "the number of elements of ``t``"),
    "set_mode": fn("(model, train)", "``model.train()`` / ``model.eval()``"),
    "zero_grad": fn("(model)", "clear every parameter gradient of ``model``"),
    "recording": fn("(train)", "context manager: record autograd in train/eval mode (MXNet's record)"),
    "inference": fn("(train)", "context manager: run without recording"),
    "backward": fn("(outputs, grads=...)", "backpropagate a scalar loss, or ``grads`` into ``outputs``"),
    "param_grads": fn("(model)", "``{name: gradient as numpy or None}``"),
    "input_grad": fn("(x)", "the gradient of input ``x`` as numpy, or None"),
    "forward_hooks": fn("(model, hook)", "context manager: ``hook(module, inputs, output)`` on every submodule"),
    "cast_model": fn("(model, dtype)", "the model with its parameters and buffers cast to ``dtype``"),
}

INIT: Dict[str, Name] = {
    "apply": fn("(name, tensor, kwargs)", "run torch.nn.init.<name>'s recipe on a native tensor or parameter "
                "in place (dualdl.nn.init); returns it"),
}

CORE: Dict[str, Name] = {
    "Backend": cls("()", "the :class:`dualdl.backend.Backend` subclass (the tensor functions)"),
}

# ops_functional: dualdl.nn.functional's functions. Their names and signatures (torch.nn.functional's) are
# one table, dualdl/functional_spec.py (this module imports nothing), which dualdl.nn.functional builds its
# dispatchers from; tests/test_nn_functional_more.py checks both adapters against it as check_adapter does.
OPS_FUNCTIONAL: Dict[str, Name] = {}

#: module name -> {name: Name}; the module order is ``ADAPTER_MODULES``'s
CONTRACT: Dict[str, Dict[str, Name]] = {
    "core": CORE, "nn": NN, "ops": OPS, "losses": LOSSES, "optim": OPTIM,
    "optim_adaptive": OPTIM_ADAPTIVE, "optim_lamb": OPTIM_LAMB, "state": STATE,
    "distributed": DISTRIBUTED, **PARALLEL, "testing": TESTING, "init": INIT,
    "ops_functional": OPS_FUNCTIONAL,
}


def stub(signature: str):
    """A function with the parameters of ``signature`` (source text such as ``"(x, dim=...)"``)."""
    ns: Dict[str, object] = {}
    exec(f"def _stub{signature}: pass", ns)     # noqa: S102 (our own constant text)
    return ns["_stub"]


def contract_signature(module: str, name: str) -> inspect.Signature:
    """The ``inspect.Signature`` the contract gives ``module.name``."""
    return inspect.signature(stub(CONTRACT[module][name].signature))


def _actual_signature(obj) -> Optional[inspect.Signature]:
    """A function's signature, or a class's constructor's without ``self``; a constructor that only
    passes ``*args, **kwargs`` on is looked through to the next class in the MRO that says more."""
    if not inspect.isclass(obj):
        try:
            sig = inspect.signature(obj)
        except ValueError:          # a framework builtin used as is (torch's F.conv2d): unknowable
            return None
        kinds = [p.kind for p in sig.parameters.values()]
        if kinds == [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]:
            return None             # a framework dispatcher (torch's F.max_pool2d): takes anything
        return sig
    for klass in obj.__mro__:
        init = vars(klass).get("__init__")
        if init is None or klass is object:
            continue
        params = list(inspect.signature(init).parameters.values())[1:]
        kinds = [p.kind for p in params]
        if kinds != [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]:
            return inspect.Signature(params)
    return inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
                              inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])


def signature_mismatch(want: inspect.Signature, got: inspect.Signature) -> Optional[str]:
    """Why ``got`` cannot stand in for ``want`` (``None`` if it can): every wanted parameter is
    there with the same name, kind and position among its kind, optional where the contract's is;
    every extra parameter is optional (has a default, or is ``*args`` / ``**kwargs``)."""
    P = inspect.Parameter
    got_params = list(got.parameters.values())
    names = [p.name for p in got_params]
    for i, w in enumerate(want.parameters.values()):
        if w.name not in names:
            return f"parameter {w.name!r} is missing"
        g = got.parameters[w.name]
        if g.kind != w.kind:
            return f"parameter {w.name!r} is {g.kind.description}, the contract says {w.kind.description}"
        if w.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD) and names.index(w.name) != i:
            return f"parameter {w.name!r} is at position {names.index(w.name)}, the contract says {i}"
        if w.default is not P.empty and g.default is P.empty and w.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            return f"parameter {w.name!r} is required, the contract gives it a default"
    extra = [p for p in got_params if p.name not in want.parameters
             and p.default is P.empty and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)]
    if extra:
        return f"extra required parameter(s) {', '.join(p.name for p in extra)}"
    return None


def check_adapter(adapter: str) -> List[str]:
    """Every way the adapter package ``adapter`` (e.g. ``"dualdl_torch"``) breaks the contract, as
    readable lines (empty when it keeps it). Imports the adapter and so its framework."""
    import importlib
    problems: List[str] = []
    for module, names in CONTRACT.items():
        try:
            mod = importlib.import_module(f"{adapter}.{module}")
        except ImportError as e:
            problems.append(f"{adapter}.{module}: cannot be imported ({e})")
            continue
        for name, spec in names.items():
            where = f"{adapter}.{module}.{name}"
            obj = getattr(mod, name, None)
            if obj is None:
                problems.append(f"{where}: missing ({spec.meaning})")
                continue
            if spec.kind == "class" and not inspect.isclass(obj):
                problems.append(f"{where}: expected a class, got {type(obj).__name__}")
                continue
            if spec.kind == "function" and not callable(obj):
                problems.append(f"{where}: expected a function, got {type(obj).__name__}")
                continue
            actual = _actual_signature(obj) if spec.signature is not None else None
            if actual is not None:
                why = signature_mismatch(contract_signature(module, name), actual)
                if why:
                    problems.append(f"{where}{actual}: {why} (contract: {spec.signature})")
    return problems
