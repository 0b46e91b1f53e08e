// batch_norm_pool.h: the max pooling fused into dl_batch_norm's pass (see batch_norm.cc's header
// comment, attr pool): the window geometry, one output row of the pooling by torch's rule, and the
// float32 loops for windows one or two wide as explicit vectors, forward and backward.
//
// Part of batch_norm.cc's translation unit: included by it, inside its anonymous namespace, after
// the vector types (vf, vd, vi, load/store) and the normalize loops it uses; not a header of its own.
#ifndef DUALDL_BATCH_NORM_POOL_H_
#define DUALDL_BATCH_NORM_POOL_H_
// max pooling of a feature map in windows of kh x kw, stride the window, no padding, floor
struct Pool {
  int64_t kh = 0, kw = 0, h = 0, w = 0;           // kh == 0: no pooling
  int64_t rows = 0, cols = 0;                     // the pooled map's (no division in the loops)
  bool on() const { return kh > 0; }
  int64_t ho() const { return rows; }
  int64_t wo() const { return cols; }
};

Pool pool_of(const std::unordered_map<std::string, std::string>& attrs, const std::vector<int64_t>& shape) {
  Pool p;
  auto it = attrs.find("pool");
  if (it == attrs.end()) return p;
  std::vector<int64_t> k;
  int64_t v = -1;
  for (char ch : it->second + ",") {
    if (ch >= '0' && ch <= '9') {
      v = (v < 0 ? 0 : v * 10) + (ch - '0');
    } else if (v >= 0) {
      k.push_back(v);
      v = -1;
    }
  }
  if (k.size() != 2 || shape.size() != 4 || k[0] < 1 || k[1] < 1) return p;
  p.kh = k[0];
  p.kw = k[1];
  p.h = shape[2];
  p.w = shape[3];
  p.rows = p.h / p.kh;
  p.cols = p.w / p.kw;
  return p;
}

// one output row of the pooling: the maximum of each window of the kh rows at ``band`` (row length
// p.w) by torch's rule (max_pool2d on CPU: the first maximum, a NaN replaces it), and where given
// its element ``at[q]`` (i * kw + j within window q). Window elements in torch's order, each over
// all windows at once: no data-dependent branch.
template <typename T>
DL_CLONES void pool_row(const T* band, Pool p, T* best, uint8_t* at) {
  typedef typename std::conditional<sizeof(T) == 4, int32_t, int64_t>::type I;   // T's width: one vector
  const int64_t wo = p.wo(), kw = p.kw;
  I pos[512];
  for (int64_t q0 = 0; q0 < wo; q0 += 512) {
    const int64_t nq = std::min<int64_t>(512, wo - q0);
    T* b = best + q0;
    const T* base = band + q0 * kw;
    for (int64_t q = 0; q < nq; ++q) b[q] = base[q * kw];
    for (int64_t q = 0; q < nq; ++q) pos[q] = 0;
    for (int64_t i = 0; i < p.kh; ++i)
      for (int64_t j = i == 0 ? 1 : 0; j < kw; ++j) {
        const T* r = base + i * p.w + j;
        const I k = I(i * kw + j);
        for (int64_t q = 0; q < nq; ++q) {
          const T v = r[q * kw];
          const bool take = v > b[q] || v != v;
          b[q] = take ? v : b[q];
          pos[q] = take ? k : pos[q];
        }
      }
    for (int64_t q = 0; q < nq; ++q) at[q0 + q] = uint8_t(pos[q]);
  }
}

// ---- float32 windows one or two wide (the common pools): the window loops as explicit vectors ----
// over LANES windows at a time, the remaining windows as the scalar loops; the same operations on
// each element as the loops for any window, so the same numbers (the sums' lanes aside)
static_assert(LANES == 8, "the shuffles below are written for 8 lanes");
typedef int32_t vi __attribute__((vector_size(LANES * sizeof(int32_t))));
typedef uint8_t v8 __attribute__((vector_size(LANES)));

// element j of LANES consecutive windows KW wide whose first lies at p
template <int KW>
inline vf window_lane(const float* p, int j);
template <>
inline vf window_lane<1>(const float* p, int) { return loadf(p); }
template <>
inline vf window_lane<2>(const float* p, int j) {
  const vf a = loadf(p), b = loadf(p + LANES);
  return j == 0 ? __builtin_shuffle(a, b, vi{0, 2, 4, 6, 8, 10, 12, 14})
                : __builtin_shuffle(a, b, vi{1, 3, 5, 7, 9, 11, 13, 15});
}

