"""Spatial ops -> torch.functional: ``im2col``/``col2im`` (F.unfold / F.fold), MXNet's spatial
transformer pieces ``GridGenerator`` (affine), ``BilinearSampler`` and ``SpatialTransformer``
(F.affine_grid / F.grid_sample with align_corners=True: MXNet's grid runs from -1 to 1 at the
corner pixels' centres; MXNet's grid is (N, 2, H, W), torch's (N, H, W, 2))."""
from __future__ import annotations

from .base import Expr, op, parse_attr, unsupported

__all__: list = []


def _pair(attrs, key, default):
    v = parse_attr(attrs.get(key), ())
    v = (v, v) if isinstance(v, int) else tuple(v)
    return v or (default, default)


def _unfold_args(attrs):
    return (_pair(attrs, "kernel", 1), _pair(attrs, "dilate", 1), _pair(attrs, "pad", 0), _pair(attrs, "stride", 1))


@op("im2col")
def _im2col(a, attrs, node):
    """F.unfold(x, kernel, dilate, pad, stride)"""
    k, d, p, s = _unfold_args(attrs)
    return Expr(f"F.unfold({a[0].text}, {k}, {d}, {p}, {s})")


@op("col2im")
def _col2im(a, attrs, node):
    """F.fold(x, output_size, kernel, dilate, pad, stride)"""
    k, d, p, s = _unfold_args(attrs)
    out = _pair(attrs, "output_size", 1)
    return Expr(f"F.fold({a[0].text}, {out}, {k}, {d}, {p}, {s})")


def _grid(theta: str, attrs, node, like: str = "") -> str:
    h, w = _pair(attrs, "target_shape", 0)
    if not (h and w):
        raise unsupported(node, f"{node.op} without target_shape")
    return (f"F.affine_grid({theta}.reshape(-1, 2, 3), [{theta}.shape[0], 1, {h}, {w}], align_corners=True)")


@op("GridGenerator", float32_only=True)   # "Other DTypes are not supported!" on float64
def _grid_generator(a, attrs, node):
    """F.affine_grid(theta.reshape(-1, 2, 3), (N, 1, H, W), align_corners=True).permute(0, 3, 1, 2)"""
    if attrs.get("transform_type", "affine") != "affine":
        raise unsupported(node, f"GridGenerator(transform_type={attrs['transform_type']!r})")
    return Expr(f"{_grid(a[0].p(), attrs, node)}.permute(0, 3, 1, 2)")


@op("BilinearSampler")
def _bilinear_sampler(a, attrs, node):
    """F.grid_sample(x, grid.permute(0, 2, 3, 1), align_corners=True) (zeros outside)"""
    if parse_attr(attrs.get("cudnn_off")) not in (None, False, True):
        raise unsupported(node, "BilinearSampler(cudnn_off=...)")
    return Expr(f"F.grid_sample({a[0].text}, {a[1].p()}.permute(0, 2, 3, 1), mode='bilinear', "
                f"padding_mode='zeros', align_corners=True)")


@op("SpatialTransformer")
def _spatial_transformer(a, attrs, node):
    """F.grid_sample(x, F.affine_grid(loc, ...), align_corners=True)"""
    if attrs.get("transform_type", "affine") != "affine" or attrs.get("sampler_type", "bilinear") != "bilinear":
        raise unsupported(node, "SpatialTransformer other than affine / bilinear")
    return Expr(f"F.grid_sample({a[0].text}, {_grid(a[1].p(), attrs, node)}, mode='bilinear', padding_mode='zeros', "
                f"align_corners=True)")
