"""dualdl.port.gluoncv_compat.import_gluoncv: gluoncv's model zoo, LR schedulers and transforms
in a process that also runs torch >= 2 (plain `import gluoncv` refuses torch>=2). Each test runs
in a fresh interpreter, since importing gluoncv is process-wide."""
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mxnet")
pytest.importorskip("torch")
pytest.importorskip("portalocker")
if __import__("importlib").util.find_spec("gluoncv") is None:
    pytest.skip("gluoncv not installed", allow_module_level=True)


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_plain_import_refuses_torch2_and_import_gluoncv_works_beside_torch():
    out = _run("""
        import torch, numpy as np, mxnet as mx
        assert int(torch.__version__.split(".")[0]) >= 2
        try:
            import gluoncv
        except RuntimeError as e:                     # gluoncv's own check: torch>=1.4,<2
            print("plain:", "torch>=1.4.0,<2.0.0" in str(e))
        import sys
        for k in [k for k in sys.modules if k == "gluoncv" or k.startswith("gluoncv.")]:
            del sys.modules[k]
        from dualdl.port.gluoncv_compat import import_gluoncv
        gluoncv = import_gluoncv()
        assert import_gluoncv() is gluoncv                      # idempotent
        # the version check is put back: gluoncv's own function, not dualdl's
        assert gluoncv.check._require_pytorch_version.__module__ == "gluoncv.check"
        assert gluoncv._require_pytorch_version is gluoncv.check._require_pytorch_version
        assert not any(k.startswith("gluoncv.torch") for k in sys.modules)
        # model zoo: a real model builds and runs
        net = gluoncv.model_zoo.get_model("cifar_resnet20_v1", classes=10, pretrained=False)
        net.initialize(mx.init.Xavier())
        y = net(mx.nd.ones((2, 3, 32, 32)))
        print("zoo:", type(net).__name__, y.shape)
        # gluon-cv's schedulers: warmup then cosine, the values its training scripts use
        from gluoncv.utils import LRScheduler, LRSequential
        sched = LRSequential([LRScheduler("linear", base_lr=0.0, target_lr=0.1, nepochs=1, iters_per_epoch=10),
                              LRScheduler("cosine", base_lr=0.1, target_lr=0.0, nepochs=2, iters_per_epoch=10)])
        lrs = [sched(i) for i in range(30)]
        print("lr:", round(lrs[5], 6), round(lrs[10], 6), round(lrs[20], 6))
        # transforms
        from gluoncv.data import transforms
        from gluoncv.data.transforms import presets
        img = mx.nd.array(np.random.default_rng(0).integers(0, 255, (40, 50, 3)), dtype="uint8")
        print("transforms:", transforms.image.imresize(img, 20, 10).shape, hasattr(presets, "ssd"))
        # torch still works in the same process, untouched
        t = torch.nn.Linear(3, 2)
        print("torch:", t(torch.ones(1, 3)).shape, torch.__version__ == __import__("torch").__version__)
    """)
    assert "plain: True" in out
    assert "zoo: CIFARResNetV1 (2, 10)" in out
    assert "lr: 0.055556 0.1 0.045871" in out     # gluoncv's own warmup + cosine values
    assert "transforms: (10, 20, 3) True" in out
    assert "torch: torch.Size([1, 2]) True" in out


def test_missing_portalocker_is_named():
    out = _run("""
        import sys
        sys.modules["portalocker"] = None          # as if not installed
        import importlib.util
        real = importlib.util.find_spec
        importlib.util.find_spec = lambda n, *a: None if n == "portalocker" else real(n, *a)
        from dualdl.port.gluoncv_compat import import_gluoncv
        try:
            import_gluoncv()
        except ImportError as e:
            print("error:", e)
        print("left:", [k for k in sys.modules if k.startswith("gluoncv")])
    """)
    assert "error: gluoncv's model zoo imports portalocker, which is not installed: pip install" in out
    assert "left: []" in out
