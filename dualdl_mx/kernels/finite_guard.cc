// dl_finite_guard / dl_finite_restore: an optimizer step queued behind its non-finite gradient
// check, with an exact rollback that costs nothing when the gradients are finite.
//
// Why (MXNet difference hidden here): every host read waits for MXNet's engine. dl.Trainer must
// not apply a step whose gradients are not all finite; reading the check before queueing the step
// left the engine idle while Python queued the update (0.1-0.2 of the benchmark MLP's step).
// With these operators the step is queued right behind the check and the check is read after:
//   dl_finite_guard  inputs: gradients (num_grads), then the arrays the update will write
//                    (num_states); output: (1,) float32, 1 if every gradient element is finite.
//                    Only when one is not, it copies those arrays into storage of this library,
//                    under the attribute slot, before the update (which writes them) can run.
//   dl_finite_restore inputs: the same arrays (written); output (1,) float32, 1 if restored.
//                    Copies the slot's saved values back and frees them.
// MXNet's engine orders the update after the guard (it writes what the guard reads) and the
// restore after the update (both write the same arrays).
// Reading the flag with MXNet (``asnumpy``) queues a wait operator on the engine's CPU worker,
// behind the update queued after the guard, so it returns only once the update has run too, and
// the caller's remaining work cannot overlap it. dl_finite_guard_arm / dl_finite_guard_wait
// (plain C functions) give the guard's result as soon as the guard itself has run.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "mxnet/lib_api.h"

using namespace mxnet::ext;

namespace {

constexpr int BYTES = 64;   // one AVX-512 register of lanes (two AVX2 ones, four SSE ones)
#define DL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

template <typename T> struct Lanes { typedef T type __attribute__((vector_size(BYTES))); };

std::mutex saved_lock;
std::map<int64_t, std::vector<std::vector<char>>> saved;   // slot -> copies of the states

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

size_t dtype_bytes(int dtype) {
  switch (dtype) {
    case kFloat64: case kInt64: return 8;
    case kFloat32: case kInt32: return 4;
    case kFloat16: return 2;
    default: return 1;
  }
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

MXReturnValue guard_forward(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                            std::vector<MXTensor>* out, const OpResource& res) {
  const int n = attr_int(attrs, "num_grads");
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) {
    MXTensor& g = (*in)[i];
    ok = g.dtype == kFloat32 ? all_finite(g.data<float>(), g.size()) : all_finite(g.data<double>(), g.size());
  }
  (*out)[0].data<float>()[0] = ok ? 1.0f : 0.0f;
  if (!ok) {
    std::vector<std::vector<char>> copies;
    for (size_t i = n; i < in->size(); ++i) {
      MXTensor& s = (*in)[i];
      const size_t bytes = size_t(s.size()) * dtype_bytes(s.dtype);
      const char* src = s.data<char>();
      copies.emplace_back(src, src + bytes);
    }
    std::lock_guard<std::mutex> hold(saved_lock);
    saved[attr_slot(attrs)] = std::move(copies);
  }
  publish(attr_slot(attrs), ok);                 // after the copies: the caller may restore next
  return MX_SUCCESS;
}

MXReturnValue restore_forward(const std::unordered_map<std::string, std::string>& attrs, std::vector<MXTensor>* in,
                              std::vector<MXTensor>* out, const OpResource& res) {
  std::vector<std::vector<char>> copies;
  {
    std::lock_guard<std::mutex> hold(saved_lock);
    auto it = saved.find(attr_slot(attrs));
    if (it != saved.end()) {
      copies = std::move(it->second);
      saved.erase(it);
    }
  }
  const bool restored = copies.size() == in->size();
  for (size_t i = 0; restored && i < in->size(); ++i) {
    MXTensor& s = (*in)[i];
    std::memcpy(s.data<char>(), copies[i].data(), std::min(copies[i].size(), size_t(s.size()) * dtype_bytes(s.dtype)));
  }
  (*out)[0].data<float>()[0] = restored ? 1.0f : 0.0f;
  return MX_SUCCESS;
}

MXReturnValue guard_attrs(const std::unordered_map<std::string, std::string>& attrs, int* num_in, int* num_out) {
  *num_in = attr_int(attrs, "num_grads") + attr_int(attrs, "num_states");
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue restore_attrs(const std::unordered_map<std::string, std::string>& attrs, int* num_in, int* num_out) {
  *num_in = attr_int(attrs, "num_states");
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue flag_type(const std::unordered_map<std::string, std::string>& attrs, std::vector<int>* in,
                        std::vector<int>* out) {
  const int n = attr_int(attrs, "num_grads");
  for (int i = 0; i < n; ++i)
    if ((*in)[i] != kFloat32 && (*in)[i] != kFloat64) {
      MX_ERROR_MSG << "dl_finite_guard: float32 or float64 gradients expected";
      return MX_FAIL;
    }
  (*out)[0] = kFloat32;
  return MX_SUCCESS;
}

MXReturnValue flag_shape(const std::unordered_map<std::string, std::string>& attrs,
                         std::vector<std::vector<unsigned int>>* in, std::vector<std::vector<unsigned int>>* out) {
  (*out)[0] = {1};
  return MX_SUCCESS;
}

MXReturnValue restore_mutates(const std::unordered_map<std::string, std::string>& attrs, std::vector<int>* inputs) {
  for (int i = 0; i < attr_int(attrs, "num_states"); ++i) inputs->push_back(i);
  return MX_SUCCESS;
}

}  // namespace

REGISTER_OP(dl_finite_guard)
    .setForward(guard_forward, "cpu")
    .setParseAttrs(guard_attrs)
    .setInferType(flag_type)
    .setInferShape(flag_shape);

REGISTER_OP(dl_finite_restore)
    .setForward(restore_forward, "cpu")
    .setParseAttrs(restore_attrs)
    .setInferType(flag_type)
    .setInferShape(flag_shape)
    .setMutateInputs(restore_mutates);

extern "C" {

// before queueing a guard of this slot: its result is unknown until that guard runs
void dl_finite_guard_arm(int64_t slot) {
  std::lock_guard<std::mutex> hold(result_lock);
  results[slot] = -1;
}

// the result of the slot's guard queued since dl_finite_guard_arm (1: every element finite, 0:
// not), waiting for it at most timeout_ms; -1 if it has not run by then (an operator before it
// failed, or the step is slow: the caller reads the flag through MXNet instead)
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
