"""gluonnlp's ``clip_grad_global_norm(params, max_norm)`` as recipe source:
``clip_gradients(model)`` (torch_src/clip.py: Gluon's formula, not torch's ``clip_grad_norm_``)."""
from __future__ import annotations

from .emit import RecipeError, SourceFile, lit


def emit_clip(sf: SourceFile, max_norm: float) -> None:
    if not isinstance(max_norm, (int, float)) or isinstance(max_norm, bool) or not max_norm > 0:
        raise RecipeError(f"clip_global_norm= must be the positive max_norm the script passes to "
                          f"clip_grad_global_norm, not {max_norm!r}")
    sf.use("dualdl.port.recipe.torch_src.clip", ["clip_grad_global_norm"])
    sf.add(f'''
MAX_NORM = {lit(float(max_norm))}


def clip_gradients(model: torch.nn.Module) -> float:
    """gluonnlp's clip_grad_global_norm(params, {max_norm!r}) on the model's gradients: call it
    after backward() and before the optimizer's step(); returns the norm before clipping."""
    return clip_grad_global_norm(model.parameters(), MAX_NORM)
''', "clip_gradients")
