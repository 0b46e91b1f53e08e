"""Write a file so that readers see the old file or the complete new one, never a partial one.

The one atomic writer of dualdl (checkpoints, Trainer states, port reports, distributed saves).
A save writes a temporary file beside its target, fsyncs it and renames it over the target. A
writer killed mid-save leaves its temporary file behind; the next complete save of the same
target removes those whose writer is gone (see :func:`remove_stale_temp_files`).
"""
from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
from typing import Callable, List, Optional, TypeVar

__all__ = ["atomic_write", "atomic_write_file", "check_destination", "publish", "remove_stale_temp_files",
           "temp_path"]

T = TypeVar("T")


def check_destination(path: "os.PathLike[str] | str") -> None:
    """Raise a clear error when ``path`` cannot be written as a file: its folder is missing or
    not a folder, or ``path`` is a folder (instead of an error naming a temporary file)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot write {path}: it is a folder; give a file name")
    if not os.path.isdir(directory):
        what = "is not a folder" if os.path.exists(directory) else "does not exist"
        raise FileNotFoundError(f"cannot write {path}: its folder {directory} {what}")


def atomic_write(path: "os.PathLike[str] | str", write_fn: Callable[[str], T]) -> T:
    """Call ``write_fn(tmp_path)``, fsync, then ``os.replace(tmp_path, path)``; returns what
    ``write_fn`` returned.

    The temporary file sits in the same directory (same filesystem, so the rename is atomic) and
    keeps ``path``'s suffix (``np.savez`` and friends append one otherwise), and its name is unique
    per call (concurrent saves of one path do not collide; the last rename wins). On any error the
    temporary file is removed and ``path`` is left untouched. After the rename, temporary files
    of earlier saves of ``path`` whose writer process is gone are removed.
    """
    path = os.fspath(path)
    check_destination(path)
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, _temp_name(os.path.basename(path)))
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
    _fsync_dir(directory)   # make the rename itself durable
    remove_stale_temp_files(path)
    return result


def temp_path(path: "os.PathLike[str] | str") -> str:
    """A fresh temporary file name beside ``path`` (same folder, same suffix, this process's
    name pattern), for writers that stage several files and :func:`publish` them together."""
    path = os.fspath(path)
    check_destination(path)
    return os.path.join(os.path.dirname(os.path.abspath(path)), _temp_name(os.path.basename(path)))


def publish(tmp: str, path: "os.PathLike[str] | str") -> None:
    """Make the finished temporary file ``tmp`` (from :func:`temp_path`) durable and rename it
    over ``path``; then remove temporary files of ``path`` that dead writers left."""
    path = os.fspath(path)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(os.path.dirname(os.path.abspath(path)))
    remove_stale_temp_files(path)


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def atomic_write_file(path: "os.PathLike[str] | str", write: Callable[[object], None]) -> None:
    """:func:`atomic_write` for writers that take an open binary file object."""
    def write_path(tmp: str) -> None:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
    atomic_write(path, write_path)


# ---- temporary files and their owners --------------------------------------------------------
# .<stem>.tmp-<pid>-<process start>-<host>-<boot>-<random><suffix>: the writer is identified by
# pid and start time (a reused pid has another start time), on one host in one boot.
_FIELDS = r"tmp-(\d+)-(\d+)-([0-9a-f]{6})-([0-9a-f]{8})-[0-9a-f]{8}"


def _temp_name(base: str) -> str:
    stem, suffix = os.path.splitext(base)
    pid = os.getpid()
    return (f".{stem}.tmp-{pid}-{_start_time(pid) or 0}-{_host_tag()}-{_boot_tag()}-"
            f"{secrets.token_hex(4)}{suffix}")


def _host_tag() -> str:
    return hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]


def _boot_tag() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip().replace("-", "")[:8].lower().ljust(8, "0")
    except OSError:
        return "0" * 8


def _proc_stat(pid: int) -> Optional[List[str]]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> Optional[int]:
    """When ``pid`` started (clock ticks since boot, Linux), None where unknown."""
    fields = _proc_stat(pid)
    try:
        return int(fields[19]) if fields else None       # field 22 of stat: starttime
    except (IndexError, ValueError):
        return None


def _writer_gone(pid: int, start: int, host: str, boot: str) -> bool:
    """Whether the process that created a temporary file can no longer write it. Unknown cases
    count as alive (another host, no way to tell): those files are kept."""
    if host != _host_tag():
        return False
    here = _boot_tag()
    if boot != "0" * 8 and here != "0" * 8 and boot != here:
        return True                                  # written before this host's last boot
    fields = _proc_stat(pid)
    if fields is not None:
        if fields[0] in ("Z", "X"):                  # killed, not yet reaped: writes nothing
            return True
        now = _start_time(pid)
        return bool(start) and now is not None and now != start      # the pid was reused
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False                                 # exists, belongs to another user
    return False


def remove_stale_temp_files(path: "os.PathLike[str] | str") -> List[str]:
    """Remove the temporary files that crashed saves of ``path`` left beside it; returns their
    paths. Only dualdl's own (by name) whose writer process is gone: a save running now in this
    or another process keeps its file."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    stem, suffix = os.path.splitext(os.path.basename(path))
    pattern = re.compile(re.escape(f".{stem}.") + _FIELDS + re.escape(suffix))
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None or not entry.is_file(follow_symlinks=False):
            continue
        pid, start, host, boot = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
        if _writer_gone(pid, start, host, boot):
            try:
                os.unlink(entry.path)
                removed.append(entry.path)
            except OSError:
                pass
    return removed
