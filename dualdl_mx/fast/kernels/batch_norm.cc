// dl_batch_norm: BatchNorm with batch statistics, summed in float64, for float32 (or float64) input.
//
// Why (MXNet difference hidden here): MXNet's float32 BatchNorm operator (MKLDNN) sums in float32
// and is 7.6-18x less precise than torch's (2.4e-6 against 1.3e-7 on ordinary activations); running
// MXNet's operator in float64 instead needs a float64 copy of the input and casts both ways. This
// operator reads the float32 input once per pass and sums in float64: exact to float32 rounding.
//
// inputs:  x (N, C, *), gamma (C), beta (C), all of x's dtype; with attr momentum also
//          running_mean (C), running_var (C) of x's dtype
// outputs: y (x's shape and dtype; pooled with attr pool), mean (C, float64), inv_std (C,
//          float64, 1/sqrt(biased var + eps), kept for backward); with momentum also torch's new
//          running statistics (C): (1 - momentum) * running + momentum * batch value, the variance
//          unbiased (times n/(n-1); 1 when n == 1), computed in float64 and rounded to x's dtype;
//          with pool last the element of each window that is its maximum (y's shape, uint8)
// attrs:   eps, momentum (optional), relu (optional: y is relu(BatchNorm(x)), NaN kept, and backward
//          passes dy only where !(y <= 0): torch's threshold_backward of the relu that follows),
//          pool (optional, "kh,kw", x (N, C, H, W)): y is then max_pool2d(kernel (kh, kw), stride
//          the kernel, no padding, floor) of that output, with torch's window rule (the first
//          maximum, a NaN wins; rows and columns past the last window dropped); backward sends
//          each window's dy to its maximum: the full-size feature map is never written
// Backward writes its outputs (MXNet's library operators do not see the request type): callers
// give it gamma and beta through an identity op, and x too when x is a leaf (see dualdl_mx/norm.py).
//
// Sums run in LANES fixed partial sums (lane = index mod LANES within a row), combined in a fixed
// order, lanes computed as one vector (the pooled backward's, over the windows: two), and the
// build turns off contraction into FMA: the same result on every instruction set. The sums are
// shifted by the channel's first value, or by 0 where that is infinite or NaN: a channel with -inf
// in it has torch's mean -inf (and running mean), not NaN; its variance is NaN, as torch's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <string>
#include <unordered_map>
#include <vector>

#include "mxnet/lib_api.h"

using namespace mxnet::ext;

