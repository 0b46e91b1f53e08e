"""The one error type of ``dl.port.translate``: what could not be translated, and where."""
from __future__ import annotations

from typing import Optional


class TranslationError(ValueError):
    """A Gluon op or block that has no PyTorch translation (or a configuration torch lacks).

    ``op`` is the MXNet operator name (or None for a block), ``block`` the Gluon block class and
    ``path`` the block's place in the tree (``features.4.0``; ``""`` for the top block)."""

    def __init__(self, message: str, *, op: Optional[str] = None, block: str = "", path: str = ""):
        block = _printable(block)     # a class name from the model: never a line break in the message
        where = f"{block} at {path!r}" if path else (f"{block} (the top block)" if block else "")
        hint = (" Register one with dualdl.port.register_translation(" +
                (f"{op!r}, fn)" if op else f"{block}, fn)") + " (see docs/translate.md).") if (op or block) else ""
        super().__init__(f"{message}{' in ' + where if where else ''}.{hint}")
        self.op, self.block, self.path = op, block, path


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
