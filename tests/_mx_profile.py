"""MXNet's profiler around one call, for tests that check which engine operations a call runs."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Dict

import mxnet as mx
from mxnet import nd


def engine_stats(fn: Callable[[], object], folder: Path) -> Dict[str, Dict[str, dict]]:
    """MXNet's aggregate profiler statistics (``{domain: {name: stats}}``) of what ``fn()`` runs,
    the engine idle before and drained after; the profiler's file goes into ``folder``."""
    mx.profiler.set_config(profile_all=True, aggregate_stats=True, filename=str(folder / "profile.json"))
    nd.waitall()
    mx.profiler.set_state("run")
    try:
        fn()
        nd.waitall()
    finally:
        mx.profiler.set_state("stop")
    return json.loads(mx.profiler.dumps(reset=True, format="json")).get("Time", {})