namespace {

constexpr int LANES = 8;
// x86-64-v4 (AVX-512 with VL and BW: mask registers on 256-bit vectors) where the compiler knows
// it (GCC 11 on), else AVX-512F, AVX2, SSE2
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define DL_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx512f", "avx2", "default")))
#else
#define DL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

// LANES floats as one vector, LANES doubles as two vectors of four (GCC vector extensions: a
// vector wider than the instruction set's registers lives in memory between operations, which
// made AVX2's loops 3x slower as one vector of eight doubles; the halves are ymm registers with
// AVX2 and AVX-512; the default clone, for CPUs without AVX2, has 16-byte registers only, and its
// loops stay 10x slower); lanes are independent, so the numbers are the same on each
typedef float vf __attribute__((vector_size(LANES * sizeof(float))));
typedef float vf4 __attribute__((vector_size(LANES / 2 * sizeof(float))));
typedef double vd4 __attribute__((vector_size(LANES / 2 * sizeof(double))));
struct vd {
  vd4 lo, hi;                                        // lanes 0-3, 4-7
  double operator[](int j) const { return j < LANES / 2 ? lo[j] : hi[j - LANES / 2]; }
};
inline vd operator+(vd a, vd b) { return {a.lo + b.lo, a.hi + b.hi}; }
inline vd operator-(vd a, vd b) { return {a.lo - b.lo, a.hi - b.hi}; }
inline vd operator*(vd a, vd b) { return {a.lo * b.lo, a.hi * b.hi}; }
inline vd operator+(vd a, double k) { return {a.lo + k, a.hi + k}; }
inline vd operator-(vd a, double k) { return {a.lo - k, a.hi - k}; }
inline vd& operator+=(vd& a, vd b) { return a = a + b; }

// float32 -> float64 through a LANES-wide vector split into its halves (one conversion per
// register; conversions of four-lane halves went through the stack with AVX2), float64 -> float32
// half by half (through the wide vector, AVX-512's loops stored both halves and reloaded them as
// one: a store-forwarding stall per vector)
typedef double vd8 __attribute__((vector_size(LANES * sizeof(double))));
inline vd wide(vf v) {
  const vd8 w = __builtin_convertvector(v, vd8);
  vd r;
  std::memcpy(&r, &w, sizeof(r));
  return r;
}
inline vf narrow(vd v) {
  const vf4 lo = __builtin_convertvector(v.lo, vf4), hi = __builtin_convertvector(v.hi, vf4);
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
}
inline vd load(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof(v));
  return wide(v);
}
inline vd load(const double* p) {
  vd v;
  std::memcpy(&v.lo, p, sizeof(v.lo));
  std::memcpy(&v.hi, p + LANES / 2, sizeof(v.hi));
  return v;
}
inline void store(float* p, vd v) {
  const vf f = narrow(v);
  std::memcpy(p, &f, sizeof(f));
}
inline void store(double* p, vd v) {
  std::memcpy(p, &v.lo, sizeof(v.lo));
  std::memcpy(p + LANES / 2, &v.hi, sizeof(v.hi));
}
inline vf loadf(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store(float* p, vf v) { std::memcpy(p, &v, sizeof(v)); }
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

// channels are computed independently, so OpenMP's threads (MXNet's own runtime, libgomp) split
// them with the same result; below this many elements a fork costs more than it saves
bool parallel(Dims d) { return d.c > 1 && d.n * d.c * d.s >= 32768; }

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
    if (i < d.s) {            // the row's last terms as one more vector, 0 past them (adding 0 leaves a
      double t[LANES] = {};   // lane's sum as it was); so in the other sums' tails
      for (int j = 0; i + j < d.s; ++j) t[j] = double(p[i + j]) - k;
      const vd tv = load(t);
      a += tv;
      q += tv * tv;
    }
  }
  *s1 = total(a);
  *s2 = total(q);
}

// relu with NaN kept (x > 0 or NaN: x, else +0), of a value rounded to T, as a vector of LANES
template <typename T>
inline T relu_kept(T v) { return v > 0 || v != v ? v : T(0); }
inline vf relu_kept(vf v) { return (v > 0) | (v != v) ? v : vf{}; }
inline vd relu_kept(vd v) {
  return {(v.lo > 0) | (v.lo != v.lo) ? v.lo : vd4{}, (v.hi > 0) | (v.hi != v.hi) ? v.hi : vd4{}};
}
inline vf rounded(vd v, float) { return narrow(v); }
inline vd rounded(vd v, double) { return v; }

// y = (x - m) * scale + shift over a row, in float64, rounded once (relu'd with NaN kept, after
// the rounding, in the same loop)
template <typename T>
inline void normalize_row_body(const T* p, T* o, int64_t n, double m, double scale, double shift, bool with_relu) {
  const vd mv = vd{} + m, sv = vd{} + scale, hv = vd{} + shift;
  int64_t i = 0;
  if (with_relu) {
    for (; i + LANES <= n; i += LANES) store(o + i, relu_kept(rounded((load(p + i) - mv) * sv + hv, T())));
    for (; i < n; ++i) o[i] = relu_kept(T((double(p[i]) - m) * scale + shift));
  } else {
    for (; i + LANES <= n; i += LANES) store(o + i, rounded((load(p + i) - mv) * sv + hv, T()));
    for (; i < n; ++i) o[i] = T((double(p[i]) - m) * scale + shift);
  }
}

template <typename T>
DL_CLONES void normalize_row(const T* p, T* o, int64_t n, double m, double scale, double shift, bool with_relu) {
  normalize_row_body(p, o, n, m, scale, shift, with_relu);
}

