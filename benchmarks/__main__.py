"""``python -m benchmarks`` (``make bench``): run the cases, print a table, write JSON and Markdown.

Options: ``--quick`` (tiny sizes, few rounds), ``--only GROUP_OR_CASE`` (repeatable, e.g.
``--only train_step`` or ``--only checkpoint``), ``--repeats N``, ``--no-keras``, ``--json PATH``,
``--markdown PATH`` (``--markdown ''`` to skip), ``--list``.
"""
from __future__ import annotations

import os

# One thread per framework, set before any framework loads: the machine is shared, and MXNet
# deadlocks with OMP_NUM_THREADS>=2 and two CPU contexts running `dot` concurrently.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", os.environ["OMP_NUM_THREADS"])

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import inspect  # noqa: E402
import traceback  # noqa: E402
from dataclasses import asdict  # noqa: E402
from typing import Iterator, List, Optional, Sequence  # noqa: E402

from . import harness, report  # noqa: E402
from .harness import CASES, Config, Row  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_JSON = os.path.join(HERE, "results.json")
DEFAULT_MD = os.path.join(os.path.dirname(HERE), "docs", "benchmarks.md")
FINDINGS = os.path.join(HERE, "findings.md")
CASE_MODULES = ("train_step", "guarantees", "breakdown", "keras_peer", "parallel", "startup", "checkpoint", "port",
                "translate", "project")


def load_cases() -> None:
    """Import the modules that register cases (in report order)."""
    import importlib
    for mod in CASE_MODULES:
        importlib.import_module(f"{__package__ or 'benchmarks'}.{mod}")


def select(only: Sequence[str]):
    if not only:
        return list(CASES)
    keys = set(only)
    chosen = [c for c in CASES if c.group in keys or c.name in keys or f"{c.group}:{c.name}" in keys]
    unknown = keys - {c.group for c in CASES} - {c.name for c in CASES} - {f"{c.group}:{c.name}" for c in CASES}
    if unknown:
        raise SystemExit(f"unknown case(s) {sorted(unknown)}; see --list")
    return chosen


CASE_TIMEOUT_S = 300.0      # per case; a full run of a case takes 5-120 s here


def _error_row(name: str, why: str) -> Row:
    return Row(group="errors", name=name, value=float("nan"), note=why[:300])


def run_isolated(c, cfg: Config, timeout: float = CASE_TIMEOUT_S) -> List[Row]:
    """Run one case in a fresh interpreter with a time limit: a case that hangs (an MXNet engine
    deadlock, say) or crashes becomes an 'errors' row and the run goes on."""
    import subprocess
    import tempfile
    fd, out = tempfile.mkstemp(prefix="dualdl-bench-case-", suffix=".json")
    os.close(fd)
    name = f"{c.group}:{c.name}"
    cmd = [sys.executable, "-m", "benchmarks", "--case-worker", name, "--config", json.dumps(asdict(cfg)),
           "--case-out", out]

    def partial() -> List[Row]:          # rows the case finished before it stopped
        try:
            with open(out) as f:
                return [Row(**d) for d in json.load(f)]
        except (OSError, ValueError):
            return []
    try:
        r = subprocess.run(cmd, timeout=timeout, cwd=os.path.dirname(HERE))
        if r.returncode != 0:
            return partial() + [_error_row(name, f"case process exited with {r.returncode} (traceback above)")]
        return partial()
    except subprocess.TimeoutExpired:
        return partial() + [_error_row(name, f"did not finish within {timeout:.0f} s (hang?); killed")]
    finally:
        os.unlink(out)


def _batches(result) -> Iterator[List[Row]]:
    """A case returns a list of rows, or yields lists of rows as it goes."""
    if inspect.isgenerator(result):
        yield from result
    else:
        yield result


def _case_worker(name: str, config: str, out: str) -> int:
    cfg = Config(**json.loads(config))
    (c,) = select([name])
    rows: List[Row] = []
    for batch in _batches(c.fn(cfg)):
        rows += batch
        tmp = out + ".tmp"
        with open(tmp, "w") as f:           # rewritten after each batch: a hang keeps what is done
            json.dump([r.to_dict() for r in rows], f, default=report._json_default)
        os.replace(tmp, out)
    return 0


