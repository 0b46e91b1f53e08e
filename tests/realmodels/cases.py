"""The real-model cases: which class of which file, built how small, fed what, trained with the
original script's loss and optimizer (tests/test_write_once_realmodels.py runs them)."""
from __future__ import annotations

from typing import Dict

import numpy as np

from .harness import Case


def _nll(F, out, xs):
    return F.nll_loss(out, xs[1])


def _ce(F, out, xs):
    return F.cross_entropy(out, xs[1])


def _labels(n, classes):
    return lambda rng: (rng.randint(0, classes, size=n).astype("int64"),)


def _image(shape, classes):
    return lambda rng: (rng.rand(*shape), rng.randint(0, classes, size=shape[0]).astype("int64"))


def _lm_inputs(ntoken, seq, batch, hidden=None):
    def make(rng):
        data = rng.randint(0, ntoken, size=(seq, batch)).astype("int64")
        target = rng.randint(0, ntoken, size=(seq * batch,)).astype("int64")
        if hidden is None:
            return data, target
        h = tuple(np.zeros(hidden) for _ in range(2))
        return data, target, h
    return make


def _rnn_call(net, xs):
    return net(xs[0], xs[2])


def _rnn_loss(F, out, xs):
    return F.nll_loss(out[0], xs[1])


def _gpt_call(net, xs):
    return net(xs[0], xs[1])


def _gpt_loss(F, out, xs):
    return out[1]


def _vae_loss(F, out, xs):
    """The script's own loss_function (BCE + KL), of the file whose F this is."""
    import sys
    kind = "originals" if F.__name__.startswith("torch") else "twins"
    return sys.modules[f"realmodels_{kind}_vae"].loss_function(out[0], xs[0], out[1], out[2])


def _gpt(mod):
    cfg = mod.GPTConfig(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=8, dropout=0.0, bias=True)
    return mod.GPT(cfg)


CASES: Dict[str, Case] = {
    "mnist_net": Case("mnist_net", lambda m: m.Net(), _image((2, 1, 28, 28), 10), _nll, ("Adadelta", {"lr": 1.0})),
    "vae": Case("vae", lambda m: m.VAE(), lambda rng: (rng.rand(2, 1, 28, 28),), _vae_loss,
                ("Adam", {"lr": 1e-3}), noise=True),
    "dcgan_discriminator": Case(
        "dcgan", lambda m: m.Discriminator(1), lambda rng: (rng.rand(2, 3, 64, 64) * 2 - 1, rng.rand(2)),
        lambda F, out, xs: F.binary_cross_entropy(out, xs[1]), ("Adam", {"lr": 2e-4, "betas": (0.5, 0.999)})),
    "dcgan_generator": Case(
        "dcgan", lambda m: m.Generator(1), lambda rng: (rng.randn(2, 8, 1, 1), rng.rand(2, 3, 64, 64)),
        lambda F, out, xs: F.mse_loss(out, xs[1]), ("Adam", {"lr": 2e-4, "betas": (0.5, 0.999)})),
    "resnet_basic": Case(
        "resnet", lambda m: m.ResNet(m.BasicBlock, [1, 1, 1, 1], num_classes=10), _image((2, 3, 48, 48), 10), _ce,
        ("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4}), steps=1),
    "resnet_bottleneck": Case(
        "resnet", lambda m: m.ResNet(m.Bottleneck, [1, 1, 1, 1], num_classes=10), _image((2, 3, 48, 48), 10), _ce,
        ("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4}), steps=1),
    "mobilenet_v2": Case(
        "mobilenet", lambda m: m.mobilenet_v2(num_classes=10, width_mult=0.25), _image((2, 3, 64, 64), 10), _ce,
        ("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 4e-5}), steps=1),
    "rnn_lstm_tied": Case(
        "word_language_model", lambda m: m.RNNModel("LSTM", 13, 8, 8, 2, dropout=0.0, tie_weights=True),
        _lm_inputs(13, 5, 2, hidden=(2, 2, 8)), _rnn_loss, ("SGD", {"lr": 1.0}), call=_rnn_call, clip=0.25),
    "rnn_gru": Case(
        "word_language_model", lambda m: m.RNNModel("GRU", 13, 8, 6, 1, dropout=0.0),
        lambda rng: (rng.randint(0, 13, size=(5, 2)).astype("int64"), rng.randint(0, 13, size=(10,)).astype("int64"),
                     np.zeros((1, 2, 6))),
        _rnn_loss, ("SGD", {"lr": 1.0}), call=_rnn_call, clip=0.25),
    "transformer_lm": Case(
        "word_language_model", lambda m: m.TransformerModel(13, 8, 2, 16, 2, dropout=0.0),
        _lm_inputs(13, 5, 2), _nll, ("SGD", {"lr": 1.0}), hybridizable=False, clip=0.25,
        call=lambda net, xs: _flat_lm(net(xs[0]))),
    "nanogpt": Case(
        "nanogpt", _gpt, lambda rng: (rng.randint(0, 11, size=(2, 8)).astype("int64"),
                                      rng.randint(0, 11, size=(2, 8)).astype("int64")),
        _gpt_loss, ("AdamW", {"lr": 6e-4, "betas": (0.9, 0.95), "weight_decay": 0.1}), hybridizable=False,
        call=_gpt_call),
}


def _flat_lm(out):
    """TransformerModel's (T, N, ntoken) log-probabilities as the (T*N, ntoken) rows of its targets."""
    import dualdl.ops as ops
    return ops.reshape(out, (-1, out.shape[-1]))
