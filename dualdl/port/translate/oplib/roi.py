"""MXNet's region ops (gluoncv's Faster R-CNN) -> torch: ``_contrib_ROIAlign`` written out in torch
(no torchvision: the generated file depends on torch alone) with MXNet's semantics.

``ROIAlign`` is Detectron's: each bin averages ``sample_ratio`` x ``sample_ratio`` bilinear samples
(``ceil(roi size / pooled size)`` per ROI when ``sample_ratio <= 0``), samples outside
``[-1, size]`` count as 0, a ROI is at least 1x1 unless ``aligned``, a negative batch index gives
zeros (MXNet's result is undefined there: it reads outside the data), and no gradient reaches the ROIs (MXNet's backward has none for them; torch's autograd would
differentiate the sample positions)."""
from __future__ import annotations

import numpy as np

from ..errors import TranslationError
from .base import Expr, op, parse_attr

__all__ = ["ROI_ALIGN", "ROI_POOL"]

ROI_ALIGN = '''def roi_align(x, rois, pooled, spatial_scale, sample_ratio, aligned):
    """MXNet _contrib_ROIAlign (Detectron's ROIAlign): (R, C, ph, pw) from x (N, C, H, W) and rois
    (R, 5) = (batch index, x1, y1, x2, y2); no gradient to the rois, as in MXNet."""
    rois = rois.detach()
    n, c, height, width = x.shape
    ph, pw = pooled
    out = x.new_zeros((rois.shape[0], c, ph, pw))
    for r in range(rois.shape[0]):
        b = int(rois[r, 0])
        if b < 0:
            continue
        off = 0.5 if aligned else 0.0
        x1, y1 = rois[r, 1] * spatial_scale - off, rois[r, 2] * spatial_scale - off
        rw, rh = rois[r, 3] * spatial_scale - off - x1, rois[r, 4] * spatial_scale - off - y1
        if not aligned:
            rw, rh = torch.clamp(rw, min=1.0), torch.clamp(rh, min=1.0)
        bh, bw = rh / ph, rw / pw
        gh = sample_ratio if sample_ratio > 0 else int(torch.ceil(rh / ph))
        gw = sample_ratio if sample_ratio > 0 else int(torch.ceil(rw / pw))
        iy = torch.arange(gh, dtype=x.dtype, device=x.device)
        ix = torch.arange(gw, dtype=x.dtype, device=x.device)
        p_y = torch.arange(ph, dtype=x.dtype, device=x.device)
        p_x = torch.arange(pw, dtype=x.dtype, device=x.device)
        ys = (y1 + p_y[:, None] * bh + (iy[None, :] + 0.5) * bh / gh).reshape(-1)    # (ph * gh,)
        xs = (x1 + p_x[:, None] * bw + (ix[None, :] + 0.5) * bw / gw).reshape(-1)    # (pw * gw,)

        def axis(v, size):
            inside = (v >= -1.0) & (v <= size)
            v = torch.clamp(v, min=0)
            lo = v.long()
            top = lo >= size - 1
            lo = torch.where(top, torch.full_like(lo, size - 1), lo)
            hi = torch.where(top, lo, lo + 1)
            v = torch.where(top, lo.to(v.dtype), v)
            frac = v - lo.to(v.dtype)
            return lo, hi, 1 - frac, frac, inside
        y_lo, y_hi, hy, ly, in_y = axis(ys, height)
        x_lo, x_hi, hx, lx, in_x = axis(xs, width)
        img = x[b]
        w = (in_y[:, None] & in_x[None, :]).to(x.dtype)
        val = (hy[:, None] * hx[None, :] * img[:, y_lo][:, :, x_lo] + hy[:, None] * lx[None, :] * img[:, y_lo][:, :, x_hi]
               + ly[:, None] * hx[None, :] * img[:, y_hi][:, :, x_lo] + ly[:, None] * lx[None, :] * img[:, y_hi][:, :, x_hi])
        val = (val * w).reshape(c, ph, gh, pw, gw)
        out[r] = val.sum(dim=(2, 4)) / (gh * gw)
    return out
'''