template <typename T>
void normalize_channel(const T* x, T* y, Dims d, int64_t c, double m, double scale, double shift, bool with_relu) {
  for (int64_t n = 0; n < d.n; ++n)
    normalize_row(x + (n * d.c + c) * d.s, y + (n * d.c + c) * d.s, d.s, m, scale, shift, with_relu);
}

#include "batch_norm_pool.h"      // the fused max pooling (Pool, pool_row, the float32 window loops)

// normalized (relu'd) and pooled channel c, with each window's maximum element (for backward):
// each band of kh rows into ``band``, then its windows
template <typename T>
void normalize_pool_channel(const T* x, T* y, uint8_t* at, Dims d, Pool p, int64_t c, double m, double scale,
                            double shift, bool with_relu, T* band) {
  const int64_t po = p.ho() * p.wo();
  for (int64_t n = 0; n < d.n; ++n) {
    const T* px = x + (n * d.c + c) * d.s;
    const int64_t o = (n * d.c + c) * po;
    if constexpr (std::is_same<T, float>::value) {
      if (p.kw == 1 || p.kw == 2) {
        (p.kw == 1 ? normalize_pool_plane_f<1> : normalize_pool_plane_f<2>)(px, y + o, at + o, p, m, scale, shift,
                                                                            with_relu, band);
        continue;
      }
    }
    for (int64_t r = 0; r < p.ho(); ++r) {
      normalize_row(px + r * p.kh * p.w, band, p.kh * p.w, m, scale, shift, with_relu);
      pool_row(band, p, y + o + r * p.wo(), at + o + r * p.wo());
    }
  }
}

template <typename T>
void forward_impl(const T* x, const T* gamma, const T* beta, T* y, double* mean, double* inv_std, Dims d,
                  double eps, const T* running_mean, const T* running_var, T* new_mean, T* new_var,
                  double momentum, bool with_relu, Pool p, uint8_t* at) {
  const double cnt = double(d.n) * double(d.s);
  const double bessel = cnt > 1 ? cnt / (cnt - 1) : 1.0;
#pragma omp parallel if (parallel(d))
  {
  std::vector<T> band(p.on() ? p.kh * p.w : 0);
#pragma omp for schedule(static)
  for (int64_t c = 0; c < d.c; ++c) {
    // the shift: the channel's first value, or 0 where it is infinite or NaN (x - k would be NaN
    // for every element, where torch's mean of a channel with -inf in it is -inf; its variance is
    // NaN either way)
    const double first = double(x[c * d.s]);
    const double k = std::isfinite(first) ? first : 0.0;
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
    if (p.on())
      normalize_pool_channel(x, y, at, d, p, c, k + dm, double(gamma[c]) * inv, double(beta[c]), with_relu, band.data());
    else
      normalize_channel(x, y, d, c, k + dm, double(gamma[c]) * inv, double(beta[c]), with_relu);
  }
  }
}

// dy where !(y <= 0), else 0 (the fused relu's backward), into a row buffer
template <typename T>
DL_CLONES void masked_row(const T* g, const T* y, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = y[i] <= 0 ? T(0) : g[i];
}

// offsets[a]: where element a (i * kw + j) of a window lies from the window's first element
std::vector<int64_t> window_offsets(Pool p) {
  std::vector<int64_t> o(p.kh * p.kw);
  for (int64_t i = 0; i < p.kh; ++i)
    for (int64_t j = 0; j < p.kw; ++j) o[i * p.kw + j] = i * p.w + j;
  return o;
}

