"""Vision transform pipelines as source: each ``gluon.data.vision.transforms`` pipeline becomes
``transform_<name>(img, generator=None)`` over an HWC uint8 torch tensor, calling the torch
functions of torch_src/transforms.py (no torchvision: it cannot be installed beside this torch,
and its bilinear resize is not OpenCV's)."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from .emit import RecipeError, SourceFile, lit

_SRC = "dualdl.port.recipe.torch_src.transforms"
_BASE = ["_f32", "Size", "_wh"]


def _flatten(block: Any) -> List[Any]:
    """Compose / (Hybrid)Sequential children in order (Compose groups hybrid runs)."""
    kind = type(block).__name__
    if kind in ("Compose", "Sequential", "HybridSequential") and hasattr(block, "_children"):
        out = []
        for child in block._children.values():
            out += _flatten(child)
        return out
    return [block]


def _step(t: Any, need: List[str]) -> Tuple[str, List[str]]:
    """(python statement, notes) for one transform."""
    kind = type(t).__name__
    mod = type(t).__module__
    gen = "generator"
    if kind == "ToTensor":
        need.append("to_tensor")
        return "img = to_tensor(img)", []
    if kind == "Normalize":
        need.append("normalize")
        return f"img = normalize(img, {lit(_plain(t._mean))}, {lit(_plain(t._std))})", []
    if kind == "Cast":
        return f"img = img.to(torch.{_plain(t._dtype)})", []
    if kind == "Resize":
        _bilinear(t._interpolation, kind)
        need += ["_coeffs", "imresize", "resize"]
        return (f"img = resize(img, {lit(_plain(t._size))}, keep_ratio={lit(bool(t._keep))}, "
                f"interp={lit(int(t._interpolation))})"), []
    if kind == "CenterCrop":
        size, interp = t._args
        _bilinear(interp, kind)
        need += ["_coeffs", "imresize", "scale_down", "fixed_crop", "center_crop"]
        return f"img = center_crop(img, {lit(_plain(size))}, interp={lit(int(interp))})", []
    if kind == "RandomResizedCrop":
        size, scale, ratio, interp = t._args
        _bilinear(interp, kind)
        need += ["_coeffs", "imresize", "scale_down", "fixed_crop", "center_crop",
                 "random_resized_crop"]
        return (f"img = random_resized_crop(img, {lit(_plain(size))}, {lit(_plain(scale))}, "
                f"{lit(_plain(ratio))}, interp={lit(int(interp))})",
                ["RandomResizedCrop draws its box with Python's random as Gluon does: "
                 "random.seed(s) on both sides gives the same boxes"])
    if kind == "RandomCrop" and "gluoncv" in mod or (kind == "RandomCrop" and hasattr(t, "pad")):
        size, interp = t._args
        need += ["_coeffs", "imresize", "scale_down", "fixed_crop", "random_crop"]
        return (f"img = random_crop(img, {lit(_plain(size))}, pad={lit(_plain(t.pad))}, "
                f"interp={lit(int(interp))})", [])
    if kind in ("RandomFlipLeftRight", "RandomFlipTopBottom"):
        fn = "random_flip_left_right" if kind == "RandomFlipLeftRight" else "random_flip_top_bottom"
        need += ["_coin", fn]
        return f"img = {fn}(img, {gen})", [f"{kind}: torch's RNG (MXNet's is its own)"]
    single = {"RandomBrightness": "adjust_brightness", "RandomContrast": "adjust_contrast",
              "RandomSaturation": "adjust_saturation", "RandomHue": "adjust_hue"}
    if kind in single:
        lo, hi = t._args
        need += ["_saturate", "_uniform", single[kind]] + \
            (["_rgb_to_hls", "_hls_to_rgb"] if kind == "RandomHue" else [])
        return (f"img = {single[kind]}(img, _uniform({lit(float(lo))}, {lit(float(hi))}, "
                f"{gen}))", [f"{kind}: factor from torch's RNG"])
    if kind == "RandomColorJitter":
        need += ["_saturate", "_uniform", "adjust_brightness", "adjust_contrast",
                 "adjust_saturation", "_rgb_to_hls", "_hls_to_rgb", "adjust_hue",
                 "random_color_jitter"]
        b, c, s, h = (float(v) for v in t._args)
        return (f"img = random_color_jitter(img, {lit(b)}, {lit(c)}, {lit(s)}, {lit(h)}, {gen})",
                ["RandomColorJitter: order and factors from torch's RNG"])
    if kind == "RandomLighting":
        need += ["_saturate", "_EIG", "adjust_lighting", "random_lighting"]
        return (f"img = random_lighting(img, {lit(float(t._alpha))}, {gen})",
                ["RandomLighting: alphas from torch's RNG"])
    raise RecipeError(f"vision transform {mod}.{kind} has no translation; supported: ToTensor, "
                      f"Normalize, Cast, Resize, CenterCrop, RandomResizedCrop, RandomCrop "
                      f"(gluon-cv), RandomFlipLeftRight/TopBottom, RandomBrightness/Contrast/"
                      f"Saturation/Hue, RandomColorJitter, RandomLighting (in a Compose)")


def _bilinear(interp: int, kind: str) -> None:
    if int(interp) != 1:
        raise RecipeError(f"{kind}(interpolation={interp}) has no bit-exact translation; only "
                          f"bilinear (1, Gluon's default) is translated")


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, type):
        return v.__name__
    return v


def emit_transforms(sf: SourceFile, transforms: Any) -> List[str]:
    """``transforms``: one pipeline (-> ``transform_train``) or a dict name -> pipeline."""
    pipes: Dict[str, Any] = transforms if isinstance(transforms, dict) else {"train": transforms}
    notes: List[str] = []
    for name, pipe in pipes.items():
        if not str(name).isidentifier():
            raise RecipeError(f"transforms= key {name!r} must be a Python identifier (it names "
                              f"transform_{name})")
        need: List[str] = []
        lines = []
        for t in _flatten(pipe):
            line, why = _step(t, need)
            lines.append("    " + line)
            notes += [n for n in why if n not in notes]
        sf.use(_SRC, _BASE + list(dict.fromkeys(need)))
        body = "\n".join(lines) if lines else "    pass"
        desc = ", ".join(type(t).__name__ for t in _flatten(pipe))
        sf.add(f'''
def transform_{name}(img: torch.Tensor,
                     generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Gluon's {desc} on an HWC uint8 image tensor."""
{body}
    return img
''', f"transform_{name}")
    return notes
