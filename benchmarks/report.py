"""Output: a console table, ``results.json`` and a Markdown summary with machine info."""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional

from .harness import Row

GROUP_TITLES = {
    "train_step": "Training step: dualdl vs hand-written native code",
    "guarantees": "What each guarantee costs: the step with one switched off (ratios to native code)",
    "breakdown": "Where the time goes: dualdl pieces added one at a time (rest native)",
    "peer": "Peer: Keras 3 (torch backend) vs native torch",
    "data_parallel": "Single-node data parallel (dl.Trainer)",
    "startup": "Start-up",
    "checkpoint": "Checkpoints (~100M parameters)",
    "port": "Porting (~100M parameters)",
    "translate": "Translating Gluon models to PyTorch source (translate + float64 proof, per model)",
    "errors": "Cases that failed",
}


def _fmt_value(v: Optional[float], unit: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if unit == "s":
        if v < 1e-3:
            return f"{v * 1e6:.0f} us"
        if v < 1:
            return f"{v * 1e3:.2f} ms"
        return f"{v:.2f} s"
    if unit == "x model":
        return f"{v:.2f}x model"
    return f"{v:.4g} {unit}"


def _fmt_ratio(r: Row) -> str:
    if r.ratio is None or math.isnan(r.ratio):
        return "-"
    spread = ""
    if r.ratio_p25 is not None and r.ratio_p75 is not None and not math.isnan(r.ratio_p25):
        spread = f" [{r.ratio_p25:.2f}-{r.ratio_p75:.2f}]"
    return f"{r.ratio:.3f}{spread}"


def _fmt_min(r: Row) -> str:
    return "-" if r.ratio_of_min is None or math.isnan(r.ratio_of_min) else f"{r.ratio_of_min:.3f}"


def _verdict(r: Row) -> str:
    if r.ok is None:
        return ""
    return f"ok (<= {r.target:g})" if r.ok else f"OVER {r.target:g}"


def columns(r: Row) -> List[str]:
    base = "-" if r.baseline is None else f"{r.baseline}: {_fmt_value(r.baseline_value, r.unit)}"
    return [r.name, _fmt_value(r.value, r.unit), base, _fmt_ratio(r), _fmt_min(r), _verdict(r), r.note]


HEADER = ["case", "value (median)", "baseline (median)", "ratio (median [p25-p75])", "ratio of minima", "target",
          "note"]


def console_table(rows: List[Row]) -> str:
    lines = []
    for group in _groups(rows):
        lines.append(f"\n== {GROUP_TITLES.get(group, group)} ==")
        body = [HEADER] + [columns(r) for r in rows if r.group == group]
        widths = [max(len(b[i]) for b in body) for i in range(len(HEADER) - 1)]
        for b in body:
            lines.append("  ".join(c.ljust(w) for c, w in zip(b, widths)) + "  " + b[-1])
    return "\n".join(lines)


def _groups(rows: List[Row]) -> List[str]:
    seen: List[str] = []
    for r in rows:
        if r.group not in seen:
            seen.append(r.group)
    return seen


def write_json(path: str, rows: List[Row], machine: Dict[str, Any], config: Dict[str, Any],
               elapsed_s: float) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    data = {"machine": machine, "config": config, "elapsed_s": elapsed_s,
            "rows": [r.to_dict() for r in rows]}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and math.isnan(o):
        return None
    try:
        return float(o)
    except Exception:
        return str(o)


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|")


def peer_table(rows: List[Row]) -> List[str]:
    """model | dualdl / native torch | Keras / native torch (each timed against its own native run)."""
    out = []
    for model in ("mlp", "lenet"):
        d = next((r for r in rows if r.group == "train_step" and r.extra.get("model") == model
                  and r.extra.get("backend") == "torch" and r.name.endswith("/ dualdl")), None)
        k = next((r for r in rows if r.group == "peer" and r.extra.get("model") == model), None)
        if d is None and k is None:
            continue
        out.append(f"| {model} | {_fmt_ratio(d) if d else '-'} | {_fmt_ratio(k) if k else '-'} |")
    if not out:
        return []
    return ["| model (torch backend) | dualdl / native torch | Keras 3 / native torch |", "|---|---|---|", *out]


def markdown(rows: List[Row], machine: Dict[str, Any], config: Dict[str, Any], elapsed_s: float,
             findings: str = "") -> str:
    v = machine.get("versions", {})
    lines = [
        "# Benchmarks",
        "",
        "What dualdl costs next to hand-written native code, and next to a peer. Regenerate with "
        "`make bench` (about 5 minutes on 2 cores; `make bench ARGS=--quick` for tiny sizes); raw numbers in "
        "`benchmarks/results.json`.",
        "",
        "**Method.** Every ratio divides two things timed in the same run, interleaved (A B A B ..., "
        "order rotated each round), after warm-up; the ratio is the median over rounds of the "
        "per-round ratio, with its 25th-75th percentile in brackets; the target verdict uses that "
        "median. *Ratio of minima* divides the best sample of each side (load from other processes "
        "only adds time, so it is the steadiest estimate of intrinsic cost). Values are medians. "
        "Every training step ends synchronised (`mx.nd.waitall()` on MXNet). One thread per "
        "framework (`OMP_NUM_THREADS=1`, `torch.set_num_threads(1)`), as the machine is shared.",
        "",
        "## Machine",
        "",
        f"- CPU: {machine.get('cpu')} ({machine.get('cores')} cores), "
        f"memory {((machine.get('memory_bytes') or 0) / 2 ** 30):.0f} GiB; load average at start "
        f"{', '.join(f'{x:.1f}' for x in machine.get('loadavg_at_start') or [])}",
        f"- {machine.get('os')}, Python {machine.get('python')}",
        f"- dualdl {v.get('dualdl')} (commit {machine.get('git_commit')}), torch {v.get('torch')}, "
        f"mxnet {v.get('mxnet')}, numpy {v.get('numpy')}, gluonnlp {v.get('gluonnlp')}, "
        f"safetensors {v.get('safetensors')}",
        f"- threads: {machine.get('threads')}; run: {'--quick' if config.get('quick') else 'full'}, "
        f"{config.get('repeats')} rounds, {config.get('clock', 'wall')} clock, {elapsed_s:.0f} s in all",
        "",
    ]
    for group in _groups(rows):
        lines += [f"## {GROUP_TITLES.get(group, group)}", ""]
        if group == "peer":
            pt = peer_table(rows)
            if pt:
                lines += pt + [""]
        lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        for r in rows:
            if r.group == group:
                lines.append("| " + " | ".join(_md_escape(c) for c in columns(r)) + " |")
        lines.append("")
    if findings:     # the tables first (docs: how-to, then measurements), what each run found after them
        lines += ["## Findings", "", findings.strip(), ""]
    return "\n".join(lines)


def write_markdown(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