def run(cfg: Config, only: Sequence[str] = (), json_path: Optional[str] = DEFAULT_JSON,
        md_path: Optional[str] = DEFAULT_MD, log=print, isolate: bool = False,
        timeout: float = CASE_TIMEOUT_S) -> List[Row]:
    """Run the selected cases; a failing case becomes an 'errors' row (the others still run).
    ``isolate``: each case in its own interpreter with a time limit (the command line does this)."""
    load_cases()
    try:
        import torch
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    except ImportError:       # pragma: no cover
        pass
    machine = harness.machine_info()
    rows: List[Row] = []
    t_all = time.perf_counter()
    for c in select(only):
        t0 = time.perf_counter()
        log(f"[bench] {c.group}:{c.name} - {c.doc}", flush=True)
        try:
            got = run_isolated(c, cfg, timeout) if isolate else [r for b in _batches(c.fn(cfg)) for r in b]
        except Exception as e:
            traceback.print_exc()
            got = [_error_row(f"{c.group}:{c.name}",
                              f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")]
        rows += got
        log(f"[bench]   {len(got)} row(s) in {time.perf_counter() - t0:.1f} s", flush=True)
    elapsed = time.perf_counter() - t_all
    config = asdict(cfg)
    log(report.console_table(rows))
    if json_path:
        report.write_json(json_path, rows, machine, config, elapsed)
        log(f"[bench] wrote {json_path}")
    if md_path:
        findings = open(FINDINGS).read() if os.path.exists(FINDINGS) and not only else ""
        report.write_markdown(md_path, report.markdown(rows, machine, config, elapsed, findings))
        log(f"[bench] wrote {md_path}")
    return rows


def render(json_path: str, md_path: str) -> int:
    """Rewrite ``md_path`` from ``json_path`` and benchmarks/findings.md, measuring nothing."""
    with open(json_path) as f:
        data = json.load(f)
    rows = [Row(**{k: (float("nan") if v is None and k == "value" else v) for k, v in r.items()})
            for r in data["rows"]]
    findings = open(FINDINGS).read() if os.path.exists(FINDINGS) else ""
    report.write_markdown(md_path, report.markdown(rows, data["machine"], data["config"], data["elapsed_s"], findings))
    print(f"[bench] wrote {md_path} from {json_path}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes and few rounds (a minute or two)")
    p.add_argument("--only", action="append", default=[], metavar="GROUP|CASE",
                   help="run only this group or case (repeatable); see --list")
    p.add_argument("--repeats", type=int, default=None, help="timed rounds per comparison")
    p.add_argument("--no-keras", action="store_true", help="skip the Keras peer (and its venv)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="in-process comparisons: wall time (default; what a step costs) or the process's "
                        "CPU time (all threads; ignores time spent waiting for a core on a busy machine)")
    p.add_argument("--json", default=None,
                   help="results JSON path ('' to skip; default benchmarks/results.json for a full run, "
                        "results-quick.json / results-partial.json for --quick / --only)")
    p.add_argument("--markdown", default=None,
                   help=f"Markdown summary path ('' to skip; default {os.path.relpath(DEFAULT_MD)} "
                        f"for a full run of every case, skipped otherwise)")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--in-process", action="store_true",
                   help="run every case in this interpreter (default: each in its own, with a time limit)")
    p.add_argument("--case-timeout", type=float, default=CASE_TIMEOUT_S,
                   help=f"seconds a case may take before it is killed and reported (default {CASE_TIMEOUT_S:.0f})")
    p.add_argument("--case-worker", help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)
    p.add_argument("--case-out", help=argparse.SUPPRESS)
    p.add_argument("--render", action="store_true",
                   help="only rewrite the Markdown from an existing results JSON (after editing findings.md)")
    a = p.parse_args(argv)
    load_cases()
    if a.case_worker:
        return _case_worker(a.case_worker, a.config, a.case_out)
    if a.render:
        return render(a.json or DEFAULT_JSON, a.markdown or DEFAULT_MD)
    if a.list:
        for c in CASES:
            print(f"{c.group + ':' + c.name:30s} {c.doc}")
        return 0
    kw = {"keras": not a.no_keras, "clock": a.clock}
    if a.repeats is not None:
        if a.repeats < 1:
            p.error("--repeats must be >= 1")
        kw["repeats"] = a.repeats
    cfg = Config.make(quick=a.quick, **kw)
    md = a.markdown
    if md is None:     # docs/benchmarks.md holds full runs only
        md = DEFAULT_MD if not a.quick and not a.only else ""
    js = a.json
    if js is None:
        js = DEFAULT_JSON if not a.quick and not a.only else os.path.join(
            HERE, "results-quick.json" if a.quick else "results-partial.json")
    rows = run(cfg, a.only, js or None, md or None, isolate=not a.in_process, timeout=a.case_timeout)
    return 1 if any(r.group == "errors" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
