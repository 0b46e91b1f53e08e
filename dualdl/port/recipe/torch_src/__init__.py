"""Torch-only building blocks copied verbatim into generated recipe files.

Each module here imports torch, numpy and the standard library only (never dualdl, never
mxnet): the emitters in ``dualdl.port.recipe`` copy its definitions into the generated file, so
the code that is tested here is the code that is written out."""
