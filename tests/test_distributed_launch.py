"""`dualdl launch` under faults: every failure is reported by rank, ends the whole job in bounded
time with a non-zero exit, and leaves no process behind (checked by pid)."""
import argparse
import os
import re
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_scripts"))
from launchutil import (PYTHON, alive, assert_all_dead, clean_env, launch, script,  # noqa: E402
                        stop_launcher)

from dualdl.distributed import launch as launcher  # noqa: E402

pytestmark = pytest.mark.distributed


@pytest.mark.parametrize("engine", ["torch", "mxnet"])
def test_crashing_worker_is_reported_and_job_ends(engine, tmp_path):
    rc, out, err, secs = launch(["--backend", engine, "--nproc", "2", "--timeout", "60"],
                                "faulty.py", ["--engine", engine, "--fault", "exit1",
                                              "--piddir", str(tmp_path)])
    assert rc == 1, err
    # the rank that raised is named, with its exit code and its own traceback lines
    assert "FAILED" in err and "rank1 (" in err and "exited with code 1  <- first failure" in err
    tail = err.split("last stderr lines:", 1)[1]
    assert "RuntimeError: boom: rank 1 fails on purpose" in tail
    assert secs < 30, f"took {secs:.1f} s"       # fail fast, not the 60 s deadline
    assert_all_dead(tmp_path, 2 if engine == "torch" else 4)


def test_hanging_worker_is_killed_at_the_deadline(tmp_path):
    rc, out, err, secs = launch(["--nproc", "2", "--timeout", "2", "--grace", "1"], "faulty.py",
                                ["--fault", "hang", "--piddir", str(tmp_path)])
    assert rc == 124, err
    assert "TIMEOUT" in err and "rank1 (" in err and "| rank 1 hangs" in err
    assert 2 <= secs < 10, secs
    assert_all_dead(tmp_path, 4)      # two ranks and the `sleep` grandchild each started


def test_worker_killed_by_signal_is_reported(tmp_path):
    logs = tmp_path / "logs"
    rc, out, err, secs = launch(["--nproc", "2", "--timeout", "30", "--log-dir", str(logs)],
                                "faulty.py", ["--fault", "signal", "--piddir", str(tmp_path)])
    assert rc == 1, err
    assert "rank1 (" in err and "killed by SIGKILL (9)  <- first failure" in err
    assert "rank0 (" in err and "from the launcher" in err
    assert secs < 15, secs
    assert_all_dead(tmp_path, 3)
    assert sorted(os.listdir(logs)) == ["rank0.log", "rank1.log"]      # --log-dir copies
    assert "rank 1 pid" in (logs / "rank1.log").read_text()


def test_worker_leaving_early_with_exit_0_does_not_hang_the_job(tmp_path):
    # ps-lite: a worker that os._exit(0)s skips the barriers its peers wait in, forever
    rc, out, err, secs = launch(["--backend", "mxnet", "--nproc", "2", "--timeout", "60",
                                 "--exit-timeout", "1.5", "--grace", "1"], "faulty.py",
                                ["--engine", "mxnet", "--fault", "early0",
                                 "--piddir", str(tmp_path)])
    assert rc == 1, err
    assert "exited with code 0 while the others were still running" in err
    assert "rank1 (worker" in err
    assert secs < 30, secs
    assert_all_dead(tmp_path, 4)


def test_torch_rank_may_finish_before_the_others(tmp_path):
    # torch ranks leave independently (e.g. rank 0 evaluates alone): not a failure by default
    rc, out, err, secs = launch(["--nproc", "2", "--timeout", "30"], "faulty.py",
                                ["--fault", "solo", "--piddir", str(tmp_path)])
    assert rc == 0, err
    assert "rank 0 done" in out


