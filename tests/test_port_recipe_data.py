"""translate_recipe(transforms=..., loader=...): vision transforms as generated torch functions
compared on real photos shipped with installed packages (scikit-learn's china.jpg / flower.jpg,
matplotlib's grace_hopper.jpg, decoded by MXNet): deterministic ones and RandomResizedCrop /
gluon-cv RandomCrop (same Python seed) equal Gluon's output bit for bit; MXNet-RNG ones (flip,
jitter, lighting) have the same distribution and, at fixed factors, the same pixels. The
DataLoader's batch order (shuffle on numpy's global RNG, last_batch keep/discard/rollover) is
reproduced exactly."""
import importlib.util
import os
import random

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

from dualdl.port.recipe import RecipeError, translate_recipe  # noqa: E402
from dualdl.port.recipe.torch_src import transforms as TT  # noqa: E402


def _photos():
    out = []
    for mod, rel in (("sklearn", "datasets/images/china.jpg"),
                     ("sklearn", "datasets/images/flower.jpg"),
                     ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg")):
        spec = importlib.util.find_spec(mod)
        if spec is not None:
            path = os.path.join(os.path.dirname(spec.origin), rel)
            if os.path.exists(path):
                out.append(path)
    if not out:
        pytest.skip("no photo shipped with an installed package (scikit-learn, matplotlib)")
    return out


@pytest.fixture(scope="module")
def photos():
    return [mx.image.imread(p) for p in _photos()]


def _t(img):
    return torch.from_numpy(img.asnumpy())


def _gluoncv_block():
    spec = importlib.util.find_spec("gluoncv")
    if spec is None:
        pytest.skip("gluoncv not installed")
    path = os.path.join(os.path.dirname(spec.origin), "data", "transforms", "block.py")
    s = importlib.util.spec_from_file_location("gluoncv_transforms_block", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


SIZES = [(224, 224), (256, 171), (33, 17), (1000, 900), (5, 3), (100, 333)]


def test_resize_is_opencv_bit_for_bit(photos):
    for img in photos:
        h, w = img.shape[:2]
        for size in SIZES + [(w // 2, h // 2), (w, h)]:
            ours = TT.imresize(_t(img), *size).numpy()
            np.testing.assert_array_equal(ours, mx.image.imresize(img, *size, interp=1).asnumpy(),
                                          err_msg=str(size))


def test_imagenet_pipelines_equal_gluon(photos):
    """val: Resize(256, keep_ratio) + CenterCrop(224) + ToTensor + Normalize; train:
    RandomResizedCrop(224) + ToTensor + Normalize, both seeded with random.seed(s)."""
    from mxnet.gluon.data.vision import transforms as T
    norm = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    val = T.Compose([T.Resize(256, keep_ratio=True), T.CenterCrop(224), T.ToTensor(), norm])
    train = T.Compose([T.RandomResizedCrop(224), T.ToTensor(), norm])
    mod = translate_recipe(transforms={"val": val, "train": train}).load()
    for img in photos:
        np.testing.assert_array_equal(mod.transform_val(_t(img)).numpy(), val(img).asnumpy())
        for seed in range(6):
            random.seed(seed)
            want = train(img).asnumpy()
            random.seed(seed)
            np.testing.assert_array_equal(mod.transform_train(_t(img)).numpy(), want)


def test_cifar_pipeline_with_gluoncv_random_crop(photos):
    """gluon-cv train_cifar10.py: RandomCrop(32, pad=4) + RandomFlipLeftRight + ToTensor +
    Normalize; the crop equals Gluon's with the same Python seed, the flip is a coin on torch's
    RNG (checked: the output is Gluon's output or its mirror, and both happen)."""
    from mxnet.gluon.data.vision import transforms as T
    block = _gluoncv_block()
    norm = T.Normalize([0.4914, 0.4822, 0.4465], [0.2023, 0.1994, 0.2010])
    pipe = T.Compose([block.RandomCrop(32, pad=4), T.RandomFlipLeftRight(), T.ToTensor(), norm])
    no_flip = T.Compose([block.RandomCrop(32, pad=4), T.ToTensor(), norm])
    mod = translate_recipe(transforms=pipe).load()
    small = mx.image.imresize(photos[0], 32, 32, interp=1)
    seen = set()
    gen = torch.Generator().manual_seed(0)
    for seed in range(12):
        random.seed(seed)
        want = no_flip(small).asnumpy()
        random.seed(seed)
        got = mod.transform_train(_t(small), gen).numpy()
        flipped = not np.array_equal(got, want)
        if flipped:
            np.testing.assert_array_equal(got, want[:, :, ::-1])
        seen.add(flipped)
    assert seen == {True, False}


@pytest.mark.parametrize("factor", [0.55, 1.4])
def test_colour_ops_at_fixed_factor(photos, factor):
    """MXNet's random_* ops with min == max factor are deterministic: brightness, contrast,
    saturation (with MXNet's blue-only grey) and lighting equal bit for bit; hue differs by 1 at
    <= 0.04% of the pixels (MXNet's compiled float32 HLS arithmetic)."""
    F = mx.nd.image
    for img in photos:
        x = _t(img)
        for ours, theirs in ((TT.adjust_brightness, F.random_brightness),
                             (TT.adjust_contrast, F.random_contrast),
                             (TT.adjust_saturation, F.random_saturation)):
            np.testing.assert_array_equal(ours(x, factor).numpy(),
                                          theirs(img, factor, factor).asnumpy())
        d = TT.adjust_hue(x, factor / 4).numpy().astype(int) - \
            F.random_hue(img, factor / 4, factor / 4).asnumpy().astype(int)
        assert np.abs(d).max() <= 1 and (d != 0).mean() < 1e-3
        alpha = (0.1 * factor, -0.2, 0.05)
        np.testing.assert_array_equal(TT.adjust_lighting(x, alpha).numpy(),
                                      F.adjust_lighting(img, alpha=alpha).asnumpy())


def test_random_ops_have_gluons_distribution(photos):
    """Per-image mean brightness after RandomColorJitter / RandomLighting / RandomBrightness over
    300 draws: two-sample KS test against Gluon's draws."""
    stats = pytest.importorskip("scipy.stats")
    from mxnet.gluon.data.vision import transforms as T
    img = mx.image.imresize(photos[0], 48, 32, interp=1)
    pipes = {"jitter": T.RandomColorJitter(0.4, 0.4, 0.4, 0.1),
             "lighting": T.RandomLighting(0.1), "brightness": T.RandomBrightness(0.3),
             "flip": T.RandomFlipLeftRight()}
    mod = translate_recipe(transforms=pipes).load()
    gen = torch.Generator().manual_seed(0)
    mx.random.seed(0)
    x = _t(img)
    for name, pipe in pipes.items():
        fn = getattr(mod, f"transform_{name}")
        if name == "flip":
            a = [float(pipe(img).asnumpy()[:, 0].mean()) for _ in range(300)]
            b = [float(fn(x, gen).numpy()[:, 0].mean()) for _ in range(300)]
            left = float(img.asnumpy()[:, 0].mean())
            pa, pb = np.mean(np.isclose(a, left)), np.mean(np.isclose(b, left))
            assert abs(pa - 0.5) < 0.1 and abs(pb - 0.5) < 0.1, (pa, pb)
            continue
        a = [float(pipe(img).asnumpy().astype(np.float64).mean()) for _ in range(300)]
        b = [float(fn(x, gen).numpy().astype(np.float64).mean()) for _ in range(300)]
        assert stats.ks_2samp(a, b).pvalue > 1e-3, name


def test_unsupported_transform_is_named():
    from mxnet.gluon.data.vision import transforms as T
    with pytest.raises(RecipeError, match="RandomRotation has no translation"):
        translate_recipe(transforms=T.Compose([T.RandomRotation((-10, 10)), T.ToTensor()]))
    with pytest.raises(RecipeError, match="interpolation=2"):
        translate_recipe(transforms=T.Resize(32, interpolation=2))


@pytest.mark.parametrize("last_batch", ["keep", "discard", "rollover"])
@pytest.mark.parametrize("shuffle", [True, False])
def test_batch_order_equals_gluon_dataloader(shuffle, last_batch):
    """3 epochs of gluon.data.DataLoader(ArrayDataset(arange(23)), batch_size=5) vs the generated
    batch sampler in a torch DataLoader, both after np.random.seed(7): identical batches."""
    from mxnet import gluon
    ds = gluon.data.ArrayDataset(np.arange(23))
    loader = gluon.data.DataLoader(ds, batch_size=5, shuffle=shuffle, last_batch=last_batch)
    mod = translate_recipe(loader=loader).load()
    np.random.seed(7)
    want = [[b.asnumpy().tolist() for b in loader] for _ in range(3)]
    sampler = mod.make_batch_sampler()
    tl = torch.utils.data.DataLoader(torch.arange(23), batch_sampler=sampler)
    np.random.seed(7)
    got = [[b.tolist() for b in tl] for _ in range(3)]
    assert got == want
    assert len(sampler) == len(loader)
