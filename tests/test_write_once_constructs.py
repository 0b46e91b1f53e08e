"""The module-level constructs real torch model files use, on torch, MXNet eager and MXNet
hybridized (issue 43): subclassed containers and composite layers, in-place ``+=`` on activations,
weight tying, ModuleDict attributes, tensors made in forward, and the one-line error a torch tensor
method gives on an MXNet tensor. Each compares MXNet with torch from the same weights."""
import numpy as np
import pytest

import dualdl as dl
from dualdl import nn, ops

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")


class ConvBN(nn.Sequential):            # torchvision's Conv2dNormActivation pattern
    def __init__(self, cin, cout):
        layers = [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)]
        super().__init__(*layers)
        self.out_channels = cout


class Residual(nn.Module):              # torchvision's BasicBlock: out += identity
    def __init__(self):
        super().__init__()
        self.a = ConvBN(3, 3)
        self.b = nn.Conv2d(3, 3, 1)

    def forward(self, x):
        out = self.a(x)
        out += x
        out -= 0.25
        out = self.b(ops.relu(out))
        out *= 2.0
        out /= 3.0
        return out


class Tied(nn.Module):                  # word_language_model's tie_weights, nanoGPT's ModuleDict
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(7, 4), h=nn.Linear(4, 4)))
        self.lm_head = nn.Linear(4, 7, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx):
        pos = dl.arange(0, 2, dtype="int64", device=dl.device_of(idx))
        x = self.transformer.wte(idx) + dl.ones((2, 4), "float64", device=dl.device_of(idx)) * ops.unsqueeze(
            ops.sum(self.transformer.wte(pos), 1), 1)
        return self.lm_head(self.transformer.h(x))


class Twice(nn.Sequential):             # a container subclass with its own forward calling the container's
    def __init__(self):
        super().__init__(nn.Linear(4, 3), nn.Tanh())

    def forward(self, x):
        return super().forward(x) * 2.0 + self[0](x)


class Encoder(nn.TransformerEncoderLayer):   # a composite layer subclassed, its forward kept
    def __init__(self):
        super().__init__(d_model=4, nhead=2, dim_feedforward=8, dropout=0.0)


class LM(nn.Transformer):               # word_language_model's TransformerModel pattern
    def __init__(self, ntoken, ninp):
        super().__init__(d_model=ninp, nhead=2, dim_feedforward=8, num_encoder_layers=1, dropout=0.0)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.decoder = nn.Linear(ninp, ntoken)          # replaces the Transformer's decoder (torch allows it)

    def forward(self, src):
        return self.decoder(self.encoder(self.input_emb(src)))


def _run(net, x, backend):
    """Output and every parameter's gradient of ``sum(out * w)`` (a fixed random weighting)."""
    w = np.random.RandomState(1).rand(*dl.to_numpy(net(dl.from_numpy(x, backend=backend))).shape)
    net.zero_grad()
    xt = dl.from_numpy(x, backend=backend)
    with dl.record(backend=backend):
        out = net(xt)
        loss = ops.sum(out * dl.from_numpy(w.astype(dl.to_numpy(out).dtype), backend=backend))
    dl.backward(loss)
    grads = {k: dl.to_numpy(p.grad if backend == "torch" else p.grad()) for k, p in net.named_parameters()}
    return dl.to_numpy(out), grads


CASES = [(Residual, lambda: np.random.RandomState(0).rand(2, 3, 4, 4)),
         (Tied, lambda: np.array([[1, 2], [3, 6]])),
         (Encoder, lambda: np.random.RandomState(0).rand(3, 2, 4)),
         (Twice, lambda: np.random.RandomState(0).rand(2, 4)),
         (LM, lambda: np.array([[1, 2], [3, 4], [5, 6]]))]


@pytest.mark.parametrize("hybridize", [False, True], ids=["eager", "hybridized"])
@pytest.mark.parametrize("cls,make_x", CASES, ids=[c.__name__ for c, _ in CASES])
def test_construct_matches_torch(cls, make_x, hybridize):
    args = (9, 4) if cls is LM else ()
    x = make_x()
    if x.dtype.kind == "f":
        x = x.astype("float64")
    pt = cls(*args, backend="torch").double()
    m = cls(*args, backend="mxnet")
    m.cast("float64")
    assert list(dl.state_dict(m)) == list(dl.state_dict(pt))
    dl.load_state_dict(m, dl.state_dict(pt))
    if hybridize:
        m.hybridize()
    out_pt, g_pt = _run(pt, x, "torch")
    out_mx, g_mx = _run(m, x, "mxnet")
    assert sorted(g_mx) == sorted(g_pt)
    err = max([float(abs(out_pt - out_mx).max())] + [float(abs(g_pt[k] - g_mx[k]).max()) for k in g_pt])
    assert err < 1e-10, err          # float64: same computation, rounding only


