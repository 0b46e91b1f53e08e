"""Generates the parts of docs/writing-once.md that come from code: the side-by-side of a model
file and its twin, every line the twins change, the lines-changed table (tests/realmodels/) and
the torch tensor methods MXNet answers with a dualdl spelling (dualdl_mx/torch_style.py).

``python tests/realmodels/writing_once_gen.py`` rewrites the page between its
``<!-- generated: NAME -->`` and ``<!-- end: NAME -->`` markers; tests/test_write_once_docs.py
fails when the page is stale."""
from __future__ import annotations

import os
import re
import sys
from typing import Callable, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PAGE = os.path.join(ROOT, "docs", "writing-once.md")
sys.path.insert(0, os.path.dirname(HERE))

from realmodels import diffstat  # noqa: E402

SOURCES = {
    "dcgan.py": "pytorch/examples dcgan/main.py (Generator, Discriminator)",
    "mnist_net.py": "pytorch/examples mnist/main.py (Net)",
    "mobilenet.py": "torchvision models/mobilenet.py (MobileNetV2, ConvBNReLU(nn.Sequential))",
    "nanogpt.py": "karpathy/nanoGPT model.py (GPT, weight tying, causal attention)",
    "resnet.py": "torchvision models/resnet.py (ResNet, BasicBlock, Bottleneck: `out += identity`)",
    "vae.py": "pytorch/examples vae/main.py (VAE, loss_function)",
    "word_language_model.py": "pytorch/examples word_language_model/model.py (RNNModel tie_weights, "
                              "TransformerModel(nn.Transformer))",
}


def _cell(text: str) -> str:
    text = text.replace("|", "\\|")
    return "<br>".join(f"`{line.strip()}`" for line in text.split("\n") if line.strip()) or "(none)"


def side_by_side() -> str:
    a = "\n".join(diffstat.body(os.path.join(HERE, "originals", "mnist_net.py")))
    b = "\n".join(diffstat.body(os.path.join(HERE, "twins", "mnist_net.py")))
    return (f"torch (tests/realmodels/originals/mnist_net.py):\n\n```python\n{a.strip()}\n```\n\n"
            f"write once (tests/realmodels/twins/mnist_net.py):\n\n```python\n{b.strip()}\n```")


def changes() -> str:
    out = []
    for s in diffstat.stats():
        out.append(f"**{s.file}** ({SOURCES.get(s.file, s.file)}): {s.changed} of {s.original} lines\n")
        out.append("| torch original | write-once twin |\n|---|---|")
        out += [f"| {_cell(a)} | {_cell(b)} |" for a, b in diffstat.pairs(s.file)]
        out.append("")
    return "\n".join(out).rstrip()


def stats() -> str:
    rows = diffstat.stats()
    lines = ["| file | lines of model code | changed | per 100 lines |", "|---|---:|---:|---:|"]
    lines += [f"| {s.file} | {s.original} | {s.changed} | {100 * s.changed / s.original:.1f} |" for s in rows]
    t, c = sum(s.original for s in rows), sum(s.changed for s in rows)
    lines.append(f"| **total** | {t} | {c} | {100 * c / t:.1f} |")
    return "\n".join(lines)


def methods() -> str:
    from dualdl_mx.torch_style import TORCH_METHODS
    lines = ["| torch `x.<method>(...)` | write (both backends) |", "|---|---|"]
    lines += [f"| `{k}` | {v.replace('|', '/')} |" for k, v in sorted(TORCH_METHODS.items())]
    return "\n".join(lines)


def added() -> str:
    from dualdl_mx.torch_methods import BOTH, NDARRAY_ONLY
    names = [f"`{'@' if n == '__matmul__' else n}`" for n in BOTH if n != "__rmatmul__"]
    return (f"NDArray and Symbol: {', '.join(names)}; NDArray only (they read a shape): "
            f"{', '.join(f'`{n}`' for n in NDARRAY_ONLY)}.")


SECTIONS: Dict[str, Callable[[], str]] = {"side-by-side": side_by_side, "changes": changes, "stats": stats,
                                          "methods": methods, "added": added}


def render(page: str) -> str:
    for name, make in SECTIONS.items():
        pattern = re.compile(rf"(<!-- generated: {name} -->\n)(?:.*?\n)?(<!-- end: {name} -->)", re.S)
        if not pattern.search(page):
            raise ValueError(f"docs/writing-once.md has no <!-- generated: {name} --> section")
        body = make()
        page = pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), page)
    return page


if __name__ == "__main__":
    with open(PAGE) as f:
        old = f.read()
    new = render(old)
    if new != old:
        with open(PAGE, "w") as f:
            f.write(new)
    print("docs/writing-once.md", "updated" if new != old else "up to date")
