"""Gluon training recipes written out as torch-only Python source (issue 33): optimizer and lr
schedule, ``mx.init`` initializers, ``mx.metric`` metrics, vision transforms and the
DataLoader's batch order. See docs/porting-trainer.md."""
from .api import Recipe, translate_recipe
from .emit import RecipeError

__all__ = ["translate_recipe", "Recipe", "RecipeError"]