def test_torch_rank0_hosting_the_store_leaves_after_the_others(tmp_path):
    """shutdown(): rank 0 returns only once every other rank has destroyed its process group
    (here rank 1's takes 1.5 s more), so the store it hosts outlives its peers' teardown."""
    rc, out, err, secs = launch(["--backend", "torch", "--nproc", "2", "--timeout", "60"],
                                "faulty.py", ["--engine", "torch", "--fault", "slowleave"])
    assert rc == 0, err
    took = {int(r): float(t) for r, t in re.findall(r"rank (\d) shutdown took ([\d.]+) s", out)}
    assert took.keys() == {0, 1}, out
    assert took[1] >= 1.5 and took[0] >= 1.4, took      # rank 0 waited for rank 1 to leave


def test_torch_shutdown_does_not_wait_for_a_rank_that_left_without_it(tmp_path):
    """A rank that ends without shutdown() (it destroys its process group itself): the others'
    shutdown() barrier fails at once (its sockets are closed), they warn and leave: the job ends
    0, in seconds, not at the barrier's timeout."""
    rc, out, err, secs = launch(["--backend", "torch", "--nproc", "2", "--timeout", "60"],
                                "faulty.py", ["--engine", "torch", "--fault", "skipshutdown"])
    assert rc == 0, err
    assert "rank 0 done" in out and "rank 1 done" not in out
    assert "not every rank reached shutdown()" in err
    assert secs < 30, secs


