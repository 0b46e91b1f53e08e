"""Every environment variable dualdl reads, in one list, each read when it is used (never at import).

Three kinds: dualdl's own settings (``DUALDL_*`` a user may set), the variables a launcher sets in
the processes of a distributed job (``dualdl launch``, ``torchrun``, MXNet's ps-lite), and the
framework variables dualdl reads or sets. ``docs/config.md`` is this list for readers. A leaf:
imports nothing from dualdl and no framework.
"""
from __future__ import annotations

import os
from typing import Dict, Mapping, NamedTuple, Optional

__all__ = ["Variable", "VARIABLES", "get", "flag", "backend", "mx_fused_batchnorm", "mx_kernels", "cache_dir", "mx_kvstore",
           "torch_dist_backend", "require_gpu", "dmlc_connect_timeout"]


class Variable(NamedTuple):
    """One environment variable: its default (``None``: unset means "not given") and meaning."""
    default: Optional[str]
    meaning: str
    kind: str          # "setting", "launcher" or "framework"


VARIABLES: Dict[str, Variable] = {
    # ---- dualdl's settings ----------------------------------------------------------------------
    "DUALDL_BACKEND": Variable(None, "the backend active when the program sets none "
                               "(torch, mxnet or an alias: pytorch, mx, gluon); default torch; "
                               "also the default of `dualdl launch --backend`", "setting"),
    "DUALDL_MX_FUSED_BATCHNORM": Variable("0", "1: MXNet BatchNorm in NDArray mode and in a hybridized "
                                          "dualdl model's graph uses MXNet's fused float32 operator "
                                          "(faster, less close to torch); read when dualdl_mx's layers "
                                          "are imported", "setting"),
    "DUALDL_MX_EXACT_RELU": Variable("0", "1: MXNet relu always runs MXNet's relu op, never MKLDNN's "
                                     "ELU form (torch's gradient also for 0 < x <= 6e-8; slower after a "
                                     "convolution); read when dualdl_mx's layers are imported", "setting"),
    "DUALDL_MX_FAST": Variable("1", "0: none of MXNet's CPU speed code (dualdl_mx/fast/: the compiled "
                               "kernels built with g++ on first use, the guarded step, the relu and "
                               "BatchNorm forms) runs: every layer, loss and step takes its precise form "
                               "(the same numbers to float32 rounding, slower); read at each use",
                               "setting"),
    "DUALDL_MX_KERNELS": Variable("1", "0: as DUALDL_MX_FAST=0 for the compiled kernels only (kept for "
                                  "scripts that set it; DUALDL_MX_FAST is the switch)", "setting"),
    "DUALDL_CACHE_DIR": Variable(None, "where dualdl keeps what it builds once per machine (its compiled "
                                 "MXNet kernels); default ~/.cache/dualdl ($XDG_CACHE_HOME/dualdl)",
                                 "setting"),
    "DUALDL_MX_KVSTORE": Variable("dist_sync", "the kvstore type of a distributed MXNet job "
                                  "(dist_sync or dist_sync_device)", "setting"),
    "DUALDL_TORCH_DIST_BACKEND": Variable(None, "the torch.distributed process-group backend "
                                          "(gloo or nccl); default nccl when CUDA is available, "
                                          "else gloo", "setting"),
    "DUALDL_DMLC_CONNECT_TIMEOUT": Variable("60", "seconds an MXNet worker waits for its "
                                            "scheduler before failing", "setting"),
    "DUALDL_DEBUG": Variable(None, "1: `dualdl translate` prints the full traceback of an internal error "
                             "(by default one line naming it)", "setting"),
    "DUALDL_TRANSLATE_PAUSE": Variable(None, "test seam of translate's crash tests: the name of a point "
                                       "where the run prints it and waits to be killed", "setting"),
    "DUALDL_TRANSLATE_TRACE": Variable(None, "test seam: 1 prints every point translate's staged write "
                                       "reaches", "setting"),
    "DUALDL_PROOF_RECORD": Variable(None, "set by `dualdl convert-project --prove` in the Gluon run it starts: "
                                    "the .npz file that run records every update into", "setting"),
    "DUALDL_PROOF_STEPS": Variable(None, "set by `dualdl convert-project --prove`: how many updates the "
                                   "Gluon run records before it stops (default 4)", "setting"),
    "DUALDL_PROOF_SEED": Variable(None, "set by `dualdl convert-project --prove`: the seed of numpy's and "
                                  "MXNet's generators in the Gluon run", "setting"),
    "DUALDL_PROOF_DTYPE": Variable(None, "set by `dualdl convert-project --prove` to float64 in the Gluon "
                                   "run it starts again where the float32 verdict failed: every "
                                   "parameter cast after MXNet initialises it, every float batch "
                                   "array cast", "setting"),
    "DUALDL_ZOO_OVERRIDE": Variable(None, "a proof at small size: JSON {model name: hyper-parameters, "
                                    "\"BERTClassifier\": {\"dropout\": 0.0}} shrinking a gluonnlp zoo "
                                    "model alike in convert-project's translation, the Gluon run, "
                                    "its data writer and the torch BERTClassifier", "setting"),
    "DUALDL_REQUIRE_GPU": Variable("0", "1 (set by `make gpu-check`): tests marked gpu run even "
                                   "without an NVIDIA driver and fail where they would skip", "setting"),
    # ---- set by `dualdl launch` in every worker --------------------------------------------------
    "DUALDL_LAUNCH_BACKEND": Variable(None, "the backend `dualdl launch` started this process for",
                                      "launcher"),
    "DUALDL_LAUNCHER_PID": Variable(None, "the launcher's pid: a worker exits when it dies",
                                    "launcher"),
    "DUALDL_RANK_FILE": Variable(None, "where an MXNet worker writes the kvstore rank it received",
                                 "launcher"),
    "DUALDL_NNODES": Variable(None, "the number of nodes of the job (informational)", "launcher"),
    "DUALDL_NODE_RANK": Variable(None, "this node's index in the job (informational)", "launcher"),
    # ---- set by torchrun / dualdl launch (torch) and by ps-lite (MXNet) -----------------------------
    "WORLD_SIZE": Variable(None, "the number of processes of a torch job", "launcher"),
    "RANK": Variable(None, "this process's rank in a torch job", "launcher"),
    "LOCAL_RANK": Variable(None, "this process's rank on its node (torch)", "launcher"),
    "LOCAL_WORLD_SIZE": Variable(None, "the number of processes on this node (torch)", "launcher"),
    "MASTER_ADDR": Variable(None, "the host of torch's rendezvous store", "launcher"),
    "MASTER_PORT": Variable(None, "the port of torch's rendezvous store", "launcher"),
    "TORCHELASTIC_USE_AGENT_STORE": Variable(None, "True under torchrun: its agent hosts the store",
                                             "launcher"),
    "DMLC_ROLE": Variable(None, "worker, server or scheduler of an MXNet job (`import mxnet` "
                          "blocks as a ps-lite node when set)", "launcher"),
    "DMLC_PS_ROOT_URI": Variable(None, "the MXNet scheduler's host", "launcher"),
    "DMLC_PS_ROOT_PORT": Variable(None, "the MXNet scheduler's port", "launcher"),
    "DMLC_NUM_SERVER": Variable(None, "the number of MXNet servers", "launcher"),
    "DMLC_NUM_WORKER": Variable(None, "the number of MXNet workers", "launcher"),
    # ---- framework variables dualdl reads or sets ---------------------------------------------------
    "OMP_NUM_THREADS": Variable("1", "OpenMP threads per op; MXNet's multi-context data parallel "
                                "deadlocks on CPU with more than 1 (dualdl checks it)", "framework"),
    "MXNET_CPU_WORKER_NTHREADS": Variable("1", "MXNet engine threads per CPU context (checked with "
                                          "OMP_NUM_THREADS)", "framework"),
    "XDG_CACHE_HOME": Variable(None, "the user's cache folder; DUALDL_CACHE_DIR defaults to its "
                               "dualdl folder (else ~/.cache/dualdl)", "framework"),
    "CUDA_VISIBLE_DEVICES": Variable(None, "the GPUs a process sees; set by dualdl.visible_gpus()",
                                     "framework"),
    "CUBLAS_WORKSPACE_CONFIG": Variable(None, "set to :4096:8 by dualdl.seed(deterministic=True) "
                                        "on torch (cuBLAS determinism)", "framework"),
    "MXNET_ENFORCE_DETERMINISM": Variable(None, "set to 1 by dualdl.seed(deterministic=True) on MXNet",
                                          "framework"),
    "MXNET_CUDNN_AUTOTUNE_DEFAULT": Variable(None, "set to 0 by dualdl.seed(deterministic=True) on "
                                             "MXNet (no cuDNN autotuning)", "framework"),
}


