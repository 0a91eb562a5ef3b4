// The GPU compute backend. Compute dtype bf16 (the default): bf16 activations and the native bf16 tensor-core kernels
// end to end, weight gradients (GEMM C in fp32, RMSNorm dweight, embedding dtable) fp32. Compute dtype fp32 (the
// earlier path): fp32 tensors with bf16 tensor-core GEMMs and attention. P and G stay in the executor's storage dtype
// (fp32, or bf16 for mixed precision) through convert() and adamw()'s dtypes (see gpu_backend.h).
// Host code over the launchers of kernels/cuda (C++17 device code) and cuBLAS; every call is enqueued on one compute
// stream and nothing blocks the host except download(), elapsed_s() and synchronize().
//
// Kernel dispatch on the compute dtype (kc = kernels::cuda; every launcher below is the overload of those types):
//   kernel              fp32 compute                              bf16 compute
//   gemm, C fp32        kc::gemm(float a, b, c), FAST_16BF        kc::gemm(bf16 a, b -> float c)
//   gemm, C bf16        abort (no such output on this path)       kc::gemm(bf16 a, b -> bf16 c)
//   rmsnorm fwd/bwd     float x, w, y / dy, dx; float rstd, dw    bf16 x, w, y / dy, dx; float rstd, dweight
//   swiglu, rope, add   float                                     bf16
//   attention fwd       float + bf16-copy workspace               bf16, no workspace
//   attention bwd       float + bf16-copy workspace               bf16 + fp32 dq/delta workspace
//   cross_entropy       float logits; float loss_rows scratch     bf16 logits; float loss_rows scratch
//   embedding fwd/bwd   float table, out / dout; float dtable     bf16 table, out / dout; float dtable
// The aliasing the model relies on holds for both: cross_entropy in place (dlogits == logits: each thread reads an
// element before it overwrites it, no __restrict__), swiglu_backward with dgate == dout (element-wise, every input
// of an element loaded before its outputs are stored), add with y as both input and output, and gemm with beta = 1
// accumulating into C (cuBLAS reads C in its dtype, sums in fp32, rounds once).
#include "gpu/gpu_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/watchdog.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/quantize_cuda.h"

namespace lins {

int gpu_device_count() { return kernels::cuda::device_count(); }

namespace {

namespace kc = kernels::cuda;

// Blocks are rounded to 512 bytes (16-byte vector access and cuBLAS alignment hold for every block) and kept by
// rounded size when freed. Reuse is safe without events because every user is ordered after the compute stream: the
// model's kernels run on it, and the NCCL communicators order each collective after it at issue time (a block freed
// while kernels that read it are still queued is only handed to work queued behind them).
constexpr int64_t kBlockAlign = 512;

// Where the host blocks on the compute stream: a collective that never completes (a hung or dead peer) stalls the
// stream that waits for it, and is seen by the host only here, so these waits run under the watchdog (--timeout).
constexpr const char* kStreamWait =
    "waiting for the GPU compute stream (its kernels and the NCCL collectives it waits for)";

// As CUDA_CHECK, with cuDNN's own message (the kernels' interface has no error path: a failure aborts the rank).
void cudnn_check(cudaError_t e, const char* call, int line) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "lins: %s:%d: %s failed: %s (%s); --attention flash runs the project's own kernels\n",
               __FILE__, line, call, cudaGetErrorString(e), kc::cudnn_attention_last_error().c_str());
  std::fflush(stderr);
  std::abort();
}

