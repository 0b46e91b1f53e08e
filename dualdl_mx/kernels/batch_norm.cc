// dl_batch_norm: BatchNorm with batch statistics, summed in float64, for float32 (or float64) input.
//
// Why (MXNet difference hidden here): MXNet's float32 BatchNorm operator (MKLDNN) sums in float32
// and is 7.6-18x less precise than torch's (2.4e-6 against 1.3e-7 on ordinary activations); running
// MXNet's operator in float64 instead needs a float64 copy of the input and casts both ways. This
// operator reads the float32 input once per pass and sums in float64: exact to float32 rounding.
//
// inputs:  x (N, C, *), gamma (C), beta (C), all of x's dtype
// outputs: y (x's shape and dtype), mean (C, float64), unbiased var (C, float64; the biased one
//          times n/(n-1), 1 when n == 1: torch's running-variance update), inv_std (C, float64,
//          1/sqrt(biased var + eps), kept for backward)
// attrs:   eps
// Backward writes its outputs (MXNet's library operators do not see the request type): callers
// give it gamma and beta through an identity op, and x too when x is a leaf (see dualdl_mx/norm.py).
//
// Sums run in LANES fixed partial sums (lane = index mod LANES within a row), combined in a fixed
// order, lanes computed as one vector, and the build turns off contraction into FMA: the same
// result on every instruction set.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "mxnet/lib_api.h"

using namespace mxnet::ext;