// the pooled channel's dy is each window's dy at its maximum (0 where the fused relu's pooled
// output is <= 0), 0 elsewhere; these sums run over the windows (float64, as grad_sums)
template <typename T>
DL_CLONES void pooled_grad_sums(const T* dy, const T* x, const T* y, const uint8_t* at, const int64_t* offsets,
                                Dims d, Pool p, int64_t c, double m, bool with_relu, double* s1, double* s2) {
  const int64_t po = p.ho() * p.wo();
  double a[2] = {0, 0}, q2[2] = {0, 0};
  for (int64_t n = 0; n < d.n; ++n) {
    const T* px = x + (n * d.c + c) * d.s;
    const int64_t o = (n * d.c + c) * po;
    for (int64_t r = 0; r < p.ho(); ++r) {
      const T* band = px + r * p.kh * p.w;
      for (int64_t q = 0; q < p.wo(); ++q) {
        const int64_t k = o + r * p.wo() + q;
        const double t = with_relu && y[k] <= 0 ? 0.0 : double(dy[k]);
        a[q & 1] += t;
        q2[q & 1] += t * (double(band[q * p.kw + offsets[at[k]]]) - m);
      }
    }
  }
  *s1 = a[0] + a[1];
  *s2 = q2[0] + q2[1];
}

// grad_channel of a pooled channel: the dy = 0 formula over all of x, then each window's maximum
template <typename T>
DL_CLONES void pooled_grad_channel(const T* dy, const T* x, const T* y, const uint8_t* at, const int64_t* offsets,
                                   T* dx, Dims d, Pool p, int64_t c, double m, double k, double mean_dy, double slope,
                                   bool with_relu) {
  const vd mv = vd{} + m, kv = vd{} + k, zv = vd{} - mean_dy, sv = vd{} + slope;
  const int64_t po = p.ho() * p.wo();
  for (int64_t n = 0; n < d.n; ++n) {
    const int64_t row = (n * d.c + c) * d.s;
    const T* px = x + row;
    T* o = dx + row;
    int64_t i = 0;
    for (; i + LANES <= d.s; i += LANES) store(o + i, kv * (zv - (load(px + i) - mv) * sv));
    for (; i < d.s; ++i) o[i] = T(k * ((0.0 - mean_dy) - (double(px[i]) - m) * slope));
    const int64_t w0 = (n * d.c + c) * po;
    for (int64_t r = 0; r < p.ho(); ++r)
      for (int64_t q = 0; q < p.wo(); ++q) {
        const int64_t j = w0 + r * p.wo() + q;
        if (with_relu && y[j] <= 0) continue;
        const int64_t e = r * p.kh * p.w + q * p.kw + offsets[at[j]];
        o[e] = T(k * (double(dy[j]) - mean_dy - (double(px[e]) - m) * slope));
      }
  }
}

// one pooled channel's backward: the float32 loops for windows one or two wide, else any window's
template <typename T>
void pooled_backward(const T* dy, const T* x, const T* y, const uint8_t* at, const int64_t* offsets, const T* gamma,
                     T* dx, T* dgamma, T* dbeta, Dims d, Pool p, int64_t c, double m, double inv, double cnt,
                     bool with_relu) {
  double sdy, sdxc;
  const bool fast = std::is_same<T, float>::value && (p.kw == 1 || p.kw == 2);
  if constexpr (std::is_same<T, float>::value) {
    if (p.kw == 1) pooled_grad_sums_f<1>(dy, x, y, at, d, p, c, m, with_relu, &sdy, &sdxc);
    if (p.kw == 2) pooled_grad_sums_f<2>(dy, x, y, at, d, p, c, m, with_relu, &sdy, &sdxc);
  }
  if (!fast) pooled_grad_sums(dy, x, y, at, offsets, d, p, c, m, with_relu, &sdy, &sdxc);
  const double sdyx = sdxc * inv;                      // sum of dy * x_hat
  dgamma[c] = T(sdyx);
  dbeta[c] = T(sdy);
  const double k = double(gamma[c]) * inv, mean_dy = sdy / cnt, slope = sdyx / cnt * inv;
  if constexpr (std::is_same<T, float>::value) {
    if (p.kw == 1) pooled_grad_channel_f<1>(dy, x, y, at, dx, d, p, c, m, k, mean_dy, slope, with_relu);
    if (p.kw == 2) pooled_grad_channel_f<2>(dy, x, y, at, dx, d, p, c, m, k, mean_dy, slope, with_relu);
  }
  if (!fast) pooled_grad_channel(dy, x, y, at, offsets, dx, d, p, c, m, k, mean_dy, slope, with_relu);
}

