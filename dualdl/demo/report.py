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


def epoch_table(first: List[RunResult]) -> str:
    """Held-out accuracy after each epoch, the backends side by side (the first seed's runs)."""
    lines = [f"## held-out accuracy per epoch (seed {first[0].seed}), per digit / whole string", "",
             "| epoch | " + " | ".join(r.backend for r in first) + " |", "|---:|" + "---|" * len(first)]
    for e in range(max(len(r.epoch_accuracy) for r in first)):
        cells = [f"{100 * r.epoch_accuracy[e][0]:.1f}% / {100 * r.epoch_accuracy[e][1]:.1f}%"
                 if e < len(r.epoch_accuracy) else "" for r in first]
        lines.append(f"| {e + 1} | " + " | ".join(cells) + " |")
    return "\n".join(lines + [""])


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
    parts = [run_table(first), seeds_table(by_backend), epoch_table(first)]
    if steps:
        parts.append(agreement_table(steps, per_parameter))
    if cmp is not None:
        parts.append(comparison_lines(cmp))
    return "\n".join(parts)


def plot(results: List[RunResult], path: str) -> None:
    """Three panels: both loss curves; where they part (|loss_torch - loss_mxnet| per step and the
    weights' max abs distance at the kept steps, log axes); held-out accuracy per epoch."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from .results import loss_gaps, weight_distances
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    colours = ("tab:blue", "tab:orange", "tab:red")
    for r, style, c in zip(results, ("-", "--", ":"), colours):
        ax.plot(range(1, len(r.step_losses) + 1), r.step_losses, style, color=c, label=f"{r.backend} ({r.strategy})",
                linewidth=1.2)
    ax.set(xlabel="training step", ylabel="CTC loss (batch mean)", yscale="log", title="loss per step")
    ax.legend()
    ax = axes[1]
    if len(results) == 2:
        gaps = loss_gaps(results[0], results[1])
        # a step where the losses are bit-identical (0) leaves a gap in the log-scale line
        ax.plot(range(1, len(gaps) + 1), [g if g > 0 else float("nan") for g in gaps], linewidth=0.8,
                color="tab:green", label=f"|loss {results[0].backend} - loss {results[1].backend}| (0: not drawn)")
        dist = weight_distances(results[0], results[1])
        if dist:
            ax.plot(list(dist), [d if d > 0 else float("nan") for d in dist.values()], "o-", markersize=3,
                    color="tab:purple", label="weights: max abs distance")
        ax.set(xscale="log", yscale="log")
        ax.legend(fontsize=8)
    ax.set(xlabel="training step", title="where the backends part (same start, same batches)")
    ax = axes[2]
    for r, marker, c in zip(results, ("o", "s", "^"), colours):
        epochs = range(1, len(r.epoch_accuracy) + 1)
        ax.plot(epochs, [100 * d for d, _ in r.epoch_accuracy], marker + "-", color=c, label=f"{r.backend} per digit")
        ax.plot(epochs, [100 * w for _, w in r.epoch_accuracy], marker + ":", color=c,
                label=f"{r.backend} whole string")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set(xlabel="epoch", ylabel="held-out accuracy (%)", title="held-out accuracy per epoch")
    ax.legend(fontsize=8)
    fig.suptitle(f"dualdl demo: CRNN on handwritten digit strings (seed {results[0].seed})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(first: List[RunResult], body: str, out_dir: str, settings: dict,
          by_backend: Optional[Dict[str, List[RunResult]]] = None,
          steps: Optional[List[StepAgreement]] = None, seconds: Optional[float] = None) -> dict:
    """The plot, the Markdown report and ``results.json`` (what docs/demo.md's numbers are generated
    from: ``python -m dualdl.demo.docs_numbers``)."""
    from .results import write_json
    os.makedirs(out_dir, exist_ok=True)
    png = os.path.join(out_dir, "loss_curves.png")
    md = os.path.join(out_dir, "report.md")
    plot(first, png)
    text = ["# dualdl demo report", "", "Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()), "",
            body, f"![loss curves, where the backends part, accuracy per epoch; seed {first[0].seed}]"
            "(loss_curves.png)", ""]
    with open(md, "w") as f:
        f.write("\n".join(text))
    js = write_json(os.path.join(out_dir, "results.json"), first, by_backend or {r.backend: [r] for r in first},
                    steps or [], settings, seconds)
    return {"plot": png, "report": md, "json": js}
