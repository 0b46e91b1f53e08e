"""``dualdl convert-project SRC_DIR OUT_DIR``: a Gluon project's ``.py`` files converted to
PyTorch source (:func:`dualdl.port.project.convert_project`); with ``--prove SCRIPT``, that
script and its converted twin run for ``--steps`` updates on a synthetic dataset of the real
format (``--data NAME``: :mod:`dualdl.port.project.proof_data`'s writers; ``--mnist``) and every
update is compared (:func:`dualdl.port.project.proof.prove_scripts`)."""
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
    parser.add_argument("--data", action="append", default=[], metavar="NAME[:FOLDER][,k=v]",
                        help="a synthetic dataset for the proof's runs, in the files the Gluon "
                             "reader opens (mnist, fashion-mnist, cifar10, arrays, a text "
                             "corpus...: the proof's error lists them), in FOLDER of the proof's "
                             "folder or the writer's own (./data and $MXNET_HOME/datasets/<name>); "
                             "k=v: the writer's options (train=600); repeatable")
    parser.add_argument("--mnist", action="store_true", help="the same as --data mnist")
    parser.add_argument("--nproc", type=int, default=1,
                        help="run the converted script of the proof as N torch.distributed "
                             "processes (dualdl launch, gloo on CPU), one per device of its "
                             "split_and_load list; the Gluon script runs as written")
    parser.add_argument("--zoo", action="append", default=[], metavar="NAME[:k=v,...]",
                        help="a model-zoo configuration to translate for a get_model call whose "
                             "arguments are known at run time only; repeatable")
    parser.add_argument("--script-args", default=None,
                        help="arguments for the proved script, one string (e.g. '--epochs 1')")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    from .project import ProjectError, convert_project
    try:
        report = convert_project(args.src, args.out, force=args.force, zoo=args.zoo)
    except (ProjectError, OSError) as e:
        print(f"dualdl convert-project: {e}", file=sys.stderr)
        return 2
    out = report.to_dict()
    if not args.json:
        print(report.summary())
    if args.prove:
        from .project.proof import prove_scripts
        from .project.proof_data import DataSpecError, write_data
        script = os.path.join(args.src, args.prove)
        if not os.path.isfile(script):
            print(f"dualdl convert-project: --prove {args.prove}: no such script in {args.src}",
                  file=sys.stderr)
            return 2
        work = tempfile.mkdtemp(prefix="dualdl_proof_")
        try:
            for spec in (["mnist"] if args.mnist else []) + args.data:
                write_data(spec, work)
        except DataSpecError as e:
            print(f"dualdl convert-project: {e}", file=sys.stderr)
            return 2
        try:
            proof = prove_scripts(script, os.path.join(args.out, args.prove), work, args.steps,
                                  (args.script_args or "").split(), seed=args.seed,
                                  nproc=args.nproc)
        except RuntimeError as e:
            print(f"dualdl convert-project: the proof's run failed: {e}", file=sys.stderr)
            return 1
        out["proof"] = {"steps": proof.steps, "passed": proof.passed, "evidence": proof.evidence,
                        "worst_usage": proof.usage, "max_diff": proof.max_diff,
                        "first_failure": proof.first_failure, "seconds": proof.seconds,
                        "note": proof.note, "max_diff64": proof.max_diff64}
        if not args.json:
            print(proof.summary())
        if args.json:
            print(json.dumps(out, indent=1))
        return 0 if proof.passed else 1
    if args.json:
        print(json.dumps(out, indent=1))
    return 0
