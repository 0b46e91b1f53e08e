"""``dualdl launch``: start one training script as N processes on each framework's own engine.

PyTorch: N ranks with ``MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK`` (torchrun's names).
MXNet: a ps-lite scheduler, ``--num-servers`` servers and N workers with ``DMLC_*`` (the same
script runs in every role; ``import mxnet`` turns scheduler and server into nodes). Our own
supervisor replaces MXNet's bundled launcher (which crashes on Python 3.11 and orphans nodes)
and hardens both engines: loopback by default, each child in its own process group, fail fast
when any process dies (a dead ps-lite node hangs the rest forever), children that die with the
launcher even when it is SIGKILLed (``lifeline.py``), a deadline after which every process group
is killed, a report naming the failed rank with its exit code or signal and last
stderr lines, one retry when the free port it picked was taken. POSIX only.
"""
from __future__ import annotations

import argparse
import collections
import errno
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Optional, Sequence

from .. import config
from ..backend import KNOWN_BACKENDS, canonical_name
from .env import LAUNCH_BACKEND, LAUNCHER_PID, RANK_FILE, dmlc_vars, is_loopback
from .lifeline import die_with_parent

__all__ = ["add_arguments", "run", "LaunchError"]

EXIT_USAGE, EXIT_FAILED, EXIT_TIMEOUT = 2, 1, 124
_PORT_CONFLICT = re.compile(r"EADDRINUSE|address already in use|bind failed", re.I)
_POLL = 0.02


