"""A small benchmark harness: register cases, time competitors interleaved, report medians and ratios.

Every comparison is a ratio of two things timed in the same run, **interleaved** (A B A B ..., the
order rotated each round so neither side always runs first), after warm-up. The reported ratio is
the median over rounds of the per-round ratio ``A_i / B_i``: a load spike from another process hits
both sides of a round, so the paired ratio is steadier than a ratio of two medians.
"""
from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional

__all__ = ["Config", "Row", "Case", "case", "CASES", "compare", "time_interleaved", "ratio_row",
           "value_row", "machine_info", "quantile"]


@dataclass
class Config:
    """How hard to measure. ``quick`` shrinks models and repeats (smoke test / --quick)."""
    quick: bool = False
    repeats: int = 41            # timed rounds per comparison
    warmup: int = 5              # untimed calls of each competitor before timing
    min_sample_s: float = 0.01   # each timed sample repeats the call until it lasts about this long
    # (short samples, many rounds: the two sides of a pair run close together, so load from other
    # processes on a shared machine hits both)
    keras: bool = True           # run the Keras peer (needs its own venv)
    workdir: str = ""            # scratch directory for checkpoints
    backends: tuple = ("torch", "mxnet", "mxnet-hybrid")   # training-step variants to run
    clock: str = "wall"          # in-process comparisons: "wall" (step time) or "cpu" (process CPU time)

    @classmethod
    def make(cls, quick: bool = False, **kw: Any) -> "Config":
        if quick:
            base = dict(quick=True, repeats=5, warmup=1, min_sample_s=0.005)
            base.update(kw)
            return cls(**base)
        return cls(**kw)


@dataclass
class Row:
    """One measured line: ``value`` (seconds, bytes, ...) and, for a comparison, the baseline it is
    divided by. ``target`` is the ratio (or value) a row should stay under; ``ok`` says if it does."""
    group: str
    name: str
    value: float
    unit: str = "s"
    baseline: Optional[str] = None
    baseline_value: Optional[float] = None
    ratio: Optional[float] = None
    ratio_p25: Optional[float] = None
    ratio_p75: Optional[float] = None
    ratio_of_min: Optional[float] = None    # min(A) / min(B): the best case of each, robust to added load
    target: Optional[float] = None
    ok: Optional[bool] = None
    rounds: int = 0
    note: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class Case:
    name: str
    fn: Callable[[Config], List[Row]]
    group: str
    doc: str = ""


CASES: List[Case] = []


def case(group: str, name: Optional[str] = None) -> Callable:
    """Register ``fn(cfg) -> list[Row]`` as a benchmark case of ``group``."""
    def deco(fn: Callable[[Config], List[Row]]) -> Callable:
        CASES.append(Case(name or fn.__name__, fn, group, (fn.__doc__ or "").strip().split("\n")[0]))
        return fn
    return deco


def quantile(xs: List[float], q: float) -> float:
    s = sorted(xs)
    if not s:
        return math.nan
    pos = q * (len(s) - 1)
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _calibrate(fn: Callable[[], Any], min_sample_s: float) -> int:
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    return max(1, int(math.ceil(min_sample_s / max(dt, 1e-9))))


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def time_interleaved(fns: Dict[str, Callable[[], Any]], repeats: int = 15, warmup: int = 3,
                     min_sample_s: float = 0.02, clock: str = "wall") -> Dict[str, List[float]]:
    """Per-call seconds of each function, ``repeats`` samples each, interleaved.

    Each function is warmed up ``warmup`` times, then called ``number`` times per sample, with
    ``number`` chosen so one sample lasts about ``min_sample_s`` (the same ``number`` for all, from
    the slowest, so they see the same conditions). Rounds rotate the order of the functions.
    ``clock="cpu"`` counts the CPU time of the whole process (all threads, MXNet's engine
    included) instead of wall time: time spent waiting for a core that another process holds is
    not counted, which makes single-device comparisons stable on a shared machine."""
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")
    now = CLOCKS[clock]
    labels = list(fns)
    for _ in range(warmup):
        for k in labels:
            fns[k]()
    number = min(_calibrate(fns[k], min_sample_s) for k in labels)
    times: Dict[str, List[float]] = {k: [] for k in labels}
    for r in range(repeats):
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        for k in order:
            fn = fns[k]
            t0 = now()
            for _ in range(number):
                fn()
            times[k].append((now() - t0) / number)
    return times


def ratio_row(group: str, name: str, times: Dict[str, List[float]], label: str, baseline: str,
              target: Optional[float] = None, note: str = "", **extra: Any) -> Row:
    """The row for ``label`` against ``baseline`` from :func:`time_interleaved` output."""
    a, b = times[label], times[baseline]
    ratios = [x / y for x, y in zip(a, b) if y > 0]
    ratio = statistics.median(ratios) if ratios else math.nan
    ok = None if target is None or math.isnan(ratio) else bool(ratio <= target)
    return Row(group=group, name=name, value=statistics.median(a), unit="s", baseline=baseline,
               baseline_value=statistics.median(b), ratio=ratio, ratio_p25=quantile(ratios, 0.25),
               ratio_p75=quantile(ratios, 0.75), ratio_of_min=min(a) / min(b) if a and b and min(b) > 0 else None,
               target=target, ok=ok, rounds=len(ratios), note=note,
               extra=dict(extra))


def compare(group: str, fns: Dict[str, Callable[[], Any]], baseline: str, cfg: Config,
            names: Optional[Dict[str, str]] = None, targets: Optional[Dict[str, float]] = None,
            note: str = "", clock: Optional[str] = None, **extra: Any) -> List[Row]:
    """Time ``fns`` interleaved and return one row per non-baseline function (ratio to ``baseline``)."""
    clock = clock or cfg.clock
    times = time_interleaved(fns, cfg.repeats, cfg.warmup, cfg.min_sample_s, clock)
    extra["clock"] = clock
    names = names or {}
    targets = targets or {}
    return [ratio_row(group, names.get(k, k), times, k, baseline, targets.get(k), note, **extra)
            for k in fns if k != baseline]


def value_row(group: str, name: str, samples: List[float], unit: str = "s", target: Optional[float] = None,
              note: str = "", **extra: Any) -> Row:
    """A row for an absolute measurement (median of ``samples``), optionally checked against ``target``."""
    v = statistics.median(samples)
    ok = None if target is None else bool(v <= target)
    return Row(group=group, name=name, value=v, unit=unit, target=target, ok=ok, rounds=len(samples),
               note=note, extra=dict(extra))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(mod: str) -> Optional[str]:
    try:
        from importlib.metadata import version
        return version(mod)
    except Exception:
        return None


def _git_commit() -> Optional[str]:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10, cwd=os.path.dirname(os.path.abspath(__file__)))
        return out.stdout.strip() or None
    except Exception:
        return None


def machine_info() -> Dict[str, Any]:
    """CPU model, cores, load, OS, Python and framework versions (without importing frameworks)."""
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = None
    return {
        "cpu": _cpu_model(), "cores": os.cpu_count(), "memory_bytes": mem,
        "loadavg_at_start": list(load) if load else None,
        "os": platform.platform(), "python": platform.python_version(),
        "versions": {k: _version(k) for k in ("dualdl", "torch", "mxnet", "numpy", "gluonnlp", "safetensors")},
        "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        "git_commit": _git_commit(),
        "executable": sys.executable,
    }