// the inverse: element j of LANES windows from v[j], stored from p
template <int KW>
inline void store_windows(float* p, const vf* v);
template <>
inline void store_windows<1>(float* p, const vf* v) { store(p, v[0]); }
template <>
inline void store_windows<2>(float* p, const vf* v) {
  store(p, __builtin_shuffle(v[0], v[1], vi{0, 8, 1, 9, 2, 10, 3, 11}));
  store(p + LANES, __builtin_shuffle(v[0], v[1], vi{4, 12, 5, 13, 6, 14, 7, 15}));
}

// the pooled dy of LANES windows from k, 0 where the fused relu's pooled output is <= 0
inline vf window_dy(const float* dy, const float* y, int64_t k, bool with_relu) {
  const vf g = loadf(dy + k);
  return with_relu ? (loadf(y + k) <= 0 ? vf{} : g) : g;
}

// bytes to int32 through uint16: vector zero-extensions (straight to int32, GCC took each byte
// through a general register)
typedef uint16_t vu16 __attribute__((vector_size(LANES * sizeof(uint16_t))));
typedef uint32_t vu32 __attribute__((vector_size(LANES * sizeof(uint32_t))));
inline vi window_index(const uint8_t* at) {
  v8 b;
  std::memcpy(&b, at, sizeof(b));
  return (vi)__builtin_convertvector(__builtin_convertvector(b, vu16), vu32);
}

// the inverse of window_index (indices < 256): the low byte of each lane, as one byte shuffle on
// little-endian machines (the conversion took each lane through a general register with AVX2)
inline void store_index(uint8_t* at, vi pos) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  typedef uint8_t vb __attribute__((vector_size(LANES * sizeof(int32_t))));
  const vb b = (vb)pos;
  const v8 bytes = __builtin_shufflevector(b, b, 0, 4, 8, 12, 16, 20, 24, 28);
#else
  const v8 bytes = __builtin_convertvector(pos, v8);
#endif
  std::memcpy(at, &bytes, sizeof(bytes));
}

// pool_row for float32 windows KW wide
template <int KW>
inline void pool_row_f(const float* band, Pool p, float* best, uint8_t* at) {
  const int64_t wo = p.wo(), w = p.w, kh = p.kh;
  int64_t q = 0;
  for (; q + LANES <= wo; q += LANES) {
    const float* base = band + q * KW;
    vf b = window_lane<KW>(base, 0);
    vi pos = {};
    for (int64_t i = 0; i < kh; ++i)
      for (int j = i == 0 ? 1 : 0; j < KW; ++j) {
        const vf v = window_lane<KW>(base + i * w, j);
        const vi take = (v > b) | (v != v);
        b = take ? v : b;
        pos = take ? vi{} + int32_t(i * KW + j) : pos;
      }
    store(best + q, b);
    store_index(at + q, pos);
  }
  for (; q < wo; ++q) {
    const float* base = band + q * KW;
    float b = base[0];
    int32_t pos = 0;
    for (int64_t i = 0; i < kh; ++i)
      for (int j = i == 0 ? 1 : 0; j < KW; ++j) {
        const float v = base[i * w + j];
        if (v > b || v != v) {
          b = v;
          pos = int32_t(i * KW + j);
        }
      }
    best[q] = b;
    at[q] = uint8_t(pos);
  }
}

// normalize_pool_channel's plane (n, c) for float32 windows KW wide: one call for its bands
template <int KW>
DL_CLONES void normalize_pool_plane_f(const float* px, float* y, uint8_t* at, Pool p, double m, double scale,
                                      double shift, bool with_relu, float* band) {
  for (int64_t r = 0; r < p.ho(); ++r) {
    normalize_row_body(px + r * p.kh * p.w, band, p.kh * p.w, m, scale, shift, with_relu);
    pool_row_f<KW>(band, p, y + r * p.wo(), at + r * p.wo());
  }
}

