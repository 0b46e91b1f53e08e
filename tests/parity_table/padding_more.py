"""Parity rows of padding layers added for torch's module tests (issue 34)."""
from dualdl.testing.spec import layer  # noqa: F401

ROWS = [
]
