"""Processes started by ``dualdl launch`` die with their launcher, even when it is SIGKILLed.

Hides a POSIX trap: a killed parent leaves its children running, re-parented to PID 1 (or a
subreaper), and a ps-lite or gloo peer then waits forever for a job that no longer exists. Two
layers: on Linux the kernel's ``PR_SET_PDEATHSIG`` (set in the child between ``fork`` and
``exec``, kept across ``exec``; it fires when the *thread* that forked exits, and `dualdl
launch` forks from the thread that supervises the job until its end), and a parent-watch thread
in the worker (:func:`watch_launcher`, started by :func:`dualdl.distributed.init`) for systems
without ``prctl``.
"""
from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
import threading
import time
from typing import Callable, Mapping, Optional

from .. import config
from .env import LAUNCHER_PID

__all__ = ["die_with_parent", "watch_launcher"]

_PR_SET_PDEATHSIG = 1


@functools.lru_cache(maxsize=None)
def _prctl() -> Optional[Callable[..., int]]:
    if not sys.platform.startswith("linux"):
        return None
    try:   # the process's own symbols include libc's (no ldconfig lookup)
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(sig: int = signal.SIGKILL) -> Optional[Callable[[], None]]:
    """A ``preexec_fn`` for ``subprocess.Popen`` that makes the child receive ``sig`` when the
    calling thread of this process ends; None where the kernel offers no such thing.

    Everything is looked up here, in the parent: between ``fork`` and ``exec`` the child only
    makes the system calls. If the parent died before ``prctl`` took effect (the child was
    already re-parented), the child kills itself.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
    return preexec


def _end_own_group() -> None:
    """Kill this process and, when it leads its own process group (as `dualdl launch` starts
    every child), the whole group: its own children go too."""
    me = os.getpid()
    try:
        if os.getpgid(0) == me:
            os.killpg(me, signal.SIGKILL)
    except OSError:
        pass
    os.kill(me, signal.SIGKILL)


def watch_launcher(env: Optional[Mapping[str, str]] = None, interval: float = 0.5) -> bool:
    """Start a daemon thread that ends this process (and its process group) once its parent is
    no longer the launcher named by ``$DUALDL_LAUNCHER_PID``; returns whether one was started.
    Without that variable (not started by `dualdl launch`) nothing happens."""
    env = os.environ if env is None else env
    raw = config.get(LAUNCHER_PID, env) or ""
    if not raw.isdigit() or getattr(watch_launcher, "_started", False):
        return False
    launcher = int(raw)
    parent = os.getppid()
    if parent != launcher:
        if parent == 1:                  # re-parented to init: the launcher is already gone
            _end_own_group()
        return False                     # a grandchild that inherited the environment

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != launcher:
                _end_own_group()

    threading.Thread(target=watch, name="dualdl-launcher-watch", daemon=True).start()
    watch_launcher._started = True      # type: ignore[attr-defined]
    return True
