"""Declarations of the activations added for torch's module tests (issue 34): merged into ``dualdl.nn.layers.LAYERS`` (see docs/concepts.md
"Adding a layer")."""
from __future__ import annotations

from .declaration import layer  # noqa: F401

LAYERS = {
}