def test_explicit_port_in_use_is_refused_before_starting(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        rc, out, err, secs = launch(["--nproc", "2", "--port", str(port)], "faulty.py",
                                    ["--piddir", str(tmp_path)], timeout=30)
    assert rc == 2, err
    assert f"port {port} on 127.0.0.1 is already in use" in err
    assert os.listdir(tmp_path) == []          # nothing was started


@pytest.mark.parametrize("engine", ["torch", "mxnet"])
def test_lost_free_port_race_is_retried_once(engine, tmp_path, monkeypatch, capsys):
    """The free port picked was taken before the rendezvous bound it: the launcher sees the
    bind failure (MXNet scheduler / torch rank 0), stops the job and starts it again on another
    free port."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    taken = busy.getsockname()[1]
    real = launcher._free_port
    picks = []

    def pick(host):
        picks.append(taken if not picks else real(host))
        return picks[-1]

    monkeypatch.setattr(launcher, "_free_port", pick)
    for k in [k for k in os.environ if k.startswith("DMLC_")]:
        monkeypatch.delenv(k)
    p = argparse.ArgumentParser()
    launcher.add_arguments(p)
    args = p.parse_args(["--backend", engine, "--nproc", "2", "--timeout", "60",
                         script("faulty.py"), "--engine", engine, "--piddir", str(tmp_path)])
    try:
        rc = launcher.run(args)
    finally:
        busy.close()
    err = capsys.readouterr().err
    assert rc == 0, err
    assert len(picks) == 2 and picks[0] == taken
    assert f"port {taken} was taken before the job could bind it; retrying" in err
    # every process that started is gone; the first attempt's may be stopped before they record
    # their pid (under load), so only the second, successful attempt's count is certain
    assert_all_dead(tmp_path, 2 if engine == "torch" else 4)


def test_world_size_mismatch_is_a_clear_error(tmp_path):
    rc, out, err, secs = launch(["--nproc", "2", "--timeout", "60"], "faulty.py",
                                ["--engine", "torch", "--expect-world", "3"])
    assert rc == 1, err
    assert "expected world size 3 but this job has 2 processes" in err
    assert secs < 30


def test_nodes_disagreeing_on_world_size_fail_fast(tmp_path):
    """Two `dualdl launch` on one host acting as two nodes, the second told --nnodes 3."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    common = ["--nproc", "1", "--port", str(port), "--timeout", "60"]
    node1 = subprocess.Popen(
        [PYTHON, "-m", "dualdl", "launch", *common, "--nnodes", "3", "--node-rank", "1",
         script("faulty.py"), "--engine", "torch"],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        rc0, _, err0, _ = launch([*common, "--nnodes", "2", "--node-rank", "0"], "faulty.py",
                                 ["--engine", "torch"], env=clean_env(), timeout=60)
        _, err1 = node1.communicate(timeout=60)
    finally:
        stop_launcher(node1)
    assert node1.returncode == 1, err1
    assert "rank 1 was started with WORLD_SIZE=3 but rank 0 with WORLD_SIZE=2" in err1
    assert rc0 == 1, err0      # node 0 sees it too, long before the 60 s deadline
    assert "rank 0 was started with WORLD_SIZE=2 but rank 1 with WORLD_SIZE=3" in err0


def test_dmlc_variables_are_removed_for_torch_children(tmp_path):
    env = clean_env(DMLC_ROLE="worker", DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT="9")
    rc, out, err, secs = launch(["--nproc", "2", "--timeout", "30"], "faulty.py",
                                ["--assert-no-dmlc"], env=env)
    assert rc == 0, err
    assert "removed DMLC_PS_ROOT_PORT, DMLC_PS_ROOT_URI, DMLC_ROLE" in err
    assert out.count("no DMLC_* variables") == 2


def test_leaked_dmlc_role_errors_instead_of_hanging(tmp_path):
    """A process that is not an MXNet node but has DMLC_ROLE=worker: `import mxnet` would block
    forever; dualdl.distributed.init names the leaked variables instead."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]          # nobody listens there
    env = clean_env(DMLC_ROLE="worker", DMLC_PS_ROOT_URI="127.0.0.1",
                    DMLC_PS_ROOT_PORT=str(dead_port), DMLC_NUM_SERVER="1", DMLC_NUM_WORKER="2",
                    DUALDL_DMLC_CONNECT_TIMEOUT="1")
    code = "import dualdl.distributed as d; d.init('mxnet')"
    t0 = time.monotonic()
    r = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "no MXNet scheduler answers at 127.0.0.1" in r.stderr
    assert "DMLC_* variables leaked" in r.stderr
    assert time.monotonic() - t0 < 30
    r = subprocess.run([PYTHON, "-c", "import dualdl.distributed as d; d.init('torch')"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "DMLC_ROLE='worker' is set in a torch process" in r.stderr


def test_missing_backend_on_the_workers_python(tmp_path):
    # an interpreter without site-packages stands for a worker host where mxnet is not installed
    wrapper = tmp_path / "python-without-site"
    wrapper.write_text(f"#!/bin/sh\nexec {PYTHON} -S \"$@\"\n")
    wrapper.chmod(0o755)
    rc, out, err, secs = launch(["--backend", "mxnet", "--nproc", "2", "--python", str(wrapper)],
                                "faulty.py", timeout=30)
    assert rc == 2, err
    assert "cannot import 'mxnet', which --backend mxnet needs" in err


@pytest.mark.parametrize("argv, message", [
    (["--nproc", "0"], "--nproc must be >= 1"),
    (["--nnodes", "2", "--node-rank", "2", "--port", "1234"], "--node-rank 2 is not in [0, --nnodes 2)"),
    (["--nnodes", "2"], "--nnodes > 1 needs --port"),
    (["--timeout", "-1"], "--timeout must be > 0"),
])
def test_bad_requests_start_nothing(argv, message, capsys):
    p = argparse.ArgumentParser()
    launcher.add_arguments(p)
    assert launcher.run(p.parse_args([*argv, script("faulty.py")])) == 2
    assert message in capsys.readouterr().err


def test_missing_script(capsys):
    p = argparse.ArgumentParser()
    launcher.add_arguments(p)
    assert launcher.run(p.parse_args(["no/such/script.py"])) == 2
    assert "script 'no/such/script.py' not found" in capsys.readouterr().err


def test_terminating_the_launcher_stops_every_process(tmp_path):
    cmd = [PYTHON, "-m", "dualdl", "launch", "--nproc", "2", "--grace", "1", script("faulty.py"),
           "--fault", "hang", "--piddir", str(tmp_path)]
    p = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(os.listdir(tmp_path)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(os.listdir(tmp_path)) == 4, "the job did not start"
        t0 = time.monotonic()
        p.send_signal(15)
        _, err = p.communicate(timeout=30)
    finally:
        stop_launcher(p)
    assert p.returncode == 128 + 15, err
    assert "interrupted" in err and time.monotonic() - t0 < 10
    assert_all_dead(tmp_path, 4)


@pytest.mark.parametrize("engine", ["torch", "mxnet"])
def test_sigkilled_launcher_takes_every_process_with_it(engine, tmp_path):
    """SIGKILL leaves the launcher no chance to stop its children: the kernel's PDEATHSIG must
    (torch ranks; MXNet scheduler, server and workers, connected through ps-lite)."""
    cmd = [PYTHON, "-m", "dualdl", "launch", "--backend", engine, "--nproc", "2",
           "--timeout", "120", script("faulty.py"), "--engine", engine, "--fault", "sleep",
           "--piddir", str(tmp_path)]
    p = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        ready = 0
        deadline = time.monotonic() + 60
        while ready < 2 and time.monotonic() < deadline:     # both workers past init()
            line = p.stdout.readline()
            if not line:
                break
            ready += line.rstrip().endswith("ready")
        assert ready == 2, p.stderr.read() if p.poll() is not None else "the job did not start"
        p.kill()                                             # the launcher only, not its group
        p.wait(timeout=10)
    finally:
        stop_launcher(p)
    assert p.returncode == -9
    assert_all_dead(tmp_path, 2 if engine == "torch" else 4)


def test_lifeline_thread_ends_a_worker_whose_launcher_died(tmp_path):
    """The fallback where the kernel has no PDEATHSIG: a child started without it, watching
    its parent through dualdl.distributed.lifeline, ends itself once the parent is SIGKILLed."""
    child = ("import os,sys,time; from dualdl.distributed.lifeline import watch_launcher; "
             "assert watch_launcher(interval=0.1); print(os.getpid(), flush=True); time.sleep(60)")
    parent = ("import os,subprocess,sys,time; "
              f"c = subprocess.Popen([sys.executable, '-c', {child!r}], "
              "env=dict(os.environ, DUALDL_LAUNCHER_PID=str(os.getpid())), "
              "start_new_session=True); time.sleep(60)")
    p = subprocess.Popen([PYTHON, "-c", parent], env=clean_env(), stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        pid = int(p.stdout.readline())
        (tmp_path / "child.pid").write_text(str(pid))
        assert alive(pid)
        p.kill()
        p.wait(timeout=10)
    finally:
        stop_launcher(p)
    assert_all_dead(tmp_path, 1)


@pytest.mark.parametrize("engine", ["torch", "mxnet"])
def test_rank_exit_code_is_reported_as_is(engine, tmp_path):
    """sys.exit(3) without shutdown(): MXNet used to abort in ps-lite's exit-time teardown
    (reported as SIGABRT); the launcher must report the rank's own code."""
    rc, out, err, secs = launch(["--backend", engine, "--nproc", "2", "--timeout", "60"],
                                "faulty.py", ["--engine", engine, "--fault", "exit3",
                                              "--piddir", str(tmp_path)])
    assert rc == 1, err
    assert "rank1 (" in err and "exited with code 3  <- first failure" in err, err
    assert "SIGABRT" not in err and "terminate called" not in err, err
    assert secs < 30, secs
    assert_all_dead(tmp_path, 2 if engine == "torch" else 4)


def test_mxnet_workers_ending_without_shutdown_finish_the_job(tmp_path):
    """Every worker exits 0 without shutdown(): no SIGABRT, and the scheduler and server, left
    waiting for a goodbye that never comes, are stopped after --grace instead of failing the job
    at --exit-timeout."""
    rc, out, err, secs = launch(["--backend", "mxnet", "--nproc", "2", "--timeout", "60",
                                 "--grace", "1"], "faulty.py",
                                ["--engine", "mxnet", "--fault", "noshutdown",
                                 "--piddir", str(tmp_path)])
    assert rc == 0, err
    assert out.count("done") == 2 and "SIGABRT" not in err
    assert "every worker exited 0" in err and "without dualdl.distributed.shutdown()" in err
    assert secs < 20, secs
    assert_all_dead(tmp_path, 4)
