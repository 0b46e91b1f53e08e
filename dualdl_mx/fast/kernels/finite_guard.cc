// dl_guarded_sgd_mom: dl.Trainer's SGD-momentum step on MXNet, applied only if every gradient
// element (and every element of the step's loss arrays) is finite, in one operator.
//
// Why (MXNet difference hidden here): every host read waits for MXNet's engine. dl.Trainer must
// not apply a step whose gradients are not all finite. Reading a check before queueing the step
// left the engine idle while Python queued the update (0.1-0.2 of the benchmark MLP's step); a
// check operator queued before MXNet's multi_sgd_mom_update, keeping a copy of the written arrays
// to undo a bad step, was one more engine operator a step (0.05-0.12 of the MLP's step,
// benchmarks/findings.md). This operator tests the gradients and then runs multi_sgd_mom_update's
// arithmetic itself, or writes nothing:
//   inputs:  (weight, gradient, momentum) per weight (num_weights of them, float32), then
//            num_checked arrays (float32 or float64: the step's losses) that must be finite too;
//   attrs:   lrs, wds, momenta, rescales: one value per weight, as tuples "(a, b)"; slot;
//   output:  (1,) float32, 1 if the step was applied (every element finite), 0 if nothing was
//            written;
//   mutates: each weight and its momentum.
// The update is multi_sgd_mom_update's (MXNet 1.9.1, optimizer_op-inl.h, MultiSGDKernel) bit for
// bit: mom = momentum*mom - (lr*wd)*w - (lr*rescale)*g; w = w + mom, each operation in float32 in
// that order (no fused multiply-add: -ffp-contract=off), with each attribute parsed as MXNet parses
// it there: lrs and wds as a Tuple<float> (std::istream), momentum and rescale_grad as float fields
// (dmlc::stof, which rounds differently from strtof for about 6% of decimal strings).
// MXNet's engine runs it after the backward (it reads the gradients) and orders later reads and
// writes of the weights and momenta after it (it writes them).
// Reading the flag with MXNet (``asnumpy``) waits on the engine's CPU worker; dl_finite_guard_arm /
// dl_finite_guard_wait (plain C functions) give the check's result as soon as the check has run,
// while the update itself still runs.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <dmlc/strtonum.h>

#include "mxnet/lib_api.h"

using namespace mxnet::ext;

namespace {

constexpr int BYTES = 64;             // one AVX-512 register of lanes (two AVX2 ones, four SSE ones)
constexpr int64_t BLOCK = 1 << 16;    // elements a thread takes at a time
constexpr int64_t FORK = 1 << 18;     // elements in all below which a fork of OpenMP's threads costs more than it saves
#define DL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

template <typename T> struct Lanes { typedef T type __attribute__((vector_size(BYTES))); };

std::mutex result_lock;
std::condition_variable result_ready;
std::map<int64_t, int> results;                            // slot -> 1 finite, 0 not, -1 armed

void publish(int64_t slot, bool ok) {
  {
    std::lock_guard<std::mutex> hold(result_lock);
    results[slot] = ok ? 1 : 0;
  }
  result_ready.notify_all();
}

int attr_int(const std::unordered_map<std::string, std::string>& attrs, const char* key) {
  auto it = attrs.find(key);
  return it == attrs.end() ? 0 : std::stoi(it->second);
}

int64_t attr_slot(const std::unordered_map<std::string, std::string>& attrs) {
  auto it = attrs.find("slot");
  return it == attrs.end() ? 0 : std::stoll(it->second);
}

// the elements of a tuple attribute "(a, b, c)" (or "(a,)"), each parsed as std::istream parses
// a Tuple<float>'s (as_field false) or as dmlc parses a float field (as_field true)
bool parse_floats(const std::unordered_map<std::string, std::string>& attrs, const char* key, bool as_field,
                  size_t n, std::vector<float>* out) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return false;
  std::string s = it->second;
  for (char& ch : s)
    if (ch == '(' || ch == ')' || ch == '[' || ch == ']' || ch == ',') ch = ' ';
  std::istringstream words(s);
  std::string word;
  out->clear();
  while (words >> word) {
    float v;
    if (as_field) {
      try {
        v = dmlc::stof(word);
      } catch (...) {
        return false;
      }
    } else {
      std::istringstream one(word);
      if (!(one >> v)) return false;
    }
    out->push_back(v);
  }
  return out->size() == n;
}

// x - x is 0 for a finite x and NaN for an infinite or NaN one
template <typename T>
DL_CLONES bool all_finite(const T* p, int64_t n) {
  typedef typename Lanes<T>::type V;
  constexpr int L = BYTES / sizeof(T);
  V acc = {};
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V v;
    std::memcpy(&v, p + i, sizeof(v));
    acc += v - v;
  }
  T tail = 0;
  for (; i < n; ++i) tail += p[i] - p[i];
  bool ok = tail == 0;
  for (int j = 0; j < L; ++j) ok = ok && acc[j] == 0;
  return ok;
}

// multi_sgd_mom_update's element update, in its order of float32 operations
DL_CLONES void sgd_mom(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ m, int64_t n,
                       float momentum, float lr_wd, float lr_rescale) {
  for (int64_t i = 0; i < n; ++i) {
    const float mom = momentum * m[i] - lr_wd * w[i] - lr_rescale * g[i];
    m[i] = mom;
    w[i] = w[i] + mom;
  }
}

struct Block {
  int t;              // which weight
  int64_t begin, n;   // its elements [begin, begin + n)
};

