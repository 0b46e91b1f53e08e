"""Parity testing: prove that a model gives the same numbers on PyTorch and on MXNet.

``dualdl.testing.assert_parity(factory, inputs, ...)`` builds the model on both backends with the
same (randomised) weights, trains both for a few optimizer steps and compares outputs, loss, every
gradient and the weights after each step; on a mismatch it names the first divergent layer.
``check_parity`` returns the report without raising. A pytest fixture (``parity``) lives in
:mod:`dualdl.testing.pytest_plugin`; the CLI is ``dualdl parity MODULE:FACTORY``. See docs/parity.md.
``check_native_training`` / ``assert_native_training`` do the same for a native Gluon block and
a native torch module paired by a ``dl.port`` mapping, each with its own loss and optimizer.
No framework is imported until a check runs.
"""
from .native import Divergence, NativeTrainingReport, assert_native_training, check_native_training
from .native_reference import clip_global_norm
from .parity import LOSSES, OPTIMIZERS, assert_parity, build, check_parity, randomize_state
from .report import Diff, LayerDiff, ParityError, ParityReport, compare_arrays

__all__ = ["assert_parity", "check_parity", "ParityError", "ParityReport", "Diff", "LayerDiff",
           "compare_arrays", "build", "randomize_state", "LOSSES", "OPTIMIZERS", "check_native_training",
           "assert_native_training", "NativeTrainingReport", "Divergence", "clip_global_norm"]
