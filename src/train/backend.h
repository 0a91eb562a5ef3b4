// The compute backend of the training step: device memory (tracked per category, with a high-water mark), one
// compute stream with events, host<->device copies, and the kernels of kernels/ops.h on device pointers. The CPU
// backend runs them on host memory with OpenBLAS; the GPU backend (CUDA kernels, cuBLAS) implements the same
// interface. Activations are in the backend's compute dtype (fp32, or bf16), weight gradients fp32; the executor
// keeps P and G in its storage dtype (fp32, or bf16 for the paper's mixed precision) and moves between the dtypes
// with convert() and adamw()'s dtypes. The model and the executor use only this interface: they never dereference
// device memory.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "core/model/vocabulary.h"  // DType
#include "core/util/result.h"
#include "kernels/ops.h"
#include "kernels/quantize.h"

namespace lins {

// What a device allocation holds; the memory test compares the `state` categories with the memory model.
enum class MemCategory {
  param,       // P: the local parameter shard (and ZeRO++'s secondary partition)
  grad,        // G: gradients kept across micro-batches
  optimizer,   // OS: master weights, momentum, variance of the owned elements
  activation,  // saved activations of the micro-batch in flight, and the workspaces of the kernels computing them
  buffer,      // the executor's: gathered parameters, whole-module gradients, packed buffers, payloads, working copies
};
constexpr int kMemCategoryCount = 5;
const char* mem_category_name(MemCategory c);

struct MemoryStats {
  std::array<int64_t, kMemCategoryCount> current_bytes{};
  std::array<int64_t, kMemCategoryCount> peak_bytes{};  // per category
  int64_t total_current_bytes = 0;
  int64_t total_peak_bytes = 0;         // high-water mark of everything live at once
  int64_t state_current_bytes() const;  // param + grad + optimizer
};

class ComputeBackend;

// An owning device allocation (move-only). Freed (and untracked) when destroyed.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(ComputeBackend* owner, void* ptr, int64_t bytes, MemCategory category)
      : owner_(owner), ptr_(ptr), bytes_(bytes), category_(category) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  void reset();
  bool empty() const { return ptr_ == nullptr; }
  int64_t bytes() const { return bytes_; }
  MemCategory category() const { return category_; }
  void* data() const { return ptr_; }
  float* f32() const { return static_cast<float*>(ptr_); }
  int32_t* i32() const { return static_cast<int32_t*>(ptr_); }
  double* f64() const { return static_cast<double*>(ptr_); }

 private:
  ComputeBackend* owner_ = nullptr;
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
  MemCategory category_ = MemCategory::buffer;
};

// A point on the compute stream. On the CPU it is the host time when recorded (work is synchronous); on the GPU a
// CUDA event.
struct Event {
  double host_s = 0.0;
  std::shared_ptr<void> native;  // cudaEvent_t holder on the GPU backend
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  virtual const char* name() const = 0;  // "cpu", "gpu"

  // Memory, tracked per category. zero = false leaves the contents undefined (for buffers written before read).
  virtual Result<DeviceBuffer> allocate(int64_t bytes, MemCategory category, bool zero = true) = 0;
  const MemoryStats& memory() const { return mem_; }
  void reset_peak_memory();  // peak := current (per category and total)

  // Transfers and fills on the compute stream. download waits for the stream.
  virtual void upload(void* dst, const void* host_src, int64_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, int64_t bytes) = 0;
  virtual void copy(void* dst, const void* src, int64_t bytes) = 0;
  virtual void zero(void* dst, int64_t bytes) = 0;
  virtual void fill(float* dst, int64_t n, float value) = 0;
  // dst[i] = std * N(0, 1) from a counter-based generator: element i of the stream `seed` is a function of (seed,
  // first + i) only, so any slice of a tensor can be initialised without the rest (identical whatever the sharding).
  virtual void init_normal(float* dst, int64_t n, uint64_t seed, int64_t first, float std) = 0;

  // Stream and events.
  virtual Event record_event() = 0;
  virtual double elapsed_s(const Event& start, const Event& end) = 0;
  virtual void synchronize() = 0;     // host waits for the compute stream
  virtual void* native_stream() = 0;  // cudaStream_t on the GPU (for the NCCL communicator), nullptr on the CPU