def get(name: str, env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The value of the listed variable ``name`` in ``env`` (default ``os.environ``), else its
    default; ``KeyError`` for a name missing from :data:`VARIABLES` (so the list stays complete)."""
    var = VARIABLES[name]
    value = (os.environ if env is None else env).get(name)
    return var.default if value is None else value


def flag(name: str, env: Optional[Mapping[str, str]] = None) -> bool:
    """Whether the listed variable ``name`` is ``"1"``."""
    return (get(name, env) or "").strip() == "1"


def backend() -> Optional[str]:
    """``DUALDL_BACKEND`` as given (``None`` or empty when unset; dualdl.backend canonicalises it)."""
    return get("DUALDL_BACKEND")


def mx_fused_batchnorm() -> bool:
    """``DUALDL_MX_FUSED_BATCHNORM=1``."""
    return flag("DUALDL_MX_FUSED_BATCHNORM")


def mx_exact_relu() -> bool:
    """``DUALDL_MX_EXACT_RELU=1``."""
    return flag("DUALDL_MX_EXACT_RELU")


def mx_fast() -> bool:
    """``DUALDL_MX_FAST`` is not ``0`` (default: MXNet's CPU speed code in dualdl_mx/fast/ runs)."""
    return (get("DUALDL_MX_FAST") or "").strip() != "0"


def mx_kernels() -> bool:
    """The compiled MXNet kernels may be used: ``DUALDL_MX_FAST`` and ``DUALDL_MX_KERNELS`` are not
    ``0``."""
    return mx_fast() and (get("DUALDL_MX_KERNELS") or "").strip() != "0"


def cache_dir() -> str:
    """``DUALDL_CACHE_DIR``, else ``$XDG_CACHE_HOME/dualdl``, else ``~/.cache/dualdl``."""
    given = get("DUALDL_CACHE_DIR")
    if given:
        return given
    return os.path.join(get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                        "dualdl")


def mx_kvstore(env: Optional[Mapping[str, str]] = None) -> str:
    """``DUALDL_MX_KVSTORE`` (default ``dist_sync``)."""
    return get("DUALDL_MX_KVSTORE", env)


def torch_dist_backend(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """``DUALDL_TORCH_DIST_BACKEND`` (``None``/empty: decided from CUDA availability)."""
    return get("DUALDL_TORCH_DIST_BACKEND", env)


def require_gpu() -> bool:
    """``DUALDL_REQUIRE_GPU=1``."""
    return flag("DUALDL_REQUIRE_GPU")


def dmlc_connect_timeout(env: Optional[Mapping[str, str]] = None) -> float:
    """``DUALDL_DMLC_CONNECT_TIMEOUT`` in seconds (default 60)."""
    return float(get("DUALDL_DMLC_CONNECT_TIMEOUT", env))
