"""The translate corpus of issue 32: real Gluon models of every family a user brings, built from
the installed model zoo, gluoncv (through ``dualdl.port.gluoncv_compat.import_gluoncv``),
gluonnlp, d2l's numpy-interface code (tests/_translate_d2l.py) and public Gluon projects (DCGAN
of apache/mxnet's example/gluon/dc_gan, a MobileFaceNet, the fast style-transfer network of
apache/mxnet's example/gluon/style_transfer), at small inputs with random init
(``pretrained=False``, ``pretrained_base=False``: nothing is downloaded).

``python tests/_translate_corpus.py [--only NAME ...] [--fast] [--status FILE]`` translates each
model with the proof and prints one line per model: ``ok``, ``FAILED CHECK`` (which check, its
relative difference), ``REFUSED`` (the TranslationError), ``RAW`` (any other exception: a bug),
``BUILD`` (the model itself could not be built here) and the seconds.

The code of the vendored models below is adapted from apache/mxnet (Apache License 2.0,
https://github.com/apache/mxnet): ``dcgan_netG``/``dcgan_netD`` from example/gluon/dc_gan/dcgan.py
(widths as arguments), ``StyleTransferNet`` from example/gluon/style_transfer/net.py (its Blocks
written as HybridBlocks; the Inspiration layer is left out); ``MobileFaceNet`` follows the
architecture of Chen et al. 2018 as insightface's fmobilefacenet.py writes it (Apache 2.0/MIT).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

Built = Tuple[Any, List[np.ndarray]]


@dataclass(frozen=True)
class Case:
    """One corpus model. ``expect``: "ok" (translates with the proof), "refused" (a
    TranslationError whose message contains every word of ``names``), "rejected" (translate's own
    ValueError about the sample inputs), "not-ok" (the report says a check failed: a known
    difference the proof catches) or "bug" (a known raw error, xfail in the tests). See ``KNOWN``."""
    name: str
    family: str
    build: Callable[[], Built]
    expect: str = "ok"
    names: Tuple[str, ...] = ()
    slow: bool = False
    note: str = ""
    np_mode: bool = False      # MXNet's numpy interface (npx.set_np()) while building and translating
    inference: bool = False    # translate(train=False): a detector whose training forward needs targets


def _rng(seed: int = 0):
    return np.random.default_rng(seed)


def _image(*shape: int) -> np.ndarray:
    return _rng().standard_normal(shape).astype(np.float32)


def _ids(vocab: int, *shape: int, dtype=np.float32) -> np.ndarray:
    """Token ids as Gluon users feed them: float32 by default (``nd.array(ids)``)."""
    return _rng(1).integers(0, vocab, shape).astype(dtype)


def _nd(x):
    import mxnet as mx
    return type(x)(_nd(v) for v in x) if isinstance(x, (list, tuple)) else mx.nd.array(x, dtype=x.dtype)


def _finish(net, inputs: List[Any], init=None) -> Built:
    import mxnet as mx
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # "already initialized" for parts built initialised
        net.initialize(init or mx.init.Xavier())
    net(*[_nd(x) for x in inputs])                 # deferred shapes known
    mx.nd.waitall()
    return net, inputs


def _seeded(fn: Callable[[], Built]) -> Callable[[], Built]:
    def build() -> Built:
        import mxnet as mx
        mx.random.seed(0)
        np.random.seed(0)
        return fn()
    build.__name__ = getattr(fn, "__name__", "build")
    return build


# ------------------------------------------------------------------------------ builders
def zoo(name: str, shape: Sequence[int]) -> Callable[[], Built]:
    def build() -> Built:
        from mxnet.gluon.model_zoo import vision
        return _finish(vision.get_model(name, pretrained=False), [_image(*shape)])
    return _seeded(build)


def gcv(name: str, shape: Sequence[int], init: Any = None, **kwargs: Any) -> Callable[[], Built]:
    def build() -> Built:
        from dualdl.port.gluoncv_compat import import_gluoncv
        gluoncv = import_gluoncv()
        net = gluoncv.model_zoo.get_model(name, pretrained=False, **kwargs)
        return _finish(net, [_image(*shape)], init() if callable(init) else init)
    return _seeded(build)


def frcnn(rois: int) -> Callable[[], Built]:
    """gluoncv faster_rcnn_resnet50_v1b_voc at 128 px keeping ``rois`` proposals at test time (the
    factory fixes 300: its res5 head then runs a batch of 300 ROIs, minutes of float64 in the proof)."""
    def build() -> Built:
        from dualdl.port.gluoncv_compat import import_gluoncv
        net = import_gluoncv().model_zoo.get_model("faster_rcnn_resnet50_v1b_voc", pretrained=False,
                                                  pretrained_base=False)
        net.rpn._test_pre_nms, net.rpn._test_post_nms, net._rpn_test_post_nms = 4 * rois, rois, rois
        return _finish(net, [_image(1, 3, 128, 128)])
    return _seeded(build)


def _normal():
    import mxnet as mx
    return mx.init.Normal(0.01)


def _xavier_with_norms():
    """Xavier for the weights; vectors as Gluon's layers initialise them (scales and variances 1,
    the rest 0). A SymbolBlock's parameters (gluoncv SSD's FeatureExpander) get the default
    initializer whatever their role, and Xavier refuses vectors (a normal init instead gives
    negative running variances)."""
    import mxnet as mx

    class XavierWithNorms(mx.init.Xavier):
        def _init_weight(self, name, arr):
            if len(arr.shape) >= 2:
                return super()._init_weight(name, arr)
            arr[:] = 1.0 if str(name).endswith(("gamma", "running_var", "moving_var")) else 0.0
    return XavierWithNorms()


def seg(name: str, size: int, **kwargs) -> Callable[[], Built]:
    """gluoncv segmentation at ``size`` px: crop/base size set so the pyramid pools and the
    final resize match the small input; no aux head, no pretrained backbone."""
    return gcv(name, (2, 3, size, size), pretrained_base=False, crop_size=size, base_size=size,
               **kwargs)


def video_tsn_resnet18() -> Built:
    """gluoncv's resnet18_v1b_kinetics400 (per-frame ResNet, segment consensus), built as its
    factory does but with ``pretrained_base=False`` (the factory always downloads the base)."""
    from dualdl.port.gluoncv_compat import import_gluoncv
    ar = import_gluoncv().model_zoo.action_recognition
    net = ar.actionrec_resnetv1b.ActionRecResNetV1b(depth=18, nclass=10, pretrained_base=False, num_segments=2,
                                                    dropout_ratio=0.5, init_std=0.01)
    return _finish(net, [_image(4, 3, 32, 32)])      # 2 videos x 2 segments


def nlp_standard_rnn(mode: str) -> Callable[[], Built]:
    def build() -> Built:
        import gluonnlp as nlp
        net = nlp.model.StandardRNN(mode, vocab_size=40, embed_size=16, hidden_size=16, num_layers=2,
                                    dropout=0.0, tie_weights=True)
        return _finish(net, [_ids(40, 7, 3)])
    return _seeded(build)


def nlp_awd_rnn() -> Built:
    import gluonnlp as nlp
    net = nlp.model.AWDRNN("lstm", vocab_size=40, embed_size=16, hidden_size=24, num_layers=2,
                           tie_weights=True, dropout=0.0, weight_drop=0.5, drop_h=0.0, drop_i=0.0, drop_e=0.0)
    return _finish(net, [_ids(40, 7, 3)])


def nlp_bert() -> Built:
    import mxnet as mx
    import gluonnlp as nlp
    enc = nlp.model.BERTEncoder(num_layers=2, units=32, hidden_size=64, max_length=16, num_heads=2,
                                dropout=0.0, output_attention=False, output_all_encodings=False)
    net = nlp.model.BERTModel(enc, vocab_size=60, token_type_vocab_size=2, units=32, embed_size=32,
                              use_pooler=True, use_decoder=False, use_classifier=False)
    ids, types = _ids(60, 3, 9), _ids(2, 3, 9)
    return _finish(net, [ids, types, np.array([9, 6, 4], np.float32)], mx.init.Normal(0.02))


def nlp_transformer_encoder() -> Built:
    import mxnet as mx
    import gluonnlp as nlp
    enc, _, _ = nlp.model.transformer.get_transformer_encoder_decoder(
        num_layers=2, num_heads=2, units=32, hidden_size=64, dropout=0.0, max_src_length=16,
        max_tgt_length=16)
    # hybrid_forward(inputs, states=None, valid_length=None): called on the embedded sequence alone
    return _finish(enc, [_image(3, 9, 32)], mx.init.Xavier())


def nlp_nmt() -> Built:
    import mxnet as mx
    import gluonnlp as nlp
    enc, dec, one_step = nlp.model.transformer.get_transformer_encoder_decoder(
        num_layers=2, num_heads=2, units=32, hidden_size=64, dropout=0.0, max_src_length=16,
        max_tgt_length=16)
    src_vocab = nlp.Vocab(nlp.data.count_tokens([f"s{i}" for i in range(30)]))
    tgt_vocab = nlp.Vocab(nlp.data.count_tokens([f"t{i}" for i in range(30)]))
    net = nlp.model.translation.NMTModel(src_vocab, tgt_vocab, enc, dec, one_step, embed_size=32,
                                         share_embed=False, tie_weights=True)
    n = len(src_vocab)
    return _finish(net, [_ids(n, 2, 8), _ids(n, 2, 7), np.array([8, 5], np.float32),
                         np.array([7, 4], np.float32)], mx.init.Xavier())


_ELMO = dict(output_size=16, filters=[[1, 8], [2, 8]], char_embed_size=8, num_highway=1,
             conv_layer_activation="relu", max_chars_per_token=6, char_vocab_size=30)


def nlp_elmo_char() -> Built:
    import gluonnlp as nlp
    net = nlp.model.elmo.ELMoCharacterEncoder(**_ELMO)
    return _finish(net, [_ids(30, 2, 5, 6)])


def nlp_elmo_bilm() -> Built:
    import gluonnlp as nlp
    net = nlp.model.elmo.ELMoBiLM("lstmpc", input_size=16, hidden_size=24, proj_size=16, num_layers=2,
                                  cell_clip=3, proj_clip=3, **_ELMO)
    # gluonnlp's ELMo is called with its begin states (nested lists: forward/backward x layer x [h, c])
    states = [[[np.zeros(s, np.float32) for s in ((2, 16), (2, 24))] for _ in range(2)] for _ in range(2)]
    return _finish(net, [_ids(30, 2, 5, 6), states])


# ------------------------------------------------------------------ public Gluon projects
def dcgan_netG(ngf: int = 8, nc: int = 3):
    """apache/mxnet example/gluon/dc_gan/dcgan.py get_netG (64x64 output)."""
    from mxnet.gluon import nn
    netG = nn.Sequential()
    with netG.name_scope():
        netG.add(nn.Conv2DTranspose(ngf * 8, 4, 1, 0, use_bias=False))
        netG.add(nn.BatchNorm())
        netG.add(nn.Activation('relu'))
        netG.add(nn.Conv2DTranspose(ngf * 4, 4, 2, 1, use_bias=False))
        netG.add(nn.BatchNorm())
        netG.add(nn.Activation('relu'))
        netG.add(nn.Conv2DTranspose(ngf * 2, 4, 2, 1, use_bias=False))
        netG.add(nn.BatchNorm())
        netG.add(nn.Activation('relu'))
        netG.add(nn.Conv2DTranspose(ngf, 4, 2, 1, use_bias=False))
        netG.add(nn.BatchNorm())
        netG.add(nn.Activation('relu'))
        netG.add(nn.Conv2DTranspose(nc, 4, 2, 1, use_bias=False))
        netG.add(nn.Activation('tanh'))
    return netG


def dcgan_netD(ndf: int = 8):
    """apache/mxnet example/gluon/dc_gan/dcgan.py get_netD (64x64 input)."""
    from mxnet.gluon import nn
    netD = nn.Sequential()
    with netD.name_scope():
        netD.add(nn.Conv2D(ndf, 4, 2, 1, use_bias=False))
        netD.add(nn.LeakyReLU(0.2))
        netD.add(nn.Conv2D(ndf * 2, 4, 2, 1, use_bias=False))
        netD.add(nn.BatchNorm())
        netD.add(nn.LeakyReLU(0.2))
        netD.add(nn.Conv2D(ndf * 4, 4, 2, 1, use_bias=False))
        netD.add(nn.BatchNorm())
        netD.add(nn.LeakyReLU(0.2))
        netD.add(nn.Conv2D(ndf * 8, 4, 2, 1, use_bias=False))
        netD.add(nn.BatchNorm())
        netD.add(nn.LeakyReLU(0.2))
        netD.add(nn.Conv2D(2, 4, 1, 0, use_bias=False))
    return netD


def dcgan_g() -> Built:
    import mxnet as mx
    return _finish(dcgan_netG(), [_image(2, 16, 1, 1)], mx.init.Normal(0.02))


def dcgan_d() -> Built:
    import mxnet as mx
    return _finish(dcgan_netD(), [_image(2, 3, 64, 64)], mx.init.Normal(0.02))


def _mobilefacenet_classes():
    from mxnet.gluon import nn

    class ConvBlock(nn.HybridBlock):
        """Conv - BN - PReLU (``linear=True``: no PReLU), as fmobilefacenet's Conv / Linear."""
        def __init__(self, channels, kernel=1, stride=1, pad=0, groups=1, linear=False, **kw):
            super().__init__(**kw)
            self.conv = nn.Conv2D(channels, kernel, stride, pad, groups=groups, use_bias=False)
            self.bn = nn.BatchNorm(epsilon=1e-3)
            self.act = None if linear else nn.PReLU()

        def hybrid_forward(self, F, x):
            x = self.bn(self.conv(x))
            return x if self.act is None else self.act(x)

    class DepthWise(nn.HybridBlock):
        """1x1 expand - 3x3 depthwise - 1x1 linear project, residual when shapes match."""
        def __init__(self, cin, cout, groups, stride=1, residual=False, **kw):
            super().__init__(**kw)
            self.residual = residual
            self.body = nn.HybridSequential()
            self.body.add(ConvBlock(groups), ConvBlock(groups, 3, stride, 1, groups=groups),
                          ConvBlock(cout, linear=True))

        def hybrid_forward(self, F, x):
            y = self.body(x)
            return x + y if self.residual else y

    class MobileFaceNet(nn.HybridBlock):
        def __init__(self, emb=32, width=16, **kw):
            super().__init__(**kw)
            w = width
            self.features = nn.HybridSequential()
            self.features.add(ConvBlock(w * 4, 3, 2, 1), ConvBlock(w * 4, 3, 1, 1, groups=w * 4),
                              DepthWise(w * 4, w * 4, w * 8, stride=2))
            for _ in range(2):
                self.features.add(DepthWise(w * 4, w * 4, w * 8, residual=True))
            self.features.add(DepthWise(w * 4, w * 8, w * 16, stride=2))
            for _ in range(2):
                self.features.add(DepthWise(w * 8, w * 8, w * 16, residual=True))
            self.features.add(DepthWise(w * 8, w * 8, w * 16, stride=2))
            self.features.add(ConvBlock(w * 32))
            self.gdc = ConvBlock(w * 32, 7, 1, 0, groups=w * 32, linear=True)   # global depthwise conv
            self.embedding = nn.HybridSequential()
            self.embedding.add(nn.Conv2D(emb, 1, use_bias=False), nn.BatchNorm(epsilon=1e-3), nn.Flatten())

        def hybrid_forward(self, F, x):
            return self.embedding(self.gdc(self.features(x)))

    return MobileFaceNet