namespace {

constexpr int LANES = 8;
#define DL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// LANES doubles / floats as one vector (GCC vector extensions: one zmm with AVX-512, two ymm with
// AVX2, four xmm otherwise; lanes are independent, so the numbers are the same on each)
typedef double vd __attribute__((vector_size(LANES * sizeof(double))));
typedef float vf __attribute__((vector_size(LANES * sizeof(float))));

inline vd load(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof(v));
  return __builtin_convertvector(v, vd);
}
inline vd load(const double* p) {
  vd v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store(float* p, vd v) {
  const vf f = __builtin_convertvector(v, vf);
  std::memcpy(p, &f, sizeof(f));
}
inline void store(double* p, vd v) { std::memcpy(p, &v, sizeof(v)); }
inline double total(vd v) {                          // a fixed order
  double t = 0;
  for (int j = 0; j < LANES; ++j) t += v[j];
  return t;
}

struct Dims {
  int64_t n, c, s;   // x viewed as (N, C, S)
};

Dims dims_of(const MXTensor& t) {
  Dims d{t.shape[0], t.shape[1], 1};
  for (size_t i = 2; i < t.shape.size(); ++i) d.s *= t.shape[i];
  return d;
}

double eps_of(const std::unordered_map<std::string, std::string>& attrs) {
  auto it = attrs.find("eps");
  return it == attrs.end() ? 1e-5 : std::stod(it->second);
}

// sum of (x - k) and of (x - k)^2 over channel c; k is a value of the channel, so the float64
// single pass does not cancel (|mean - k| is of the order of the standard deviation)
template <typename T>
DL_CLONES void shifted_sums(const T* x, Dims d, int64_t c, double k, double* s1, double* s2) {
  const vd kv = vd{} + k;
  vd a = {}, q = {};
  for (int64_t n = 0; n < d.n; ++n) {
    const T* p = x + (n * d.c + c) * d.s;
    int64_t i = 0;
    for (; i + LANES <= d.s; i += LANES) {
      const vd t = load(p + i) - kv;
      a += t;
      q += t * t;
    }
    for (; i < d.s; ++i) {
      const double t = double(p[i]) - k;
      a[i % LANES] += t;
      q[i % LANES] += t * t;
    }
  }
  *s1 = total(a);
  *s2 = total(q);
}

template <typename T>
DL_CLONES void normalize_channel(const T* x, T* y, Dims d, int64_t c, double m, double scale, double shift) {
  const vd mv = vd{} + m, sv = vd{} + scale, hv = vd{} + shift;
  for (int64_t n = 0; n < d.n; ++n) {
    const T* p = x + (n * d.c + c) * d.s;
    T* o = y + (n * d.c + c) * d.s;
    int64_t i = 0;
    for (; i + LANES <= d.s; i += LANES) store(o + i, (load(p + i) - mv) * sv + hv);
    for (; i < d.s; ++i) o[i] = T((double(p[i]) - m) * scale + shift);
  }
}

template <typename T>
void forward_impl(const T* x, const T* gamma, const T* beta, T* y, double* mean, double* var,
                  double* inv_std, Dims d, double eps) {
  const double cnt = double(d.n) * double(d.s);
  const double bessel = cnt > 1 ? cnt / (cnt - 1) : 1.0;
  for (int64_t c = 0; c < d.c; ++c) {
    const double k = double(x[c * d.s]);
    double s1, s2;
    shifted_sums(x, d, c, k, &s1, &s2);
    const double dm = s1 / cnt;
    const double v = std::max(s2 / cnt - dm * dm, 0.0);   // NaN stays NaN
    const double inv = 1.0 / std::sqrt(v + eps);
    mean[c] = k + dm;
    var[c] = v * bessel;
    inv_std[c] = inv;
    normalize_channel(x, y, d, c, k + dm, double(gamma[c]) * inv, double(beta[c]));
  }
}

// sum of dy and of dy * (x - mean) over channel c
template <typename T>
DL_CLONES void grad_sums(const T* dy, const T* x, Dims d, int64_t c, double m, double* s1, double* s2) {
  const vd mv = vd{} + m;
  vd a = {}, q = {};
  for (int64_t n = 0; n < d.n; ++n) {
    const T* p = x + (n * d.c + c) * d.s;
    const T* g = dy + (n * d.c + c) * d.s;
    int64_t i = 0;
    for (; i + LANES <= d.s; i += LANES) {
      const vd t = load(g + i);
      a += t;
      q += t * (load(p + i) - mv);
    }
    for (; i < d.s; ++i) {
      const double t = double(g[i]);
      a[i % LANES] += t;
      q[i % LANES] += t * (double(p[i]) - m);
    }
  }
  *s1 = total(a);
  *s2 = total(q);
}

// dx = gamma * inv_std * (dy - mean(dy) - x_hat * mean(dy * x_hat))
template <typename T>
DL_CLONES void grad_channel(const T* dy, const T* x, T* dx, Dims d, int64_t c, double m, double k,
                            double mean_dy, double slope) {
  const vd mv = vd{} + m, kv = vd{} + k, av = vd{} + mean_dy, sv = vd{} + slope;
  for (int64_t n = 0; n < d.n; ++n) {
    const T* p = x + (n * d.c + c) * d.s;
    const T* g = dy + (n * d.c + c) * d.s;
    T* o = dx + (n * d.c + c) * d.s;
    int64_t i = 0;
    for (; i + LANES <= d.s; i += LANES) store(o + i, kv * (load(g + i) - av - (load(p + i) - mv) * sv));
    for (; i < d.s; ++i) o[i] = T(k * (double(g[i]) - mean_dy - (double(p[i]) - m) * slope));
  }
}

template <typename T>
void backward_impl(const T* dy, const T* x, const T* gamma, const double* mean, const double* inv_std,
                   T* dx, T* dgamma, T* dbeta, Dims d) {
  const double cnt = double(d.n) * double(d.s);
  for (int64_t c = 0; c < d.c; ++c) {
    const double m = mean[c], inv = inv_std[c];
    double sdy, sdxc;
    grad_sums(dy, x, d, c, m, &sdy, &sdxc);
    const double sdyx = sdxc * inv;                      // sum of dy * x_hat
    dgamma[c] = T(sdyx);
    dbeta[c] = T(sdy);
    grad_channel(dy, x, dx, d, c, m, double(gamma[c]) * inv, sdy / cnt, sdyx / cnt * inv);
  }
}

MXReturnValue forward(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                      std::vector<MXTensor>* out, const OpResource& res) {
  const MXTensor& x = (*in)[0];
  const Dims d = dims_of(x);
  double* stats[3] = {(*out)[1].data<double>(), (*out)[2].data<double>(), (*out)[3].data<double>()};
  if (x.dtype == kFloat32)
    forward_impl<float>((*in)[0].data<float>(), (*in)[1].data<float>(), (*in)[2].data<float>(),
                        (*out)[0].data<float>(), stats[0], stats[1], stats[2], d, eps_of(attrs));
  else
    forward_impl<double>((*in)[0].data<double>(), (*in)[1].data<double>(), (*in)[2].data<double>(),
                         (*out)[0].data<double>(), stats[0], stats[1], stats[2], d, eps_of(attrs));
  return MX_SUCCESS;
}

// inputs: the 4 output gradients, the 3 inputs, the 4 outputs; outputs: dx, dgamma, dbeta
MXReturnValue backward(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                       std::vector<MXTensor>* out, const OpResource& res) {
  const MXTensor& x = (*in)[4];
  const Dims d = dims_of(x);
  const double* mean = (*in)[8].data<double>();
  const double* inv_std = (*in)[10].data<double>();
  if (x.dtype == kFloat32)
    backward_impl<float>((*in)[0].data<float>(), (*in)[4].data<float>(), (*in)[5].data<float>(), mean, inv_std,
                         (*out)[0].data<float>(), (*out)[1].data<float>(), (*out)[2].data<float>(), d);
  else
    backward_impl<double>((*in)[0].data<double>(), (*in)[4].data<double>(), (*in)[5].data<double>(), mean,
                          inv_std, (*out)[0].data<double>(), (*out)[1].data<double>(), (*out)[2].data<double>(), d);
  return MX_SUCCESS;
}

MXReturnValue parse_attrs(const std::unordered_map<std::string, std::string>& attrs, int* num_in, int* num_out) {
  *num_in = 3;
  *num_out = 4;
  return MX_SUCCESS;
}

MXReturnValue infer_type(const std::unordered_map<std::string, std::string>& attrs, std::vector<int>* in,
                         std::vector<int>* out) {
  const int t = (*in)[0];
  if ((t != kFloat32 && t != kFloat64) || (*in)[1] != t || (*in)[2] != t) {
    MX_ERROR_MSG << "dl_batch_norm: x, gamma and beta must all be float32 or all float64";
    return MX_FAIL;
  }
  (*out)[0] = t;
  (*out)[1] = (*out)[2] = (*out)[3] = kFloat64;
  return MX_SUCCESS;
}

MXReturnValue infer_shape(const std::unordered_map<std::string, std::string>& attrs,
                          std::vector<std::vector<unsigned int>>* in, std::vector<std::vector<unsigned int>>* out) {
  const std::vector<unsigned int>& x = (*in)[0];
  if (x.size() < 2 || (*in)[1].size() != 1 || (*in)[2].size() != 1 || (*in)[1][0] != x[1] || (*in)[2][0] != x[1]) {
    MX_ERROR_MSG << "dl_batch_norm: x (N, C, ...) with gamma and beta (C,) expected";
    return MX_FAIL;
  }
  (*out)[0] = x;
  (*out)[1] = (*out)[2] = (*out)[3] = {x[1]};
  return MX_SUCCESS;
}

}  // namespace

REGISTER_OP(dl_batch_norm)
    .setForward(forward, "cpu")
    .setBackward(backward, "cpu")
    .setParseAttrs(parse_attrs)
    .setInferType(infer_type)
    .setInferShape(infer_shape);

MXReturnValue initialize(int version) { return version >= 10900 ? MX_SUCCESS : MX_FAIL; }
