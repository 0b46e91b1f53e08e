"""dualdl.distributed in one process: sharding, atomic writes, single-process defaults, and the
environment checks that turn would-be hangs into errors."""
import os
import socket

import numpy as np
import pytest

import dualdl.distributed as ddist
from dualdl.distributed.env import DistributedEnvError, check_mxnet_node_env
from dualdl.distributed.sharding import shard_indices


@pytest.mark.parametrize("n, world, batch", [(32, 2, 8), (30, 4, 3), (7, 3, 2), (5, 8, 1)])
def test_shards_are_equal_sized_and_cover_the_permutation(n, world, batch):
    shards = [shard_indices(n, r, world, shuffle=True, seed=3, epoch=1) for r in range(world)]
    assert len({len(s) for s in shards}) == 1
    assert set(np.concatenate(shards)) == set(range(n))        # padded by repetition only
    perm = shard_indices(n, 0, 1, shuffle=True, seed=3, epoch=1)
    if n % (world * batch) == 0:   # local batch i of all ranks == global batch i of one process
        for i in range(n // (world * batch)):
            local = np.concatenate([s[i * batch:(i + 1) * batch] for s in shards])
            assert sorted(local) == sorted(perm[i * world * batch:(i + 1) * world * batch])


def test_shard_drop_last_and_epochs():
    a = [shard_indices(10, r, 3, drop_last=True) for r in range(3)]
    assert [len(s) for s in a] == [3, 3, 3] and len(set(np.concatenate(a))) == 9
    e0 = shard_indices(10, 0, 1, shuffle=True, seed=1, epoch=0)
    e1 = shard_indices(10, 0, 1, shuffle=True, seed=1, epoch=1)
    assert not np.array_equal(e0, e1) and sorted(e0) == sorted(e1) == list(range(10))
    with pytest.raises(ValueError, match="0 <= rank < world_size"):
        shard_indices(10, 2, 2)
    with pytest.raises(TypeError, match="n_samples must be an int"):
        shard_indices(10.0, 0, 1)


def test_atomic_write_replaces_or_leaves_untouched(tmp_path):
    path = tmp_path / "ck.npz"
    ddist.atomic_write(path, lambda tmp: np.savez(tmp, a=np.arange(3)))
    with np.load(path) as z:
        assert z["a"].tolist() == [0, 1, 2]

    def broken(tmp):
        with open(tmp, "wb") as f:
            f.write(b"half a checkpoint")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        ddist.atomic_write(path, broken)
    with np.load(path) as z:                      # the old file is intact
        assert z["a"].tolist() == [0, 1, 2]
    assert sorted(os.listdir(tmp_path)) == ["ck.npz"]   # no temporary file left


def test_single_process_defaults(backend, tmp_path):
    assert ddist.init(backend, world_size=1) is False
    try:
        assert (ddist.rank(), ddist.world_size(), ddist.is_main(), ddist.local_rank()) == (0, 1, True, 0)
        assert ddist.global_batch_size(16) == 16
        assert ddist.step_scale(4, 6) == (1.5, 6) and ddist.step_scale(6, 6) == (1.0, 6)
        with pytest.raises(ValueError, match="exceeds full_local_batch_size"):
            ddist.step_scale(7, 6)
        assert ddist.trainer_kwargs() == ({"kvstore": "device"} if backend == "mxnet" else {})
        assert ddist.kvstore() == ("device" if backend == "mxnet" else None)
        model = object()
        assert ddist.wrap_model(model) is model
        ddist.barrier()
        assert ddist.save_on_main(lambda tmp: open(tmp, "w").write("x"), tmp_path / "f.txt")
        assert (tmp_path / "f.txt").read_text() == "x"
        other = "torch" if backend == "mxnet" else "mxnet"
        with pytest.raises(DistributedEnvError, match=f"already initialised for '{backend}'"):
            ddist.init(other)
    finally:
        ddist.shutdown()
    with pytest.raises(DistributedEnvError, match="expected world size 2"):
        ddist.init(backend, world_size=2)
    assert not ddist.is_initialized()


def test_launcher_backend_mismatch_is_an_error(monkeypatch):
    monkeypatch.setenv("DUALDL_LAUNCH_BACKEND", "mxnet")
    with pytest.raises(DistributedEnvError, match="--backend mxnet` but initialises the 'torch'"):
        ddist.init("torch")


def test_dmlc_role_in_a_torch_process_is_refused(monkeypatch):
    monkeypatch.setenv("DMLC_ROLE", "worker")
    with pytest.raises(DistributedEnvError, match="DMLC_ROLE='worker' is set in a torch process"):
        ddist.check_environment("torch")


def test_incomplete_or_unreachable_dmlc_env():
    with pytest.raises(DistributedEnvError, match="DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT"):
        check_mxnet_node_env({"DMLC_ROLE": "worker"})
    with pytest.raises(DistributedEnvError, match="DMLC_ROLE='boss'"):
        check_mxnet_node_env({"DMLC_ROLE": "boss"})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"DMLC_ROLE": "server", "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(port),
           "DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "x"}
    with pytest.raises(DistributedEnvError, match="DMLC_NUM_WORKER='x' is not an integer"):
        check_mxnet_node_env(env)
    env["DMLC_NUM_WORKER"] = "2"
    with pytest.raises(DistributedEnvError, match="no MXNet scheduler answers"):
        check_mxnet_node_env(env, connect_timeout=0.3)
    assert check_mxnet_node_env({}) is False


def test_unlaunched_rank_query_before_init_in_a_launched_process(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="needs dualdl.distributed.init"):
        ddist.rank()