def _roi_align(a, attrs, node):
    if parse_attr(attrs.get("position_sensitive"), False):
        raise TranslationError("MXNet op _contrib_ROIAlign(position_sensitive=True) has no translation (R-FCN's "
                               "position-sensitive pooling); register one with dualdl.port.register_translation",
                               op=node.op, block=node.block, path=node.path)
    pooled = parse_attr(attrs.get("pooled_size"))
    pooled = (pooled, pooled) if isinstance(pooled, int) else tuple(pooled)
    scale = float(np.float32(parse_attr(attrs.get("spatial_scale"), 1.0)))   # MXNet keeps it as a C++ float
    ratio = int(parse_attr(attrs.get("sample_ratio"), -1))
    aligned = bool(parse_attr(attrs.get("aligned"), False))
    return Expr(f"roi_align({a[0].text}, {a[1].text}, {pooled!r}, {scale!r}, {ratio}, {aligned})", helpers=(ROI_ALIGN,))


op("_contrib_ROIAlign", torch="roi_align(x, rois, pooled, spatial_scale, sample_ratio, aligned)")(_roi_align)


ROI_POOL = '''def roi_pool(x, rois, pooled, spatial_scale):
    """MXNet ROIPooling (Fast R-CNN): (R, C, ph, pw), the max of each bin of the ROI rounded to whole
    pixels (round half away from zero, at least 1x1); an empty bin gives 0; no gradient to the rois."""
    rois = rois.detach()
    n, c, height, width = x.shape
    ph, pw = pooled
    out = []
    for r in range(rois.shape[0]):
        b = int(rois[r, 0])
        box = rois[r, 1:] * spatial_scale
        x1, y1, x2, y2 = [int(torch.sign(v) * torch.floor(v.abs() + 0.5)) for v in box]
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)

        def edges(p, size, start, limit):
            i = torch.arange(p, dtype=torch.float64)
            lo = torch.floor(i * (size / p)).long() + start
            hi = torch.ceil((i + 1) * (size / p)).long() + start
            return lo.clamp(0, limit), hi.clamp(0, limit)
        hs, he = edges(ph, rh, y1, height)
        ws, we = edges(pw, rw, x1, width)
        ys, xs = torch.arange(height), torch.arange(width)
        my = ((ys[None, :] >= hs[:, None]) & (ys[None, :] < he[:, None])).to(x.device)     # (ph, H)
        mx = ((xs[None, :] >= ws[:, None]) & (xs[None, :] < we[:, None])).to(x.device)     # (pw, W)
        img = x[b]
        low = torch.finfo(x.dtype).min
        over_w = torch.where(mx[None, None], img[:, :, None, :], low).amax(-1)            # (C, H, pw)
        over_h = torch.where(my[None, :, :, None], over_w[:, None], low).amax(2)           # (C, ph, pw)
        empty = ~(my.any(1)[:, None] & mx.any(1)[None, :])
        out.append(torch.where(empty[None], torch.zeros_like(over_h), over_h))
    return torch.stack(out) if out else x.new_zeros((0, c, ph, pw))
'''


@op("ROIPooling", "_npx_roi_pooling")
def _roi_pooling(a, attrs, node):
    """roi_pool(x, rois, pooled, spatial_scale) (per-bin max, MXNet's rounding)"""
    pooled = parse_attr(attrs.get("pooled_size"))
    pooled = (pooled, pooled) if isinstance(pooled, int) else tuple(pooled)
    scale = float(np.float32(parse_attr(attrs.get("spatial_scale"), 1.0)))
    return Expr(f"roi_pool({a[0].text}, {a[1].text}, {pooled!r}, {scale!r})", helpers=(ROI_POOL,))
