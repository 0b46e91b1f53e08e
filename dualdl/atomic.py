"""Write a file so that readers see the old file or the complete new one, never a partial one."""
from __future__ import annotations

import os
import secrets
from typing import Callable, TypeVar

__all__ = ["atomic_write", "atomic_write_file"]

T = TypeVar("T")


def atomic_write(path: "os.PathLike[str] | str", write_fn: Callable[[str], T]) -> T:
    """Call ``write_fn(tmp_path)``, fsync, then ``os.replace(tmp_path, path)``.

    The temporary file sits in the same directory (same filesystem, so the rename is atomic) and
    keeps ``path``'s suffix (``np.savez`` and friends append one otherwise), and its name is unique
    per call (concurrent saves of one path do not collide; the last rename wins). On any error the
    temporary file is removed and ``path`` is left untouched.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    stem, suffix = os.path.splitext(base)
    # pid + random token: two threads or processes saving the same path never share a temp file
    tmp = os.path.join(directory, f".{stem}.tmp-{os.getpid()}-{secrets.token_hex(4)}{suffix}")
    try:
        result = write_fn(tmp)
        if not os.path.exists(tmp):
            raise FileNotFoundError(f"write_fn did not create the file it was given ({tmp})")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return result


def atomic_write_file(path: "os.PathLike[str] | str", write: Callable[[object], None]) -> None:
    """Like :func:`atomic_write`, but ``write`` receives an open binary file object."""
    def write_path(tmp: str) -> None:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
    atomic_write(path, write_path)
