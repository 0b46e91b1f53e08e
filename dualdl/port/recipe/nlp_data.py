"""A gluonnlp DataLoader's batches as source: ``FixedBucketSampler`` -> ``make_batch_sampler
(lengths)`` and its ``batchify_fn`` (``Pad``/``Stack``/``Tuple``/``List``/``Dict``) ->
``make_collate()`` for ``torch.utils.data.DataLoader(dataset, batch_sampler=..., collate_fn=...)``
(see torch_src/nlp_data.py). The live sampler's bucket keys are written as a table and the
sampler written is rebuilt from its lengths and compared here, bucket by bucket."""
from __future__ import annotations

from typing import Any

from .emit import RecipeError, SourceFile, call_src, lit, pretty

_SRC = "dualdl.port.recipe.torch_src.nlp_data"
_BATCHIFY = {"Pad": "GluonPad", "Stack": "GluonStack", "Tuple": "GluonTuple", "List": "GluonList",
             "Dict": "GluonDict"}


def is_nlp_loader(loader: Any) -> bool:
    """True for a gluonnlp sampler, or a DataLoader whose batch_sampler is one."""
    bs = getattr(loader, "_batch_sampler", loader)
    return type(bs).__module__.startswith("gluonnlp.")


def bucket_spec(sampler: Any) -> dict:
    """batch size, ratio, shuffle, use_average_length and bucket keys of a live
    ``FixedBucketSampler``, checked by rebuilding it with the torch-only sampler."""
    from .torch_src.nlp_data import GluonFixedBucketSampler
    kind = type(sampler).__name__
    if kind != "FixedBucketSampler":
        raise RecipeError(f"gluonnlp's {kind} has no translation; only FixedBucketSampler does")
    if sampler._num_shards:
        raise RecipeError(f"FixedBucketSampler(num_shards={sampler._num_shards}) has no "
                          f"translation; use num_shards=0 (one device) or shard the batches in "
                          f"the torch script")
    keys = [int(k) if sampler._single_element else tuple(int(x) for x in k)
            for k in sampler._bucket_keys]
    spec = dict(batch_size=int(sampler._batch_size), bucket_keys=keys,
                ratio=float(sampler._ratio), shuffle=bool(sampler._shuffle))
    for avg in (False, True):
        ours = GluonFixedBucketSampler(sampler._lengths, spec["batch_size"], bucket_keys=keys,
                                       ratio=spec["ratio"], use_average_length=avg)
        if ours._bucket_batch_sizes == list(sampler._bucket_batch_sizes):
            break
    else:
        raise RecipeError("this FixedBucketSampler's per-bucket batch sizes match neither "
                          "use_average_length=False nor True; it has no translation")
    if ours._bucket_sample_ids != [list(s) for s in sampler._bucket_sample_ids] or \
            ours._batch_infos != list(sampler._batch_infos):
        raise RecipeError("this FixedBucketSampler has been iterated with shuffle=True (its "
                          "buckets are shuffled in place); translate it before its first epoch")
    spec["use_average_length"] = avg
    return spec


def _dtype(d: Any) -> Any:
    import numpy as np
    return None if d is None else np.dtype(d).name


def batchify_src(fn: Any, indent: int = 4) -> str:
    """Source of the torch-only collate function equal to a gluonnlp batchify function."""
    kind = type(fn).__name__
    if not type(fn).__module__.startswith("gluonnlp.data.batchify") or kind not in _BATCHIFY:
        raise RecipeError(f"batchify_fn {getattr(fn, '__name__', kind)} has no translation; "
                          f"only gluonnlp.data.batchify {', '.join(_BATCHIFY)} do (write that "
                          f"collate_fn by hand)")
    name = _BATCHIFY[kind]
    if kind == "Pad":
        return call_src(name, [], dict(axis=int(fn._axis), pad_val=fn._pad_val,
                                       ret_length=bool(fn._ret_length), dtype=_dtype(fn._dtype),
                                       round_to=fn._round_to), indent=indent)
    if kind == "Stack":
        return call_src(name, [], dict(dtype=_dtype(fn._dtype)), indent=indent)
    if kind == "List":
        return f"{name}()"
    pad = " " * (indent + 4)
    if kind == "Tuple":
        parts = [batchify_src(f, indent + 4) for f in fn._fn]
    else:
        parts = [f"{lit(k)}: {batchify_src(f, indent + 4)}" for k, f in fn._fn_dict.items()]
    o, c = (f"{name}(", ")") if kind == "Tuple" else (f"{name}({{", "})")
    flat = o + ", ".join(parts) + c
    if indent + len(flat) <= 95 and "\n" not in flat:
        return flat
    return o + "\n" + "".join(f"{pad}{p},\n" for p in parts) + " " * indent + c


def emit_nlp_loader(sf: SourceFile, loader: Any) -> None:
    """``make_batch_sampler(lengths)`` and, for a DataLoader, ``make_collate()``."""
    sampler = getattr(loader, "_batch_sampler", loader)
    spec = bucket_spec(sampler)
    collate = None
    if sampler is not loader:
        collate = batchify_src(loader._batchify_fn)
    seed = ("\n    Seed with np.random.seed (gluonnlp shuffles the batches and each bucket in place"
            "\n    with numpy's global RNG)." if spec["shuffle"] else "")
    sf.use(_SRC, ["gluon_bucket_keys", "_match_bucket_keys", "GluonFixedBucketSampler"])
    sf.add(f'''
BUCKET_KEYS = {pretty(spec["bucket_keys"])}


def make_batch_sampler(lengths) -> GluonFixedBucketSampler:
    """gluonnlp's FixedBucketSampler (batch_size={spec["batch_size"]}, ratio={spec["ratio"]!r},
    shuffle={spec["shuffle"]}, use_average_length={spec["use_average_length"]}) over the same
    per-sample lengths: ``DataLoader(dataset, batch_sampler=make_batch_sampler(lengths))``. Make
    it once: each epoch shuffles its state further.{seed}
    """
    return GluonFixedBucketSampler(lengths, {spec["batch_size"]}, bucket_keys=BUCKET_KEYS,
                                   ratio={lit(spec["ratio"])}, shuffle={lit(spec["shuffle"])},
                                   use_average_length={lit(spec["use_average_length"])})
''', "make_batch_sampler")
    if collate is not None:
        sf.use(_SRC, ["_as_torch"] + sorted(set(v for v in _BATCHIFY.values() if v in collate)))
        sf.add(f'''
def make_collate():
    """The DataLoader's gluonnlp batchify_fn: ``DataLoader(..., collate_fn=make_collate())``
    gives the same arrays (torch tensors) and int32 lengths."""
    return {collate}
''', "make_collate")
