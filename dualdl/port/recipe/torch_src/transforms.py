"""``gluon.data.vision.transforms`` (MXNet 1.9.1) as torch functions on HWC uint8 images.

What differs from torchvision: Gluon resizes with OpenCV 3.4's fixed-point bilinear kernel
(11-bit weights, rows shifted right by 4 and multiplied with a 16-bit high product, ``+2 >> 2``;
an exact 2x shrink averages 2x2 blocks), reproduced here bit for bit; ``RandomResizedCrop`` draws
its box with Python's ``random`` and numpy as ``mx.image.random_size_crop`` does (same seed, same
box); the colour ops compute in float32 and *truncate* to uint8 (MXNet's ``saturate_cast``), and
``RandomSaturation`` keeps MXNet's grey value, which is the blue channel's share only. Random
choices MXNet makes with its own RNG (flip, jitter factors and order, lighting) use torch's RNG:
the same distribution, not the same draws."""
from __future__ import annotations

import random
import struct
from typing import Callable, Optional, Sequence, Tuple, Union

import numpy as np
import torch

Size = Union[int, Sequence[int]]


def _f32(x: float) -> float:
    """``x`` as the C++ ``float`` field of an MXNet operator parameter stores it."""
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def _wh(size: Size) -> Tuple[int, int]:
    if isinstance(size, (int, float, np.integer)):
        return int(size), int(size)
    return int(size[0]), int(size[1])