class LaunchError(Exception):
    """A launch request that cannot work; nothing was started."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nproc", "--nproc-per-node", dest="nproc", type=int, default=1,
                   help="training processes (torch ranks / MXNet workers) on this node")
    p.add_argument("--backend", choices=tuple(KNOWN_BACKENDS), default=None,
                   help="engine (default: $DUALDL_BACKEND or torch)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds; kill every process after this and exit 124 (default: none)")
    p.add_argument("--exit-timeout", type=float, default=None,
                   help="seconds the others may keep running after one worker exited 0, then "
                        "the job fails (0: never). Default: 30 for MXNet, where workers leave "
                        "together through ps-lite's final barrier and one that leaves early "
                        "hangs the rest; 0 for torch, where rank 0 may legitimately work on alone")
    p.add_argument("--grace", type=float, default=3.0,
                   help="seconds between SIGTERM and SIGKILL when stopping processes (default 3)")
    p.add_argument("--master-addr", "--host", dest="master_addr", default="127.0.0.1",
                   help="address of the rendezvous: torch rank 0's store / the MXNet scheduler "
                        "(default 127.0.0.1, loopback only)")
    p.add_argument("--port", "--master-port", dest="port", type=int, default=0,
                   help="rendezvous port (default: a free one; required with --nnodes > 1)")
    p.add_argument("--nnodes", type=int, default=1, help="hosts in the job (default 1)")
    p.add_argument("--node-rank", type=int, default=0, help="index of this host in [0, nnodes)")
    p.add_argument("--node-host", default=None,
                   help="MXNet: this host's address that the others reach (DMLC_NODE_HOST); "
                        "default 127.0.0.1 for a loopback master, else ps-lite picks an interface")
    p.add_argument("--num-servers", type=int, default=1, help="MXNet parameter servers (node 0)")
    p.add_argument("--tail", type=int, default=20, help="stderr lines shown for a failed process")
    p.add_argument("--log-dir", default=None,
                   help="also write each process's output to LOG_DIR/<name>.log (appended)")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter for the processes (default: the Python running dualdl)")
    p.add_argument("script", help="the training script (runs in every process)")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments for the script")


# ---- configuration ---------------------------------------------------------------------------
@dataclass
class _Config:
    backend: str
    nproc: int
    nnodes: int
    node_rank: int
    master_addr: str
    port: int
    node_host: Optional[str]
    num_servers: int
    timeout: Optional[float]
    exit_timeout: Optional[float]
    grace: float
    tail: int
    log_dir: Optional[str]
    python: str
    cmd: List[str]
    hosts_rendezvous: bool
    base_env: Dict[str, str]


def _validate(args: argparse.Namespace) -> _Config:
    try:
        backend = canonical_name(args.backend or config.backend() or "torch")
    except ValueError as e:
        raise LaunchError(str(e)) from None
    for name in ("nproc", "nnodes", "num_servers"):
        if getattr(args, name) < 1:
            raise LaunchError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not 0 <= args.node_rank < args.nnodes:
        raise LaunchError(f"--node-rank {args.node_rank} is not in [0, --nnodes {args.nnodes})")
    most = max(64, 4 * (os.cpu_count() or 1))
    if args.nproc > most:
        raise LaunchError(f"--nproc {args.nproc} starts more processes than this host can run ({most} at most "
                          f"here); give the processes per node")
    for name in ("timeout", "grace", "exit_timeout"):
        v = getattr(args, name)
        if v is not None and not math.isfinite(v):
            raise LaunchError(f"--{name.replace('_', '-')} must be a finite number of seconds, got {v}")
    for name in ("timeout", "grace"):
        v = getattr(args, name)
        if v is not None and v <= 0:
            raise LaunchError(f"--{name.replace('_', '-')} must be > 0, got {v}")
    exit_timeout = args.exit_timeout
    if exit_timeout is None:
        exit_timeout = 30.0 if backend == "mxnet" else 0.0
    if exit_timeout < 0:
        raise LaunchError(f"--exit-timeout must be >= 0, got {exit_timeout}")
    if not 0 <= args.port < 65536:
        raise LaunchError(f"--port {args.port} is not a TCP port")
    if args.nnodes > 1 and not args.port:
        raise LaunchError("--nnodes > 1 needs --port: every node must use the same rendezvous port")
    if args.log_dir is not None:
        try:
            os.makedirs(args.log_dir, exist_ok=True)
        except OSError as e:
            raise LaunchError(f"--log-dir {args.log_dir!r}: {e}") from None
    if not os.path.isfile(args.script):
        raise LaunchError(f"script {args.script!r} not found")
    if shutil.which(args.python) is None and not os.access(args.python, os.X_OK):
        raise LaunchError(f"--python {args.python!r} is not an executable")
    _check_framework(args.python, backend)
    hosts = args.node_rank == 0
    if args.port and hosts:
        _check_port_free(args.master_addr, args.port)
    node_host = args.node_host
    if node_host is None and is_loopback(args.master_addr):
        node_host = "127.0.0.1"
    cmd = [args.python, "-u", args.script] + [a for a in args.script_args]
    if cmd[3:4] == ["--"]:
        del cmd[3]
    return _Config(backend, args.nproc, args.nnodes, args.node_rank, args.master_addr, args.port,
                   node_host, args.num_servers, args.timeout, exit_timeout or None, args.grace,
                   max(0, args.tail), args.log_dir, args.python, cmd, hosts, _base_env(backend))


def _check_framework(python: str, backend: str) -> None:
    """The workers' interpreter must find the framework (else every rank dies at import)."""
    _, module, extra = KNOWN_BACKENDS[backend]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    code = f"import importlib.util,sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        r = subprocess.run([python, "-c", code], env=env, timeout=60,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LaunchError(f"cannot run the workers' Python {python!r}: {e}") from None
    if r.returncode != 0:
        raise LaunchError(f"the workers' Python ({python}) cannot import {module!r}, which "
                          f"--backend {backend} needs; install it there (pip install "
                          f"'dualdl[{extra}]') or pick another --backend/--python")


def _check_port_free(host: str, port: int) -> None:
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except OSError as e:
        raise LaunchError(f"--master-addr {host!r} does not resolve: {e}") from None
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise LaunchError(f"port {port} on {host} is already in use; pick another --port or "
                              f"omit it to get a free one") from None
        if e.errno == errno.EADDRNOTAVAIL:
            raise LaunchError(f"--master-addr {host} is not an address of this host (node 0 "
                              f"hosts the rendezvous)") from None
        raise LaunchError(f"cannot bind {host}:{port}: {e}") from None
    finally:
        s.close()