// sum of dy and of dy * (x - mean) over channel c; dy's row n at g + n * stride
template <typename T>
DL_CLONES void grad_sums(const T* g, int64_t stride, const T* x, Dims d, int64_t c, double m, double* s1,
                         double* s2) {
  const vd mv = vd{} + m;
  vd a = {}, q = {};
  for (int64_t n = 0; n < d.n; ++n) {
    const T* p = x + (n * d.c + c) * d.s;
    const T* gr = g + n * stride;
    int64_t i = 0;
    for (; i + LANES <= d.s; i += LANES) {
      const vd t = load(gr + i);
      a += t;
      q += t * (load(p + i) - mv);
    }
    if (i < d.s) {
      double t[LANES] = {}, tx[LANES] = {};
      for (int j = 0; i + j < d.s; ++j) {
        t[j] = double(gr[i + j]);
        tx[j] = t[j] * (double(p[i + j]) - m);
      }
      a += load(t);
      q += load(tx);
    }
  }
  *s1 = total(a);
  *s2 = total(q);
}

// dx = gamma * inv_std * (dy - mean(dy) - x_hat * mean(dy * x_hat)); dy's row n at g + n * stride
template <typename T>
DL_CLONES void grad_channel(const T* g, int64_t stride, const T* x, T* dx, Dims d, int64_t c, double m, double k,
                            double mean_dy, double slope) {
  const vd mv = vd{} + m, kv = vd{} + k, av = vd{} + mean_dy, sv = vd{} + slope;
  for (int64_t n = 0; n < d.n; ++n) {
    const int64_t row = (n * d.c + c) * d.s;
    const T* p = x + row;
    const T* gr = g + n * stride;
    T* o = dx + row;
    int64_t i = 0;
    for (; i + LANES <= d.s; i += LANES) store(o + i, kv * (load(gr + i) - av - (load(p + i) - mv) * sv));
    for (; i < d.s; ++i) o[i] = T(k * (double(gr[i]) - mean_dy - (double(p[i]) - m) * slope));
  }
}

// y: the forward output where the relu or the pool was fused, else null; at: the windows' maxima
// with the pool
template <typename T>
void backward_impl(const T* dy, const T* x, const T* y, const uint8_t* at, const T* gamma, const double* mean,
                   const double* inv_std, T* dx, T* dgamma, T* dbeta, Dims d, bool with_relu, Pool p) {
  const double cnt = double(d.n) * double(d.s);
  const std::vector<int64_t> offsets = p.on() ? window_offsets(p) : std::vector<int64_t>();
#pragma omp parallel if (parallel(d))
  {
  std::vector<T> buf(with_relu && !p.on() ? d.n * d.s : 0);   // the channel's masked dy
#pragma omp for schedule(static)
  for (int64_t c = 0; c < d.c; ++c) {
    const double m = mean[c], inv = inv_std[c];
    const T* g = dy + c * d.s;
    int64_t stride = d.c * d.s;
    if (p.on()) {
      pooled_backward(dy, x, y, at, offsets.data(), gamma, dx, dgamma, dbeta, d, p, c, m, inv, cnt, with_relu);
      continue;
    }
    if (with_relu) {
      for (int64_t n = 0; n < d.n; ++n)
        masked_row(dy + (n * d.c + c) * d.s, y + (n * d.c + c) * d.s, buf.data() + n * d.s, d.s);
      g = buf.data();
      stride = d.s;
    }
    double sdy, sdxc;
    grad_sums(g, stride, x, d, c, m, &sdy, &sdxc);
    const double sdyx = sdxc * inv;                      // sum of dy * x_hat
    dgamma[c] = T(sdyx);
    dbeta[c] = T(sdy);
    grad_channel(g, stride, x, dx, d, c, m, double(gamma[c]) * inv, sdy / cnt, sdyx / cnt * inv);
  }
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
                  track ? std::stod(attrs.at("momentum")) : 0.0, attrs.count("relu") > 0,
                  pool_of(attrs, (*in)[0].shape), attrs.count("pool") ? out->back().data<uint8_t>() : nullptr);
}

