"""A Gluon ``DataLoader``'s batch order as source: ``make_batch_sampler(length)`` for
``torch.utils.data.DataLoader(dataset, batch_sampler=...)`` (see torch_src/sampler.py)."""
from __future__ import annotations

from typing import Any

from .emit import RecipeError, SourceFile, lit

_SRC = "dualdl.port.recipe.torch_src.sampler"


def loader_spec(loader: Any) -> dict:
    """batch size, shuffle, last_batch and dataset length of a ``gluon.data.DataLoader``."""
    bs = getattr(loader, "_batch_sampler", None)
    if bs is None or not hasattr(bs, "_batch_size"):
        raise RecipeError(f"loader= must be a mxnet.gluon.data.DataLoader built with batch_size= "
                          f"(got {type(loader).__name__}); a custom batch_sampler has no "
                          f"translation")
    kind = type(bs._sampler).__name__
    if kind not in ("RandomSampler", "SequentialSampler"):
        raise RecipeError(f"the DataLoader's sampler is a {kind}; only shuffle=True "
                          f"(RandomSampler) and shuffle=False (SequentialSampler) translate")
    return dict(batch_size=int(bs._batch_size), shuffle=kind == "RandomSampler",
                last_batch=bs._last_batch, length=len(bs._sampler))


def emit_sampler(sf: SourceFile, loader: Any) -> None:
    from .nlp_data import emit_nlp_loader, is_nlp_loader
    if is_nlp_loader(loader):  # gluonnlp's FixedBucketSampler + batchify
        return emit_nlp_loader(sf, loader)
    spec = loader_spec(loader)
    inner = "GluonRandomSampler" if spec["shuffle"] else "GluonSequentialSampler"
    seed = (" Seed with np.random.seed (Gluon shuffles with numpy's global RNG)."
            if spec["shuffle"] else "")
    sf.use(_SRC, [inner, "GluonBatchSampler"])
    sf.add(f'''
DATASET_LENGTH = {spec["length"]}


def make_batch_sampler(length: int = DATASET_LENGTH) -> GluonBatchSampler:
    """The Gluon DataLoader's batches (batch_size={spec["batch_size"]}, shuffle={spec["shuffle"]},
    last_batch={spec["last_batch"]!r}): ``DataLoader(dataset, batch_sampler=make_batch_sampler())``.
    Make it once: 'rollover' keeps the incomplete batch for the next epoch.{seed}"""
    return GluonBatchSampler({inner}(length), batch_size={spec["batch_size"]},
                             last_batch={lit(spec["last_batch"])})
''', "make_batch_sampler")