class GpuBackend final : public ComputeBackend {
 public:
  static Result<std::unique_ptr<ComputeBackend>> create(const GpuBackendOptions& o) {
    const int device = o.device;
    const DType compute = o.compute;
    const int n = kc::device_count();
    if (n == 0) return make_error("gpu backend: no CUDA device is visible (cudaGetDeviceCount found none)");
    if (device < 0 || device >= n)
      return make_error("gpu backend: device " + std::to_string(device) + " requested but " + std::to_string(n) +
                        " visible (0.." + std::to_string(n - 1) + ")");
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
      return make_error(std::string("gpu backend: cudaSetDevice(") + std::to_string(device) +
                        ") failed: " + cudaGetErrorString(e));
    std::unique_ptr<GpuBackend> b(new GpuBackend());
    b->device_ = device;
    b->compute_ = compute;
    b->bf16_ = compute == DType::bf16;
    b->attention_ = o.attention;
    if (o.attention == AttentionKernel::cudnn && compute != DType::bf16)
      return make_error("gpu backend: cuDNN's fused attention runs on bf16 activations; use --compute bf16 or "
                        "--attention flash");
    if (o.attention == AttentionKernel::cudnn && !kc::cudnn_attention_available())
      return make_error("gpu backend: cuDNN's fused attention is not available: " + kc::cudnn_attention_last_error() +
                        "; use --attention flash");
    if (cudaError_t e = cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking); e != cudaSuccess)
      return make_error(std::string("gpu backend: cudaStreamCreate failed: ") + cudaGetErrorString(e));
    if (cublasStatus_t st = kc::blas_create(&b->blas_); st != CUBLAS_STATUS_SUCCESS)
      return make_error(std::string("gpu backend: cuBLAS could not start: ") + cublasGetStatusString(st));
    return std::unique_ptr<ComputeBackend>(std::move(b));
  }

  ~GpuBackend() override {
    cudaSetDevice(device_);
    if (stream_) cudaStreamSynchronize(stream_);
    kc::blas_destroy(&blas_);
    for (auto& [size, blocks] : cache_)
      for (void* p : blocks) cudaFree(p);
    if (stream_) cudaStreamDestroy(stream_);
  }

  const char* name() const override { return "gpu"; }

  Result<DeviceBuffer> allocate(int64_t bytes, MemCategory category, bool zero) override {
    if (bytes < 0) return make_error("gpu backend: negative allocation of " + std::to_string(bytes) + " bytes");
    if (bytes == 0) return DeviceBuffer(this, nullptr, 0, category);
    const int64_t rounded = (bytes + kBlockAlign - 1) / kBlockAlign * kBlockAlign;
    void* p = nullptr;
    if (auto it = cache_.find(rounded); it != cache_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
    } else {
      cudaError_t e = cudaMalloc(&p, size_t(rounded));
      if (e != cudaSuccess) {
        // Out of memory with free blocks of other sizes cached: return them to the driver and try once more.
        (void)cudaGetLastError();
        trim();
        e = cudaMalloc(&p, size_t(rounded));
      }
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return make_error("gpu backend: out of device memory allocating " + std::to_string(bytes) + " bytes (" +
                          std::to_string(mem_.total_current_bytes) + " bytes live, " + std::to_string(reserved_) +
                          " reserved): " + cudaGetErrorString(e));
      }
      reserved_ += rounded;
      peak_reserved_ = std::max(peak_reserved_, reserved_);
    }
    if (zero) CUDA_CHECK(cudaMemsetAsync(p, 0, size_t(rounded), stream_));
    track_alloc(bytes, category);
    return DeviceBuffer(this, p, bytes, category);
  }

  void upload(void* dst, const void* src, int64_t bytes) override {
    // From pageable memory the copy is staged before the call returns, so the caller may reuse `src` at once.
    if (bytes > 0) CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyHostToDevice, stream_));
  }
  void download(void* dst, const void* src, int64_t bytes) override {
    if (bytes <= 0) return;
    WatchdogScope watched(kStreamWait);  // into pageable memory the copy itself already blocks
    CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy(void* dst, const void* src, int64_t bytes) override {
    if (dst != src && bytes > 0)
      CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice, stream_));
  }
  void zero(void* dst, int64_t bytes) override {
    if (bytes > 0) CUDA_CHECK(cudaMemsetAsync(dst, 0, size_t(bytes), stream_));
  }
  void fill(float* dst, int64_t n, float value) override { CUDA_CHECK(kc::fill(dst, value, n, stream_)); }
  void init_normal(float* dst, int64_t n, uint64_t seed, int64_t first, float std_dev) override {
    CUDA_CHECK(kc::init_normal(dst, n, seed, first, std_dev, stream_));
  }

  Event record_event() override {
    Event e;
    e.host_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    cudaEvent_t ev = nullptr;
    CUDA_CHECK(cudaEventCreate(&ev));
    CUDA_CHECK(cudaEventRecord(ev, stream_));
    e.native = std::shared_ptr<void>(ev, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
    return e;
  }
  double elapsed_s(const Event& start, const Event& end) override {
    if (!start.native || !end.native) return end.host_s - start.host_s;
    auto a = static_cast<cudaEvent_t>(start.native.get()), b = static_cast<cudaEvent_t>(end.native.get());
    {
      WatchdogScope watched(kStreamWait);
      CUDA_CHECK(cudaEventSynchronize(b));
    }
    float ms = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return double(ms) * 1e-3;
  }
  void synchronize() override {
    WatchdogScope watched(kStreamWait);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void* native_stream() override { return stream_; }

  DType compute_dtype() const override { return compute_; }

  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a, const void* b, float beta,
            void* c, DType c_dtype) override {
    if (!bf16_ && c_dtype == DType::bf16)
      die("gemm with a bf16 C on an fp32-compute backend (fp32 compute writes fp32 C only; C must be the compute "
          "dtype or fp32)");
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {  // the CPU contract: C = beta * C (cuBLAS would do nothing)
      if (beta == 0.f) zero(c, m * n * dtype_bytes(c_dtype));
      // beta != 0 with k == 0 keeps C scaled by beta; the step never asks for it.
      return;
    }
    if (!bf16_)
      CUBLAS_CHECK(kc::gemm(blas_, ta, tb, m, n, k, alpha, F(a), F(b), beta, F(c), stream_));
    else if (c_dtype == DType::bf16)
      CUBLAS_CHECK(kc::gemm(blas_, ta, tb, m, n, k, alpha, B(a), B(b), beta, B(c), stream_));
    else
      CUBLAS_CHECK(kc::gemm(blas_, ta, tb, m, n, k, alpha, B(a), B(b), beta, F(c), stream_));
  }
  void rmsnorm_forward(const void* x, const void* w, void* y, float* rstd, int64_t rows, int64_t dim,
                       float eps) override {
    if (bf16_)
      CUDA_CHECK(kc::rmsnorm_forward(B(x), B(w), B(y), rstd, rows, dim, eps, stream_));
    else
      CUDA_CHECK(kc::rmsnorm_forward(F(x), F(w), F(y), rstd, rows, dim, eps, stream_));
  }
  void rmsnorm_backward(const void* dy, const void* x, const void* w, const float* rstd, void* dx, float* dw,
                        int64_t rows, int64_t dim) override {
    if (bf16_)
      CUDA_CHECK(kc::rmsnorm_backward(B(dy), B(x), B(w), rstd, B(dx), dw, rows, dim, stream_));
    else
      CUDA_CHECK(kc::rmsnorm_backward(F(dy), F(x), F(w), rstd, F(dx), dw, rows, dim, stream_));
  }
  void swiglu_forward(const void* gate, const void* up, void* out, int64_t n) override {
    if (bf16_)
      CUDA_CHECK(kc::swiglu_forward(B(gate), B(up), B(out), n, stream_));
    else
      CUDA_CHECK(kc::swiglu_forward(F(gate), F(up), F(out), n, stream_));
  }
  void swiglu_backward(const void* dout, const void* gate, const void* up, void* dgate, void* dup,
                       int64_t n) override {  // dgate may alias dout (element-wise: loads before stores)
    if (bf16_)
      CUDA_CHECK(kc::swiglu_backward(B(dout), B(gate), B(up), B(dgate), B(dup), n, stream_));
    else
      CUDA_CHECK(kc::swiglu_backward(F(dout), F(gate), F(up), F(dgate), F(dup), n, stream_));
  }
  void rope(void* x, int batch, int seq, int heads, int head_dim, float theta, bool inverse) override {
    if (bf16_)
      CUDA_CHECK(kc::rope(B(x), batch, seq, heads, head_dim, theta, inverse, stream_));
    else
      CUDA_CHECK(kc::rope(F(x), batch, seq, heads, head_dim, theta, inverse, stream_));
  }
  void attention_forward(const void* q, const void* k, const void* v, void* out, float* lse, int batch, int seq,
                         int heads, int head_dim) override {
    if (bf16_ && attention_ == AttentionKernel::cudnn) {
      cudnn_check(kc::cudnn_attention_forward(B(q), B(k), B(v), B(out), lse, batch, seq, heads, head_dim, stream_),
                  "cudnn_attention_forward", __LINE__);
      return;
    }
    if (bf16_) {
      CUDA_CHECK(kc::attention_forward(B(q), B(k), B(v), B(out), lse, batch, seq, heads, head_dim, stream_));
      return;
    }
    DeviceBuffer ws = scratch(kc::attention_forward_fp32_workspace_bytes(batch, seq, heads, head_dim));
    CUDA_CHECK(kc::attention_forward(F(q), F(k), F(v), F(out), lse, batch, seq, heads, head_dim, ws.data(),
                                     size_t(ws.bytes()), stream_));
  }  // ws returns to the pool; later users are queued behind the kernels that read it
  void attention_backward(const void* dout, const void* q, const void* k, const void* v, const void* out,
                          const float* lse, void* dq, void* dk, void* dv, int batch, int seq, int heads,
                          int head_dim) override {
    if (bf16_ && attention_ == AttentionKernel::cudnn) {  // cuDNN holds its own workspace
      cudnn_check(kc::cudnn_attention_backward(B(dout), B(q), B(k), B(v), B(out), lse, B(dq), B(dk), B(dv), batch, seq,
                                               heads, head_dim, stream_),
                  "cudnn_attention_backward", __LINE__);
      return;
    }
    if (bf16_) {  // scratch: the fp32 dq accumulator and the row terms D = rowsum(dout * out)
      DeviceBuffer ws = scratch(int64_t(kc::attention_backward_workspace_bytes(batch, seq, heads, head_dim)));
      CUDA_CHECK(kc::attention_backward(B(dout), B(q), B(k), B(v), B(out), lse, B(dq), B(dk), B(dv), batch, seq, heads,
                                        head_dim, ws.data(), size_t(ws.bytes()), stream_));
      return;
    }
    DeviceBuffer ws = scratch(kc::attention_backward_fp32_workspace_bytes(batch, seq, heads, head_dim));
    CUDA_CHECK(kc::attention_backward(F(dout), F(q), F(k), F(v), F(out), lse, F(dq), F(dk), F(dv), batch, seq, heads,
                                      head_dim, ws.data(), size_t(ws.bytes()), stream_));
  }
  void cross_entropy(const void* logits, const int32_t* targets, void* dlogits, int64_t rows, int64_t vocab,
                     float grad_scale, double* loss_sum) override {
    // In place (dlogits == logits) is supported by both overloads. Per-row losses in fp32 scratch, summed in fp64.
    DeviceBuffer loss_rows = scratch(rows * 4);  // [rows] fp32
    if (bf16_)
      CUDA_CHECK(kc::cross_entropy(B(logits), targets, B(dlogits), loss_rows.f32(), rows, vocab, grad_scale, stream_));
    else
      CUDA_CHECK(kc::cross_entropy(F(logits), targets, F(dlogits), loss_rows.f32(), rows, vocab, grad_scale, stream_));
    CUDA_CHECK(kc::sum_accumulate(loss_rows.f32(), rows, loss_sum, stream_));
  }
  void embedding_forward(const void* table, const int32_t* ids, void* out, int64_t n, int64_t dim) override {
    if (bf16_)
      CUDA_CHECK(kc::embedding_forward(B(table), ids, B(out), n, dim, stream_));
    else
      CUDA_CHECK(kc::embedding_forward(F(table), ids, F(out), n, dim, stream_));
  }
  void embedding_backward(const void* dout, const int32_t* ids, float* dtable, int64_t n, int64_t dim) override {
    if (bf16_)
      CUDA_CHECK(kc::embedding_backward(B(dout), ids, dtable, n, dim, stream_));
    else
      CUDA_CHECK(kc::embedding_backward(F(dout), ids, dtable, n, dim, stream_));
  }
  void adamw(float* master, const void* grad, DType grad_dtype, float* m, float* v, void* param_out, DType param_dtype,
             int64_t n, const kernels::cpu::AdamWConfig& cfg, int step) override {
    // One fused pass for each of the four (gradient, parameter) dtype pairs, the gradient taken as given (grad_scale
    // 1). A null param_out is passed typed as the parameter dtype (the kernel then skips the store).
    const bool g16 = grad_dtype == DType::bf16, p16 = param_dtype == DType::bf16;
    const auto* gb = static_cast<const kc::bf16*>(grad);
    const auto* gf = static_cast<const float*>(grad);
    auto* pb = static_cast<kc::bf16*>(param_out);
    auto* pf = static_cast<float*>(param_out);
    constexpr float kScale = 1.f;
    if (g16 && p16) CUDA_CHECK(kc::adamw(master, gb, m, v, pb, n, cfg, step, kScale, stream_));
    if (g16 && !p16) CUDA_CHECK(kc::adamw(master, gb, m, v, pf, n, cfg, step, kScale, stream_));
    if (!g16 && p16) CUDA_CHECK(kc::adamw(master, gf, m, v, pb, n, cfg, step, kScale, stream_));
    if (!g16 && !p16) CUDA_CHECK(kc::adamw(master, gf, m, v, pf, n, cfg, step, kScale, stream_));
  }
  void copy_on(void* stream, void* dst, const void* src, int64_t bytes) override {
    on_stream(stream, [&] { copy(dst, src, bytes); });
  }
  void convert_on(void* stream, const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                  bool accumulate) override {
    on_stream(stream, [&] { convert(src, src_dtype, dst, dst_dtype, n, accumulate); });
  }
  // ZeRO++'s quantizers on the communication stream (kernels/cuda/quantize_cuda.h).
  void quantize_int8_on(void* stream, const float* x, int64_t n, int64_t groups, int8_t* q, float* scales) override {
    CUDA_CHECK(kc::quantize_int8(x, n, groups, q, scales, on(stream)));
  }
  void dequantize_int8_on(void* stream, const int8_t* q, const float* scales, int64_t n, int64_t groups,
                          float* out) override {
    CUDA_CHECK(kc::dequantize_int8(q, scales, n, groups, out, on(stream)));
  }
  void swizzle_quantize_int4_on(void* stream, const float* x, int64_t n, int64_t groups, int nodes, int gpus_per_node,
                                uint8_t* packed, float* scales) override {
    CUDA_CHECK(kc::swizzle_quantize_int4(x, n, groups, nodes, gpus_per_node, packed, scales, on(stream)));
  }
  void quantized_reduction_int4_on(void* stream, const uint8_t* in, const float* in_scales, int64_t elems_per_peer,
                                   int64_t groups_per_peer, int peers, uint8_t* out, float* out_scales) override {
    CUDA_CHECK(kc::quantized_reduction_int4(in, in_scales, elems_per_peer, groups_per_peer, peers, out, out_scales,
                                             on(stream)));
  }
  void dequantize_reduce_int4_on(void* stream, const uint8_t* in, const float* in_scales, int64_t elems_per_peer,
                                 int64_t groups_per_peer, int peers, float divisor, float* out) override {
    CUDA_CHECK(kc::dequantize_reduce_int4(in, in_scales, elems_per_peer, groups_per_peer, peers, divisor, out,
                                           on(stream)));
  }
  // A communication stream, or the compute stream when none is given.
  cudaStream_t on(void* stream) const { return stream ? static_cast<cudaStream_t>(stream) : stream_; }
  // Runs `f`, whose kernels go to `stream` instead of the compute stream (the host thread issuing both is the same).
  template <class F>
  void on_stream(void* stream, F&& f) {
    cudaStream_t compute = stream_;
    stream_ = stream ? static_cast<cudaStream_t>(stream) : compute;
    f();
    stream_ = compute;
  }
  void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n, bool accumulate) override {
    if (n <= 0) return;
    const bool from16 = src_dtype == DType::bf16, to16 = dst_dtype == DType::bf16;
    const auto* sb = static_cast<const kc::bf16*>(src);
    const auto* sf = static_cast<const float*>(src);
    auto* db = static_cast<kc::bf16*>(dst);
    auto* df = static_cast<float*>(dst);
    if (!accumulate) {
      if (from16 == to16)
        copy(dst, src, n * dtype_bytes(dst_dtype));  // a device-to-device copy on the stream (nothing when dst == src)
      else if (to16)
        CUDA_CHECK(kc::cast_fp32_to_bf16(sf, db, n, stream_));
      else
        CUDA_CHECK(kc::cast_bf16_to_fp32(sb, df, n, stream_));
    } else if (to16) {
      CUDA_CHECK(from16 ? kc::accumulate(sb, db, n, stream_) : kc::accumulate(sf, db, n, stream_));
    } else {
      CUDA_CHECK(from16 ? kc::accumulate(sb, df, n, stream_) : kc::add(df, sf, df, n, stream_));
    }
  }

  GpuMemoryInfo info() const {
    GpuMemoryInfo i;
    i.reserved_bytes = reserved_;
    i.peak_reserved_bytes = peak_reserved_;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      i.device_used_bytes = int64_t(total_b - free_b);
      i.device_total_bytes = int64_t(total_b);
    } else {
      (void)cudaGetLastError();
    }
    return i;
  }

 protected:
  void release(void* ptr, int64_t bytes, MemCategory category) override {
    cache_[(bytes + kBlockAlign - 1) / kBlockAlign * kBlockAlign].push_back(ptr);
    track_free(bytes, category);
  }

 private:
  GpuBackend() = default;

  // The compute-dtype views of the interface's untyped pointers.
  static const kc::bf16* B(const void* p) { return static_cast<const kc::bf16*>(p); }
  static kc::bf16* B(void* p) { return static_cast<kc::bf16*>(p); }
  static const float* F(const void* p) { return static_cast<const float*>(p); }
  static float* F(void* p) { return static_cast<float*>(p); }

  // A call the interface cannot refuse (no error path for kernels): report it as a launch failure would, and abort.
  [[noreturn]] static void die(const char* what) {
    std::fprintf(stderr, "[%s] lins gpu backend: %s\n", kc::detail::host_name(), what);
    std::fflush(stderr);
    std::abort();
  }

  // Kernel workspace from the pool, tracked with the activations while the call that uses it runs.
  DeviceBuffer scratch(int64_t bytes) {
    auto b = allocate(std::max<int64_t>(bytes, 1), MemCategory::activation, /*zero=*/false);
    if (!b) {
      std::fprintf(stderr, "[%s] lins gpu backend: %s\n", kc::detail::host_name(), b.error().c_str());
      std::abort();  // the interface's kernels have no error path
    }
    return std::move(*b);
  }

  // Returns every cached free block to the driver (after the queued work that may still use them).
  void trim() {
    cudaStreamSynchronize(stream_);
    for (auto& [size, blocks] : cache_) {
      for (void* p : blocks) cudaFree(p);
      reserved_ -= size * int64_t(blocks.size());
      blocks.clear();
    }
  }

  int device_ = 0;
  DType compute_ = DType::bf16;  // activations' dtype (compute_dtype())
  bool bf16_ = true;             // compute_ == DType::bf16
  AttentionKernel attention_ = AttentionKernel::flash;
  cudaStream_t stream_ = nullptr;
  kc::BlasHandle blas_{};
  std::unordered_map<int64_t, std::vector<void*>> cache_;  // rounded size -> free blocks
  int64_t reserved_ = 0, peak_reserved_ = 0;
};

}  // namespace

Result<std::unique_ptr<ComputeBackend>> make_gpu_backend(const GpuBackendOptions& options) {
  return GpuBackend::create(options);
}

Result<std::unique_ptr<ComputeBackend>> make_gpu_backend(int device, DType compute) {
  GpuBackendOptions o;
  o.device = device;
  o.compute = compute;
  return GpuBackend::create(o);
}

GpuMemoryInfo gpu_memory_info(ComputeBackend& backend) {
  if (auto* g = dynamic_cast<GpuBackend*>(&backend)) return g->info();
  return {};
}

}  // namespace lins
