"""``dualdl convert-project SRC_DIR OUT_DIR``: a Gluon project's ``.py`` files converted to
PyTorch source (:func:`dualdl.port.project.convert_project`); with ``--prove SCRIPT``, that
script and its converted twin run for ``--steps`` updates on synthetic MNIST-shaped data
(``--mnist``) and every update is compared (:func:`dualdl.port.project.proof.prove_scripts`)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", metavar="SRC_DIR", help="the Gluon project's folder")
    parser.add_argument("out", metavar="OUT_DIR", help="where the PyTorch project is written")
    parser.add_argument("--force", action="store_true",
                        help="overwrite files OUT_DIR already has")
    parser.add_argument("--prove", metavar="SCRIPT",
                        help="a training script of the project (relative to SRC_DIR) to run on "
                             "both sides and compare update by update")
    parser.add_argument("--steps", type=int, default=4, help="updates the proof compares")
    parser.add_argument("--seed", type=int, default=0,
                        help="the proof's seed (the initial weights and the shuffling order; "
                             "another seed gives other batches)")
    parser.add_argument("--mnist", action="store_true",
                        help="give the proof's runs a synthetic MNIST in ./data (the files "
                             "gluon.data.vision.MNIST reads)")
    parser.add_argument("--script-args", default=None,
                        help="arguments for the proved script, one string (e.g. '--epochs 1')")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    from .project import ProjectError, convert_project
    try:
        report = convert_project(args.src, args.out, force=args.force)
    except (ProjectError, OSError) as e:
        print(f"dualdl convert-project: {e}", file=sys.stderr)
        return 2
    out = report.to_dict()
    if not args.json:
        print(report.summary())
    if args.prove:
        from .project.proof import prove_scripts, write_mnist
        script = os.path.join(args.src, args.prove)
        if not os.path.isfile(script):
            print(f"dualdl convert-project: --prove {args.prove}: no such script in {args.src}",
                  file=sys.stderr)
            return 2
        work = tempfile.mkdtemp(prefix="dualdl_proof_")
        if args.mnist:
            write_mnist(os.path.join(work, "data"))
        try:
            proof = prove_scripts(script, os.path.join(args.out, args.prove), work, args.steps,
                                  (args.script_args or "").split(), seed=args.seed)
        except RuntimeError as e:
            print(f"dualdl convert-project: the proof's run failed: {e}", file=sys.stderr)
            return 1
        out["proof"] = {"steps": proof.steps, "passed": proof.passed, "evidence": proof.evidence,
                        "worst_usage": proof.usage, "max_diff": proof.max_diff,
                        "first_failure": proof.first_failure, "seconds": proof.seconds}
        if not args.json:
            print(proof.summary())
        if args.json:
            print(json.dumps(out, indent=1))
        return 0 if proof.passed else 1
    if args.json:
        print(json.dumps(out, indent=1))
    return 0
