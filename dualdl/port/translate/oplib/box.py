"""MXNet's box ops (gluoncv's detection heads) -> torch: ``_contrib_box_nms`` and
``_contrib_box_decode``, each reproducing MXNet's exact semantics, measured against MXNet.

``box_nms`` (MXNet 1.9.1, measured): a row is a candidate when its score is strictly above
``valid_thresh`` and, with an ``id_index``, its id is not ``background_id`` (-1 by default, so id -1
rows are dropped); candidates are sorted by score, ties kept in input order, cut to ``topk``; greedy
suppression drops a later candidate whose IoU with a kept one is strictly above ``overlap_thresh``
(same id only, unless ``force_suppress``), the area of an inverted box being 0; the output has the
input's shape: kept rows in score order, then rows of -1. Its gradient goes to the kept rows only.
``box_decode``: gluoncv's NormalizedBoxCenterDecoder formula with MXNet's float32 std/clip values, and
MXNet's gradient for it: none (its backward is zero, measured)."""
from __future__ import annotations

from ..conventions import float32_value
from ..errors import TranslationError
from .base import Expr, op, parse_attr

__all__ = ["BOX_NMS", "BOX_DECODE", "BOX_ENCODE"]

BOX_NMS = '''def box_nms(x, overlap_thresh, valid_thresh, topk, coord_start, score_index, id_index, background_id,
            force_suppress, center):
    """MXNet _contrib_box_nms: the input's shape, kept rows first in score order (ties in input order),
    then rows of -1; candidates score > valid_thresh and id != background_id; IoU > overlap_thresh
    suppresses (same id unless force_suppress); the gradient reaches the kept rows only."""
    rows_all = x.reshape(-1, x.shape[-2], x.shape[-1])
    out = []
    for rows in rows_all:
        score = rows[:, score_index].detach()
        valid = score > valid_thresh
        if id_index >= 0:
            valid = valid & (rows[:, id_index].detach() != background_id)
        idx = torch.nonzero(valid).flatten()
        idx = idx[torch.sort(score[idx], descending=True, stable=True).indices]
        if topk > 0:
            idx = idx[:topk]
        # the suppression decisions on the CPU, one kept box against the later ones at a time (RPNs sort
        # 6000 candidates: a 6000 x 6000 IoU matrix would take gigabytes)
        box = rows[idx, coord_start:coord_start + 4].detach().cpu()
        if center:
            w, h = box[:, 2], box[:, 3]
            x1, y1, x2, y2 = box[:, 0] - w / 2, box[:, 1] - h / 2, box[:, 0] + w / 2, box[:, 1] + h / 2
        else:
            x1, y1, x2, y2 = box.unbind(1)
            w, h = x2 - x1, y2 - y1
        area = torch.where((w < 0) | (h < 0), torch.zeros_like(w), w * h)
        ids = rows[idx, id_index].detach().cpu() if id_index >= 0 and not force_suppress else None
        removed = torch.zeros(len(idx), dtype=torch.bool)
        keep = []
        for i in range(len(idx)):
            if removed[i]:
                continue
            keep.append(i)
            rest = slice(i + 1, len(idx))
            iw = (torch.minimum(x2[i], x2[rest]) - torch.maximum(x1[i], x1[rest])).clamp(min=0)
            ih = (torch.minimum(y2[i], y2[rest]) - torch.maximum(y1[i], y1[rest])).clamp(min=0)
            inter = iw * ih
            over = inter / (area[i] + area[rest] - inter) > overlap_thresh
            if ids is not None:
                over = over & (ids[rest] == ids[i])
            removed[rest] |= over
        kept = rows[idx[torch.tensor(keep, dtype=torch.long, device=idx.device)]]
        pad = rows.new_full((rows.shape[0] - kept.shape[0], rows.shape[1]), -1)
        out.append(torch.cat([kept, pad], dim=0))
    return torch.stack(out).reshape(x.shape)
'''