def test_tied_checkpoint_round_trips_across_backends(tmp_path):
    pt, m, back = Tied(backend="torch"), Tied(backend="mxnet"), Tied(backend="torch")
    dl.save(pt, str(tmp_path / "pt.ckpt"))
    dl.load(m, str(tmp_path / "pt.ckpt"))
    dl.save(m, str(tmp_path / "mx.ckpt"))
    dl.load(back, str(tmp_path / "mx.ckpt"))
    assert m.lm_head.weight is m.transformer.wte.weight and back.lm_head.weight is back.transformer.wte.weight
    np.testing.assert_array_equal(dl.to_numpy(back.lm_head.weight), dl.to_numpy(pt.lm_head.weight))
    np.testing.assert_array_equal(dl.to_numpy(m.lm_head.weight.data()), dl.to_numpy(pt.lm_head.weight))


def test_tied_weight_is_one_parameter_with_both_names():
    for backend in ("torch", "mxnet"):
        net = Tied(backend=backend)
        names = [k for k, _ in net.named_parameters()]
        assert "lm_head.weight" not in names or "transformer.wte.weight" not in names   # listed once
        sd = dl.state_dict(net)
        assert "transformer.wte.weight" in sd and "lm_head.weight" in sd             # torch lists both
        np.testing.assert_array_equal(dl.to_numpy(sd["transformer.wte.weight"]), dl.to_numpy(sd["lm_head.weight"]))
    pt, m = Tied(backend="torch"), Tied(backend="mxnet")
    dl.load_state_dict(m, dl.state_dict(pt))
    m2 = Tied(backend="mxnet")
    dl.load_state_dict(m2, dl.state_dict(m))                    # round-trip keeps one shared array
    w = dl.to_numpy(m2.lm_head.weight.data())
    np.testing.assert_array_equal(w, dl.to_numpy(pt.lm_head.weight))
    assert m2.lm_head.weight is m2.transformer.wte.weight


def test_inplace_outside_a_dualdl_forward_is_mxnets_own():
    a = mx.nd.ones((2,))
    b = a
    a += 1                                  # eager, not recording: MXNet's in-place, shared
    assert b.asnumpy().tolist() == [2.0, 2.0]
    x = mx.nd.ones((2,))
    x.attach_grad()
    with mx.autograd.record():
        y = x * 2
        with pytest.raises(mx.base.MXNetError):
            y += 1                          # Gluon code outside dualdl keeps MXNet's refusal
    with pytest.raises(mx.base.NotImplementedForSymbol):
        s = mx.sym.var("s")
        s += 1