  // Kernels (kernels/ops.h semantics, device pointers, enqueued on the compute stream). Activations and the
  // parameters they read (void*) hold elements of compute_dtype(): fp32, or bf16 (the GPU's tensor-core path; the CPU
  // emulates it by widening each input to fp32 and rounding each output). rstd, lse and every weight gradient
  // (dweight, dtable, a GEMM's C when c_dtype is fp32) are fp32; weight gradients accumulate.
  virtual DType compute_dtype() const = 0;
  // a, b in compute_dtype(); C in c_dtype (compute_dtype() or fp32), accumulated in fp32.
  virtual void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                    const void* b, float beta, void* c, DType c_dtype) = 0;
  virtual void rmsnorm_forward(const void* x, const void* weight, void* y, float* rstd, int64_t rows, int64_t dim,
                               float eps) = 0;
  virtual void rmsnorm_backward(const void* dy, const void* x, const void* weight, const float* rstd, void* dx,
                                float* dweight, int64_t rows, int64_t dim) = 0;
  virtual void swiglu_forward(const void* gate, const void* up, void* out, int64_t n) = 0;
  virtual void swiglu_backward(const void* dout, const void* gate, const void* up, void* dgate, void* dup,
                               int64_t n) = 0;  // dgate may alias dout
  virtual void rope(void* x, int batch, int seq, int heads, int head_dim, float theta, bool inverse) = 0;
  virtual void attention_forward(const void* q, const void* k, const void* v, void* out, float* lse, int batch, int seq,
                                 int heads, int head_dim) = 0;
  virtual void attention_backward(const void* dout, const void* q, const void* k, const void* v, const void* out,
                                  const float* lse, void* dq, void* dk, void* dv, int batch, int seq, int heads,
                                  int head_dim) = 0;
  // loss_sum[0] += summed loss (fp64, device); dlogits = grad_scale * (softmax - onehot); may run in place.
  virtual void cross_entropy(const void* logits, const int32_t* targets, void* dlogits, int64_t rows, int64_t vocab,
                             float grad_scale, double* loss_sum) = 0;
  virtual void embedding_forward(const void* table, const int32_t* ids, void* out, int64_t n, int64_t dim) = 0;
  virtual void embedding_backward(const void* dout, const int32_t* ids, float* dtable, int64_t n, int64_t dim) = 0;
  // y += x over n compute_dtype() elements: convert() accumulating within the compute dtype.
  void add(void* y, const void* x, int64_t n) { convert(x, compute_dtype(), y, compute_dtype(), n, true); }
  // AdamW on n owned elements: master, m, v (fp32) updated in place from grad (fp32 or bf16); param_out (may be
  // null) receives the updated master weights in param_dtype (rounded to nearest even for bf16).
  virtual void adamw(float* master, const void* grad, DType grad_dtype, float* m, float* v, void* param_out,
                     DType param_dtype, int64_t n, const kernels::cpu::AdamWConfig& cfg, int step) = 0;
  // Mixed precision: dst[i] = src[i] in dst's dtype or, with accumulate, dst[i] + src[i] (summed in fp32, rounded
  // once to dst's dtype). Any pair of fp32 and bf16.
  virtual void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n, bool accumulate) = 0;
  // copy() and convert() done by a communication stream instead of the compute stream (the work a stream does around
  // its collectives, Communicator::then): the CPU backend runs them at once on the calling thread, which is that
  // stream's progress thread; the GPU backend enqueues them on `stream`.
  virtual void copy_on(void* stream, void* dst, const void* src, int64_t bytes) {
    (void)stream;
    copy(dst, src, bytes);
  }
  virtual void convert_on(void* stream, const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                          bool accumulate) {
    (void)stream;
    convert(src, src_dtype, dst, dst_dtype, n, accumulate);
  }
  // ZeRO++'s quantizers (kernels/quantize.h: the arguments, layouts and arithmetic), done by a communication stream on
  // device pointers as copy_on is: these defaults run the CPU kernels at once (host memory); the GPU backend enqueues
  // kernels/cuda/quantize_cuda.h's on `stream`.
  virtual void quantize_int8_on(void* stream, const float* x, int64_t n, int64_t groups, int8_t* q, float* scales) {
    (void)stream;
    kernels::quant::quantize_int8(x, n, groups, q, scales);
  }
  virtual void dequantize_int8_on(void* stream, const int8_t* q, const float* scales, int64_t n, int64_t groups,
                                  float* out) {
    (void)stream;
    kernels::quant::dequantize_int8(q, scales, n, groups, out);
  }
  virtual void swizzle_quantize_int4_on(void* stream, const float* x, int64_t n, int64_t groups, int nodes,
                                        int gpus_per_node, uint8_t* packed, float* scales) {
    (void)stream;
    kernels::quant::swizzle_quantize_int4(x, n, groups, nodes, gpus_per_node, packed, scales);
  }
  virtual void quantized_reduction_int4_on(void* stream, const uint8_t* in, const float* in_scales,
                                           int64_t elems_per_peer, int64_t groups_per_peer, int peers, uint8_t* out,
                                           float* out_scales) {
    (void)stream;
    kernels::quant::quantized_reduction_int4(in, in_scales, elems_per_peer, groups_per_peer, peers, out, out_scales);
  }
  virtual void dequantize_reduce_int4_on(void* stream, const uint8_t* in, const float* in_scales,
                                         int64_t elems_per_peer, int64_t groups_per_peer, int peers, float divisor,
                                         float* out) {
    (void)stream;
    kernels::quant::dequantize_reduce_int4(in, in_scales, elems_per_peer, groups_per_peer, peers, divisor, out);
  }

 protected:
  friend class DeviceBuffer;
  virtual void release(void* ptr, int64_t bytes, MemCategory category) = 0;
  void track_alloc(int64_t bytes, MemCategory category);
  void track_free(int64_t bytes, MemCategory category);
  MemoryStats mem_;
};

// The CPU backend: host memory, synchronous kernels (kernels/cpu), events are host timestamps. compute = bf16
// emulates the GPU's bf16 activations (fp32 arithmetic on widened copies, outputs rounded to bf16).
std::unique_ptr<ComputeBackend> make_cpu_backend(DType compute = DType::fp32);

}  // namespace lins
