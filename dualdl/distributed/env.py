"""What a launched process learns from its environment, checked before any framework loads.

Hides two engine traps: ``DMLC_ROLE`` in the environment turns ``import mxnet`` into a ps-lite
node that blocks until its scheduler answers (forever if there is none), and torch's env://
rendezvous reads ``RANK``/``WORLD_SIZE``/``MASTER_*`` without checking that they agree.
"""
from __future__ import annotations

import errno
import ipaddress
import os
import socket
import time
from typing import Dict, Mapping, Optional

from .. import config

__all__ = [
    "DistributedEnvError", "LAUNCH_BACKEND", "LAUNCHER_PID", "RANK_FILE", "DMLC_REQUIRED",
    "dmlc_vars", "int_env", "is_loopback", "check_no_dmlc", "check_mxnet_node_env", "launched_backend",
    "check_port_free", "check_torch_env",
]

LAUNCH_BACKEND = "DUALDL_LAUNCH_BACKEND"   # set by `dualdl launch` in every child
LAUNCHER_PID = "DUALDL_LAUNCHER_PID"       # the launcher's pid: children die with it
RANK_FILE = "DUALDL_RANK_FILE"             # MXNet workers write their kvstore rank here
CONNECT_TIMEOUT = "DUALDL_DMLC_CONNECT_TIMEOUT"  # seconds a worker waits for its scheduler
DMLC_REQUIRED = ("DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_SERVER", "DMLC_NUM_WORKER")


class DistributedEnvError(RuntimeError):
    """The environment of a distributed process is missing, inconsistent or leaked in."""


def dmlc_vars(env: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    env = os.environ if env is None else env
    return {k: v for k, v in env.items() if k.startswith("DMLC_")}


def launched_backend(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The backend `dualdl launch` started this process for, or None."""
    env = os.environ if env is None else env
    return config.get(LAUNCH_BACKEND, env) or None


def int_env(name: str, env: Optional[Mapping[str, str]] = None, default: Optional[int] = None,
            minimum: int = 0) -> int:
    """``int(env[name])`` with an error that names the variable and what was expected."""
    env = os.environ if env is None else env
    raw = config.get(name, env)
    if raw is None or raw == "":
        if default is None:
            raise DistributedEnvError(f"environment variable {name} is not set; a distributed "
                                      f"process needs it (start the job with `dualdl launch`)")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise DistributedEnvError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise DistributedEnvError(f"{name}={value} must be >= {minimum}")
    return value


def is_loopback(host: str) -> bool:
    """Whether ``host`` (name or address) resolves only to loopback addresses."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if host == "localhost":
        return True
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def check_no_dmlc(backend: str, env: Optional[Mapping[str, str]] = None) -> None:
    """Refuse a ``DMLC_ROLE`` in a process that is not an MXNet node (it would block in
    ``import mxnet``)."""
    env = os.environ if env is None else env
    if config.get("DMLC_ROLE", env):
        leaked = ", ".join(sorted(dmlc_vars(env)))
        raise DistributedEnvError(
            f"DMLC_ROLE={env['DMLC_ROLE']!r} is set in a {backend} process ({leaked}); these "
            f"variables make `import mxnet` start a ps-lite node that blocks. They leaked from the "
            f"parent environment: unset them (`dualdl launch` removes them for --backend {backend}).")


def check_mxnet_node_env(env: Optional[Mapping[str, str]] = None,
                         connect_timeout: Optional[float] = None) -> bool:
    """Validate the DMLC_* variables of an MXNet process before ``import mxnet``.

    Returns False when there is no ``DMLC_ROLE`` (a plain single-process run). For a worker or
    server, waits up to ``connect_timeout`` seconds (default ``$DUALDL_DMLC_CONNECT_TIMEOUT`` or
    60) for the scheduler's TCP port, so that leaked variables give an error instead of a hang.
    """
    env = os.environ if env is None else env
    role = config.get("DMLC_ROLE", env)
    if not role:
        return False
    if role not in ("worker", "server", "scheduler"):
        raise DistributedEnvError(f"DMLC_ROLE={role!r}; expected worker, server or scheduler")
    missing = [k for k in DMLC_REQUIRED if not config.get(k, env)]
    if missing:
        raise DistributedEnvError(
            f"DMLC_ROLE={role!r} is set but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'}"
            f" not: `import mxnet` would block. Either these DMLC_* variables leaked into this "
            f"process (unset them) or the job was launched incompletely (use `dualdl launch "
            f"--backend mxnet`).")
    port = int_env("DMLC_PS_ROOT_PORT", env, minimum=1)
    int_env("DMLC_NUM_SERVER", env, minimum=1)
    int_env("DMLC_NUM_WORKER", env, minimum=1)
    if role == "scheduler":
        check_port_free(env["DMLC_PS_ROOT_URI"], port, "DMLC_PS_ROOT_PORT")
        return True
    host = env["DMLC_PS_ROOT_URI"]
    if connect_timeout is None:
        connect_timeout = config.dmlc_connect_timeout(env)
    deadline = time.monotonic() + connect_timeout
    last: Optional[BaseException] = None
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return True
        except OSError as e:
            last = e
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    raise DistributedEnvError(
        f"DMLC_ROLE={role!r} but no MXNet scheduler answers at {host}:{port} after "
        f"{connect_timeout:g} s ({last}). If this process is not meant to be part of an MXNet "
        f"job, DMLC_* variables leaked into its environment: unset them.")


def check_port_free(host: str, port: int, what: str) -> None:
    """Fail early (before a slow framework import) when the rendezvous port is taken; the
    message contains EADDRINUSE so that `dualdl launch` can retry on another port."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except OSError:
        return                      # let the framework report an unresolvable host
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise DistributedEnvError(
                f"{what} {port} on {host} is already in use (EADDRINUSE): another process holds "
                f"it; choose another port (dualdl launch picks a free one unless --port is "
                f"given)") from None
    finally:
        s.close()


def check_torch_env(env: Optional[Mapping[str, str]] = None) -> None:
    """Rank 0 of a loopback job checks MASTER_PORT before importing torch."""
    env = os.environ if env is None else env
    check_no_dmlc("torch", env)
    if config.get("TORCHELASTIC_USE_AGENT_STORE", env) == "True":    # torchrun's agent holds the port
        return
    if (config.get("RANK", env) == "0" and config.get("MASTER_ADDR", env)
            and (config.get("MASTER_PORT", env) or "").isdigit()):
        if is_loopback(env["MASTER_ADDR"]):
            check_port_free(env["MASTER_ADDR"], int(env["MASTER_PORT"]), "MASTER_PORT")
