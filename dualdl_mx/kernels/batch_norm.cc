// dl_batch_norm: BatchNorm with batch statistics, summed in float64, for float32 (or float64) input.
//
// Why (MXNet difference hidden here): MXNet's float32 BatchNorm operator (MKLDNN) sums in float32
// and is 7.6-18x less precise than torch's (2.4e-6 against 1.3e-7 on ordinary activations); running
// MXNet's operator in float64 instead needs a float64 copy of the input and casts both ways. This
// operator reads the float32 input once per pass and sums in float64: exact to float32 rounding.
//
// inputs:  x (N, C, *), gamma (C), beta (C), all of x's dtype; with attr momentum also
//          running_mean (C), running_var (C) of x's dtype
// outputs: y (x's shape and dtype), mean (C, float64), inv_std (C, float64, 1/sqrt(biased var +
//          eps), kept for backward); with momentum also torch's new running statistics (C):
//          (1 - momentum) * running + momentum * batch value, the variance unbiased (times
//          n/(n-1); 1 when n == 1), computed in float64 and rounded to x's dtype
// attrs:   eps, momentum (optional), relu (optional: y is relu(BatchNorm(x)), NaN kept, and backward
//          passes dy only where !(y <= 0): torch's threshold_backward of the relu that follows)
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

bool tracks(const std::unordered_map<std::string, std::string>& attrs) { return attrs.count("momentum") > 0; }

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

// relu with NaN kept, in place over a row just written (a loop GCC vectorises into blends)
template <typename T>
DL_CLONES void relu_row(T* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = o[i];
    o[i] = v > 0 || v != v ? v : T(0);
  }
}

template <typename T>
DL_CLONES void normalize_channel(const T* x, T* y, Dims d, int64_t c, double m, double scale, double shift,
                                 bool with_relu) {
  const vd mv = vd{} + m, sv = vd{} + scale, hv = vd{} + shift;
  for (int64_t n = 0; n < d.n; ++n) {
    const T* p = x + (n * d.c + c) * d.s;
    T* o = y + (n * d.c + c) * d.s;
    int64_t i = 0;
    for (; i + LANES <= d.s; i += LANES) store(o + i, (load(p + i) - mv) * sv + hv);
    for (; i < d.s; ++i) o[i] = T((double(p[i]) - m) * scale + shift);
    if (with_relu) relu_row(o, d.s);
  }
}

template <typename T>
void forward_impl(const T* x, const T* gamma, const T* beta, T* y, double* mean, double* inv_std, Dims d,
                  double eps, const T* running_mean, const T* running_var, T* new_mean, T* new_var,
                  double momentum, bool with_relu) {
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
    inv_std[c] = inv;
    if (new_mean) {
      new_mean[c] = T((1 - momentum) * double(running_mean[c]) + momentum * (k + dm));
      new_var[c] = T((1 - momentum) * double(running_var[c]) + momentum * (v * bessel));
    }
    normalize_channel(x, y, d, c, k + dm, double(gamma[c]) * inv, double(beta[c]), with_relu);
  }
}

// dy where !(y <= 0), else 0 (the fused relu's backward), into a row buffer
template <typename T>
DL_CLONES void masked_row(const T* g, const T* y, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = y[i] <= 0 ? T(0) : g[i];
}

// the row of dy at ``row``: dy itself, or masked into ``buf`` where the fused relu's output y is given
template <typename T>
inline const T* grad_row(const T* dy, const T* y, T* buf, int64_t row, int64_t n) {
  if (!y) return dy + row;
  masked_row(dy + row, y + row, buf, n);
  return buf;
}

