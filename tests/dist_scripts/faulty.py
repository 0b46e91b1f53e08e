"""A worker that misbehaves on one rank, for the launcher's fault tests.

--engine none|torch|mxnet   (none: no framework, rank from $RANK; fastest)
--fault exit1|exit3|hang|signal|early0|solo|sleep|noshutdown|skipshutdown|slowleave|none   what
    rank --bad-rank does after init (exit3: sys.exit(3) without shutdown(); sleep: every rank
    sleeps, for killing the launcher; noshutdown: every rank ends after its barriers without
    shutdown(); skipshutdown: that rank alone does, after destroying its torch process group
    itself; slowleave: torch's destroy_process_group takes 1.5 s more on that rank)
--piddir DIR   every process (and the `sleep` grandchild each spawns) records its pid there
--expect-world N   passed to dualdl.distributed.init(world_size=N)
"""
import argparse
import os
import signal
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--engine", default="none")
ap.add_argument("--fault", default="none")
ap.add_argument("--bad-rank", type=int, default=1)
ap.add_argument("--piddir", default=None)
ap.add_argument("--expect-world", type=int, default=None)
ap.add_argument("--assert-no-dmlc", action="store_true")
args = ap.parse_args()


def record(pid, tag):
    if args.piddir:
        with open(os.path.join(args.piddir, f"{tag}-{pid}.pid"), "w") as f:
            f.write(str(pid))


role = os.environ.get("DMLC_ROLE", "proc")
record(os.getpid(), role)
if args.assert_no_dmlc:
    leaked = sorted(k for k in os.environ if k.startswith("DMLC_"))
    assert not leaked, leaked
    print("no DMLC_* variables", flush=True)

if args.engine == "none":
    rank = int(os.environ.get("RANK", "0"))
    ddist = None
else:
    import dualdl.distributed as ddist
    ddist.init(args.engine, world_size=args.expect_world)   # scheduler/server exit in here
    rank = ddist.rank()
print(f"rank {rank} pid {os.getpid()} ready", flush=True)

def wait_for_peers():
    """Without an engine nothing synchronises the ranks: let the peers record their pids (and
    spawn their grandchild) before failing, so the test can check that the launcher ends them."""
    if args.engine != "none" or not args.piddir:
        return
    peers = int(os.environ.get("WORLD_SIZE", "1")) - 1
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if sum(n.startswith("grandchild-") for n in os.listdir(args.piddir)) >= peers:
            return
        time.sleep(0.02)


if args.fault == "sleep":               # every process; the test kills the launcher
    time.sleep(1000)

if rank == args.bad_rank:
    if args.fault == "exit3":
        sys.exit(3)                      # without shutdown(): MXNet's kvstore is still alive
    if args.fault in ("exit1", "signal"):
        wait_for_peers()
    if args.fault == "exit1":
        raise RuntimeError(f"boom: rank {rank} fails on purpose")
    if args.fault == "hang":
        child = subprocess.Popen(["sleep", "1000"])
        record(child.pid, "grandchild")
        print(f"rank {rank} hangs", file=sys.stderr, flush=True)
        time.sleep(1000)
    if args.fault == "signal":
        os.kill(os.getpid(), signal.SIGKILL)
    if args.fault == "early0":
        os._exit(0)                      # skips the collectives the others wait for
    if args.fault == "solo":
        sys.exit(0)

if args.fault == "solo":                 # rank bad-rank left at once; the others work on
    time.sleep(1.5)
elif args.engine == "none":
    if args.fault != "none":
        child = subprocess.Popen(["sleep", "1000"])     # a peer waiting for the bad rank
        record(child.pid, "grandchild")
        time.sleep(1000)
else:
    ddist.barrier()
    ddist.barrier()
    if args.fault == "slowleave" and rank == args.bad_rank:
        import torch.distributed as dist
        destroy = dist.destroy_process_group

        def slow_destroy(*a, **k):
            destroy(*a, **k)
            time.sleep(1.5)
        dist.destroy_process_group = slow_destroy
    if args.fault == "skipshutdown" and rank == args.bad_rank:
        import torch.distributed as dist
        dist.destroy_process_group()       # torch's own teardown, not dualdl's shutdown()
        sys.exit(0)
    if args.fault != "noshutdown":
        t0 = time.monotonic()
        ddist.shutdown()
        print(f"rank {rank} shutdown took {time.monotonic() - t0:.2f} s", flush=True)
print(f"rank {rank} done", flush=True)