def _free_port(host: str) -> int:
    family = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0][0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host if is_loopback(host) else "", 0))
        return s.getsockname()[1]


def _loopback_ifname() -> Optional[str]:
    try:
        names = [n for _, n in socket.if_nameindex()]
    except OSError:
        return None
    return next((n for n in ("lo", "lo0") if n in names), None)


# DMLC_* variables an MXNet job may take from the user (interface choice for ps-lite)
_DMLC_KEEP = ("DMLC_INTERFACE",)


def _removed_dmlc(backend: str) -> List[str]:
    keep = _DMLC_KEEP if backend == "mxnet" else ()
    return sorted(k for k in dmlc_vars() if k not in keep)


def _base_env(backend: str) -> Dict[str, str]:
    drop = set(_removed_dmlc(backend))
    env = {k: v for k, v in os.environ.items() if k not in drop}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
              "MASTER_PORT", "GROUP_RANK", "NODE_RANK", RANK_FILE):
        env.pop(k, None)
    env.setdefault("OMP_NUM_THREADS", "1")   # N processes share the cores; MXNet deadlock trap
    env["PYTHONUNBUFFERED"] = "1"
    env["DUALDL_BACKEND"] = backend
    env[LAUNCH_BACKEND] = backend
    env[LAUNCHER_PID] = str(os.getpid())      # the workers' parent-watch (lifeline.py)
    return env


# ---- processes -------------------------------------------------------------------------------
@dataclass
class _Proc:
    name: str
    argv: List[str]
    env: Dict[str, str]
    is_worker: bool
    rendezvous: bool = False           # hosts the port (torch rank 0 / MXNet scheduler)
    popen: Optional[subprocess.Popen] = None
    exit_time: Optional[float] = None
    killed_by_launcher: bool = False
    stderr_tail: Deque[str] = field(default_factory=collections.deque)
    threads: List[threading.Thread] = field(default_factory=list)
    rank_file: Optional[str] = None

    def rank(self) -> Optional[int]:
        """MXNet: the kvstore rank the scheduler gave this worker (None until it is known)."""
        if self.rank_file and os.path.exists(self.rank_file):
            try:
                with open(self.rank_file) as f:
                    return int(f.read().strip())
            except (OSError, ValueError):
                pass
        return None

    def tag(self) -> str:
        """The ``[tag]`` of its output lines: ``rank{r}`` once the rank is known, so labels equal ranks."""
        r = self.rank()
        return f"rank{r}" if r is not None else self.name

    def label(self) -> str:
        pid = self.popen.pid if self.popen else "-"
        r = self.rank()
        if r is not None:   # MXNet: rank from the scheduler
            return f"rank{r} ({self.name}, pid {pid})"
        return f"{self.name} (pid {pid})"


def _specs(cfg: _Config, port: int, tmpdir: str) -> List[_Proc]:
    env = dict(cfg.base_env, DUALDL_NNODES=str(cfg.nnodes), DUALDL_NODE_RANK=str(cfg.node_rank))
    procs: List[_Proc] = []
    if cfg.backend == "torch":
        world = cfg.nproc * cfg.nnodes
        env.update(MASTER_ADDR=cfg.master_addr, MASTER_PORT=str(port), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(cfg.nproc), GROUP_RANK=str(cfg.node_rank))
        if is_loopback(cfg.master_addr) and "GLOO_SOCKET_IFNAME" not in env:
            lo = _loopback_ifname()
            if lo:
                env["GLOO_SOCKET_IFNAME"] = lo     # keep gloo's pairs on loopback too
        for local in range(cfg.nproc):
            r = cfg.node_rank * cfg.nproc + local
            procs.append(_Proc(f"rank{r}", cfg.cmd, dict(env, RANK=str(r), LOCAL_RANK=str(local)),
                               True, rendezvous=(r == 0)))
        return procs
    env.update(DMLC_PS_ROOT_URI=cfg.master_addr, DMLC_PS_ROOT_PORT=str(port),
               DMLC_NUM_SERVER=str(cfg.num_servers), DMLC_NUM_WORKER=str(cfg.nproc * cfg.nnodes))
    if cfg.node_host:
        env["DMLC_NODE_HOST"] = cfg.node_host      # else ps-lite binds the first non-lo card
    if cfg.hosts_rendezvous:
        procs.append(_Proc("scheduler", cfg.cmd, dict(env, DMLC_ROLE="scheduler"), False, True))
        for i in range(cfg.num_servers):
            procs.append(_Proc(f"server{i}", cfg.cmd, dict(env, DMLC_ROLE="server"), False))
    for local in range(cfg.nproc):
        slot = cfg.node_rank * cfg.nproc + local
        rank_file = os.path.join(tmpdir, f"worker{slot}.rank")
        procs.append(_Proc(f"worker-slot{slot}", cfg.cmd,     # its rank comes from the scheduler
                           dict(env, DMLC_ROLE="worker", LOCAL_RANK=str(local),
                                LOCAL_WORLD_SIZE=str(cfg.nproc), **{RANK_FILE: rank_file}),
                           True, rank_file=rank_file))
    return procs


