"""pytest plugin for parity tests: the ``parity`` fixture and a ``--parity-report`` summary.

Enabled by the ``pytest11`` entry point ``dualdl = dualdl.testing.pytest_plugin`` once dualdl is
installed with it, by ``pytest -p dualdl.testing.pytest_plugin``, or per test module with
``from dualdl.testing.pytest_plugin import parity``. A test is then::

    def test_my_model_parity(parity):
        parity(MyModel, np.random.rand(8, 3, 32, 32).astype("float32"), steps=3, optimizer="adam")

``parity(...)`` is :func:`dualdl.testing.assert_parity` (fails the test with the report table);
``parity.check(...)`` returns the report without failing. Options: ``--parity-report`` prints every
report at the end of the session, ``--parity-float64`` adds the float64 reference to every check.
"""
from __future__ import annotations

from typing import Any, Callable, List

import pytest

from .report import ParityReport

_REPORTS: List[tuple] = []


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("dualdl", "dualdl parity tests")
    group.addoption("--parity-report", action="store_true", default=False,
                    help="print every dualdl parity report (max abs/rel differences) at the end")
    group.addoption("--parity-float64", action="store_true", default=False,
                    help="run every dualdl parity check with a float64 reference")


class ParityFixture:
    """Callable fixture object: ``parity(factory, inputs, **kwargs)`` asserts parity and returns the
    report; ``parity.check(...)`` only measures; ``parity.reports`` lists this test's reports."""

    def __init__(self, nodeid: str, float64: bool):
        self.nodeid, self.float64 = nodeid, float64
        self.reports: List[ParityReport] = []

    def _kwargs(self, kwargs: dict) -> dict:
        if self.float64:
            kwargs.setdefault("float64_reference", True)
        return kwargs

    def __call__(self, model_factory: Callable[..., Any], inputs: Any, **kwargs: Any) -> ParityReport:
        from .report import ParityError
        report = self.check(model_factory, inputs, **kwargs)
        if not report.passed:
            raise ParityError(report)
        return report

    def check(self, model_factory: Callable[..., Any], inputs: Any, **kwargs: Any) -> ParityReport:
        from .parity import check_parity
        report = check_parity(model_factory, inputs, **self._kwargs(kwargs))
        self.reports.append(report)
        _REPORTS.append((self.nodeid, report))
        return report


@pytest.fixture
def parity(request: Any) -> ParityFixture:
    """Assert that a model factory gives the same numbers on torch and MXNet (dualdl.testing)."""
    return ParityFixture(request.node.nodeid, bool(request.config.getoption("--parity-float64", default=False)))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    if not config.getoption("--parity-report", default=False) or not _REPORTS:
        return
    terminalreporter.section("dualdl parity reports")
    for nodeid, report in _REPORTS:
        terminalreporter.write_line(f"{nodeid}")
        terminalreporter.write_line(report.summary())
        terminalreporter.write_line("")
