"""Run the ```python blocks of docs/*.md as a reader would: each page's blocks in order, in one
namespace, after a short context that defines what the page assumes the reader has (``Net``,
``X``, a ``loader``...). Used by tests/test_docs_blocks.py, in a subprocess per backend:

    python tests/docs_blocks.py BACKEND OUT.json docs/a.md docs/b.md ...

Convention for a block that cannot run (a multi-host sketch, a shell line): the line right before
its fence is ``<!-- not run: the reason -->``; rendered pages do not show it. A python block that is
output (code that dualdl wrote, shown) says so the same way: ``<!-- output: what wrote it -->``.
Shell and text blocks are checked by tests/test_docs_fences.py.
"""
import contextlib
import io
import json
import os
import re
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->\s*$")
OUTPUT = re.compile(r"<!--\s*output:\s*(.*?)\s*-->\s*$")

# What each page assumes the reader already has. Small shapes: the whole run stays fast.
_NET = '''
import numpy as np
import dualdl as dl
dl.seed(0)
class Net(dl.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = dl.nn.Linear(8, 16), dl.nn.Linear(16, 3)
    def forward(self, x):
        return self.fc2(dl.ops.relu(self.fc1(x)))
_rng = np.random.default_rng(0)
X = _rng.standard_normal((40, 8)).astype("float32")
y = _rng.integers(0, 3, 40).astype("int64")
'''
# keys: a page (before its first block) or (page, i) (before its block i, from 0)
CONTEXT = {
    "docs/data.md": '''
import numpy as np
_rng = np.random.default_rng(0)
x_train = _rng.standard_normal((64, 5)).astype("float32")
y_train = _rng.integers(0, 3, 64).astype("int64")
from dualdl.data import ArrayDataset, pad_collate
dataset = ArrayDataset(x_train, y_train)
''',
    "docs/distributed.md": _NET + "LR, GLOBAL_BATCH, EPOCHS = 0.1, 8, 2\n",
    "docs/losses.md": '''
import numpy as np
import dualdl as dl
_rng = np.random.default_rng(0)
w = dl.from_numpy(np.array([1.0, 2.0, 0.5], "float32"))
logits = dl.from_numpy(_rng.standard_normal((4, 3)).astype("float32"))
logits.requires_grad_() if dl.backend() == "torch" else logits.attach_grad()
target = dl.from_numpy(np.array([0, 2, 1, 2], "int64"))
log_probs_TNC = dl.from_numpy(np.log(np.full((6, 2, 4), 0.25, "float32")))
targets = dl.from_numpy(np.array([[1, 2], [3, 3]], "int64"))
input_lengths = dl.from_numpy(np.array([6, 5], "int64"))
target_lengths = dl.from_numpy(np.array([2, 1], "int64"))
pred = dl.from_numpy(_rng.standard_normal((4, 3)).astype("float32"))
label = dl.from_numpy(_rng.standard_normal((4, 3)).astype("float32"))
''',
    "docs/parity.md": '''
import numpy as np
import dualdl as dl
class MyNet(dl.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = dl.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = dl.nn.Linear(4, 10)
    def forward(self, x):
        return self.fc(dl.ops.mean(dl.ops.relu(self.conv(x)), (2, 3)))
SmallCNN = MyNet
''',
    "docs/porting.md": '''
import numpy as np
import mxnet as mx
from test_port_vision import ResNet18V1 as MyTorchResNet18
from test_port_nlp import TorchAWD, _tokens
import gluonnlp as nlp
from mxnet.gluon.model_zoo import vision as _vision
mx.random.seed(0)
_g = _vision.resnet18_v1(classes=10)
_g.initialize(mx.init.Xavier())
_g(mx.nd.zeros((1, 3, 32, 32)))
_g.save_parameters("resnet18_v1.params")
_g.save_parameters("gluon_checkpoint.params")
awd = nlp.model.train.AWDRNN("lstm", 50, embed_size=16, hidden_size=24, num_layers=3, tie_weights=True,
                             dropout=0.4, weight_drop=0.5, drop_h=0.2, drop_i=0.65, drop_e=0.1)
awd.initialize(mx.init.Xavier())
torch_awd = TorchAWD(50, 16, 24, 3)
tokens = _tokens()
fresh_torch_net = MyTorchResNet18(classes=10)
''',
    # before the rules block: a Gluon Dense + scale and a torch pair storing (in, out) and log(gamma)
    ("docs/porting.md", 1): '''
import torch
from mxnet.gluon import nn as _gnn
from test_port_rules import GluonScale, KernelLinear, TorchLogScale
g = _gnn.HybridSequential()
g.add(_gnn.Dense(7, in_units=5), GluonScale(7))
g.initialize(mx.init.Xavier())
t = torch.nn.Sequential(KernelLinear(5, 7), TorchLogScale(7))
_x_resnet, x = x, np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
_report_resnet = report
''',
    # before the keyword-inputs block: a small gluonnlp BERT and its transformers twin
    ("docs/porting.md", 2): '''
from _port_pairs import _bert_inputs, _gluon_bert, _hf_bert
gluon_bert, hf_bert = _gluon_bert(), _hf_bert()
(ids, token_types, _), _ = _bert_inputs()
''',
    ("docs/porting.md", 3): "x = _x_resnet\n",
    ("docs/porting.md", 4): "report = _report_resnet   # the ResNet-18 port of the first block\n",
    # before the extension-point block: the user's Gluon layer it registers
    ("docs/translate.md", 2): '''
from mxnet import gluon as _gluon
class MyScale(_gluon.HybridBlock):
    def __init__(self, n, **kwargs):
        super().__init__(**kwargs)
        self.alpha = self.params.get("alpha", shape=(n,), init="ones")
    def hybrid_forward(self, F, x, alpha):
        return F.broadcast_mul(x, alpha)
''',
    # before the native-training block: model-zoo resnet18_v1 and transformers' ResNet-18
    ("docs/parity.md", 2): '''
from _port_pairs import _gluon_resnet, _hf_resnet
x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
gluon_net, torch_net = _gluon_resnet("resnet18_v1"), _hf_resnet(deep=False, stride_on_1x1=False)
labels = np.array([3, 7])
''',
    "docs/porting-trainer.md": '''
import numpy as np
import mxnet as mx
import torch
from mxnet.gluon import nn as _gnn
net = _gnn.HybridSequential()
net.add(_gnn.Dense(16, in_units=8, activation="relu"), _gnn.Dense(3, in_units=16))
net.initialize(mx.init.Xavier())
torch_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
_rng = np.random.default_rng(0)
sample_input = _rng.standard_normal((4, 8)).astype("float32")
loader = [(torch.from_numpy(_rng.standard_normal((4, 8)).astype("float32")),
           torch.from_numpy(_rng.integers(0, 3, 4))) for _ in range(3)]
loss_fn = torch.nn.CrossEntropyLoss(reduction="none")
''',
    ("docs/porting-trainer.md", 1): '''
from mxnet.gluon.data.vision import transforms as _T
x = sample_input
transform_train = _T.Compose([_T.RandomFlipLeftRight(), _T.ToTensor(), _T.Normalize(0.5, 0.25)])
transform_test = _T.Compose([_T.ToTensor(), _T.Normalize(0.5, 0.25)])
train_data = mx.gluon.data.DataLoader(mx.gluon.data.ArrayDataset(np.zeros((12, 8), "float32"), np.zeros(12)),
                                      batch_size=4, shuffle=True)
''',
    "docs/training.md": _NET + '''
loader = [(dl.from_numpy(X[i:i + 10]), dl.from_numpy(y[i:i + 10])) for i in range(0, 40, 10)]
x_val, y_val = X[:10], y[:10]
loss_fn = dl.losses.CrossEntropyLoss()
per_sample_loss = dl.losses.CrossEntropyLoss(reduction="none")
''',
    ("docs/training.md", 1): "_step_loss = loss   # what trainer.train_step returned\n",
    # the two files HybridBlock.export writes, for the model zoo ResNet-18
    "docs/translate-exported.md": '''
import mxnet as mx
from mxnet.gluon.model_zoo import vision as _vision
mx.random.seed(0)
_net = _vision.resnet18_v1()
_net.initialize()
_net.hybridize()
_net(mx.nd.zeros((1, 3, 32, 32)))
_net.export("resnet18_v1")
''',
    "docs/transformer.md": '''
import numpy as np
import dualdl as dl
x = dl.from_numpy(np.random.default_rng(0).standard_normal((2, 5, 256)).astype("float32"))
pad = dl.from_numpy(np.array([[False] * 5, [False] * 3 + [True] * 2]))
lengths = dl.from_numpy(np.array([5, 3], "int64"))
''',
}
# Checks, after a page's blocks, of what its comments claim.
_NATIVE = "type(x).__module__.split('.')[0] == {'torch': 'torch', 'mxnet': 'mxnet'}[dl.backend()]"
CHECKS = {
    "docs/data.md": f"assert {_NATIVE}\nassert set(state) == {{'epoch', 'batches', 'seed', 'sampler_seed'}}\n",
    "docs/models.md": "import torch, mxnet\nassert isinstance(net_mx, mxnet.gluon.HybridBlock)\n"
                      "assert isinstance(net, torch.nn.Module if dl.backend() == 'torch' else mxnet.gluon.HybridBlock)\n",
    "docs/parity.md": "assert r.passed, r\n",
    "docs/translate.md": "assert report.ok, report.summary()\n"
                         "_g = _gluon.nn.HybridSequential()\n"
                         "_g.add(_gluon.nn.Dense(4, in_units=3), MyScale(4))\n"
                         "_g.initialize()\n"
                         "_r = dl.port.translate(_g, np.random.randn(2, 3).astype('float32'), 'scaled')\n"
                         "assert _r.ok, _r.summary()\n"
                         "assert 'class Scale(nn.Module)' in open('scaled/' + _r.name + '.py').read()\n",
    "docs/porting-trainer.md": "assert report.ok and scheduler is not None and optimizer.state\n",
    "docs/training.md": "assert isinstance(_step_loss, float) and np.isfinite(_step_loss + val_loss)\n",
    "docs/transformer.md": "assert tuple(y.shape) == (2, 5, 256)\n",
    "docs/translate-exported.md": "assert report.ok, report.summary()\n",
}

