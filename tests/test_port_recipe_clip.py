"""translate_recipe(clip_global_norm=max_norm): ``clip_gradients(model)`` is gluonnlp's
``clip_grad_global_norm`` in torch-only source (gradients divided by max(1, norm/max_norm), no
epsilon), measured against gluonnlp on the same gradients; torch's clip_grad_norm_ is not it."""
import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
nlp = pytest.importorskip("gluonnlp")

from dualdl.port.recipe import RecipeError, translate_recipe  # noqa: E402


@pytest.mark.parametrize("max_norm", [0.05, 1e3])
def test_clip_gradients_is_gluonnlps_clip(max_norm):
    rng = np.random.default_rng(0)
    shapes = [(7, 5), (7,), (3, 7), (3,)]
    grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    params = []
    for i, (s, g) in enumerate(zip(shapes, grads)):
        p = mx.gluon.Parameter(f"p{i}", shape=s)
        p.initialize()
        p.grad()[:] = mx.nd.array(g)
        params.append(p)
    norm_g = nlp.utils.clip_grad_global_norm(params, max_norm)
    model = torch.nn.Module()
    for i, g in enumerate(grads):
        w = torch.nn.Parameter(torch.zeros(g.shape))
        w.grad = torch.from_numpy(g.copy())
        model.register_parameter(f"p{i}", w)
    recipe = translate_recipe(clip_global_norm=max_norm)
    assert "import mxnet" not in recipe.source and "dualdl" not in recipe.source.split('"""', 2)[2]
    norm_t = recipe.load().clip_gradients(model)
    assert abs(norm_t - norm_g) < 1e-5 * norm_g
    for p, w in zip(params, model.parameters()):
        assert np.abs(w.grad.numpy() - p.grad().asnumpy()).max() < 1e-7
    if max_norm < norm_g:      # active: torch's clip_grad_norm_ lands elsewhere (its + 1e-6)
        t = [torch.from_numpy(g.copy()) for g in grads]
        ws = [torch.nn.Parameter(torch.zeros(g.shape)) for g in grads]
        for w, g in zip(ws, t):
            w.grad = g
        torch.nn.utils.clip_grad_norm_(ws, max_norm)
        ratio = ws[0].grad.double().norm() / torch.from_numpy(params[0].grad().asnumpy()).double().norm()
        assert abs(float(ratio) - 1) > 1e-8


def test_a_bad_max_norm_is_named():
    with pytest.raises(RecipeError, match="clip_global_norm= must be the positive max_norm"):
        translate_recipe(clip_global_norm=-1)
