"""Vision transforms as source (in progress)."""
from .emit import RecipeError


def emit_transforms(sf, transforms):
    raise RecipeError("transforms= is not translated yet")