def _coeffs(dst: int, src: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """OpenCV's source index and 11-bit weights per destination pixel (float32 positions)."""
    scale = 1.0 / (dst / src)
    pos = ((torch.arange(dst, dtype=torch.float64) + 0.5) * scale - 0.5).to(torch.float32)
    s = torch.floor(pos)
    f = pos - s
    return s.to(torch.int64), f, torch.ones((), dtype=torch.float32)


def imresize(x: torch.Tensor, w: int, h: int, interp: int = 1) -> torch.Tensor:
    """``mx.image.imresize`` / ``F.image.resize`` (OpenCV 3.4.2 ``INTER_LINEAR`` on uint8)."""
    if interp != 1:
        raise ValueError(f"interpolation {interp} is not translated; only bilinear (1), Gluon's "
                         f"default for Resize, CenterCrop and RandomResizedCrop")
    if x.dtype != torch.uint8 or x.dim() != 3:
        raise ValueError(f"expected an HWC uint8 image, got {x.dtype} of shape {tuple(x.shape)}")
    H, W, C = x.shape
    if (W, H) == (w, h):
        return x.clone()
    src = x.to(torch.int64)
    if W == 2 * w and H == 2 * h:  # OpenCV's fast INTER_AREA path for an exact 2x shrink
        s = src[0::2, 0::2] + src[0::2, 1::2] + src[1::2, 0::2] + src[1::2, 1::2]
        return ((s + 2) >> 2).to(torch.uint8)
    sx, fx, one = _coeffs(w, W)
    low, high = sx < 0, sx >= W - 1
    fx = torch.where(low | high, torch.zeros_like(fx), fx)
    sx = torch.where(low, torch.zeros_like(sx), torch.where(high, torch.full_like(sx, W - 1), sx))
    a0 = torch.round((one - fx) * 2048).to(torch.int64)
    a1 = torch.round(fx * 2048).to(torch.int64)
    sx1 = torch.clamp(sx + 1, max=W - 1)
    rows = src[:, sx, :] * a0[None, :, None] + src[:, sx1, :] * a1[None, :, None]
    sy, fy, one = _coeffs(h, H)
    b0 = torch.round((one - fy) * 2048).to(torch.int64)[:, None]
    b1 = torch.round(fy * 2048).to(torch.int64)[:, None]
    r0 = rows[torch.clamp(sy, 0, H - 1)].reshape(h, -1)
    r1 = rows[torch.clamp(sy + 1, 0, H - 1)].reshape(h, -1)
    v = (((r0 >> 4) * b0) >> 16) + (((r1 >> 4) * b1) >> 16)
    return torch.clamp((v + 2) >> 2, 0, 255).to(torch.uint8).reshape(h, w, C)


def resize(x: torch.Tensor, size: Size, keep_ratio: bool = False, interp: int = 1) -> torch.Tensor:
    """``transforms.Resize(size, keep_ratio, interpolation)``; ``size`` is (width, height)."""
    H, W = int(x.shape[0]), int(x.shape[1])
    if isinstance(size, (int, float, np.integer)) or len(size) == 1:
        s = int(size if isinstance(size, (int, float, np.integer)) else size[0])
        if not keep_ratio:
            w, h = s, s
        elif H > W:
            w, h = s, int(H * s // W)
        else:
            h, w = s, int(W * s // H)
    else:
        w, h = int(size[0]), int(size[1])
    return imresize(x, w, h, interp)


def scale_down(src_size: Tuple[int, int], size: Tuple[int, int]) -> Tuple[int, int]:
    """``mx.image.scale_down``: shrink a (w, h) crop to fit a (w, h) image, keeping its ratio."""
    w, h = size
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def fixed_crop(x: torch.Tensor, x0: int, y0: int, w: int, h: int,
               size: Optional[Tuple[int, int]] = None, interp: int = 1) -> torch.Tensor:
    """``mx.image.fixed_crop``: crop, then resize to ``size`` (w, h) if it differs."""
    out = x[y0:y0 + h, x0:x0 + w]
    if size is not None and (w, h) != tuple(size):
        out = imresize(out.contiguous(), size[0], size[1], interp)
    return out


def center_crop(x: torch.Tensor, size: Size, interp: int = 1) -> torch.Tensor:
    """``transforms.CenterCrop(size)`` (``mx.image.center_crop``)."""
    size = _wh(size)
    h, w = int(x.shape[0]), int(x.shape[1])
    new_w, new_h = scale_down((w, h), size)
    x0, y0 = int((w - new_w) / 2), int((h - new_h) / 2)
    return fixed_crop(x, x0, y0, new_w, new_h, size, interp)


def random_resized_crop(x: torch.Tensor, size: Size, scale: Tuple[float, float] = (0.08, 1.0),
                        ratio: Tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
                        interp: int = 1) -> torch.Tensor:
    """``transforms.RandomResizedCrop`` (``mx.image.random_size_crop``): the box is drawn with
    Python's ``random`` exactly as Gluon draws it, so ``random.seed(s)`` gives Gluon's box."""
    size = _wh(size)
    h, w = int(x.shape[0]), int(x.shape[1])
    src_area = h * w
    area = (scale, 1.0) if isinstance(scale, (int, float)) else scale
    for _ in range(10):
        target_area = random.uniform(area[0], area[1]) * src_area
        log_ratio = (np.log(ratio[0]), np.log(ratio[1]))
        new_ratio = np.exp(random.uniform(*log_ratio))
        new_w = int(round(np.sqrt(target_area * new_ratio)))
        new_h = int(round(np.sqrt(target_area / new_ratio)))
        if new_w <= w and new_h <= h:
            x0 = random.randint(0, w - new_w)
            y0 = random.randint(0, h - new_h)
            return fixed_crop(x, x0, y0, new_w, new_h, size, interp)
    return center_crop(x, size, interp)


def random_crop(x: torch.Tensor, size: Size, pad: Union[None, int, Sequence] = None,
                interp: int = 2) -> torch.Tensor:
    """gluon-cv ``transforms.RandomCrop(size, pad)``: zero padding, then ``mx.image.random_crop``
    (box drawn with Python's ``random``; resized only when the image is smaller than ``size``)."""
    if pad:
        widths = ((pad, pad), (pad, pad), (0, 0)) if isinstance(pad, int) else pad
        x = torch.from_numpy(np.pad(x.numpy(), widths, mode="constant", constant_values=0))
    size = _wh(size)
    h, w = int(x.shape[0]), int(x.shape[1])
    new_w, new_h = scale_down((w, h), size)
    x0 = random.randint(0, w - new_w)
    y0 = random.randint(0, h - new_h)
    return fixed_crop(x, x0, y0, new_w, new_h, size, interp)


def to_tensor(x: torch.Tensor) -> torch.Tensor:
    """``transforms.ToTensor``: HWC uint8 [0, 255] -> CHW float32 [0, 1] (``x / 255.0f``)."""
    return x.permute(2, 0, 1).to(torch.float32).div(255.0)


def normalize(x: torch.Tensor, mean: Union[float, Sequence[float]] = 0.0,
              std: Union[float, Sequence[float]] = 1.0) -> torch.Tensor:
    """``transforms.Normalize``: ``(x - mean[c]) / std[c]`` in float32 on a CHW tensor."""
    c = x.shape[0]
    m = torch.tensor([_f32(v) for v in (mean if isinstance(mean, (list, tuple)) else [mean] * c)],
                     dtype=torch.float32).reshape(-1, 1, 1)
    s = torch.tensor([_f32(v) for v in (std if isinstance(std, (list, tuple)) else [std] * c)],
                     dtype=torch.float32).reshape(-1, 1, 1)
    return (x - m) / s


def _coin(generator: Optional[torch.Generator]) -> bool:
    return bool(torch.rand((), generator=generator) < 0.5)


def random_flip_left_right(x: torch.Tensor,
                           generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """``transforms.RandomFlipLeftRight``: mirror the width axis with probability 1/2."""
    return x.flip(1) if _coin(generator) else x


def random_flip_top_bottom(x: torch.Tensor,
                           generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """``transforms.RandomFlipTopBottom``: mirror the height axis with probability 1/2."""
    return x.flip(0) if _coin(generator) else x


def _saturate(v: torch.Tensor) -> torch.Tensor:
    """MXNet's ``saturate_cast<uint8_t>(float)``: clamp to [0, 255], then truncate."""
    return torch.clamp(v, 0.0, 255.0).to(torch.uint8)


def adjust_brightness(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return _saturate(x.to(torch.float32) * _f32(alpha))


def adjust_contrast(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Grey mean over the image (float32; MXNet sums sequentially, this sums in float64 and
    rounds: it can differ in the last bit of the mean), then ``x*alpha + (1-alpha)*mean``."""
    coef = torch.tensor([0.299, 0.587, 0.114], dtype=torch.float32)
    xf = x.to(torch.float32)
    total = (xf * coef).to(torch.float64).sum() if x.shape[2] == 3 else xf.to(torch.float64).sum()
    mean = torch.tensor(_f32(total.item()), dtype=torch.float32) / float(x.shape[0] * x.shape[1])
    alpha_t = torch.tensor(_f32(alpha), dtype=torch.float32)
    beta = (1 - alpha_t) * mean
    return _saturate(xf * alpha_t + beta)


def adjust_saturation(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """MXNet 1.9.1's saturation: its grey value is ``0.114 * blue`` (the loop assigns instead of
    summing), blended as ``grey*(1-alpha) + x*alpha``; kept as MXNet computes it."""
    if x.shape[2] == 1:
        return x.clone()
    alpha_t = torch.tensor(_f32(alpha), dtype=torch.float32)
    xf = x.to(torch.float32)
    grey = xf[:, :, 2:3] * torch.tensor(0.114, dtype=torch.float32) * (1 - alpha_t)
    return _saturate(grey + xf * alpha_t)


def _rgb_to_hls(r: torch.Tensor, g: torch.Tensor, b: torch.Tensor):
    b, g, r = b / 255.0, g / 255.0, r / 255.0
    vmax = torch.maximum(torch.maximum(r, g), b)
    vmin = torch.minimum(torch.minimum(r, g), b)
    diff = vmax - vmin
    l = (vmax + vmin) * 0.5
    ok = diff > torch.finfo(torch.float32).eps
    lt = (l < 0.5).to(torch.float32)
    ge = (l >= 0.5).to(torch.float32)
    s = lt * diff / (vmax + vmin)
    s = s + ge * diff / (2.0 - vmax - vmin)
    d = 60.0 / diff
    is_r = (vmax == r).to(torch.float32)
    is_g = ((vmax != r) & (vmax == g)).to(torch.float32)
    is_b = ((vmax != r) & (vmax != g)).to(torch.float32)
    h = is_r * (g - b) * d
    h = h + is_g * ((b - r) * d + 120.0)
    h = h + is_b * ((r - g) * d + 240.0)
    h = h + (h < 0.0).to(torch.float32) * 360.0
    zero = torch.zeros_like(h)
    return torch.where(ok, h, zero), l, torch.where(ok, s, zero)


def _hls_to_rgb(h: torch.Tensor, l: torch.Tensor, s: torch.Tensor):
    p2 = (l <= 0.5).to(torch.float32) * l * (1 + s)
    p2 = p2 + (l > 0.5).to(torch.float32) * (l + s - l * s)
    p1 = 2 * l - p2
    h = h * torch.tensor(1.0 / 60.0, dtype=torch.float32)
    while bool((h < 0).any()):
        h = torch.where(h < 0, h + 6, h)
    while bool((h >= 6).any()):
        h = torch.where(h >= 6, h - 6, h)
    sector = h.to(torch.int64)
    h = h - sector.to(torch.float32)
    tab = torch.stack([p2, p1, p1 + (p2 - p1) * (1 - h), p1 + (p2 - p1) * h])
    sectors = torch.tensor([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])
    pick = sectors[sector.clamp(0, 5)]
    bgr = [tab.gather(0, pick[..., i].unsqueeze(0)).squeeze(0) for i in range(3)]
    grey = s == 0
    b, g, r = (torch.where(grey, l, c) for c in bgr)
    return r * 255.0, g * 255.0, b * 255.0


def adjust_hue(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Rotate the hue by ``alpha * 360`` degrees through MXNet's float32 RGB->HLS->RGB."""
    if x.shape[2] == 1:
        return x.clone()
    xf = x.to(torch.float32)
    h, l, s = _rgb_to_hls(xf[..., 0], xf[..., 1], xf[..., 2])
    h = h + torch.tensor(_f32(alpha), dtype=torch.float32) * 360.0
    r, g, b = _hls_to_rgb(h, l, s)
    return _saturate(torch.stack([r, g, b], dim=-1))


def _uniform(low: float, high: float, generator: Optional[torch.Generator]) -> float:
    return float(torch.empty((), dtype=torch.float32).uniform_(low, high, generator=generator))


def random_color_jitter(x: torch.Tensor, brightness: float = 0, contrast: float = 0,
                        saturation: float = 0, hue: float = 0,
                        generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """``transforms.RandomColorJitter``: the four adjustments in a random order, each with a
    factor uniform in ``1 +- amount`` (hue: ``+- hue``); a zero amount skips it."""
    order = torch.randperm(4, generator=generator).tolist()
    for op in order:
        if op == 0 and brightness > 0:
            x = adjust_brightness(x, 1.0 + _uniform(-brightness, brightness, generator))
        elif op == 1 and contrast > 0:
            x = adjust_contrast(x, 1.0 + _uniform(-contrast, contrast, generator))
        elif op == 2 and saturation > 0:
            x = adjust_saturation(x, 1.0 + _uniform(-saturation, saturation, generator))
        elif op == 3 and hue > 0:
            x = adjust_hue(x, _uniform(-hue, hue, generator))
    return x


_EIG = [[55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
        [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
        [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203]]


def adjust_lighting(x: torch.Tensor, alpha: Sequence[float]) -> torch.Tensor:
    """AlexNet PCA lighting with fixed ``alpha`` (R, G, B), float32 as MXNet's kernel."""
    if x.shape[2] == 1:
        return x.clone()
    a = [np.float32(v) for v in alpha]
    pca = [np.float32(np.float32(e[0]) * a[0]) + np.float32(np.float32(e[1]) * a[1]) for e in _EIG]
    pca = [np.float32(p + np.float32(np.float32(e[2]) * a[2])) for p, e in zip(pca, _EIG)]
    shift = torch.tensor([float(p) for p in pca], dtype=torch.float32)
    return _saturate(x.to(torch.float32) + shift)


def random_lighting(x: torch.Tensor, alpha_std: float = 0.05,
                    generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """``transforms.RandomLighting(alpha)``: ``adjust_lighting`` with alphas ~ N(0, alpha_std)."""
    alpha = torch.empty(3, dtype=torch.float32).normal_(0.0, _f32(alpha_std), generator=generator)
    return adjust_lighting(x, alpha.tolist())


class Compose:
    """``transforms.Compose``: apply each function in turn."""

    def __init__(self, fns: Sequence[Callable[[torch.Tensor], torch.Tensor]]):
        self.fns = list(fns)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        for fn in self.fns:
            x = fn(x)
        return x
