"""Reading and writing tensor files: safetensors, torch ``.pt/.pth`` and Gluon ``.params``.

Hides three framework differences:

* the file format is detected from the file's first bytes, never from its extension;
* torch files are pickles: they are loaded with ``torch.load(weights_only=True)`` only, so an
  arbitrary object in the file is refused, never executed;
* Gluon ``save_parameters`` files (MXNet NDArray list, magic ``0x112``) are parsed and written in
  pure numpy, so neither reading nor writing them imports mxnet.

Every writer is atomic (:mod:`dualdl.atomic`: temporary file in the same folder, fsync,
``os.replace``): a crash in the middle of a save leaves the previous file intact. Writers take
numpy arrays or native torch / MXNet tensors and stream them one at a time (a zero-copy view of a
CPU torch tensor, one ``asnumpy()`` for MXNet), so saving never holds a second copy of the model.
Safetensors files are read one tensor at a time with ``readinto`` after a strict check of the
header against the file (a corrupt, truncated or foreign file is a :class:`FormatError`, never a
crash). Key helpers normalise DataParallel's ``module.`` prefix and translate Gluon structural
names to torch names and back.

One module per concern: ``detect`` (format from content or extension), ``dispatch`` (any
format), ``safetensors``, ``torch_files``, ``gluon_params``, ``names`` (key names), ``arrays``
(tensors to bytes and back) and ``errors``. This package is the index of the public names
(imported in the order the API reference lists them).
"""
from .errors import FormatError
from .detect import detect_format, format_for_path
from .dispatch import read_tensors, read_metadata
from .safetensors import write_safetensors
from .torch_files import write_torch
from .gluon_params import write_gluon
from .dispatch import write_tensors
from .names import strip_prefix, add_prefix, align_module_prefix, gluon_to_torch_names, torch_to_gluon_names
from .detect import FORMATS

__all__ = [
    "FormatError", "detect_format", "read_tensors", "read_metadata", "write_safetensors",
    "write_torch", "write_gluon", "write_tensors", "format_for_path",
    "strip_prefix", "add_prefix", "align_module_prefix", "gluon_to_torch_names",
    "torch_to_gluon_names", "FORMATS",
]
