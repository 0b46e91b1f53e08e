"""The demo's table, plot and report file."""
from __future__ import annotations

import os
from typing import List, Optional

from .run import Comparison, RunResult


def table(results: List[RunResult], cmp: Optional[Comparison]) -> str:
    lines = []
    for r in results:
        lines.append(f"## {r.backend}: {r.strategy} on {', '.join(r.devices)}")
        lines.append("")
        lines.append("| epoch | mean loss |")
        lines.append("|---:|---:|")
        lines += [f"| {i + 1} | {loss:.4f} |" for i, loss in enumerate(r.epoch_losses)]
        lines.append("")
        lines.append(f"- held-out per-digit accuracy: **{100 * r.digit_accuracy:.1f}%**")
        lines.append(f"- held-out whole-string accuracy: **{100 * r.string_accuracy:.1f}%**")
        lines.append(f"- time per training step: {1000 * r.seconds_per_step:.1f} ms")
        lines.append("- examples (truth -> read): " + ", ".join(f"{t}->{p or '∅'}" for t, p in r.examples))
        lines.append("")
    if cmp is not None:
        lines.append("## torch vs mxnet (same initial weights, same batches)")
        lines.append("")
        lines.append(f"- first step (identical weights and batch): |loss difference| **{cmp.first_step_loss:.3g}**")
        lines.append(f"- loss curves: max |difference| over the first {cmp.steps} steps: **{cmp.first_steps_loss:.3g}**")
        lines.append(f"- weights after training: max abs difference **{cmp.max_abs:.3g}**, max relative "
                     f"difference **{cmp.max_rel:.3g}** (in `{cmp.worst}`)")
        if cmp.lockstep is not None:
            lines.append(f"- one SGD step from the *same* trained weights on the same batch: max abs weight "
                         f"difference **{cmp.lockstep:.3g}** (each step agrees to float32 rounding)")
        lines.append("- the two runs start bit-identical and agree to float32 rounding at first; training is "
                     "chaotic, so rounding differences (different kernels, summation orders) grow over hundreds "
                     "of steps while both reach the same accuracy.")
        lines.append("")
    return "\n".join(lines)


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


def write(results: List[RunResult], cmp: Optional[Comparison], out_dir: str, settings: dict) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    png = os.path.join(out_dir, "loss_curves.png")
    md = os.path.join(out_dir, "report.md")
    plot(results, png)
    body = ["# dualdl demo report", "", "Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()), "",
            table(results, cmp), "![loss curves](loss_curves.png)", ""]
    with open(md, "w") as f:
        f.write("\n".join(body))
    return {"plot": png, "report": md}
