"""``dualdl info``: installed backends, their versions and devices."""
from __future__ import annotations

import argparse
import importlib
import platform

from .backend import KNOWN_BACKENDS, available_backends, get_backend


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-import", action="store_true",
                        help="only list installed backends, without importing their frameworks")


def run(args: argparse.Namespace) -> int:
    import dualdl
    print(f"dualdl {dualdl.__version__} on Python {platform.python_version()} ({platform.machine()})")
    installed = set(available_backends())
    for name, (_, framework, extra) in KNOWN_BACKENDS.items():
        if name not in installed:
            print(f"  {name:6s} not installed (pip install 'dualdl[{extra}]')")
            continue
        if args.no_import:
            print(f"  {name:6s} installed")
            continue
        try:
            version = importlib.import_module(framework).__version__
            devs = ", ".join(str(d) for d in dualdl.devices(name))
        except Exception as e:     # installed but broken (a missing shared library, a version clash)
            print(f"  {name:6s} installed but cannot be used: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
            continue
        print(f"  {name:6s} {framework} {version}; devices: {devs}")
    print(f"active backend: {dualdl.backend()}")
    return 0
