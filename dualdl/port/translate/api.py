"""``translate(block, sample_inputs, out_dir)``: Gluon block -> PyTorch source, weights, proof."""
from __future__ import annotations

import math
import time
from typing import Any, List, Optional

import numpy as np

from .pipeline import TranslateReport, stage_prove_publish
from .publish import Staging
from .publish import default_name as _default_name, name_problem as _name_problem

__all__ = ["Staging", "TranslateReport", "translate"]


def _as_arrays(sample_inputs: Any) -> List[Any]:
    """One numpy array per positional input; an input that is a list or tuple of arrays (begin
    states: ``[h, c]``, gluonnlp ELMo's list of (h, c) pairs) keeps its nesting, arrays inside."""
    items = sample_inputs if isinstance(sample_inputs, (list, tuple)) else [sample_inputs]
    return [_as_array(x, str(i)) for i, x in enumerate(items)]


def _as_array(x: Any, where: str) -> Any:
    if isinstance(x, (list, tuple)) and x and _holds_arrays(x):
        return type(x)(_as_array(v, f"{where}[{j}]") for j, v in enumerate(x))
    if hasattr(x, "asnumpy"):
        x = x.asnumpy()
    elif hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x)
    except ValueError as e:
        raise ValueError(f"translate: sample input {where} is not an array ({e})") from None
    if a.dtype == object:
        raise ValueError(f"translate: sample input {where} is not a numeric array (dtype object)")
    if a.dtype.kind == "f" and np.isnan(a).any():     # every check would compare NaN with NaN
        raise ValueError(f"translate: sample input {where} holds {int(np.isnan(a).sum())} NaN values; the proof "
                         f"compares numbers: give a sample without NaN")
    return a


def _shapes(arrays: Any) -> Any:
    """The shapes of (nested) sample inputs, for messages."""
    return [_shapes(a) if isinstance(a, (list, tuple)) else tuple(a.shape) for a in arrays]


def _holds_arrays(x: Any) -> bool:
    return any(hasattr(v, "shape") or (isinstance(v, (list, tuple)) and _holds_arrays(v)) for v in x)


def translate(block: Any, sample_inputs: Any, out_dir: str, name: Optional[str] = None, *,
              verify: bool = True, lr: float = 0.1, seed: int = 0,
              batchnorm: str = "torch", force: bool = False, train: bool = True) -> TranslateReport:
    """Write ``out_dir/<name>.py`` (a torch module mirroring the Gluon block tree),
    ``<name>.safetensors`` (its state_dict, from the block's current weights) and
    ``<name>.report.json``; return the report (``.ok`` only if every check passed).

    ``sample_inputs``: one array or a list of arrays (numpy, NDArray) as the block takes them.
    Verification runs both models in float64 (eval with randomised norms/biases, and one SGD step
    at ``lr`` in train mode); the block's weights are restored afterwards.

    ``train=False`` translates for inference: a block whose forward branches on
    ``autograd.is_training()`` gets its inference forward only (its training mode raises), and the
    proof's backward and SGD step run in inference mode. Needed where the training forward asks
    ``autograd.is_recording()`` (gluoncv's detectors compute targets and losses there).

    ``batchnorm``: ``"torch"`` writes ``nn.BatchNorm*d`` (running variance updated with torch's
    unbiased batch variance); ``"gluon"`` writes a BatchNorm that keeps Gluon's biased estimate.

    Files are staged and proven before they replace anything (see :class:`Staging`): a crash
    leaves the previous complete result or no report. An existing file of these names that
    translate did not write is refused (``FileExistsError``) unless ``force=True``.
    A ``SymbolBlock`` (an exported model) is translated from its graph (``translate_symbol_block``)."""
    import mxnet as mx
    from .codegen import Generator
    from .errors import TranslationError
    from .trace import gluon_inputs, record_calls, walk
    from .verify import verify as run_verify

    if not isinstance(block, mx.gluon.Block):
        raise TypeError(f"translate: expected a Gluon Block, got {type(block).__name__}")
    if isinstance(block, mx.gluon.SymbolBlock):
        from .symbol_file import translate_symbol_block
        return translate_symbol_block(block, sample_inputs, out_dir, name, verify=verify, lr=lr, seed=seed,
                                      batchnorm=batchnorm, force=force)
    if batchnorm not in ("torch", "gluon"):
        raise ValueError(f"translate: batchnorm must be 'torch' or 'gluon', got {batchnorm!r}")
    if not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"translate: lr must be a positive finite number (the verified SGD step), got {lr!r}")
    if name is None:
        name = _default_name(block)
    elif _name_problem(name):
        raise ValueError(f"translate: cannot use the name {name!r}: {_name_problem(name)}; choose another name")
    stage = Staging(out_dir, name, force=force)     # refuses before any work: file as out_dir, foreign files
    arrays = _as_arrays(sample_inputs)
    t0, c0 = time.perf_counter(), time.process_time()
    active = [(b, b._active) for _, b in walk(block) if getattr(b, "_active", False)]
    if active:
        block.hybridize(False)
    try:
        inputs = gluon_inputs(block, arrays)
        try:
            records = record_calls(block, inputs)
        except mx.gluon.parameter.DeferredInitializationError as e:
            raise ValueError(f"translate: the block's parameters are not initialised ({e}); call "
                             f"block.initialize() or load_parameters(...) first") from None
        except mx.base.MXNetError as e:      # the sample inputs do not fit the model
            first = next((ln.strip() for ln in str(e).splitlines() if "Error" in ln and "Traceback" not in ln),
                         str(e).strip().splitlines()[-1:] or [""])
            first = first if isinstance(first, str) else first[0]
            raise ValueError(f"translate: {type(block).__name__} does not run on sample inputs of shapes "
                             f"{_shapes(arrays)} ({first}); give the shapes it takes") from None
        except TranslationError:
            raise
        except Exception as e:               # the block's own Python code failed on the sample inputs
            raise ValueError(f"translate: {type(block).__name__} failed on sample inputs of shapes "
                             f"{_shapes(arrays)} ({type(e).__name__}: "
                             f"{' '.join(str(e).split())}); check the inputs it takes") from e
        gen = Generator(block, records, name, batchnorm=batchnorm, train=train)
        source = gen.source()
        from ..mapping import checkpoint_namer     # save_parameters keys, whatever a block overrides
        ckpt_key = checkpoint_namer(block)

        def prove(report, cls, state, current):
            report.checks, report.first_divergent, notes, report.dtype = run_verify(
                block, cls, gen.entries, arrays, gen.same_output, records, lr=lr, seed=seed, ops=gen.ops,
                current=current, train=train)
            report.notes = list(notes)

        report = stage_prove_publish(stage, name, gen.top_class, source, gen.entries,
                                     lambda e: ckpt_key(e.gluon_key, e.param),
                                     prove=prove if verify and not gen.untraced else None, block=type(block).__name__,
                                     unproven_note="not verified: parts of the model were not translated"
                                     if gen.untraced else "", notes=list(getattr(gen, "notes", [])),
                                     untranslated=gen.untraced, t0=t0, c0=c0)
    finally:
        for b, flag in active:
            b._active = flag
    return report
