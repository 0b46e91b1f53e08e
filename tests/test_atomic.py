"""dualdl's one atomic writer: the temporary files of saves killed with SIGKILL are removed by the
next complete save of the same target, and only those (a live writer's file survives)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from dualdl import atomic
from dualdl import formats as F


def _writer(path, marker, release, n=4_000_000):
    """A process that saves ``n`` float32 values to ``path`` and stops inside its fsync (the data
    is on disk, the rename not done) until ``release`` exists; ``marker`` says it got there."""
    code = textwrap.dedent(f"""
        import os, time, numpy as np
        from dualdl import formats
        real = os.fsync
        def slow_fsync(fd):
            open({str(marker)!r}, "w").close()
            while not os.path.exists({str(release)!r}):
                time.sleep(0.02)
            real(fd)
        os.fsync = slow_fsync
        formats.write_safetensors({str(path)!r}, {{"w": np.full({n}, 7, np.float32)}})
    """)
    return subprocess.Popen([sys.executable, "-c", code])


def _wait_for(marker, proc, timeout=60):
    deadline = time.time() + timeout
    while not marker.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert marker.exists(), "the writer never reached its fsync"


def _temps(directory):
    return sorted(p.name for p in directory.iterdir() if ".tmp-" in p.name)


def test_next_save_removes_killed_writers_temp_files_but_not_a_live_ones(tmp_path):
    path = tmp_path / "model.safetensors"
    F.write_safetensors(path, {"w": np.arange(5, dtype=np.float64)})
    procs = []
    try:
        for i in range(4):        # 3 killed (one left a zombie, never reaped), 1 alive
            procs.append(_writer(path, tmp_path / f"m{i}", tmp_path / f"go{i}"))
        for i, p in enumerate(procs):
            _wait_for(tmp_path / f"m{i}", p)
        for p in procs[:3]:
            p.send_signal(signal.SIGKILL)
        for p in procs[:2]:
            p.wait(timeout=10)
        deadline = time.time() + 10   # the third: killed, not reaped (a zombie) but not running
        while time.time() < deadline:
            with open(f"/proc/{procs[2].pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.02)
        left = _temps(tmp_path)
        assert len(left) == 4, left
        size = sum((tmp_path / n).stat().st_size for n in left)
        assert size > 4 * 4_000_000 * 4 * 0.99        # each holds its 16 MB payload
        live = [n for n in left if n.startswith(f".model.tmp-{procs[3].pid}-")]
        assert len(live) == 1

        F.write_safetensors(path, {"w": np.arange(3, dtype=np.float32)})       # a complete save
        assert _temps(tmp_path) == live                # the killed ones' gone, the live one kept
        assert F.read_tensors(path)["w"].tolist() == [0, 1, 2]

        (tmp_path / "go3").touch()                     # the live writer finishes its save
        assert procs[3].wait(timeout=60) == 0
        assert _temps(tmp_path) == []
        assert F.read_tensors(path)["w"].shape == (4_000_000,)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)


def _name(stem, suffix, pid, start, host=None, boot=None):
    host = host or atomic._host_tag()
    boot = boot or atomic._boot_tag()
    return f".{stem}.tmp-{pid}-{start}-{host}-{boot}-0123abcd{suffix}"


def test_only_dualdls_own_temp_files_of_that_target_whose_writer_is_gone(tmp_path):
    """Pid reuse (a live pid with another start time), another host, a previous boot, other
    targets and foreign names."""
    target = tmp_path / "net.params"
    me, my_start = os.getpid(), atomic._start_time(os.getpid())
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        gone = {
            "dead pid": _name("net", ".params", dead.pid, 12345),
            "reused pid": _name("net", ".params", sleeper.pid, 1),
            "previous boot": _name("net", ".params", me, my_start, boot="ffffffff"),
        }
        kept = {
            "this process, saving now": _name("net", ".params", me, my_start),
            "live writer": _name("net", ".params", sleeper.pid,
                                 atomic._start_time(sleeper.pid)),
            "another host": _name("net", ".params", dead.pid, 12345, host="abcdef"),
            "another target": _name("other", ".params", dead.pid, 12345),
            "another suffix": _name("net", ".pt", dead.pid, 12345),
            "not dualdl's": f".net.tmp-{dead.pid}-0123abcd.params",
            "user file": "net.tmp.params",
        }
        for n in list(gone.values()) + list(kept.values()):
            (tmp_path / n).write_bytes(b"x" * 10)
        assert not atomic._host_tag() == "abcdef"
        removed = atomic.remove_stale_temp_files(target)
        assert sorted(os.path.basename(r) for r in removed) == sorted(gone.values())
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept.values())
    finally:
        sleeper.kill()
        sleeper.wait()


def test_missing_folder_is_named_not_the_temp_file(tmp_path):
    for write in (lambda p: F.write_safetensors(p, {"w": np.ones(2, np.float32)}),
                  lambda p: atomic.atomic_write(p, lambda tmp: np.save(tmp, np.ones(2)))):
        with pytest.raises(FileNotFoundError) as e:
            write(tmp_path / "no" / "such" / "w.npy")
        msg = str(e.value)
        assert f"its folder {tmp_path / 'no' / 'such'} does not exist" in msg and ".tmp-" not in msg
    with pytest.raises(IsADirectoryError, match="it is a folder"):
        F.write_safetensors(tmp_path, {"w": np.ones(2, np.float32)})
    assert list(tmp_path.iterdir()) == []
