// The ZeRO++ quantizers on the GPU (kernels/cuda/quantize_cuda.h) against the CPU versions (kernels/quantize.h), bit
// for bit, on random blocks and edge blocks (all zero, +-amax, rounding ties, bf16 inputs, fp16 subnormals, the fp16
// range's end, an inf). One case per run (`quantize_gpu_test <case>`, or `all`); exit 0 pass, 1 fail, 77 skipped (no
// device). Every device buffer is framed by guard bytes checked after each call: a write outside a buffer fails.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops_cuda.h"  // device_count
#include "kernels/cuda/quantize_cuda.h"
#include "kernels/quantize.h"

namespace {

namespace gpu = lins::kernels::cuda;
namespace quant = lins::kernels::quant;

constexpr size_t kGuard = 256;
constexpr unsigned char kGuardByte = 0xa5;

// n elements of T on the device between two guards.
template <class T>
class Buffer {
 public:
  explicit Buffer(size_t n) : n_(n) {
    CUDA_CHECK(cudaMalloc(&base_, n * sizeof(T) + 2 * kGuard));
    CUDA_CHECK(cudaMemset(base_, kGuardByte, n * sizeof(T) + 2 * kGuard));
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { cudaFree(base_); }
  T* get() { return reinterpret_cast<T*>(base_ + kGuard); }
  void upload(const std::vector<T>& v) {
    CUDA_CHECK(cudaMemcpy(get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() {
    std::vector<T> v(n_);
    CUDA_CHECK(cudaMemcpy(v.data(), get(), n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  bool guards_intact() {
    std::vector<unsigned char> g(kGuard);
    for (size_t offset : {size_t{0}, kGuard + n_ * sizeof(T)}) {
      CUDA_CHECK(cudaMemcpy(g.data(), base_ + offset, kGuard, cudaMemcpyDeviceToHost));
      for (unsigned char c : g)
        if (c != kGuardByte) return false;
    }
    return true;
  }

 private:
  size_t n_;
  unsigned char* base_ = nullptr;
};

bool g_ok = true;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("  FAIL %s\n", what.c_str());
    g_ok = false;
  }
}

// float vectors equal to the bit (any NaN equals any NaN).
bool same_floats(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  if (a.size() != b.size()) {
    std::printf("  FAIL %s: sizes %zu and %zu\n", what.c_str(), a.size(), b.size());
    return false;
  }
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t ua, ub;
    std::memcpy(&ua, &a[i], 4);
    std::memcpy(&ub, &b[i], 4);
    if (ua == ub || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    if (bad++ == 0) first = i;
  }
  if (bad)
    std::printf("  FAIL %s: %zu of %zu differ, first at %zu: gpu %.9g cpu %.9g\n", what.c_str(), bad, a.size(), first,
                a[first], b[first]);
  return bad == 0;
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && bad++ == 0) first = i;
  if (bad) std::printf("  FAIL %s: %zu of %zu bytes differ, first at %zu\n", what.c_str(), bad, a.size(), first);
  return bad == 0 && a.size() == b.size();
}

std::mt19937 g_rng(1234);

// One block of `size` inputs of kind k (0..8): normal, zeros, +-amax, ties, bf16, subnormal, large, fp16 midpoints,
// one inf.
std::vector<float> make_block(int kind, int64_t size) {
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(size));
  const float magnitude = std::pow(10.0f, uniform(g_rng) * 3.0f);
  for (auto& x : v) x = normal(g_rng) * magnitude;
  switch (kind) {
    case 1:
      for (size_t i = 0; i < v.size(); ++i) v[i] = i % 3 ? 0.0f : -0.0f;
      break;
    case 2:
      v.front() = magnitude * 2.5f;
      v.back() = -magnitude * 2.5f;
      break;
    case 3: {  // ties of the int4 and int8 grids under a power-of-two amax
      const float amax = std::ldexp(1.0f, static_cast<int>(g_rng() % 12) - 6);
      for (size_t i = 0; i < v.size(); ++i) {
        const bool int4 = g_rng() % 2;
        const int j = static_cast<int>(g_rng() % (int4 ? 16 : 256)) - (int4 ? 8 : 128);
        v[i] = (j + 0.5f) / (int4 ? 8.0f : 128.0f) * amax;
      }
      v[0] = amax;
      break;
    }
    case 4:
      for (auto& x : v) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        u &= 0xffff0000u;
        std::memcpy(&x, &u, 4);
      }
      break;
    case 5:
      for (auto& x : v) x = normal(g_rng) * 1e-6f;
      break;
    case 6:
      for (auto& x : v) x = std::fmax(-65504.0f, std::fmin(65504.0f, normal(g_rng) * 30000.0f));
      break;
    case 7:
      for (auto& x : v) {
        const float h = quant::round_fp16(normal(g_rng));
        const float next = quant::fp16_value(static_cast<uint16_t>(quant::fp16_bits(h) + 1));
        x = h + (next - h) / 2;
      }
      break;
    case 8:
      v[v.size() / 2] = INFINITY;
      break;
    default:
      break;
  }
  return v;
}

std::vector<float> make_blocks(int64_t groups, int64_t size) {
  std::vector<float> x;
  for (int64_t g = 0; g < groups; ++g) {
    const auto b = make_block(static_cast<int>((g * 7 + g_rng() % 9) % 9), size);
    x.insert(x.end(), b.begin(), b.end());
  }
  return x;
}

struct Layout {
  int64_t n, groups;
};
const Layout kLayouts[] = {{8, 1}, {2, 1}, {64, 8}, {8000, 1}, {16016, 7}, {4096, 4}, {96, 12}, {1 << 20, 256}};

bool test_quantize() {
  for (int bits : {8, 4}) {
    for (const Layout& l : kLayouts) {
      if (bits == 4 && (l.n / l.groups) % 2) continue;
      const std::string what =
          "int" + std::to_string(bits) + " n=" + std::to_string(l.n) + " groups=" + std::to_string(l.groups);
      const auto x = make_blocks(l.groups, l.n / l.groups);
      const int64_t bytes = bits == 8 ? l.n : l.n / 2;
      std::vector<uint8_t> q(bytes);
      std::vector<float> inv(l.groups), back(l.n);
      Buffer<float> x_d(l.n), inv_d(l.groups), back_d(l.n);
      Buffer<uint8_t> q_d(bytes);
      x_d.upload(x);
      if (bits == 8) {
        quant::quantize_int8(x.data(), l.n, l.groups, reinterpret_cast<int8_t*>(q.data()), inv.data());
        quant::dequantize_int8(reinterpret_cast<int8_t*>(q.data()), inv.data(), l.n, l.groups, back.data());
        CUDA_CHECK(
            gpu::quantize_int8(x_d.get(), l.n, l.groups, reinterpret_cast<int8_t*>(q_d.get()), inv_d.get(), nullptr));
        CUDA_CHECK(gpu::dequantize_int8(reinterpret_cast<int8_t*>(q_d.get()), inv_d.get(), l.n, l.groups, back_d.get(),
                                        nullptr));
      } else {
        quant::quantize_int4(x.data(), l.n, l.groups, q.data(), inv.data());
        quant::dequantize_int4(q.data(), inv.data(), l.n, l.groups, back.data());
        CUDA_CHECK(gpu::quantize_int4(x_d.get(), l.n, l.groups, q_d.get(), inv_d.get(), nullptr));
        CUDA_CHECK(gpu::dequantize_int4(q_d.get(), inv_d.get(), l.n, l.groups, back_d.get(), nullptr));
      }
      CUDA_CHECK(cudaDeviceSynchronize());
      expect(same_bytes(q_d.download(), q, what + " payload"), what + " payload");
      expect(same_floats(inv_d.download(), inv, what + " inv_scales"), what + " inv_scales");
      expect(same_floats(back_d.download(), back, what + " dequantized"), what + " dequantized");
      expect(x_d.guards_intact() && inv_d.guards_intact() && back_d.guards_intact() && q_d.guards_intact(),
             what + " guards");
    }
  }
  return g_ok;
}

// Dequantizing any payload bytes with scales of every magnitude (fp16 overflow and subnormal results included).
bool test_dequantize_any() {
  for (int bits : {8, 4}) {
    const int64_t n = 1 << 16, groups = 512, bytes = bits == 8 ? n : n / 2;
    std::vector<uint8_t> q(bytes);
    std::vector<float> inv(groups), back(n);
    for (auto& b : q) b = static_cast<uint8_t>(g_rng());
    std::uniform_real_distribution<float> exponent(-9.0f, 4.0f);
    for (auto& s : inv) s = std::pow(10.0f, exponent(g_rng));
    Buffer<uint8_t> q_d(bytes);
    Buffer<float> inv_d(groups), back_d(n);
    q_d.upload(q);
    inv_d.upload(inv);
    if (bits == 8) {
      quant::dequantize_int8(reinterpret_cast<int8_t*>(q.data()), inv.data(), n, groups, back.data());
      CUDA_CHECK(
          gpu::dequantize_int8(reinterpret_cast<int8_t*>(q_d.get()), inv_d.get(), n, groups, back_d.get(), nullptr));
    } else {
      quant::dequantize_int4(q.data(), inv.data(), n, groups, back.data());
      CUDA_CHECK(gpu::dequantize_int4(q_d.get(), inv_d.get(), n, groups, back_d.get(), nullptr));
    }
    const std::string what = "dequantize int" + std::to_string(bits) + " of any payload";
    expect(same_floats(back_d.download(), back, what), what);
    expect(back_d.guards_intact(), what + " guards");
  }
  return g_ok;
}

bool test_swizzle() {
  struct Case {
    int nodes, gpus;
    int64_t groups_per_slice, size;
  };
  for (const Case c : {Case{2, 4, 1, 8}, Case{2, 4, 3, 16}, Case{2, 2, 2, 4096}, Case{4, 8, 2, 4096}, Case{3, 2, 5, 64},
                       Case{16, 8, 1, 11008}}) {
    const int64_t groups = c.groups_per_slice * c.nodes * c.gpus, n = groups * c.size;
    const auto x = make_blocks(groups, c.size);
    std::vector<uint8_t> q(n / 2);
    std::vector<float> inv(groups);
    quant::swizzle_quantize_int4(x.data(), n, groups, c.nodes, c.gpus, q.data(), inv.data());
    Buffer<float> x_d(n), inv_d(groups);
    Buffer<uint8_t> q_d(n / 2);
    x_d.upload(x);
    CUDA_CHECK(gpu::swizzle_quantize_int4(x_d.get(), n, groups, c.nodes, c.gpus, q_d.get(), inv_d.get(), nullptr));
    const std::string what = "swizzle " + std::to_string(c.nodes) + "x" + std::to_string(c.gpus) +
                             " groups=" + std::to_string(groups) + " size=" + std::to_string(c.size);
    expect(same_bytes(q_d.download(), q, what + " payload"), what + " payload");
    expect(same_floats(inv_d.download(), inv, what + " inv_scales"), what + " inv_scales");
    expect(q_d.guards_intact() && inv_d.guards_intact(), what + " guards");
  }
  return g_ok;
}

// peers int4 tensors: quantized from mixed blocks, or (random = true) any bytes with scales of every magnitude.
void peer_inputs(int peers, int64_t groups, int64_t size, bool random, std::vector<uint8_t>& q,
                 std::vector<float>& inv) {
  q.assign(static_cast<size_t>(peers * groups * size / 2), 0);
  inv.assign(static_cast<size_t>(peers * groups), 0.0f);
  for (int j = 0; j < peers; ++j) {
    if (random) {
      std::uniform_real_distribution<float> exponent(-9.0f, 4.0f);
      for (int64_t i = 0; i < groups * size / 2; ++i) q[j * groups * size / 2 + i] = static_cast<uint8_t>(g_rng());
      for (int64_t g = 0; g < groups; ++g) inv[j * groups + g] = std::pow(10.0f, exponent(g_rng));
    } else {
      const auto x = make_blocks(groups, size);
      quant::quantize_int4(x.data(), groups * size, groups, q.data() + j * groups * size / 2, inv.data() + j * groups);
    }
  }
}

bool test_reduction() {
  for (int peers : {2, 3, 4, 8, 16}) {
    for (const Layout l : {Layout{8, 1}, Layout{128, 4}, Layout{3 * 64, 3}, Layout{4096 * 8, 8}}) {
      for (bool random : {false, true}) {
        std::vector<uint8_t> q;
        std::vector<float> inv;
        peer_inputs(peers, l.groups, l.n / l.groups, random, q, inv);
        std::vector<uint8_t> out(l.n / 2);
        std::vector<float> out_inv(l.groups);
        quant::quantized_reduction_int4(q.data(), inv.data(), l.n, l.groups, peers, out.data(), out_inv.data());
        Buffer<uint8_t> q_d(q.size()), out_d(out.size());
        Buffer<float> inv_d(inv.size()), out_inv_d(out_inv.size());
        q_d.upload(q);
        inv_d.upload(inv);
        CUDA_CHECK(gpu::quantized_reduction_int4(q_d.get(), inv_d.get(), l.n, l.groups, peers, out_d.get(),
                                                 out_inv_d.get(), nullptr));
        const std::string what = "quantized_reduction peers=" + std::to_string(peers) + " n=" + std::to_string(l.n) +
                                 " groups=" + std::to_string(l.groups) + (random ? " (random)" : "");
        expect(same_bytes(out_d.download(), out, what + " payload"), what + " payload");
        expect(same_floats(out_inv_d.download(), out_inv, what + " inv_scales"), what + " inv_scales");
        expect(out_d.guards_intact() && out_inv_d.guards_intact(), what + " guards");
      }
    }
  }
  return g_ok;
}

bool test_dequantize_reduce() {
  for (int peers : {2, 3, 4, 8}) {
    for (const Layout l : {Layout{8, 1}, Layout{128, 4}, Layout{4096 * 4, 4}}) {
      for (float divisor : {static_cast<float>(peers), 3.0f, 8.0f, 24.0f}) {
        const bool random = divisor == 8.0f;
        std::vector<uint8_t> q;
        std::vector<float> inv;
        peer_inputs(peers, l.groups, l.n / l.groups, random, q, inv);
        std::vector<float> out(l.n);
        quant::dequantize_reduce_int4(q.data(), inv.data(), l.n, l.groups, peers, divisor, out.data());
        Buffer<uint8_t> q_d(q.size());
        Buffer<float> inv_d(inv.size()), out_d(out.size());
        q_d.upload(q);
        inv_d.upload(inv);
        CUDA_CHECK(
            gpu::dequantize_reduce_int4(q_d.get(), inv_d.get(), l.n, l.groups, peers, divisor, out_d.get(), nullptr));
        const std::string what = "dequantize_reduce peers=" + std::to_string(peers) + " n=" + std::to_string(l.n) +
                                 " divisor=" + std::to_string(divisor);
        expect(same_floats(out_d.download(), out, what), what);
        expect(out_d.guards_intact(), what + " guards");
      }
    }
  }
  return g_ok;
}

// Refused layouts return cudaErrorInvalidValue and launch nothing.
bool test_errors() {
  Buffer<float> f(64);
  Buffer<uint8_t> b(64);
  expect(
      gpu::quantize_int8(f.get(), 8, 3, reinterpret_cast<int8_t*>(b.get()), f.get(), nullptr) == cudaErrorInvalidValue,
      "quantize_int8 n % groups != 0");
  expect(gpu::quantize_int4(f.get(), 6, 2, b.get(), f.get(), nullptr) == cudaErrorInvalidValue,
         "quantize_int4 odd group size");
  expect(gpu::swizzle_quantize_int4(f.get(), 8, 2, 2, 2, b.get(), f.get(), nullptr) == cudaErrorInvalidValue,
         "swizzle groups % W != 0");
  expect(gpu::quantized_reduction_int4(b.get(), f.get(), 8, 1, 0, b.get(), f.get(), nullptr) == cudaErrorInvalidValue,
         "quantized_reduction peers = 0");
  expect(gpu::dequantize_reduce_int4(b.get(), f.get(), 8, 1, 2, 0.0f, f.get(), nullptr) == cudaErrorInvalidValue,
         "dequantize_reduce divisor 0");
  expect(cudaGetLastError() == cudaSuccess, "no launch error left behind");
  return g_ok;
}

struct Case {
  const char* name;
  std::function<bool()> run;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"quantize", test_quantize},   {"dequantize_any", test_dequantize_any},       {"swizzle", test_swizzle},
      {"reduction", test_reduction}, {"dequantize_reduce", test_dequantize_reduce}, {"errors", test_errors},
  };
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  if (which == "--list") {
    for (const auto& c : cases()) std::printf("%s\n", c.name);
    return 0;
  }
  if (gpu::device_count() == 0) {
    std::printf("SKIPPED: no CUDA device (cudaGetDeviceCount reports none or no driver); GPU kernel tests need one\n");
    return 77;
  }
  bool ok = true, found = false;
  for (const auto& c : cases()) {
    if (which != "all" && which != c.name) continue;
    found = true;
    std::printf("[%s]\n", c.name);
    g_ok = true;
    const bool pass = c.run();
    std::printf("[%s] %s\n", c.name, pass ? "PASS" : "FAIL");
    ok &= pass;
  }
  if (!found) {
    std::fprintf(stderr, "unknown case '%s' (try --list)\n", which.c_str());
    return 2;
  }
  return ok ? 0 : 1;
}