BOX_DECODE = '''def box_decode(x, anchors, std, clip, corner_anchors):
    """MXNet _contrib_box_decode (gluoncv NormalizedBoxCenterDecoder): deltas (B, N, 4) on anchors
    (1, N, 4) to corner boxes; std and clip are MXNet's float32 attribute values. No gradient: MXNet's
    backward of this op is zero (detectors train on the deltas, decoding only for inference)."""
    x, anchors = x.detach(), anchors.detach()
    if corner_anchors:
        aw, ah = anchors[..., 2] - anchors[..., 0], anchors[..., 3] - anchors[..., 1]
        ax, ay = anchors[..., 0] + aw * 0.5, anchors[..., 1] + ah * 0.5
    else:
        ax, ay, aw, ah = anchors.unbind(-1)
    ox = x[..., 0] * std[0] * aw + ax
    oy = x[..., 1] * std[1] * ah + ay
    dw, dh = x[..., 2] * std[2], x[..., 3] * std[3]
    if clip > 0:
        dw, dh = torch.clamp(dw, max=clip), torch.clamp(dh, max=clip)
    dw, dh = torch.exp(dw) * aw * 0.5, torch.exp(dh) * ah * 0.5
    return torch.stack([ox - dw, oy - dh, ox + dw, oy + dh], dim=-1)
'''


def _box_nms(a, attrs, node):
    fin, fout = attrs.get("in_format", "corner"), attrs.get("out_format", "corner")
    if fin != fout:
        raise TranslationError(f"MXNet op {node.op}(in_format={fin!r}, out_format={fout!r}) has no translation: "
                               f"MXNet converts the kept boxes but passes gradients back unconverted; give both "
                               f"formats the same value, or register a translation", op=node.op, block=node.block,
                               path=node.path)
    args = (float32_value(parse_attr(attrs.get("overlap_thresh"), 0.5)),
            float32_value(parse_attr(attrs.get("valid_thresh"), 0.0)),
            int(parse_attr(attrs.get("topk"), -1)), int(parse_attr(attrs.get("coord_start"), 2)),
            int(parse_attr(attrs.get("score_index"), 1)), int(parse_attr(attrs.get("id_index"), -1)),
            float32_value(parse_attr(attrs.get("background_id"), -1)),
            bool(parse_attr(attrs.get("force_suppress"), False)),
            fin == "center")
    return Expr(f"box_nms({a[0].text}, {', '.join(repr(v) for v in args)})", helpers=(BOX_NMS,))


def _box_decode(a, attrs, node):
    std = tuple(float32_value(parse_attr(attrs.get(f"std{i}"), 1.0)) for i in range(4))
    clip = float32_value(parse_attr(attrs.get("clip"), -1.0))
    corner = attrs.get("format", "center") == "corner"
    return Expr(f"box_decode({a[0].text}, {a[1].text}, {std!r}, {clip!r}, {corner})", helpers=(BOX_DECODE,))


BOX_ENCODE = '''def box_encode(samples, matches, anchors, refs, means, stds):
    """MXNet _contrib_box_encode (gluoncv NormalizedBoxCenterEncoder): for each anchor with sample > 0.5, its
    matched reference box (corner) as center offsets ((g - a) / a_size - mean) / std and log sizes; masks 1
    there, 0 elsewhere (targets 0). No gradient, as MXNet's backward of this op."""
    samples, matches, anchors, refs = samples.detach(), matches.detach(), anchors.detach(), refs.detach()
    ref = torch.gather(refs, 1, matches.long().clamp(min=0).unsqueeze(-1).expand(-1, -1, 4))
    aw, ah = anchors[..., 2] - anchors[..., 0], anchors[..., 3] - anchors[..., 1]
    ax, ay = anchors[..., 0] + aw * 0.5, anchors[..., 1] + ah * 0.5
    gw, gh = ref[..., 2] - ref[..., 0], ref[..., 3] - ref[..., 1]
    gx, gy = ref[..., 0] + gw * 0.5, ref[..., 1] + gh * 0.5
    t = torch.stack([(gx - ax) / aw, (gy - ay) / ah, torch.log(gw / aw), torch.log(gh / ah)], dim=-1)
    t = (t - means.detach()) / stds.detach()
    valid = (samples > 0.5).unsqueeze(-1)
    return torch.where(valid, t, torch.zeros_like(t)), valid.to(t.dtype).expand_as(t)
'''


@op("_contrib_box_encode", n_outputs=lambda attrs: 2)
def _box_encode(a, attrs, node):
    """box_encode(samples, matches, anchors, refs, means, stds) -> (targets, masks), no gradient"""
    return Expr(f"box_encode({', '.join(e.text for e in a)})", helpers=(BOX_ENCODE,))


op("_contrib_box_nms", "_contrib_box_non_maximum_suppression",
   torch="box_nms(x, ...) (MXNet's candidate order, ties and -1 padding)")(_box_nms)
op("_contrib_box_decode", torch="box_decode(x, anchors, std, clip, corner) (no gradient, as MXNet)")(_box_decode)