# pages that run on one backend only (they use both themselves, or port Gluon -> torch)
ONE_BACKEND = {"docs/differences.md": "torch", "docs/index.md": "torch", "docs/parity.md": "torch",
               "docs/porting.md": "torch", "docs/porting-trainer.md": "torch",
               "docs/translate.md": "torch", "docs/translate-code.md": "torch",
               "docs/translate-exported.md": "torch"}


def blocks(path):
    """``[(line, code, reason_not_run_or_None)]`` for every ```python block of ``path`` that is not
    marked as output."""
    text = open(os.path.join(ROOT, path)).read()
    out = []
    for m in re.finditer(r"^```python[^\n]*\n(.*?)^```", text, re.S | re.M):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if OUTPUT.search(before):
            continue
        skip = NOT_RUN.search(before)
        out.append((text[:m.start()].count("\n") + 2, m.group(1), skip.group(1) if skip else None))
    return out


def script(path, indices):
    """One script: the page's context and its blocks number ``indices`` (to run as a file)."""
    parts = [CONTEXT.get(path, "")]
    for i, (_, code, _) in enumerate(blocks(path)):
        if i in indices:
            parts += [CONTEXT.get((path, i), ""), code]
    return "\n".join(parts)


def run_page(path, backend):
    """Run one page; ``None`` if every runnable block ran, else the traceback."""
    import dualdl as dl
    ns = {"__name__": "__main__"}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp, dl.use(backend), contextlib.redirect_stdout(io.StringIO()):
        os.chdir(tmp)
        try:
            exec(compile(CONTEXT.get(path, ""), f"<context of {path}>", "exec"), ns)
            for i, (line, code, skip) in enumerate(blocks(path)):
                exec(compile(CONTEXT.get((path, i), ""), f"<context of {path} block {i}>", "exec"), ns)
                if skip is None:
                    # pad with newlines so that tracebacks give the line number in the .md file
                    exec(compile("\n" * (line - 1) + code, path, "exec"), ns)
            exec(compile(CHECKS.get(path, ""), f"<checks of {path}>", "exec"), ns)
            return None
        except BaseException:
            return traceback.format_exc()
        finally:
            os.chdir(cwd)


def main(argv):
    backend, out, pages = argv[0], argv[1], argv[2:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    results = {}
    for p in pages:
        t0 = time.time()
        results[p] = {"error": run_page(p, backend), "seconds": round(time.time() - t0, 2)}
    with open(out, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1:])