def mobilefacenet() -> Built:
    return _finish(_mobilefacenet_classes()(), [_image(2, 3, 112, 112)])


def _style_classes():
    from mxnet.gluon import nn

    class ReflectancePadding(nn.HybridBlock):
        def __init__(self, pad_width=None, **kw):
            super().__init__(**kw)
            self.pad_width = pad_width

        def hybrid_forward(self, F, x):
            return F.pad(x, mode='reflect', pad_width=self.pad_width)

    class ConvLayer(nn.HybridBlock):
        def __init__(self, in_channels, out_channels, kernel_size, stride, **kw):
            super().__init__(**kw)
            padding = kernel_size // 2
            self.pad = ReflectancePadding(pad_width=(0, 0, 0, 0, padding, padding, padding, padding))
            self.conv2d = nn.Conv2D(in_channels=in_channels, channels=out_channels,
                                    kernel_size=kernel_size, strides=(stride, stride), padding=0)

        def hybrid_forward(self, F, x):
            return self.conv2d(self.pad(x))

    class UpsampleConvLayer(nn.HybridBlock):
        def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None, **kw):
            super().__init__(**kw)
            self.upsample = upsample
            self.conv2d = nn.Conv2D(in_channels=in_channels, channels=out_channels,
                                    kernel_size=kernel_size, strides=(stride, stride), padding=kernel_size // 2)

        def hybrid_forward(self, F, x):
            if self.upsample:
                x = F.UpSampling(x, scale=self.upsample, sample_type='nearest')
            return self.conv2d(x)

    class Bottleneck(nn.HybridBlock):
        def __init__(self, inplanes, planes, stride=1, downsample=None, **kw):
            super().__init__(**kw)
            self.downsample = downsample
            if downsample is not None:
                self.residual_layer = nn.Conv2D(in_channels=inplanes, channels=planes * 4, kernel_size=1,
                                                strides=(stride, stride))
            self.conv_block = nn.HybridSequential()
            self.conv_block.add(nn.InstanceNorm(in_channels=inplanes), nn.Activation('relu'),
                                nn.Conv2D(in_channels=inplanes, channels=planes, kernel_size=1),
                                nn.InstanceNorm(in_channels=planes), nn.Activation('relu'),
                                ConvLayer(planes, planes, kernel_size=3, stride=stride),
                                nn.InstanceNorm(in_channels=planes), nn.Activation('relu'),
                                nn.Conv2D(in_channels=planes, channels=planes * 4, kernel_size=1))

        def hybrid_forward(self, F, x):
            residual = self.residual_layer(x) if self.downsample is not None else x
            return residual + self.conv_block(x)

    class UpBottleneck(nn.HybridBlock):
        def __init__(self, inplanes, planes, stride=2, **kw):
            super().__init__(**kw)
            self.residual_layer = UpsampleConvLayer(inplanes, planes * 4, kernel_size=1, stride=1, upsample=stride)
            self.conv_block = nn.HybridSequential()
            self.conv_block.add(nn.InstanceNorm(in_channels=inplanes), nn.Activation('relu'),
                                nn.Conv2D(in_channels=inplanes, channels=planes, kernel_size=1),
                                nn.InstanceNorm(in_channels=planes), nn.Activation('relu'),
                                UpsampleConvLayer(planes, planes, kernel_size=3, stride=1, upsample=stride),
                                nn.InstanceNorm(in_channels=planes), nn.Activation('relu'),
                                nn.Conv2D(in_channels=planes, channels=planes * 4, kernel_size=1))

        def hybrid_forward(self, F, x):
            return self.residual_layer(x) + self.conv_block(x)

    class StyleTransferNet(nn.HybridBlock):
        """example/gluon/style_transfer/net.py's Net without the Inspiration (style target) layer."""
        def __init__(self, input_nc=3, output_nc=3, ngf=8, n_blocks=2, **kw):
            super().__init__(**kw)
            self.model = nn.HybridSequential()
            self.model.add(ConvLayer(input_nc, 16, kernel_size=7, stride=1), nn.InstanceNorm(in_channels=16),
                           nn.Activation('relu'), Bottleneck(16, 8, 2, 1), Bottleneck(32, ngf, 2, 1))
            for _ in range(n_blocks):
                self.model.add(Bottleneck(ngf * 4, ngf, 1, None))
            self.model.add(UpBottleneck(ngf * 4, 8, 2), UpBottleneck(32, 4, 2), nn.InstanceNorm(in_channels=16),
                           nn.Activation('relu'), ConvLayer(16, output_nc, kernel_size=7, stride=1))

        def hybrid_forward(self, F, x):
            return self.model(x)

    return StyleTransferNet


def style_transfer() -> Built:
    return _finish(_style_classes()(), [_image(2, 3, 32, 32)])


def _d2l_cases() -> List[Case]:
    """H-np's vendored d2l numpy-interface models (tests/_translate_d2l.py ``MODELS``: name ->
    builder returning ``(block, [arrays])``, built and translated with ``npx.set_np()`` on)."""
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        if here not in sys.path:
            sys.path.insert(0, here)
        import _translate_d2l as d2l
    except Exception:                                   # noqa: BLE001 (mxnet missing: no d2l rows)
        return []
    return [Case(f"d2l:{name}", "d2l (numpy interface)", _seeded(build), np_mode=True)
            for name, build in getattr(d2l, "MODELS", {}).items()]


# ----------------------------------------------------------------------------- the corpus
def _cases() -> List[Case]:
    c = Case
    S = True
    return [
        # MXNet model zoo (beyond tests/test_translate_zoo.py's 13)
        c("zoo:resnet34_v1", "model zoo", zoo("resnet34_v1", (2, 3, 32, 32)), slow=S),   # ill-conditioned at 32 px
        c("zoo:resnet50_v2", "model zoo", zoo("resnet50_v2", (2, 3, 64, 64)), slow=S),
        c("zoo:mobilenetv2_0.25", "model zoo", zoo("mobilenetv2_0.25", (2, 3, 32, 32))),
        c("zoo:mobilenet0.5", "model zoo", zoo("mobilenet0.5", (2, 3, 32, 32))),
        c("zoo:densenet121", "model zoo", zoo("densenet121", (1, 3, 224, 224)), slow=S),
        c("zoo:vgg11_bn", "model zoo", zoo("vgg11_bn", (1, 3, 32, 32)), slow=S),
        # gluoncv classification
        c("gcv:cifar_resnet20_v1", "gluoncv cifar", gcv("cifar_resnet20_v1", (2, 3, 32, 32))),
        c("gcv:cifar_resnet20_v2", "gluoncv cifar", gcv("cifar_resnet20_v2", (2, 3, 32, 32))),
        c("gcv:cifar_wideresnet16_10", "gluoncv cifar", gcv("cifar_wideresnet16_10", (2, 3, 32, 32)), slow=S),
        c("gcv:cifar_resnext29_32x4d", "gluoncv cifar", gcv("cifar_resnext29_32x4d", (2, 3, 32, 32)), slow=S),
        c("gcv:resnet18_v1b", "gluoncv classification", gcv("resnet18_v1b", (2, 3, 32, 32))),
        c("gcv:resnet50_v1d", "gluoncv classification", gcv("resnet50_v1d", (2, 3, 64, 64)), slow=S),
        c("gcv:se_resnet18_v1", "gluoncv classification", gcv("se_resnet18_v1", (2, 3, 32, 32))),
        c("gcv:se_resnext50_32x4d", "gluoncv classification", gcv("se_resnext50_32x4d", (2, 3, 64, 64)), slow=S),
        c("gcv:resnext50_32x4d", "gluoncv classification", gcv("resnext50_32x4d", (2, 3, 64, 64)), slow=S),
        c("gcv:resnest14", "gluoncv classification", gcv("resnest14", (2, 3, 64, 64)), slow=S),
        c("gcv:mobilenetv3_small", "gluoncv classification", gcv("mobilenetv3_small", (2, 3, 64, 64))),
        c("gcv:mobilenetv3_large", "gluoncv classification", gcv("mobilenetv3_large", (2, 3, 64, 64)), slow=S),
        c("gcv:hrnet_w18_small_v1_c", "gluoncv classification", gcv("hrnet_w18_small_v1_c", (2, 3, 64, 64)), slow=S),
        c("gcv:darknet53", "gluoncv classification", gcv("darknet53", (2, 3, 64, 64)), slow=S),
        c("gcv:xception", "gluoncv classification", gcv("xception", (1, 3, 64, 64)), slow=S),
        c("gcv:nasnet_4_1056", "gluoncv classification", gcv("nasnet_4_1056", (2, 3, 64, 64)), slow=S),
        c("gcv:residualattentionnet56", "gluoncv classification",
          gcv("cifar_residualattentionnet56", (2, 3, 32, 32)), slow=S),
        c("gcv:googlenet", "gluoncv classification", gcv("googlenet", (1, 3, 224, 224)), slow=S),
        c("gcv:dla34", "gluoncv classification", gcv("dla34", (2, 3, 64, 64)), slow=S),
        # gluoncv segmentation
        c("gcv:fastscnn_citys", "gluoncv segmentation", gcv("fastscnn_citys", (2, 3, 64, 64), crop_size=64,
                                                            base_size=64, aux=False)),
        c("gcv:fastscnn_citys_batch1", "gluoncv segmentation",   # train-mode BatchNorm on a 1x1 map: proven at batch 2
          gcv("fastscnn_citys", (1, 3, 64, 64), crop_size=64, base_size=64, aux=False)),
        c("gcv:fcn_resnet50_voc", "gluoncv segmentation", seg("fcn_resnet50_voc", 64, aux=False), slow=S),
        c("gcv:psp_resnet50_ade", "gluoncv segmentation", seg("psp_resnet50_ade", 64, aux=False), slow=S),
        c("gcv:deeplab_resnet50_ade", "gluoncv segmentation", seg("deeplab_resnet50_ade", 64, aux=False), slow=S),
        c("gcv:danet_resnet50_citys", "gluoncv segmentation", seg("danet_resnet50_citys", 64), slow=S),
        # gluoncv detection
        c("gcv:yolo3_mobilenet0.25_voc", "gluoncv detection",
          gcv("yolo3_mobilenet0.25_voc", (1, 3, 64, 64), pretrained_base=False), inference=True),
        c("gcv:yolo3_darknet53_voc", "gluoncv detection",
          gcv("yolo3_darknet53_voc", (1, 3, 64, 64), pretrained_base=False), slow=S, inference=True),
        c("gcv:ssd_512_mobilenet1.0_voc", "gluoncv detection",
          gcv("ssd_512_mobilenet1.0_voc", (1, 3, 128, 128), _xavier_with_norms, pretrained_base=False), slow=S, inference=True),
        c("gcv:faster_rcnn_resnet50_v1b_voc", "gluoncv detection",
          frcnn(16), slow=S, inference=True),
        # gluoncv pose, video
        c("gcv:simple_pose_resnet18_v1b", "gluoncv pose",
          gcv("simple_pose_resnet18_v1b", (1, 3, 64, 48), pretrained_base=False)),
        c("gcv:resnet18_v1b_kinetics400", "gluoncv video", _seeded(video_tsn_resnet18)),
        c("gcv:i3d_resnet50_v1_kinetics400", "gluoncv video",
          gcv("i3d_resnet50_v1_kinetics400", (2, 3, 8, 64, 64), pretrained_base=False, num_segments=1), slow=S),
        c("gcv:r2plus1d_resnet18_kinetics400", "gluoncv video",
          gcv("r2plus1d_resnet18_kinetics400", (1, 3, 8, 32, 32)), slow=S),
        # gluonnlp
        c("nlp:StandardRNN_lstm", "gluonnlp", nlp_standard_rnn("lstm")),
        c("nlp:StandardRNN_rnn_relu", "gluonnlp", nlp_standard_rnn("rnn_relu")),
        c("nlp:AWDRNN", "gluonnlp", _seeded(nlp_awd_rnn)),
        c("nlp:BERTModel", "gluonnlp", _seeded(nlp_bert)),
        c("nlp:TransformerEncoder", "gluonnlp", _seeded(nlp_transformer_encoder)),
        c("nlp:NMTModel_transformer", "gluonnlp", _seeded(nlp_nmt)),
        c("nlp:ELMoCharacterEncoder", "gluonnlp", _seeded(nlp_elmo_char)),
        c("nlp:ELMoBiLM", "gluonnlp", _seeded(nlp_elmo_bilm)),
        # public Gluon projects
        c("proj:dcgan_G", "public projects", _seeded(dcgan_g)),
        c("proj:dcgan_D", "public projects", _seeded(dcgan_d)),
        c("proj:mobilefacenet", "public projects", _seeded(mobilefacenet)),
        c("proj:style_transfer", "public projects", _seeded(style_transfer)),
    ] + _d2l_cases()


#: Models that do not translate ok, as measured (the final run of docs/translate.md): name ->
#: (expect, words the refusal or failed check must contain, why). Every other model is "ok".
KNOWN: Dict[str, Tuple[str, Tuple[str, ...], str]] = {}


def _with_known(cases: List[Case]) -> List[Case]:
    from dataclasses import replace
    return [replace(c, expect=KNOWN[c.name][0], names=KNOWN[c.name][1], note=KNOWN[c.name][2])
            if c.name in KNOWN else c for c in cases]


CASES: List[Case] = _with_known(_cases())
BY_NAME: Dict[str, Case] = {c.name: c for c in CASES}


# ------------------------------------------------------------------------------- runner
@dataclass
class Outcome:
    name: str
    family: str
    status: str            # ok / failed-check / refused / raw / build
    detail: str = ""
    seconds: float = 0.0
    translate_s: Optional[float] = None
    verify_s: Optional[float] = None
    max_rel: Optional[float] = None
    inputs: str = ""
    dtype: str = ""
    cpu_s: Optional[float] = None
    report: Any = field(default=None, repr=False)


def run_case(case: Case, out_dir: str) -> Outcome:
    """Build and translate one corpus model; classify what happened."""
    if case.np_mode:
        from mxnet import npx
        npx.set_np()
        try:
            return _run_case(case, out_dir)
        finally:
            npx.reset_np()
    return _run_case(case, out_dir)


def _run_case(case: Case, out_dir: str) -> Outcome:
    from dualdl.port import TranslationError, translate
    t0 = time.perf_counter()
    try:
        net, inputs = case.build()
    except Exception as e:                                          # noqa: BLE001
        return Outcome(case.name, case.family, "build", f"{type(e).__name__}: {_line(e)}",
                       time.perf_counter() - t0)
    shapes = ", ".join(_shape(x) for x in inputs)
    t1 = time.perf_counter()
    try:
        rep = translate(net, inputs, out_dir, name=_file_name(case.name), train=not case.inference)
    except TranslationError as e:
        return Outcome(case.name, case.family, "refused", _line(e), time.perf_counter() - t1, inputs=shapes)
    except ValueError as e:
        if str(e).startswith("translate:"):                         # its own check of the inputs
            return Outcome(case.name, case.family, "rejected", _line(e), time.perf_counter() - t1, inputs=shapes)
        return _raw(case, e, t1, shapes)
    except Exception as e:                                          # noqa: BLE001
        return _raw(case, e, t1, shapes)
    secs = time.perf_counter() - t1
    o = Outcome(case.name, case.family, "ok" if rep.ok else "failed-check", seconds=secs,
                translate_s=rep.seconds.get("translate"), verify_s=rep.seconds.get("verify"),
                max_rel=rep.max_rel_diff, inputs=shapes, dtype=rep.dtype, cpu_s=rep.seconds.get("cpu"), report=rep)
    if not rep.ok:
        bad = [f"{c.name}: {c.detail}" if c.detail.startswith("the torch module raised")
               else f"{c.name}: rel {c.max_rel_diff:.3g} > {c.tolerance:.3g}" for c in rep.checks if not c.passed]
        bad += [f"untranslated {u['block']} at {u['path']!r}: {u['reason']}" for u in rep.untranslated]
        o.detail = "; ".join(bad)[:400] + (f" (first divergent: {rep.first_divergent})" if rep.first_divergent else "")
    else:
        o.detail = f"max rel {rep.max_rel_diff:.2g} ({rep.dtype})"
    return o


def _raw(case: Case, e: BaseException, t1: float, shapes: str) -> Outcome:
    tb = traceback.extract_tb(e.__traceback__)[-1]
    where = f" [{os.path.basename(tb.filename)}:{tb.lineno}]"
    return Outcome(case.name, case.family, "raw", f"{type(e).__name__}: {_line(e)}{where}",
                   time.perf_counter() - t1, inputs=shapes)


def _shape(x: Any) -> str:
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_shape(v) for v in x) + "]"
    return "x".join(str(d) for d in np.shape(x)) or "scalar"


