"""MXNet's probability densities ``random_pdf_*(sample, params..., is_log)`` -> torch formulas:
the sample has the parameters' shape plus trailing axes (one density per sample value, the
parameters broadcast over those axes); ``is_log`` gives the log-density. MXNet's gamma is
parameterised by shape alpha and rate beta, its normal
with MXNet's float32 pi, its negative binomial by k failures and success
probability p, the generalized one by mean mu and dispersion alpha."""
from __future__ import annotations

from .base import Expr, op, parse_attr

__all__ = ["PDF"]

PDF = '''def pdf_b(p, x):
    return p.reshape(p.shape + (1,) * (x.dim() - p.dim()))


def pdf_normal(x, mu, sigma, log):
    mu, sigma = pdf_b(mu, x), pdf_b(sigma, x)
    out = -0.5 * ((x - mu) / sigma) ** 2 - torch.log(sigma) - 0.9189385471184401   # log(sqrt(2 float32(pi)))
    return out if log else torch.exp(out)


def pdf_uniform(x, low, high, log):
    low, high = pdf_b(low, x), pdf_b(high, x)
    out = -torch.log(high - low) + torch.zeros_like(x)
    return out if log else torch.exp(out)


def pdf_exponential(x, lam, log):
    lam = pdf_b(lam, x)
    out = torch.log(lam) - lam * x
    return out if log else torch.exp(out)


def pdf_gamma(x, alpha, beta, log):
    alpha, beta = pdf_b(alpha, x), pdf_b(beta, x)
    out = alpha * torch.log(beta) + (alpha - 1) * torch.log(x) - beta * x - torch.lgamma(alpha)
    return out if log else torch.exp(out)


def pdf_poisson(x, lam, log):
    lam = pdf_b(lam, x)
    out = x * torch.log(lam) - lam - torch.lgamma(x + 1)
    return out if log else torch.exp(out)


def pdf_negative_binomial(x, k, p, log):
    k, p = pdf_b(k, x), pdf_b(p, x)
    out = torch.lgamma(x + k) - torch.lgamma(x + 1) - torch.lgamma(k) + k * torch.log(p) + x * torch.log(1 - p)
    return out if log else torch.exp(out)


def pdf_generalized_negative_binomial(x, mu, alpha, log):
    k, p = 1 / pdf_b(alpha, x), 1 / (1 + pdf_b(alpha, x) * pdf_b(mu, x))
    out = torch.lgamma(x + k) - torch.lgamma(x + 1) - torch.lgamma(k) + k * torch.log(p) + x * torch.log(1 - p)
    return out if log else torch.exp(out)


def pdf_dirichlet(x, alpha, log):
    alpha = alpha.reshape(alpha.shape[:-1] + (1,) * (x.dim() - alpha.dim()) + alpha.shape[-1:])
    out = (torch.lgamma(alpha.sum(-1)) - torch.lgamma(alpha).sum(-1) + ((alpha - 1) * torch.log(x)).sum(-1))
    return out if log else torch.exp(out)
'''


def _pdf(kind: str):
    def fn(a, attrs, node):
        log = bool(parse_attr(attrs.get("is_log"), False))
        return Expr(f"pdf_{kind}({', '.join(e.text for e in a)}, {log})", helpers=(PDF,))
    fn.torch_form = f"pdf_{kind}(sample, params..., is_log) (the density's formula)"
    return fn


for _k in ("normal", "uniform", "exponential", "poisson", "negative_binomial", "generalized_negative_binomial"):
    op(f"random_pdf_{_k}", f"_random_pdf_{_k}")(_pdf(_k))
# measured: MXNet computes these densities' gradients (digamma) in float32 (Dirichlet 9.6e-7, gamma 2.3e-8 off
# torch's float64)
op("random_pdf_dirichlet", "_random_pdf_dirichlet", float32_internal=True,
   float32_note="its gradient (digamma) is 9.6e-7 off")(_pdf("dirichlet"))
op("random_pdf_gamma", "_random_pdf_gamma", float32_internal=True, float32_note="its gradient (digamma) is 2.3e-8 off")(
    _pdf("gamma"))
