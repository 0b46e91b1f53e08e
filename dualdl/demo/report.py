"""The demo's tables, plot and report file."""
from __future__ import annotations

import os
import statistics
from typing import Dict, List, Optional

from .agreement import StepAgreement
from .run import Comparison, RunResult


def run_table(results: List[RunResult]) -> str:
    """One seed's runs: loss per epoch, accuracies, step time, a few readings."""
    lines = []
    for r in results:
        lines += [f"## {r.backend}: {r.strategy} on {', '.join(r.devices)} (seed {r.seed})", "",
                  "| epoch | mean loss |", "|---:|---:|"]
        lines += [f"| {i + 1} | {loss:.4f} |" for i, loss in enumerate(r.epoch_losses)]
        lines += ["", f"- held-out per-digit accuracy: **{100 * r.digit_accuracy:.1f}%**",
                  f"- held-out whole-string accuracy: **{100 * r.string_accuracy:.1f}%**",
                  f"- time per training step: {1000 * r.seconds_per_step:.1f} ms",
                  "- examples (truth -> read): " + ", ".join(f"{t}->{p or '∅'}" for t, p in r.examples), ""]
    return "\n".join(lines)


def _spread(values: List[float]) -> str:
    v = [100 * x for x in values]
    sd = statistics.stdev(v) if len(v) > 1 else 0.0
    return f"{statistics.mean(v):.1f}% ± {sd:.1f} ({min(v):.1f}–{max(v):.1f})"


def seeds_table(by_backend: Dict[str, List[RunResult]]) -> str:
    """Per seed and per backend, then mean ± standard deviation (min–max) per backend."""
    seeds = sorted({r.seed for rs in by_backend.values() for r in rs})
    names = list(by_backend)
    lines = [f"## {len(seeds)} seed(s) per backend: held-out accuracy, per digit / whole string", "",
             "| seed | " + " | ".join(names) + " |", "|---:|" + "---|" * len(names)]
    for s in seeds:
        cells = []
        for b in names:
            r = next(r for r in by_backend[b] if r.seed == s)
            cells.append(f"{100 * r.digit_accuracy:.1f}% / {100 * r.string_accuracy:.1f}%")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    lines += ["", "| backend | per digit: mean ± sd (min–max) | whole string: mean ± sd (min–max) | time / step |",
              "|---|---|---|---:|"]
    for b, rs in by_backend.items():
        ms = 1000 * statistics.mean(r.seconds_per_step for r in rs)
        lines.append(f"| {b} | {_spread([r.digit_accuracy for r in rs])} | "
                     f"{_spread([r.string_accuracy for r in rs])} | {ms:.0f} ms |")
    lines.append("")
    if len(names) > 1 and len(seeds) == 1:
        lines.append("One seed: an accuracy difference between the backends here is not a backend gap. From the "
                     "same start the two runs separate chaotically (below), so the accuracies of one seed differ "
                     "by chance; `--seeds 5` reports mean and spread per backend.")
    elif len(names) > 1:
        lines.append("Compare the backends by their spreads, not seed by seed: each seed's two runs start "
                     "identical and separate chaotically.")
    lines.append("")
    return "\n".join(lines)


def agreement_table(steps: List[StepAgreement], per_parameter: bool = False) -> str:
    """Loss and gradient agreement of the lockstep steps (see ``agreement.first_steps``)."""
    lines = ["## torch vs mxnet where it is measurable: the first steps in lockstep", "",
             "Each step starts on both backends from the same weights and batch (the demo's recipe); "
             "gradients as applied (after clipping).", "",
             "| step | loss torch | loss mxnet | loss abs / rel diff | grads: max abs diff | grads: max rel diff "
             "(parameter) | weights after the step: max abs diff |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for s in steps:
        name, _, rel = s.worst()
        lines.append(f"| {s.step} | {s.loss[0]:.6f} | {s.loss[1]:.6f} | {s.loss_abs:.3g} / {s.loss_rel:.3g} | "
                     f"{s.grad_abs:.3g} | {rel:.3g} (`{name}`) | {s.weights_abs:.3g} |")
    lines.append("")
    if per_parameter and steps:
        lines += ["Per parameter, max abs / max relative gradient difference (relative to the parameter's "
                  "largest |gradient| on torch):", "",
                  "| parameter | " + " | ".join(f"step {s.step}" for s in steps) + " |",
                  "|---|" + "---:|" * len(steps)]
        for n in steps[0].grads:
            lines.append(f"| `{n}` | " + " | ".join(f"{s.grads[n][0]:.2g} / {s.grads[n][1]:.2g}" for s in steps) + " |")
        lines.append("")
    return "\n".join(lines)


def comparison_lines(cmp: Comparison) -> str:
    return "\n".join([
        "## torch vs mxnet over a whole run (same initial weights, same batches)", "",
        f"- loss curves: max |difference| over the first {cmp.steps} steps: **{cmp.first_steps_loss:.3g}**",
        f"- weights after training: max abs difference **{cmp.max_abs:.3g}**, max relative difference "
        f"**{cmp.max_rel:.3g}** (in `{cmp.worst}`)",
        "- the runs start bit-identical and each step agrees to float32 rounding (above); training is chaotic, "
        "so rounding differences grow over hundreds of steps into different trajectories, whose accuracies "
        "are compared by their seed-to-seed spread, not seed by seed.", ""])


def table(first: List[RunResult], by_backend: Dict[str, List[RunResult]], steps: Optional[List[StepAgreement]],
          cmp: Optional[Comparison], per_parameter: bool = False) -> str:
    parts = [run_table(first), seeds_table(by_backend)]
    if steps:
        parts.append(agreement_table(steps, per_parameter))
    if cmp is not None:
        parts.append(comparison_lines(cmp))
    return "\n".join(parts)


def plot(results: List[RunResult], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for r, style in zip(results, ("-", "--", ":")):
        ax.plot(range(1, len(r.step_losses) + 1), r.step_losses, style, label=f"{r.backend} ({r.strategy})",
                linewidth=1.2)
    ax.set_xlabel("training step")
    ax.set_ylabel("CTC loss (batch mean)")
    ax.set_yscale("log")
    ax.set_title("dualdl demo: CRNN on handwritten digit strings")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(first: List[RunResult], body: str, out_dir: str, settings: dict) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    png = os.path.join(out_dir, "loss_curves.png")
    md = os.path.join(out_dir, "report.md")
    plot(first, png)
    text = ["# dualdl demo report", "", "Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()), "",
            body, f"![loss curves, seed {first[0].seed}](loss_curves.png)", ""]
    with open(md, "w") as f:
        f.write("\n".join(text))
    return {"plot": png, "report": md}