class _Output:
    """Forwards children's lines with a ``[name]`` prefix; keeps the last stderr lines; copies
    them to ``<log_dir>/<name>.log`` when asked."""

    def __init__(self, log_dir: Optional[str] = None) -> None:
        self.lock = threading.Lock()
        self.log_dir = log_dir
        self.files: Dict[str, object] = {}

    def log_file(self, name: str):
        if self.log_dir is None:
            return None
        if name not in self.files:
            self.files[name] = open(os.path.join(self.log_dir, f"{name}.log"), "a",
                                    encoding="utf-8")
        return self.files[name]

    def close(self) -> None:
        for f in self.files.values():
            try:
                f.close()
            except OSError:
                pass
        self.files.clear()

    #: seconds an MXNet worker's first lines wait for its rank before they are shown under its slot
    RANK_WAIT = 10.0

    def pump(self, proc: _Proc, pipe, to_stderr: bool, tail: int) -> None:
        """Forward ``pipe``'s lines as ``[tag] line``. An MXNet worker's rank is known only once its
        kvstore joined: lines before that are held (up to :attr:`RANK_WAIT` s) so that they too carry
        the rank, not the launch slot (``[worker1] RESULT rank=0`` was the old confusion)."""
        log = self.log_file(proc.name)
        held: List[str] = []
        since = None
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if to_stderr and tail:
                proc.stderr_tail.append(line)
                while len(proc.stderr_tail) > tail:
                    proc.stderr_tail.popleft()
            if proc.rank_file and proc.rank() is None:
                since = since or time.monotonic()
                held.append(line)
                if time.monotonic() - since < self.RANK_WAIT and len(held) < 1000:
                    continue
                lines = held
            else:
                lines = held + [line]
            self._write(proc, lines, to_stderr, log)
            held, since = [], None
        if held:
            self._write(proc, held, to_stderr, log)
        pipe.close()

    def _write(self, proc: _Proc, lines: List[str], to_stderr: bool, log) -> None:
        prefix = f"[{proc.tag()}] "
        stream = sys.stderr if to_stderr else sys.stdout
        with self.lock:
            try:
                for line in lines:
                    stream.write(prefix + line + "\n")
                    if log is not None:
                        log.write(line + "\n")
                stream.flush()
                if log is not None:
                    log.flush()
            except (OSError, ValueError):
                pass


def _start(proc: _Proc, out: _Output, tail: int) -> None:
    proc.popen = subprocess.Popen(proc.argv, env=proc.env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  start_new_session=True,   # own process group: pgid == pid
                                  preexec_fn=die_with_parent())   # SIGKILLed if we die
    for pipe, err in ((proc.popen.stdout, False), (proc.popen.stderr, True)):
        t = threading.Thread(target=out.pump, args=(proc, pipe, err, tail), daemon=True)
        t.start()
        proc.threads.append(t)


