// The CPU compute backend: host memory from the C allocator (64-byte aligned, zero-filled, tracked per category),
// synchronous kernels from kernels/cpu (OpenBLAS sgemm) in fp32 or emulated bf16 compute, events that are host
// timestamps.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/util/hash.h"
#include "train/backend.h"

namespace lins {

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::param:
      return "param";
    case MemCategory::grad:
      return "grad";
    case MemCategory::optimizer:
      return "optimizer";
    case MemCategory::activation:
      return "activation";
    case MemCategory::buffer:
      return "buffer";
  }
  return "?";
}

int64_t MemoryStats::state_current_bytes() const {
  return current_bytes[int(MemCategory::param)] + current_bytes[int(MemCategory::grad)] +
         current_bytes[int(MemCategory::optimizer)];
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = o.owner_;
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    category_ = o.category_;
    o.owner_ = nullptr;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (owner_ && ptr_) owner_->release(ptr_, bytes_, category_);
  owner_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

void ComputeBackend::track_alloc(int64_t bytes, MemCategory c) {
  const int i = int(c);
  mem_.current_bytes[i] += bytes;
  mem_.peak_bytes[i] = std::max(mem_.peak_bytes[i], mem_.current_bytes[i]);
  mem_.total_current_bytes += bytes;
  mem_.total_peak_bytes = std::max(mem_.total_peak_bytes, mem_.total_current_bytes);
}

void ComputeBackend::track_free(int64_t bytes, MemCategory c) {
  mem_.current_bytes[int(c)] -= bytes;
  mem_.total_current_bytes -= bytes;
}

void ComputeBackend::reset_peak_memory() {
  mem_.peak_bytes = mem_.current_bytes;
  mem_.total_peak_bytes = mem_.total_current_bytes;
}

namespace {

// An fp32 view of n compute-dtype elements at p: p itself when they are fp32; for bf16, a widened copy (filled when
// `load`) that store() rounds back into p. The CPU's bf16 compute is an emulation: the arithmetic is fp32 on these
// copies (host vectors, outside the tracked device memory), every output rounded once to bf16, as the GPU stores it.
class F32View {
 public:
  F32View(const void* p, int64_t n, DType dtype, bool load = true)
      : p_(const_cast<void*>(p)), n_(n), bf16_(dtype == DType::bf16) {
    if (!bf16_) return;
    copy_ = std::make_unique_for_overwrite<float[]>(size_t(n));  // every element is loaded or written by the kernel
    if (load) kernels::cpu::cast_bf16_to_fp32(static_cast<const uint16_t*>(p), copy_.get(), n);
  }
  float* get() { return bf16_ ? copy_.get() : static_cast<float*>(p_); }
  void store() {
    if (bf16_) kernels::cpu::cast_fp32_to_bf16(copy_.get(), static_cast<uint16_t*>(p_), n_);
  }

 private:
  void* p_;
  int64_t n_;
  bool bf16_;
  std::unique_ptr<float[]> copy_;
};

// Freed blocks are kept by size and handed out again (the step allocates the same sizes every micro-batch), so
// steady-state steps neither map nor fault in fresh pages. Only live allocations count in MemoryStats, as a GPU
// caching allocator's "allocated" figure.
class CpuBackend final : public ComputeBackend {
 public:
  explicit CpuBackend(DType compute) : compute_(compute) {}
  ~CpuBackend() override {
    for (auto& [size, blocks] : cache_)
      for (void* p : blocks) std::free(p);
  }
  const char* name() const override { return "cpu"; }

  Result<DeviceBuffer> allocate(int64_t bytes, MemCategory category, bool zero) override {
    if (bytes < 0) return make_error("cpu backend: negative allocation of " + std::to_string(bytes) + " bytes");
    if (bytes == 0) return DeviceBuffer(this, nullptr, 0, category);
    const size_t rounded = (size_t(bytes) + 63) / 64 * 64;
    void* p = nullptr;
    if (auto it = cache_.find(rounded); it != cache_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
    } else {
      p = std::aligned_alloc(64, rounded);
      if (!p) return make_error("cpu backend: out of host memory allocating " + std::to_string(bytes) + " bytes");
    }
    if (zero) std::memset(p, 0, rounded);
    track_alloc(bytes, category);
    return DeviceBuffer(this, p, bytes, category);
  }

  void upload(void* dst, const void* src, int64_t bytes) override { std::memcpy(dst, src, size_t(bytes)); }
  void download(void* dst, const void* src, int64_t bytes) override { std::memcpy(dst, src, size_t(bytes)); }
  void copy(void* dst, const void* src, int64_t bytes) override {
    if (dst != src && bytes > 0) std::memmove(dst, src, size_t(bytes));
  }
  void zero(void* dst, int64_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, size_t(bytes));
  }
  void fill(float* dst, int64_t n, float value) override {
    for (int64_t i = 0; i < n; ++i) dst[i] = value;
  }
  void init_normal(float* dst, int64_t n, uint64_t seed, int64_t first, float std_dev) override {
    // Box-Muller on two 32-bit uniforms drawn from one 64-bit hash of (seed, index).
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t h = splitmix64(seed ^ splitmix64(uint64_t(first + i)));
      const double u1 = (double((h >> 32) & 0xffffffffu) + 1.0) / 4294967297.0;  // (0, 1)
      const double u2 = double(h & 0xffffffffu) / 4294967296.0;                  // [0, 1)
      dst[i] = float(std_dev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
    }
  }

  Event record_event() override {
    Event e;
    e.host_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    return e;
  }
  double elapsed_s(const Event& a, const Event& b) override { return b.host_s - a.host_s; }
  void synchronize() override {}
  void* native_stream() override { return nullptr; }

  DType compute_dtype() const override { return compute_; }

  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a, const void* b, float beta,
            void* c, DType c_dtype) override {
    F32View va(a, m * k, compute_), vb(b, k * n, compute_), vc(c, m * n, c_dtype, /*load=*/beta != 0.0f);
    kernels::cpu::gemm(ta, tb, m, n, k, alpha, va.get(), vb.get(), beta, vc.get());
    vc.store();
  }
  void rmsnorm_forward(const void* x, const void* w, void* y, float* rstd, int64_t rows, int64_t dim,
                       float eps) override {
    F32View vx(x, rows * dim, compute_), vw(w, dim, compute_), vy(y, rows * dim, compute_, false);
    kernels::cpu::rmsnorm_forward(vx.get(), vw.get(), vy.get(), rstd, rows, dim, eps);
    vy.store();
  }
  void rmsnorm_backward(const void* dy, const void* x, const void* w, const float* rstd, void* dx, float* dw,
                        int64_t rows, int64_t dim) override {
    F32View vdy(dy, rows * dim, compute_), vx(x, rows * dim, compute_), vw(w, dim, compute_);
    F32View vdx(dx, rows * dim, compute_, false);
    kernels::cpu::rmsnorm_backward(vdy.get(), vx.get(), vw.get(), rstd, vdx.get(), dw, rows, dim);
    vdx.store();
  }
  void swiglu_forward(const void* gate, const void* up, void* out, int64_t n) override {
    F32View vg(gate, n, compute_), vu(up, n, compute_), vo(out, n, compute_, false);
    kernels::cpu::swiglu_forward(vg.get(), vu.get(), vo.get(), n);
    vo.store();
  }
  void swiglu_backward(const void* dout, const void* gate, const void* up, void* dgate, void* dup, int64_t n) override {
    F32View vd(dout, n, compute_), vg(gate, n, compute_), vu(up, n, compute_);
    F32View vdg(dgate, n, compute_, false), vdu(dup, n, compute_, false);
    // fp32: dgate may be dout itself (the kernel reads each element before writing it); bf16: separate copies.
    kernels::cpu::swiglu_backward(vd.get(), vg.get(), vu.get(), vdg.get(), vdu.get(), n);
    vdg.store();
    vdu.store();
  }
  void rope(void* x, int batch, int seq, int heads, int head_dim, float theta, bool inverse) override {
    F32View vx(x, int64_t(batch) * seq * heads * head_dim, compute_);
    kernels::cpu::rope(vx.get(), batch, seq, heads, head_dim, theta, inverse);
    vx.store();
  }
  void attention_forward(const void* q, const void* k, const void* v, void* out, float* lse, int batch, int seq,
                         int heads, int head_dim) override {
    const int64_t n = int64_t(batch) * seq * heads * head_dim;
    F32View vq(q, n, compute_), vk(k, n, compute_), vv(v, n, compute_), vo(out, n, compute_, false);
    kernels::cpu::attention_forward(vq.get(), vk.get(), vv.get(), vo.get(), lse, batch, seq, heads, head_dim);
    vo.store();
  }
  void attention_backward(const void* dout, const void* q, const void* k, const void* v, const void* out,
                          const float* lse, void* dq, void* dk, void* dv, int batch, int seq, int heads,
                          int head_dim) override {
    const int64_t n = int64_t(batch) * seq * heads * head_dim;
    F32View vd(dout, n, compute_), vq(q, n, compute_), vk(k, n, compute_), vv(v, n, compute_), vo(out, n, compute_);
    F32View vdq(dq, n, compute_, false), vdk(dk, n, compute_, false), vdv(dv, n, compute_, false);
    kernels::cpu::attention_backward(vd.get(), vq.get(), vk.get(), vv.get(), vo.get(), lse, vdq.get(), vdk.get(),
                                     vdv.get(), batch, seq, heads, head_dim);
    vdq.store();
    vdk.store();
    vdv.store();
  }
  void cross_entropy(const void* logits, const int32_t* targets, void* dlogits, int64_t rows, int64_t vocab,
                     float grad_scale, double* loss_sum) override {
    F32View vl(logits, rows * vocab, compute_), vd(dlogits, rows * vocab, compute_, false);
    loss_sum[0] += kernels::cpu::cross_entropy(vl.get(), targets, vd.get(), rows, vocab, grad_scale);
    vd.store();
  }
  void embedding_forward(const void* table, const int32_t* ids, void* out, int64_t n, int64_t dim) override {
    // A row gather: the same bytes in either dtype.
    const int64_t row = dim * dtype_bytes(compute_);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(static_cast<char*>(out) + i * row, static_cast<const char*>(table) + int64_t(ids[i]) * row,
                  size_t(row));
  }
  void embedding_backward(const void* dout, const int32_t* ids, float* dtable, int64_t n, int64_t dim) override {
    F32View vd(dout, n * dim, compute_);
    kernels::cpu::embedding_backward(vd.get(), ids, dtable, n, dim);
  }
  void adamw(float* master, const void* grad, DType grad_dtype, float* m, float* v, void* param_out, DType param_dtype,
             int64_t n, const kernels::cpu::AdamWConfig& cfg, int step) override {
    if (grad_dtype == DType::fp32)
      kernels::cpu::adamw(master, static_cast<const float*>(grad), m, v, n, cfg, step);
    else
      kernels::cpu::adamw_mixed(master, static_cast<const uint16_t*>(grad), m, v, nullptr, n, cfg, step);
    if (param_out) convert(master, DType::fp32, param_out, param_dtype, n, false);
  }
  void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n, bool accumulate) override {
    namespace k = kernels::cpu;
    const bool from16 = src_dtype == DType::bf16, to16 = dst_dtype == DType::bf16;
    const auto* s16 = static_cast<const uint16_t*>(src);
    const auto* s32 = static_cast<const float*>(src);
    auto* d16 = static_cast<uint16_t*>(dst);
    auto* d32 = static_cast<float*>(dst);
    if (!accumulate) {
      if (from16 == to16)
        copy(dst, src, n * dtype_bytes(dst_dtype));
      else if (to16)
        k::cast_fp32_to_bf16(s32, d16, n);
      else
        k::cast_bf16_to_fp32(s16, d32, n);
    } else if (to16) {
      from16 ? k::accumulate_bf16_into_bf16(d16, s16, n) : k::accumulate_fp32_into_bf16(d16, s32, n);
    } else {
      from16 ? k::accumulate_bf16_into_fp32(d32, s16, n) : k::add(d32, s32, n);
    }
  }

 protected:
  void release(void* ptr, int64_t bytes, MemCategory category) override {
    cache_[(size_t(bytes) + 63) / 64 * 64].push_back(ptr);
    track_free(bytes, category);
  }

 private:
  std::unordered_map<size_t, std::vector<void*>> cache_;  // rounded size -> free blocks
  DType compute_ = DType::fp32;
};

}  // namespace

std::unique_ptr<ComputeBackend> make_cpu_backend(DType compute) { return std::make_unique<CpuBackend>(compute); }

}  // namespace lins
