"""Helpers for the distributed tests: run `dualdl launch` bounded, check that pids are gone."""
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
              "DUALDL_LAUNCH_BACKEND", "DUALDL_BACKEND"):
        env.pop(k, None)
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env


def script(name):
    return os.path.join(HERE, name)


def launch(launch_args, script_name, script_args=(), timeout=90, env=None):
    """Run `python -m dualdl launch ...`; returns (returncode, stdout, stderr, seconds)."""
    cmd = [PYTHON, "-m", "dualdl", "launch", *launch_args, script(script_name), *script_args]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env or clean_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_launcher(p)
        out, err = p.communicate()
        raise AssertionError(f"dualdl launch did not return within {timeout} s:\n{err[-3000:]}")
    return p.returncode, out, err, time.monotonic() - t0


def stop_launcher(p):
    """SIGTERM first: the launcher then stops its children (each in its own process group,
    so killing the launcher's group alone would orphan them); SIGKILL if it does not exit."""
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def run_single(script_name, script_args=(), timeout=90):
    """The same script without a launcher (one process)."""
    r = subprocess.run([PYTHON, script(script_name), *script_args], env=clean_env(),
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def alive(pid):
    """Whether ``pid`` runs (a zombie, killed but not yet reaped by init, counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")


def recorded_pids(piddir):
    return {name: int(open(os.path.join(piddir, name)).read())
            for name in os.listdir(piddir) if name.endswith(".pid")}


def assert_all_dead(piddir, expected_min):
    pids = recorded_pids(piddir)
    assert len(pids) >= expected_min, pids
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(p) for p in pids.values()):
        time.sleep(0.05)
    survivors = {n: p for n, p in pids.items() if alive(p)}
    for p in survivors.values():           # never leave them behind, even when failing
        try:
            os.kill(p, 9)
        except OSError:
            pass
    assert not survivors, f"processes survived the launcher: {survivors}"