// pooled_grad_sums for float32 windows KW wide (its sums in LANES lanes, by window)
template <int KW>
DL_CLONES void pooled_grad_sums_f(const float* dy, const float* x, const float* y, const uint8_t* at, Dims d, Pool p,
                                  int64_t c, double m, bool with_relu, double* s1, double* s2) {
  const int64_t po = p.ho() * p.wo(), wo = p.wo(), w = p.w, kh = p.kh;
  const vd mv = vd{} + m;
  vd a = {}, q2 = {};
  for (int64_t n = 0; n < d.n; ++n) {
    const float* px = x + (n * d.c + c) * d.s;
    const int64_t o = (n * d.c + c) * po;
    for (int64_t r = 0; r < p.ho(); ++r) {
      const float* band = px + r * kh * w;
      const int64_t k0 = o + r * wo;
      int64_t q = 0;
      for (; q + LANES <= wo; q += LANES) {
        const int64_t k = k0 + q;
        const vf t = window_dy(dy, y, k, with_relu);
        const vi idx = window_index(at + k);
        const float* base = band + q * KW;
        vf xe = window_lane<KW>(base, 0);
        for (int64_t i = 0; i < kh; ++i)
          for (int j = i == 0 ? 1 : 0; j < KW; ++j)
            xe = idx == int32_t(i * KW + j) ? window_lane<KW>(base + i * w, j) : xe;
        const vd td = wide(t);
        a += td;
        q2 += td * (wide(xe) - mv);
      }
      if (q < wo) {
        double t[LANES] = {}, tx[LANES] = {};
        for (int j = 0; q + j < wo; ++j) {
          const int64_t k = k0 + q + j;
          const int e = at[k];
          t[j] = with_relu && y[k] <= 0 ? 0.0 : double(dy[k]);
          tx[j] = t[j] * (double(band[(q + j) * KW + (e / KW) * w + e % KW]) - m);
        }
        a += load(t);
        q2 += load(tx);
      }
    }
  }
  *s1 = total(a);
  *s2 = total(q2);
}

// pooled_grad_channel for float32 windows KW wide: each element written once
template <int KW>
DL_CLONES void pooled_grad_channel_f(const float* dy, const float* x, const float* y, const uint8_t* at, float* dx,
                                     Dims d, Pool p, int64_t c, double m, double k, double mean_dy, double slope,
                                     bool with_relu) {
  const vd mv = vd{} + m, kv = vd{} + k, av = vd{} + mean_dy, sv = vd{} + slope;
  const int64_t po = p.ho() * p.wo(), wo = p.wo(), w = p.w, kh = p.kh;
  for (int64_t n = 0; n < d.n; ++n) {
    const int64_t row = (n * d.c + c) * d.s;
    const float* px = x + row;
    float* o = dx + row;
    const int64_t w0 = (n * d.c + c) * po;
    for (int64_t r = 0; r < p.ho(); ++r) {
      const float* band = px + r * kh * w;
      float* ob = o + r * kh * w;
      const int64_t k0 = w0 + r * wo;
      int64_t q = 0;
      for (; q + LANES <= wo; q += LANES) {
        const int64_t kk = k0 + q;
        const vf g = window_dy(dy, y, kk, with_relu);
        const vi idx = window_index(at + kk);
        for (int64_t i = 0; i < kh; ++i) {
          vf res[KW];
          for (int j = 0; j < KW; ++j) {
            const vf xe = window_lane<KW>(band + i * w + q * KW, j);
            const vf gs = idx == int32_t(i * KW + j) ? g : vf{};
            res[j] = narrow(kv * ((wide(gs) - av) - (wide(xe) - mv) * sv));
          }
          store_windows<KW>(ob + i * w + q * KW, res);
        }
      }
      for (; q < wo; ++q) {
        const int64_t kk = k0 + q;
        const bool live = !(with_relu && y[kk] <= 0);
        for (int64_t i = 0; i < kh; ++i)
          for (int j = 0; j < KW; ++j) {
            const int64_t e = i * w + q * KW + j;
            const double g = live && at[kk] == i * KW + j ? double(dy[kk]) : 0.0;
            ob[e] = float(k * ((g - mean_dy) - (double(band[e]) - m) * slope));
          }
      }
      for (int64_t i = 0; i < kh; ++i)              // columns past the last window
        for (int64_t e = i * w + wo * KW; e < (i + 1) * w; ++e)
          ob[e] = float(k * ((0.0 - mean_dy) - (double(band[e]) - m) * slope));
    }
    for (int64_t e = p.ho() * kh * w; e < d.s; ++e)   // rows past the last window
      o[e] = float(k * ((0.0 - mean_dy) - (double(px[e]) - m) * slope));
  }
}

#endif  // DUALDL_BATCH_NORM_POOL_H_