// sum of dy and of dy * (x - mean) over channel c (dy masked by the fused relu where y is given)
template <typename T>
DL_CLONES void grad_sums(const T* dy, const T* x, const T* y, T* buf, Dims d, int64_t c, double m, double* s1,
                         double* s2) {
  const vd mv = vd{} + m;
  vd a = {}, q = {};
  for (int64_t n = 0; n < d.n; ++n) {
    const int64_t row = (n * d.c + c) * d.s;
    const T* p = x + row;
    const T* g = grad_row(dy, y, buf, row, d.s);
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
DL_CLONES void grad_channel(const T* dy, const T* x, const T* y, T* buf, T* dx, Dims d, int64_t c, double m,
                            double k, double mean_dy, double slope) {
  const vd mv = vd{} + m, kv = vd{} + k, av = vd{} + mean_dy, sv = vd{} + slope;
  for (int64_t n = 0; n < d.n; ++n) {
    const int64_t row = (n * d.c + c) * d.s;
    const T* p = x + row;
    const T* g = grad_row(dy, y, buf, row, d.s);
    T* o = dx + row;
    int64_t i = 0;
    for (; i + LANES <= d.s; i += LANES) store(o + i, kv * (load(g + i) - av - (load(p + i) - mv) * sv));
    for (; i < d.s; ++i) o[i] = T(k * (double(g[i]) - mean_dy - (double(p[i]) - m) * slope));
  }
}

template <typename T>
void backward_impl(const T* dy, const T* x, const T* y, const T* gamma, const double* mean, const double* inv_std,
                   T* dx, T* dgamma, T* dbeta, Dims d) {
  const double cnt = double(d.n) * double(d.s);
  std::vector<T> buf(y ? d.s : 0);                       // one row of masked dy (the fused relu)
  for (int64_t c = 0; c < d.c; ++c) {
    const double m = mean[c], inv = inv_std[c];
    double sdy, sdxc;
    grad_sums(dy, x, y, buf.data(), d, c, m, &sdy, &sdxc);
    const double sdyx = sdxc * inv;                      // sum of dy * x_hat
    dgamma[c] = T(sdyx);
    dbeta[c] = T(sdy);
    grad_channel(dy, x, y, buf.data(), dx, d, c, m, double(gamma[c]) * inv, sdy / cnt, sdyx / cnt * inv);
  }
}

template <typename T>
void forward_typed(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                   std::vector<MXTensor>* out) {
  const bool track = tracks(attrs);
  forward_impl<T>((*in)[0].data<T>(), (*in)[1].data<T>(), (*in)[2].data<T>(), (*out)[0].data<T>(),
                  (*out)[1].data<double>(), (*out)[2].data<double>(), dims_of((*in)[0]), eps_of(attrs),
                  track ? (*in)[3].data<T>() : nullptr, track ? (*in)[4].data<T>() : nullptr,
                  track ? (*out)[3].data<T>() : nullptr, track ? (*out)[4].data<T>() : nullptr,
                  track ? std::stod(attrs.at("momentum")) : 0.0, attrs.count("relu") > 0);
}

MXReturnValue forward(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                      std::vector<MXTensor>* out, const OpResource& res) {
  if ((*in)[0].dtype == kFloat32)
    forward_typed<float>(attrs, in, out);
  else
    forward_typed<double>(attrs, in, out);
  return MX_SUCCESS;
}

template <typename T>
void backward_typed(int n_in, int n_out, bool with_relu, std::vector<MXTensor>* in, std::vector<MXTensor>* out) {
  MXTensor& x = (*in)[n_out];
  backward_impl<T>((*in)[0].data<T>(), x.data<T>(), with_relu ? (*in)[n_out + n_in].data<T>() : nullptr,
                   (*in)[n_out + 1].data<T>(),
                   (*in)[n_out + n_in + 1].data<double>(), (*in)[n_out + n_in + 2].data<double>(),
                   (*out)[0].data<T>(), (*out)[1].data<T>(), (*out)[2].data<T>(), dims_of(x));
  for (int i = 3; i < n_in; ++i) {                      // the running statistics: not differentiable
    T* z = (*out)[i].data<T>();
    if (z) std::fill(z, z + (*out)[i].size(), T(0));
  }
}

// inputs: the output gradients, the inputs, the outputs; outputs: one gradient per input
MXReturnValue backward(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                       std::vector<MXTensor>* out, const OpResource& res) {
  const int n_in = tracks(attrs) ? 5 : 3, n_out = n_in;
  const bool with_relu = attrs.count("relu") > 0;
  if ((*in)[n_out].dtype == kFloat32)
    backward_typed<float>(n_in, n_out, with_relu, in, out);
  else
    backward_typed<double>(n_in, n_out, with_relu, in, out);
  return MX_SUCCESS;
}

MXReturnValue parse_attrs(const std::unordered_map<std::string, std::string>& attrs, int* num_in, int* num_out) {
  *num_in = *num_out = tracks(attrs) ? 5 : 3;
  return MX_SUCCESS;
}

MXReturnValue infer_type(const std::unordered_map<std::string, std::string>& attrs, std::vector<int>* in,
                         std::vector<int>* out) {
  const int t = (*in)[0];
  bool same = t == kFloat32 || t == kFloat64;
  for (int v : *in) same = same && v == t;
  if (!same) {
    MX_ERROR_MSG << "dl_batch_norm: x, gamma, beta (and the running statistics) must all be float32 or all float64";
    return MX_FAIL;
  }
  (*out)[0] = t;
  (*out)[1] = (*out)[2] = kFloat64;
  for (size_t i = 3; i < out->size(); ++i) (*out)[i] = t;
  return MX_SUCCESS;
}

MXReturnValue infer_shape(const std::unordered_map<std::string, std::string>& attrs,
                          std::vector<std::vector<unsigned int>>* in, std::vector<std::vector<unsigned int>>* out) {
  const std::vector<unsigned int>& x = (*in)[0];
  bool ok = x.size() >= 2;
  for (size_t i = 1; ok && i < in->size(); ++i) ok = (*in)[i].size() == 1 && (*in)[i][0] == x[1];
  if (!ok) {
    MX_ERROR_MSG << "dl_batch_norm: x (N, C, ...) with gamma, beta (and running statistics) (C,) expected";
    return MX_FAIL;
  }
  (*out)[0] = x;
  for (size_t i = 1; i < out->size(); ++i) (*out)[i] = {x[1]};
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
