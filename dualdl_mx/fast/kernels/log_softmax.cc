// dl_log_softmax: log-softmax along one axis, computed in float64, for float32 (or float64) input.
//
// Why (MXNet difference hidden here): MXNet's log_softmax operator is off by up to 3.5e-6 with a
// bias of about +1e-6 (torch: 2e-7), so dualdl computed it from its formula, x - max -
// log(sum(exp(x - max))): six operators forward and about eight backward, each one more engine
// operation per loss call. This operator is the same formula in one operator each way, in float64,
// rounded once.
//
// inputs:  x (any shape), float32 or float64
// outputs: y (x's shape and dtype), lse (x's shape with the axis of size 1, float64: max +
//          log(sum(exp(x - max))), kept for backward)
// attrs:   axis (non-negative)
// Backward: dx = dy - exp(x - lse) * sum(dy) along the axis, from x and lse in float64. It writes
// its output (MXNet's library operators do not see the request type): callers give it x through an
// identity op when x is a leaf (see dualdl_mx/ops.py).
//
// NaN and infinities follow the formula's operators: the max is NaN if any element is (MXNet's
// max reducer), and inf - inf is NaN. An empty x (or one of unknown shape) is refused by shape
// inference: callers return empty inputs' empty results without it (dualdl_mx/ops.py).
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "mxnet/lib_api.h"

using namespace mxnet::ext;

namespace {

struct View {
  int64_t outer, n, inner;   // x viewed as (outer, n, inner), n along the axis
};

int axis_of(const std::unordered_map<std::string, std::string>& attrs) { return std::stoi(attrs.at("axis")); }

View view_of(const MXTensor& t, int axis) {
  View v{1, t.shape[axis], 1};
  for (int i = 0; i < axis; ++i) v.outer *= t.shape[i];
  for (size_t i = axis + 1; i < t.shape.size(); ++i) v.inner *= t.shape[i];
  return v;
}

template <typename T>
void forward_impl(const T* x, T* y, double* lse, View v) {
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const T* p = x + o * v.n * v.inner + i;
      T* q = y + o * v.n * v.inner + i;
      double m = -INFINITY;
      for (int64_t k = 0; k < v.n; ++k) {              // MXNet's maximum reducer: NaN propagates
        const double t = double(p[k * v.inner]);
        if (!std::isnan(m) && !(m >= t)) m = t;
      }
      double s = 0;
      for (int64_t k = 0; k < v.n; ++k) s += std::exp(double(p[k * v.inner]) - m);
      const double l = std::log(s);
      for (int64_t k = 0; k < v.n; ++k) q[k * v.inner] = T((double(p[k * v.inner]) - m) - l);
      lse[o * v.inner + i] = m + l;
    }
  }
}

template <typename T>
void backward_impl(const T* dy, const T* x, const double* lse, T* dx, View v) {
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const int64_t base = o * v.n * v.inner + i;
      const double l = lse[o * v.inner + i];
      double s = 0;
      for (int64_t k = 0; k < v.n; ++k) s += double(dy[base + k * v.inner]);
      for (int64_t k = 0; k < v.n; ++k) {
        const int64_t j = base + k * v.inner;
        dx[j] = T(double(dy[j]) - std::exp(double(x[j]) - l) * s);
      }
    }
  }
}

MXReturnValue forward(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                      std::vector<MXTensor>* out, const OpResource& res) {
  MXTensor& x = (*in)[0];
  const View v = view_of(x, axis_of(attrs));
  if (x.dtype == kFloat32)
    forward_impl<float>(x.data<float>(), (*out)[0].data<float>(), (*out)[1].data<double>(), v);
  else
    forward_impl<double>(x.data<double>(), (*out)[0].data<double>(), (*out)[1].data<double>(), v);
  return MX_SUCCESS;
}

// inputs: the output gradients (dy, dlse), the input x, the outputs (y, lse); outputs: dx
MXReturnValue backward(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                       std::vector<MXTensor>* out, const OpResource& res) {
  MXTensor& x = (*in)[2];
  const View v = view_of(x, axis_of(attrs));
  const double* lse = (*in)[4].data<double>();
  if (x.dtype == kFloat32)
    backward_impl<float>((*in)[0].data<float>(), x.data<float>(), lse, (*out)[0].data<float>(), v);
  else
    backward_impl<double>((*in)[0].data<double>(), x.data<double>(), lse, (*out)[0].data<double>(), v);
  return MX_SUCCESS;
}

MXReturnValue parse_attrs(const std::unordered_map<std::string, std::string>& attrs, int* num_in, int* num_out) {
  if (!attrs.count("axis")) {
    MX_ERROR_MSG << "dl_log_softmax: the axis attribute is required";
    return MX_FAIL;
  }
  *num_in = 1;
  *num_out = 2;
  return MX_SUCCESS;
}

MXReturnValue infer_type(const std::unordered_map<std::string, std::string>& attrs, std::vector<int>* in,
                         std::vector<int>* out) {
  const int t = (*in)[0];
  if (t != kFloat32 && t != kFloat64) {
    MX_ERROR_MSG << "dl_log_softmax: x must be float32 or float64";
    return MX_FAIL;
  }
  (*out)[0] = t;
  (*out)[1] = kFloat64;
  return MX_SUCCESS;
}

MXReturnValue infer_shape(const std::unordered_map<std::string, std::string>& attrs,
                          std::vector<std::vector<unsigned int>>* in, std::vector<std::vector<unsigned int>>* out) {
  const std::vector<unsigned int>& x = (*in)[0];
  const int axis = axis_of(attrs);
  if (axis < 0 || axis >= int(x.size())) {
    MX_ERROR_MSG << "dl_log_softmax: axis " << axis << " out of range for a " << x.size() << "-d input";
    return MX_FAIL;
  }
  // an empty input reaches here with its 0 as MXNet 1.x's unknown size, -1 as 2^32 - 1: copied
  // to the outputs, that asked MXNet for 2^32 - 1 times the other sizes and broke its allocator
  for (unsigned d : x)
    if (d == 0 || d == ~0u) {
      MX_ERROR_MSG << "dl_log_softmax: x has an empty or unknown dimension (MXNet 1.x reads 0 as unknown); "
                   << "dualdl.ops.log_softmax returns an empty input's result without this operator";
      return MX_FAIL;
    }
  (*out)[0] = x;
  (*out)[1] = x;
  (*out)[1][axis] = 1;
  return MX_SUCCESS;
}

}  // namespace

REGISTER_OP(dl_log_softmax)
    .setForward(forward, "cpu")
    .setBackward(backward, "cpu")
    .setParseAttrs(parse_attrs)
    .setInferType(infer_type)
    .setInferShape(infer_shape);
