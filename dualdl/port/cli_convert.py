"""``dualdl convert SRC DST``: convert checkpoints between Gluon ``.params``, torch ``.pt/.pth``
and safetensors. The source format is detected from the content; key names are translated
(Gluon gamma/beta and ``_unfused`` RNN keys <-> torch names), DataParallel ``module.`` prefixes
are removed (or added), and a port mapping from ``dualdl.port`` can be applied (a
``translate`` report, a ``port`` report or a saved ``Mapping``: see ``mapping.as_mapping``)."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from .. import formats as F
from ..atomic import check_destination

__all__ = ["add_arguments", "run", "convert", "SameFileError"]


class SameFileError(ValueError):
    """The destination is the source file (same path, a link to it, or the same file under
    another name) and in-place conversion was not asked for."""


def convert(src: str, dst: str, to: Optional[str] = None, mapping: Optional[str] = None,
            names: str = "auto", strip_prefixes: Sequence[str] = ("module.",),
            add_prefix: Optional[str] = None, verify: bool = False,
            in_place: bool = False, progress: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
    """Convert ``src`` to ``dst``; returns a summary dict. ``names``: ``auto`` (translate names
    when going between Gluon and torch files), ``keep``, ``torch`` or ``gluon``.

    A ``dst`` that is ``src`` (also through a symbolic or hard link) is refused unless
    ``in_place``: the conversion would replace the original. In place, the file that ``dst``
    names (a symbolic link's target) is replaced atomically once the new content is complete.
    """
    say = progress or (lambda text: None)
    _readable(src, "the source")
    if mapping and isinstance(mapping, (str, os.PathLike)):
        _readable(mapping, "--mapping")
    target = _destination(src, dst, in_place)
    say(f"reading {src}")
    src_fmt = F.detect_format(src)
    dst_fmt = to or F.format_for_path(dst)
    if dst_fmt not in F.FORMATS:
        raise ValueError(f"unknown target format {dst_fmt!r}; choose from {F.FORMATS}")
    tensors = F.read_tensors(src, src_fmt)
    n_in = len(tensors)
    actions: List[str] = []
    if mapping:
        from .mapping import as_mapping
        m = as_mapping(mapping)
        tensors = m.apply(tensors)
        actions.append(f"applied mapping {mapping} ({m.source_framework or '?'} -> "
                       f"{m.target_framework or '?'}, {len(m.entries)} target tensors)")
    else:
        for p in strip_prefixes:
            before = sum(k.startswith(p) for k in tensors)
            while any(k.startswith(p) for k in tensors):
                tensors = F.strip_prefix(tensors, p)
            if before:
                actions.append(f"stripped prefix {p!r} from {before} keys")
        target_names = names
        if names == "auto":
            target_names = {("gluon", "torch"): "torch", ("torch", "gluon"): "gluon"}.get(
                (src_fmt, dst_fmt), "keep")
        if target_names not in ("keep", "torch", "gluon"):
            raise ValueError(f"--names must be auto, keep, torch or gluon, not {names!r}")
        if target_names != "keep":
            fn = F.gluon_to_torch_names if target_names == "torch" else F.torch_to_gluon_names
            renamed = fn(tensors)
            changed = len(set(tensors) - set(renamed))
            dropped = len(tensors) - len(renamed)
            tensors = renamed
            actions.append(f"translated names to {target_names}'s ({changed} keys renamed"
                           f"{f', {dropped} torch-only num_batches_tracked dropped' if dropped else ''})")
    if add_prefix:
        tensors = F.add_prefix(tensors, add_prefix)
        actions.append(f"added prefix {add_prefix!r}")
    say(f"writing {dst} ({len(tensors)} tensors)")
    F.write_tensors(target, tensors, dst_fmt)
    _usual_mode(target)
    summary: Dict[str, Any] = {
        "source": src, "source_format": src_fmt, "target": dst, "target_format": dst_fmt,
        "tensors_in": n_in, "tensors_out": len(tensors),
        "values": int(sum(int(np.prod(v.shape)) for v in tensors.values())),
        "dtypes": _dtype_counts(tensors), "actions": actions,
    }
    if verify:
        say(f"reading {dst} back to verify it")
        back = F.read_tensors(target)
        bad = [k for k in tensors if k not in back or back[k].dtype != tensors[k].dtype
               or back[k].shape != tensors[k].shape or not np.array_equal(back[k], tensors[k])]
        bad += [k for k in back if k not in tensors]
        summary["verified"] = not bad
        summary["verify_failures"] = bad[:20]
    return summary


def _destination(src: str, dst: str, in_place: bool) -> str:
    """The path to write, after refusing what would destroy ``src`` or cannot be written."""
    src, dst = os.fspath(src), os.fspath(dst)
    check_destination(dst)
    if os.path.exists(dst) and not os.path.isfile(dst):      # renaming over it would replace the device node
        raise ValueError(f"{dst} is not a regular file (a FIFO, device or socket); give a file to write")
    same = os.path.abspath(src) == os.path.abspath(dst)
    if not same and os.path.exists(src) and os.path.exists(dst):
        same = os.path.samefile(src, dst)
    if not same:
        return dst
    if not in_place:
        raise SameFileError(f"{dst} is the source file {src} itself; writing it would replace the "
                            f"original checkpoint. Write to another file, or pass --in-place "
                            f"(convert(..., in_place=True)) to replace it on purpose")
    return os.path.realpath(dst)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _readable(path: str, what: str) -> None:
    """Refuse, before reading, what would block or never end: a FIFO, a device, a socket."""
    import stat
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} does not exist") from None
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"{what} {path} is a folder; give a file")
    if not stat.S_ISREG(mode):
        raise ValueError(f"{what} {path} is not a regular file (a FIFO, device or socket); give a file")


def _usual_mode(path: str) -> None:
    """0666 less the umask, as ``open(path, "w")`` gives (the temporary file it was renamed from was 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    try:
        os.chmod(path, 0o666 & ~mask)
    except OSError:
        pass


def _dtype_counts(tensors: Dict[str, np.ndarray]) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for v in tensors.values():
        out[str(v.dtype)] = out.get(str(v.dtype), 0) + 1
    return dict(sorted(out.items()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", help="checkpoint to read (format detected from its content)")
    parser.add_argument("dst", help="file to write (format from its extension, or --to)")
    parser.add_argument("--to", choices=F.FORMATS, help="target format (default: from DST's extension: "
                        ".params gluon, .pt/.pth torch, .safetensors)")
    parser.add_argument("--mapping", metavar="FILE",
                        help="a port mapping to apply: translate's <name>.report.json, a "
                        "PortReport.save or Mapping.save JSON")
    parser.add_argument("--names", default="auto", choices=("auto", "keep", "torch", "gluon"),
                        help="key names: auto translates between Gluon and torch files (default)")
    parser.add_argument("--keep-module-prefix", action="store_true",
                        help="do not strip DataParallel/DDP 'module.' prefixes")
    parser.add_argument("--add-prefix", metavar="PREFIX",
                        help="prefix every key (e.g. 'module.' for a DataParallel model)")
    parser.add_argument("--verify", action="store_true",
                        help="read DST back and check every tensor is bit-exact with its dtype")
    parser.add_argument("--in-place", action="store_true",
                        help="allow DST to be SRC itself (replaced atomically once the new file "
                             "is complete); without it that is refused")


def run(args: argparse.Namespace) -> int:
    from ..cli import progress
    try:
        s = convert(args.src, args.dst, to=args.to, mapping=args.mapping, names=args.names,
                    strip_prefixes=() if args.keep_module_prefix else ("module.",),
                    add_prefix=args.add_prefix, verify=args.verify,
                    in_place=args.in_place, progress=progress(args, "dualdl convert"))
    except RecursionError:
        print(f"dualdl convert: error: {args.mapping or args.src} is nested too deeply to be a checkpoint or "
              f"mapping; give the file dualdl wrote", file=sys.stderr)
        return 2
    except (ValueError, KeyError, TypeError, OSError) as e:
        print(f"dualdl convert: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except (IndexError, ZeroDivisionError) as e:    # a mapping entry that cannot be computed (part [0, 0, 0])
        print(f"dualdl convert: error: {'--mapping ' + args.mapping if args.mapping else args.src} holds an entry "
              f"that cannot be computed ({type(e).__name__}: {_one_line(e)}); give the mapping dualdl wrote",
              file=sys.stderr)
        return 2
    dts = ", ".join(f"{k} x{v}" for k, v in s["dtypes"].items())
    print(f"{s['source']} ({s['source_format']}, {s['tensors_in']} tensors) -> "
          f"{s['target']} ({s['target_format']}, {s['tensors_out']} tensors, "
          f"{s['values']:,} values; {dts})")
    for a in s["actions"]:
        print(f"  {a}")
    if args.verify:
        if not s["verified"]:
            print(f"  VERIFY FAILED for: {', '.join(s['verify_failures'])}", file=sys.stderr)
            return 1
        print(f"  verified: {s['tensors_out']} tensors read back bit-exact")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="dualdl convert")
    add_arguments(p)
    sys.exit(run(p.parse_args()))