def _signal_groups(procs: Sequence[_Proc], sig: int, only_alive: bool) -> None:
    for p in procs:
        if p.popen is None or (only_alive and p.popen.poll() is not None):
            continue
        try:
            os.killpg(p.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stop_all(procs: Sequence[_Proc], grace: float) -> None:
    """SIGTERM every live group, SIGKILL after ``grace``, then SIGKILL every group we started
    (grandchildren of an exited child included)."""
    alive = [p for p in procs if p.popen is not None and p.popen.poll() is None]
    for p in alive:
        p.killed_by_launcher = True
    _signal_groups(alive, signal.SIGTERM, True)
    end = time.monotonic() + grace
    while time.monotonic() < end and any(p.popen.poll() is None for p in alive):
        time.sleep(_POLL)
    _signal_groups(procs, signal.SIGKILL, False)
    for p in procs:
        if p.popen is not None:
            try:
                p.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def _describe_exit(p: _Proc) -> str:
    rc = p.popen.returncode if p.popen else None
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
        how = f"killed by {sig} ({-rc})"
        return how + (" from the launcher" if p.killed_by_launcher else "")
    return f"exited with code {rc}"


@dataclass
class _Result:
    code: int
    port_conflict: bool = False


class _Interrupted(Exception):
    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum


def _run_once(cfg: _Config, port: int, auto_port: bool, last_try: bool) -> _Result:
    tmpdir = tempfile.mkdtemp(prefix="dualdl-launch-")
    procs = _specs(cfg, port, tmpdir)
    out = _Output(cfg.log_dir)
    t0 = time.monotonic()
    deadline = t0 + cfg.timeout if cfg.timeout else None
    reason: Optional[str] = None
    first: List[_Proc] = []
    code = 0
    try:
        for p in procs:
            try:
                _start(p, out, cfg.tail)
            except OSError as e:
                _log(f"error: cannot start {p.name} ({' '.join(p.argv[:3])}): {e}")
                shutil.rmtree(tmpdir, ignore_errors=True)
                return _Result(EXIT_FAILED)             # the finally stops those started
        _log(f"started {len(procs)} processes ({cfg.backend}, port {port}): "
             + ", ".join(f"{p.name}={p.popen.pid}" for p in procs))
        worker_done_at: Optional[float] = None
        services_wait: Optional[float] = None
        while True:
            now = time.monotonic()
            for p in procs:
                if p.exit_time is None and p.popen.poll() is not None:
                    p.exit_time = now
            failed = [p for p in procs if p.exit_time is not None and p.popen.returncode != 0]
            if failed:
                first = sorted(failed, key=lambda q: q.exit_time)
                reason = "failed"
                break
            if all(p.exit_time is not None for p in procs):
                break
            if all(p.exit_time is not None for p in procs if p.is_worker):
                # MXNet: every worker is done; scheduler and servers leave by themselves once the
                # workers' kvstores said goodbye, which workers without shutdown() never do
                services_wait = services_wait or now
                if now - services_wait > cfg.grace:
                    reason = "services-left"
                    break
            if worker_done_at is None and any(p.is_worker and p.exit_time for p in procs):
                worker_done_at = now
            if (cfg.exit_timeout and worker_done_at is not None
                    and now - worker_done_at > cfg.exit_timeout):
                first = sorted((p for p in procs if p.exit_time is not None),
                               key=lambda q: q.exit_time)[:1]
                reason = "early-exit"
                break
            if deadline is not None and now > deadline:
                reason = "timeout"
                break
            time.sleep(_POLL)
    except _Interrupted as e:
        reason = "interrupted"
        code = 128 + int(e.signum)
    finally:
        _stop_all(procs, cfg.grace)
        for p in procs:
            for t in p.threads:
                t.join(timeout=2)
        out.close()
    elapsed = time.monotonic() - t0
    try:
        if reason is None:
            _log(f"all {len(procs)} processes exited 0 in {elapsed:.1f} s")
            return _Result(0)
        if reason == "services-left":
            left = ", ".join(p.name for p in procs if p.killed_by_launcher)
            _log(f"every worker exited 0 in {elapsed:.1f} s; stopped {left}, still running "
                 f"{cfg.grace:g} s after the last worker (workers that end without "
                 f"dualdl.distributed.shutdown() leave them waiting)")
            return _Result(0)
        conflict = (reason == "failed" and any(p.rendezvous for p in first) and
                    any(_PORT_CONFLICT.search(line) for p in first for line in p.stderr_tail))
        if conflict and auto_port and not last_try:
            _log(f"port {port} was taken before the job could bind it; retrying with another "
                 f"free port")
            return _Result(EXIT_FAILED, port_conflict=True)
        _report(cfg, procs, first, reason, elapsed, port, conflict and not auto_port)
        code = {"timeout": EXIT_TIMEOUT, "interrupted": code}.get(reason, EXIT_FAILED)
        return _Result(code)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _log(msg: str) -> None:
    print(f"dualdl launch: {msg}", file=sys.stderr, flush=True)


def _report(cfg: _Config, procs: Sequence[_Proc], first: Sequence[_Proc], reason: str,
            elapsed: float, port: int, port_in_use: bool) -> None:
    lines = []
    if reason == "failed":
        names = ", ".join(f"{p.label()} {_describe_exit(p)}" for p in first)
        lines.append(f"FAILED after {elapsed:.1f} s: {names}")
        if port_in_use:
            lines.append(f"port {port} on {cfg.master_addr} is in use; choose another --port")
        t_fail = min(p.exit_time for p in first)
        for q in procs:
            if q.is_worker and q.exit_time is not None and q.exit_time < t_fail \
                    and q.popen.returncode == 0:
                lines.append(f"note: {q.label()} had exited with code 0 "
                             f"{t_fail - q.exit_time:.1f} s before; a peer that leaves early "
                             f"makes the others fail")
    elif reason == "early-exit":
        p = first[0] if first else None
        who = f"{p.label()} exited with code 0" if p else "a worker exited"
        lines.append(f"FAILED after {elapsed:.1f} s: {who} while the others were still running "
                     f"{cfg.exit_timeout:g} s later (--exit-timeout); a process that leaves "
                     f"early (e.g. os._exit, or skipping the last collective) hangs its peers")
    elif reason == "timeout":
        lines.append(f"TIMEOUT: the job did not finish within --timeout {cfg.timeout:g} s")
    else:
        lines.append(f"interrupted after {elapsed:.1f} s: stopped every process")
    lines.append("processes:")
    shown = set(id(p) for p in first)
    for p in list(first) + [q for q in procs if id(q) not in shown]:
        mark = "  <- first failure" if reason == "failed" and id(p) in shown else ""
        lines.append(f"  {p.label()}: {_describe_exit(p)}{mark}")
        if p.stderr_tail and (id(p) in shown or reason == "timeout"):
            lines.append("    last stderr lines:")
            lines.extend(f"      | {line}" for line in p.stderr_tail)
    _log("\n".join(lines))


def run(args: argparse.Namespace) -> int:
    """Run the job; returns 0 when every process exited 0, 124 on --timeout, 1 on a failure,
    2 on a bad request (nothing started)."""
    try:
        cfg = _validate(args)
    except LaunchError as e:
        _log(f"error: {e}")
        return EXIT_USAGE
    leaked = _removed_dmlc(cfg.backend)
    if leaked:
        _log(f"note: removed {', '.join(leaked)} from the children's environment")
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        def _raise(signum, frame):
            signal.signal(signum, signal.SIG_IGN)    # once: let the cleanup finish
            raise _Interrupted(signum)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            handlers[sig] = signal.signal(sig, _raise)
    try:
        auto = not cfg.port
        tries = 2 if auto else 1
        for attempt in range(tries):
            port = cfg.port or _free_port(cfg.master_addr)
            result = _run_once(cfg, port, auto, attempt + 1 == tries)
            if not result.port_conflict:
                return result.code
        return EXIT_FAILED
    except _Interrupted as e:
        return 128 + int(e.signum)
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)