class _Torchy(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.body = body

    def forward(self, x):
        return self.body(self.lin(x))


@pytest.mark.parametrize("hybridize", [False, True], ids=["eager", "hybridized"])
@pytest.mark.parametrize("body,expected", [
    (lambda y: y.size(), "x.shape"), (lambda y: y.argmax(dim=1), "ops.argmax"),
    (lambda y: y.split(2, dim=1), "ops.split"), (lambda y: y.sum(dim=1), "ops.sum"),
], ids=["size", "argmax_dim", "split_dim", "sum_dim"])
def test_torch_method_on_mxnet_says_what_to_write(body, expected, hybridize):
    net = _Torchy(body, backend="mxnet")
    if hybridize:
        net.hybridize()
    with pytest.raises((AttributeError, TypeError)) as info:
        net(mx.nd.ones((2, 4)))
    msg = str(info.value)
    assert expected in msg and "\n" not in msg, msg
    tnet = _Torchy(body, backend="torch")           # the same forward is torch's own on torch
    tnet(torch.ones(2, 4))


class _Methods(nn.Module):
    """torch tensor methods MXNet lacks (dualdl_mx/torch_methods.py) and transpose(dim0, dim1)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 6)

    def forward(self, x):
        y = self.lin(x)                                                  # (2, 6)
        a = y.view(2, 2, 3).transpose(1, 2).contiguous().view(2, 6)
        b = y.transpose(0, 1) @ y                                        # (6, 6): transpose(0, 1) swaps
        c = y.masked_fill(y > 0, 0.5).pow(2).unsqueeze(0).permute(1, 0, 2).view(-1, 6)
        d, e = y.chunk(2, 1)
        return ops.cat([ops.flatten(t, 0) for t in (a, b, c, d * e.clamp(min=0.0), y.tril(), y.triu(1))])


@pytest.mark.parametrize("hybridize", [False, True], ids=["eager", "hybridized"])
def test_torch_methods_added_to_mxnet_tensors_give_torchs_numbers(hybridize):
    pt = _Methods(backend="torch").double()
    m = _Methods(backend="mxnet").double()
    dl.load_state_dict(m, dl.state_dict(pt))
    if hybridize:
        m.hybridize()
    x = np.random.RandomState(0).rand(2, 4)                          # float64: rounding only
    out_pt = dl.to_numpy(pt(dl.from_numpy(x, backend="torch")))
    out_mx = dl.to_numpy(m(dl.from_numpy(x, backend="mxnet")))
    np.testing.assert_allclose(out_mx, out_pt, rtol=1e-13, atol=1e-14)


def test_added_methods_leave_mxnets_own_alone():
    a = mx.nd.arange(6).reshape((2, 3))
    assert a.size == 6 and a.transpose((1, 0)).shape == (3, 2) and len(a.split(3, axis=1)) == 3
    assert a.view(3, 2).shape == (3, 2) and a.numel() == 6 and a.dim() == 2 and a.new_zeros(2, 2).shape == (2, 2)


class _Plain(nn.Module):
    def __init__(self):
        super().__init__(3)

    def forward(self, x):
        return x


class _HalfLinear(nn.Linear):
    def __init__(self):
        super().__init__(4)


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
def test_init_arguments_refused_as_torch_does(backend):
    with pytest.raises(TypeError, match=r"Module.__init__\(\) takes 1 positional argument but 2 were given"):
        _Plain(backend=backend)
    with pytest.raises(TypeError, match="Linear.__init__\\(\\) missing 1 required positional argument: 'out_features'"):
        _HalfLinear(backend=backend)


@pytest.mark.parametrize("spelling", ["double", "to-torch-dtype"])
def test_model_dtype_cast_spelled_as_torch(spelling):
    """torch's model.double() / model.to(torch.float64) cast an MXNet model too (buffers included)."""
    cast = {"double": lambda m: m.double(), "to-torch-dtype": lambda m: m.to(torch.float64)}[spelling]
    for backend in ("torch", "mxnet"):
        with dl.use(backend):
            net = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
        assert cast(net) is net
        assert {str(np.dtype(dl.to_numpy(v).dtype)) for v in dl.state_dict(net).values()} == {"float64"}
        net.float()
        assert {str(np.dtype(dl.to_numpy(v).dtype)) for v in dl.state_dict(net).values()} == {"float32"}


class _Blocks(nn.ModuleList):
    def __init__(self, n):
        super().__init__([nn.Linear(3, 3) for _ in range(n)])


class _Heads(nn.ModuleDict):
    def __init__(self):
        super().__init__({"a": nn.Linear(3, 2), "b": nn.Linear(3, 1)})


class _ListDictNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = _Blocks(2)
        self.heads = _Heads()

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.heads.a(x), self.heads["b"](x)


@pytest.mark.parametrize("hybridize", [False, True], ids=["eager", "hybridized"])
def test_modulelist_and_moduledict_subclasses(hybridize):
    pt = _ListDictNet(backend="torch").double()
    m = _ListDictNet(backend="mxnet").double()
    assert list(dl.state_dict(m)) == list(dl.state_dict(pt)) and len(m.blocks) == 2
    dl.load_state_dict(m, dl.state_dict(pt))
    if hybridize:
        m.hybridize()
    x = np.random.RandomState(0).rand(2, 3)           # float64: the same computation, rounding only
    for a, b in zip(pt(dl.from_numpy(x, backend="torch")), m(dl.from_numpy(x, backend="mxnet"))):
        np.testing.assert_allclose(dl.to_numpy(b), dl.to_numpy(a), rtol=0, atol=1e-12)


def test_hybridized_inputs_keep_their_arrays_dtypes():
    """A traced Symbol has no dtype: dualdl_mx.torch_style.symbol_dtype gives the graph's inputs
    their arrays' (a bool attention mask is told from an additive float one by it)."""
    from dualdl_mx import torch_style
    seen = []

    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, q, mask):
            seen.append((torch_style.symbol_dtype(q), torch_style.symbol_dtype(mask)))
            return self.lin(q)

    net = Probe(backend="mxnet")
    net.hybridize()
    net(mx.nd.ones((2, 4), dtype="float64").astype("float32"), dl.from_numpy(np.ones((3, 3), bool), backend="mxnet"))
    assert seen == [(np.dtype("float32"), np.dtype("bool"))]
    assert torch_style.symbol_dtype(mx.sym.var("x")) is None and not torch_style._SYMBOL_DTYPES


def test_hybridized_bool_attention_mask_is_masked_as_eager():
    """sdpa reads a hybridized input mask's dtype through symbol_dtype: a bool mask masks (as torch),
    hybridized as eager (it was added as a float mask, a dtype clash in MXNet's graph)."""
    from dualdl.nn import functional as F

    class Attend(nn.Module):
        def forward(self, q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    rs = np.random.RandomState(0)
    q, k, v = (dl.from_numpy(rs.rand(2, 3, 4), backend="mxnet") for _ in range(3))
    mask = dl.from_numpy(np.tril(np.ones((3, 3), bool)), backend="mxnet")
    net = Attend(backend="mxnet")
    eager = dl.to_numpy(net(q, k, v, mask))
    net.hybridize()
    np.testing.assert_array_equal(dl.to_numpy(net(q, k, v, mask)), eager)