MXReturnValue forward(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                      std::vector<MXTensor>* out, const OpResource& res) {
  if ((*in)[0].dtype == kFloat32)
    forward_typed<float>(attrs, in, out);
  else
    forward_typed<double>(attrs, in, out);
  return MX_SUCCESS;
}

int inputs_of(const std::unordered_map<std::string, std::string>& attrs) { return tracks(attrs) ? 5 : 3; }
int outputs_of(const std::unordered_map<std::string, std::string>& attrs) {
  return inputs_of(attrs) + (attrs.count("pool") ? 1 : 0);      // the windows' maxima last
}

template <typename T>
void backward_typed(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                    std::vector<MXTensor>* out) {
  const int n_in = inputs_of(attrs), n_out = outputs_of(attrs);
  const bool with_relu = attrs.count("relu") > 0;
  MXTensor& x = (*in)[n_out];
  const Pool p = pool_of(attrs, x.shape);
  MXTensor* outputs = &(*in)[n_out + n_in];
  backward_impl<T>((*in)[0].data<T>(), x.data<T>(), with_relu || p.on() ? outputs[0].data<T>() : nullptr,
                   p.on() ? outputs[n_out - 1].data<uint8_t>() : nullptr, (*in)[n_out + 1].data<T>(),
                   outputs[1].data<double>(), outputs[2].data<double>(),
                   (*out)[0].data<T>(), (*out)[1].data<T>(), (*out)[2].data<T>(), dims_of(x), with_relu, p);
  for (int i = 3; i < n_in; ++i) {                      // the running statistics: not differentiable
    T* z = (*out)[i].data<T>();
    if (z) std::fill(z, z + (*out)[i].size(), T(0));
  }
}

// inputs: the output gradients, the inputs, the outputs; outputs: one gradient per input
MXReturnValue backward(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                       std::vector<MXTensor>* out, const OpResource& res) {
  if ((*in)[outputs_of(attrs)].dtype == kFloat32)
    backward_typed<float>(attrs, in, out);
  else
    backward_typed<double>(attrs, in, out);
  return MX_SUCCESS;
}

MXReturnValue parse_attrs(const std::unordered_map<std::string, std::string>& attrs, int* num_in, int* num_out) {
  *num_in = inputs_of(attrs);
  *num_out = outputs_of(attrs);
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
  if (attrs.count("pool")) out->back() = kUint8;
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
  // an empty x reaches here with its 0 as MXNet 1.x's unknown size, -1 as 2^32 - 1: copied to the
  // outputs, that would ask MXNet for 2^32 - 1 times the other sizes (dualdl's BatchNorm refuses
  // empty batches before calling this operator)
  for (unsigned d : x)
    if (d == 0 || d == ~0u) {
      MX_ERROR_MSG << "dl_batch_norm: x has an empty or unknown dimension (MXNet 1.x reads 0 as unknown)";
      return MX_FAIL;
    }
  (*out)[0] = x;
  if (attrs.count("pool")) {
    const Pool p = pool_of(attrs, std::vector<int64_t>(x.begin(), x.end()));
    if (!p.on() || p.ho() < 1 || p.wo() < 1 || p.kh * p.kw > 256) {
      std::string shape;
      for (unsigned v : x) shape += (shape.empty() ? "" : ", ") + std::to_string(v);
      MX_ERROR_MSG << "dl_batch_norm with the MaxPool2d after it (pool \"" << attrs.at("pool")
                   << "\"): input (" << shape << ") expected (N, C, H, W) with H, W at least the pooling window "
                   << "(and a window of at most 256 elements)";
      return MX_FAIL;
    }
    (*out)[0][2] = unsigned(p.ho());
    (*out)[0][3] = unsigned(p.wo());
  }
  for (size_t i = 1; i < out->size(); ++i) (*out)[i] = {x[1]};
  if (attrs.count("pool")) out->back() = (*out)[0];
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