def markdown_table(outcomes: Sequence[Outcome]) -> str:
    """The corpus as docs/translate.md shows it: one row per model."""
    words = {"ok": "ok", "failed-check": "proof fails", "refused": "refused", "rejected": "inputs rejected",
             "raw": "RAW ERROR", "build": "not built"}
    lines = ["| family | model | input | result | max rel diff (checked in) | translate + verify s (CPU s) |",
             "|---|---|---|---|---|---|"]
    for o in outcomes:
        diff = f"{o.max_rel:.1e} ({o.dtype})" if o.max_rel is not None else "-"
        secs = (f"{(o.translate_s or 0) + (o.verify_s or 0):.1f} ({o.cpu_s:.1f})" if o.translate_s is not None
                else "-")
        status = "not translated" if o.detail.startswith("untranslated") else words[o.status]
        what = status + ("" if o.status == "ok" else ": " + o.detail.split(". Register")[0][:200])
        lines.append(f"| {o.family} | {o.name.split(':', 1)[1]} | {o.inputs} | {what.replace('|', '/')} | {diff} | {secs} |")
    return "\n".join(lines)


def _file_name(name: str) -> str:
    import re
    return "m_" + re.sub(r"\W", "_", name)


def _line(e: BaseException) -> str:
    s = str(e).strip().replace("\n", " | ")
    return s[:400]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", default=[], help="a model name or family (repeatable)")
    p.add_argument("--fast", action="store_true", help="skip the models marked slow")
    p.add_argument("--status", help="append the result table to this Markdown file")
    p.add_argument("--json", help="write the outcomes as JSON")
    p.add_argument("--markdown", help="write the docs table (markdown_table) to this file")
    p.add_argument("--list", action="store_true")
    a = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    cases = [c for c in CASES if (not a.only or c.name in a.only or c.family in a.only
                                  or any(o in c.name for o in a.only)) and not (a.fast and c.slow)]
    if a.list:
        for c in cases:
            print(f"{c.name:40s} {c.family:28s} {'slow' if c.slow else ''} expect={c.expect}")
        return 0
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        run_case(BY_NAME["proj:dcgan_G"], tmp)      # warm-up (imports): the seconds below exclude them
        for c in cases:
            o = run_case(c, tmp)
            outcomes.append(o)
            print(f"{o.status.upper():13s} {o.seconds:6.1f}s  {c.name:36s} {o.detail}", flush=True)
    counts = {s: sum(o.status == s for o in outcomes)
              for s in ("ok", "failed-check", "refused", "rejected", "raw", "build")}
    print(f"\n{counts['ok']}/{len(outcomes)} ok; " + ", ".join(f"{k}: {v}" for k, v in counts.items() if k != "ok"))
    if a.status:
        with open(a.status, "a") as f:
            f.write(f"\n## corpus run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
                    f"(git {os.popen('git rev-parse --short HEAD').read().strip()}): {counts['ok']}/{len(outcomes)} ok\n\n")
            f.write("| model | family | status | s | detail |\n|---|---|---|---|---|\n")
            for o in outcomes:
                f.write(f"| {o.name} | {o.family} | {o.status} | {o.seconds:.1f} | {o.detail.replace('|', '/')} |\n")
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown_table(outcomes) + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{k: v for k, v in vars(o).items() if k != "report"} for o in outcomes], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