std::vector<Block> blocks_of(const std::vector<MXTensor>& in, int num_weights) {
  std::vector<Block> blocks;
  for (int t = 0; t < num_weights; ++t) {
    const int64_t size = in[3 * t].size();
    for (int64_t b = 0; b < size; b += BLOCK) blocks.push_back({t, b, std::min(BLOCK, size - b)});
  }
  return blocks;
}

MXReturnValue forward(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                      std::vector<MXTensor>* out, const OpResource& res) {
  const int n = attr_int(attrs, "num_weights");
  std::vector<float> lrs, wds, momenta, rescales;
  if (!parse_floats(attrs, "lrs", false, n, &lrs) || !parse_floats(attrs, "wds", false, n, &wds)
      || !parse_floats(attrs, "momenta", true, n, &momenta) || !parse_floats(attrs, "rescales", true, n, &rescales)) {
    MX_ERROR_MSG << "dl_guarded_sgd_mom: lrs, wds, momenta and rescales must each hold num_weights (" << n
                 << ") numbers";
    return MX_FAIL;
  }
  const std::vector<Block> blocks = blocks_of(*in, n);
  int64_t total = 0;
  for (const Block& k : blocks) total += k.n;
  const bool fork = blocks.size() > 1 && total >= FORK;
  std::vector<MXTensor>& x = *in;
  int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (fork)
  for (size_t b = 0; b < blocks.size(); ++b)
    bad |= !all_finite(x[3 * blocks[b].t + 1].data<float>() + blocks[b].begin, blocks[b].n);
  for (size_t i = 3 * n; i < x.size() && !bad; ++i)
    bad = x[i].dtype == kFloat32 ? !all_finite(x[i].data<float>(), x[i].size())
                                 : !all_finite(x[i].data<double>(), x[i].size());
  (*out)[0].data<float>()[0] = bad ? 0.0f : 1.0f;
  publish(attr_slot(attrs), !bad);        // the caller goes on while the update runs
  if (bad) return MX_SUCCESS;
#pragma omp parallel for schedule(static) if (fork)
  for (size_t b = 0; b < blocks.size(); ++b) {
    const Block& k = blocks[b];
    const float lr = lrs[k.t];
    sgd_mom(x[3 * k.t].data<float>() + k.begin, x[3 * k.t + 1].data<float>() + k.begin,
            x[3 * k.t + 2].data<float>() + k.begin, k.n, momenta[k.t], lr * wds[k.t], lr * rescales[k.t]);
  }
  return MX_SUCCESS;
}

MXReturnValue parse_attrs(const std::unordered_map<std::string, std::string>& attrs, int* num_in, int* num_out) {
  *num_in = 3 * attr_int(attrs, "num_weights") + attr_int(attrs, "num_checked");
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue infer_type(const std::unordered_map<std::string, std::string>& attrs, std::vector<int>* in,
                         std::vector<int>* out) {
  const size_t n = 3 * attr_int(attrs, "num_weights");
  for (size_t i = 0; i < in->size(); ++i)
    if ((*in)[i] != kFloat32 && (i < n || (*in)[i] != kFloat64)) {
      MX_ERROR_MSG << "dl_guarded_sgd_mom: float32 weights, gradients and momenta, and float32 or float64 "
                      "checked arrays expected";
      return MX_FAIL;
    }
  (*out)[0] = kFloat32;
  return MX_SUCCESS;
}

MXReturnValue infer_shape(const std::unordered_map<std::string, std::string>& attrs,
                          std::vector<std::vector<unsigned int>>* in, std::vector<std::vector<unsigned int>>* out) {
  for (int t = 0; t < attr_int(attrs, "num_weights"); ++t)
    if ((*in)[3 * t] != (*in)[3 * t + 1] || (*in)[3 * t] != (*in)[3 * t + 2]) {
      MX_ERROR_MSG << "dl_guarded_sgd_mom: weight " << t << "'s gradient and momentum must have its shape";
      return MX_FAIL;
    }
  (*out)[0] = {1};
  return MX_SUCCESS;
}

MXReturnValue mutates(const std::unordered_map<std::string, std::string>& attrs, std::vector<int>* inputs) {
  for (int t = 0; t < attr_int(attrs, "num_weights"); ++t) {
    inputs->push_back(3 * t);
    inputs->push_back(3 * t + 2);
  }
  return MX_SUCCESS;
}

}  // namespace

REGISTER_OP(dl_guarded_sgd_mom)
    .setForward(forward, "cpu")
    .setParseAttrs(parse_attrs)
    .setInferType(infer_type)
    .setInferShape(infer_shape)
    .setMutateInputs(mutates);

extern "C" {

// before queueing a guarded step of this slot: its result is unknown until that step's check runs
void dl_finite_guard_arm(int64_t slot) {
  std::lock_guard<std::mutex> hold(result_lock);
  results[slot] = -1;
}

// the result of the check of the slot's step queued since dl_finite_guard_arm (1: every element
// finite, 0: not), waiting for it at most timeout_ms; -1 if it has not run by then (an operator
// before it failed, or the step is slow: the caller reads the flag through MXNet instead)
int dl_finite_guard_wait(int64_t slot, int timeout_ms) {
  std::unique_lock<std::mutex> hold(result_lock);
  auto known = [slot] {
    auto it = results.find(slot);
    return it != results.end() && it->second >= 0;
  };
  result_ready.wait_for(hold, std::chrono::milliseconds(timeout_ms), known);
  auto it = results.find(slot);
  return it == results.end() ? -1 : it->second;
}

}  // extern "C"
