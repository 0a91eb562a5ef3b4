// GPU kernel benchmarks: achieved bandwidth of each memory-bound kernel against a device-to-device cudaMemcpy timed in
// the same run, and TFLOP/s of the GEMM wrapper against a direct cuBLAS call on the same shapes (plus the flash-style
// attention at the step's shapes). Timed with CUDA events; writes one CSV row per measurement and a JSON context.
// A plain main rather than Google Benchmark: every ratio needs the copy/cuBLAS reference measured in the same process.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops_cuda.h"

#if __has_include("lins_git_commit.h")
#include "lins_git_commit.h"
#endif
#ifndef LINS_GIT_COMMIT
#define LINS_GIT_COMMIT "unknown"
#endif

namespace {

namespace gpu = lins::kernels::cuda;
using gpu::bf16;

struct Options {
  std::string csv_path;              // empty: stdout
  std::string json_path;             // empty: none
  int64_t elems = int64_t{1} << 27;  // elements per memory-bound tensor (256 MiB in bf16, far above L2)
  int warmup = 3;
  int iters = 20;
  int seq = 4096, heads = 32, head_dim = 128, hidden = 4096, ffn = 11008, vocab = 32000;
  std::string only;  // run only benchmarks whose name contains this
};

struct Row {
  std::string kernel, shape, dtype;
  double bytes = 0, flops = 0, time_us = 0;
  double ref_time_us = 0;  // the reference's time for the same work (copy of the same bytes, or cuBLAS)
  std::string reference;   // "d2d_copy" or "cublas_direct" or ""
};

class Timer {
 public:
  Timer() {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  // Mean microseconds per call of fn over iters launches, after warmup launches; all on `stream`.
  double time_us(const std::function<void()>& fn, int warmup, int iters, cudaStream_t stream) {
    for (int i = 0; i < warmup; ++i) fn();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaEventRecord(start_, stream));
    for (int i = 0; i < iters; ++i) fn();
    CUDA_CHECK(cudaEventRecord(stop_, stream));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    CUDA_CHECK(cudaGetLastError());
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return 1e3 * ms / iters;
  }

 private:
  cudaEvent_t start_, stop_;
};

template <class T>
T* device_alloc(size_t n) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  return p;
}

bool selected(const Options& o, const std::string& name) {
  return o.only.empty() || name.find(o.only) != std::string::npos;
}

int parse_args(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "%s needs a value\n", what);
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--csv")
      o->csv_path = next("--csv");
    else if (a == "--json")
      o->json_path = next("--json");
    else if (a == "--elems")
      o->elems = std::stoll(next("--elems"));
    else if (a == "--iters")
      o->iters = std::stoi(next("--iters"));
    else if (a == "--warmup")
      o->warmup = std::stoi(next("--warmup"));
    else if (a == "--seq")
      o->seq = std::stoi(next("--seq"));
    else if (a == "--only")
      o->only = next("--only");
    else if (a == "--quick") {
      o->elems = int64_t{1} << 22;
      o->iters = 3;
      o->warmup = 1;
      o->seq = 512;
    } else {
      fprintf(stderr,
              "usage: bench_kernels_gpu [--csv FILE] [--json FILE] [--elems N] [--iters N] [--warmup N] [--seq N]\n"
              "                         [--only NAME] [--quick]\n");
      return 2;
    }
  }
  return 0;
}

void write_json(const Options& o, const cudaDeviceProp& prop, double copy_gbps) {
  if (o.json_path.empty()) return;
  FILE* f = fopen(o.json_path.c_str(), "w");
  if (f == nullptr) {
    fprintf(stderr, "cannot write %s\n", o.json_path.c_str());
    return;
  }
  int driver = 0, runtime = 0, cublas_version = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
    cublasGetVersion(h, &cublas_version);
    cublasDestroy(h);
  }
  int clock_khz = 0, mem_clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, 0);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
  fprintf(f,
          "{\n  \"benchmark\": \"bench_kernels_gpu\",\n  \"git_commit\": \"%s\",\n  \"device\": \"%s\",\n"
          "  \"compute_capability\": \"%d.%d\",\n  \"multiprocessors\": %d,\n  \"l2_bytes\": %d,\n"
          "  \"global_memory_bytes\": %zu,\n  \"sm_clock_khz\": %d,\n  \"memory_clock_khz\": %d,\n"
          "  \"memory_bus_bits\": %d,\n  \"cuda_driver\": %d,\n  \"cuda_runtime\": %d,\n  \"cublas\": %d,\n"
          "  \"elems\": %lld,\n  \"warmup\": %d,\n  \"iters\": %d,\n  \"seq\": %d,\n"
          "  \"d2d_copy_gbps\": %.1f,\n  \"bytes_convention\": \"bytes read + bytes written by the kernel, once "
          "each\"\n}\n",
          LINS_GIT_COMMIT, prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize,
          prop.totalGlobalMem, clock_khz, mem_clock_khz, bus_bits, driver, runtime, cublas_version,
          static_cast<long long>(o.elems), o.warmup, o.iters, o.seq, copy_gbps);
  fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int rc = parse_args(argc, argv, &o); rc != 0) return rc;
  if (gpu::device_count() == 0) {
    printf("SKIPPED: no CUDA device (cudaGetDeviceCount reports none or no driver); nothing to benchmark\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  fprintf(stderr, "device 0: %s (cc %d.%d, %d SMs, L2 %d MiB)\n", prop.name, prop.major, prop.minor,
          prop.multiProcessorCount, prop.l2CacheSize >> 20);
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Timer timer;
  std::vector<Row> rows;
  const int64_t n = o.elems;

  // --- the copy reference: a device-to-device copy of one fp32 tensor of n elements, bytes read + written -------
  const size_t copy_bytes = static_cast<size_t>(n) * 4;  // one fp32-sized tensor
  char* src = device_alloc<char>(copy_bytes);
  char* dst = device_alloc<char>(copy_bytes);
  CUDA_CHECK(cudaMemsetAsync(src, 1, copy_bytes, s));
  const double copy_us = timer.time_us(
      [&] { CUDA_CHECK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, s)); }, o.warmup, o.iters, s);
  const double copy_gbps = 2.0 * copy_bytes / (copy_us * 1e3);
  rows.push_back(
      {"d2d_copy", std::to_string(copy_bytes) + "B", "bytes", 2.0 * copy_bytes, 0, copy_us, copy_us, "d2d_copy"});
  CUDA_CHECK(cudaFree(src));
  CUDA_CHECK(cudaFree(dst));
  auto memory_row = [&](const std::string& name, const std::string& shape, const std::string& dtype, double bytes,
                        const std::function<void()>& fn) {
    if (!selected(o, name)) return;
    const double us = timer.time_us(fn, o.warmup, o.iters, s);
    // The copy's time for the same byte count, at the copy's measured rate.
    rows.push_back({name, shape, dtype, bytes, 0, us, bytes / (copy_gbps * 1e3), "d2d_copy"});
    fprintf(stderr, "%-24s %-28s %9.1f us %8.1f GB/s (%.0f%% of copy)\n", name.c_str(), shape.c_str(), us,
            bytes / (us * 1e3), 100.0 * (bytes / (us * 1e3)) / copy_gbps);
  };

  // --- memory-bound kernels -------------------------------------------------------------------------------------
  {
    float* f0 = device_alloc<float>(n);  // [n] fp32 master weights / cast source
    float* f1 = device_alloc<float>(n);  // [n] Adam m
    float* f2 = device_alloc<float>(n);  // [n] Adam v
    bf16* b0 = device_alloc<bf16>(n);    // [n] bf16 operands
    bf16* b1 = device_alloc<bf16>(n);
    bf16* b2 = device_alloc<bf16>(n);
    bf16* b3 = device_alloc<bf16>(n);
    bf16* b4 = device_alloc<bf16>(n);
    CUDA_CHECK(gpu::fill_uniform(f0, n, 1, -1.f, 1.f, s));
    CUDA_CHECK(gpu::fill_uniform(f1, n, 2, -1e-3f, 1e-3f, s));
    CUDA_CHECK(gpu::fill_uniform(f2, n, 3, 0.f, 1e-4f, s));
    CUDA_CHECK(gpu::fill_uniform(b0, n, 4, -3.f, 3.f, s));
    CUDA_CHECK(gpu::fill_uniform(b1, n, 5, -3.f, 3.f, s));
    CUDA_CHECK(gpu::fill_uniform(b2, n, 6, -1.f, 1.f, s));
    const std::string shape = "n=" + std::to_string(n);
    memory_row("cast_fp32_to_bf16", shape, "fp32->bf16", 6.0 * n,
               [&] { CUDA_CHECK(gpu::cast_fp32_to_bf16(f0, b3, n, s)); });
    memory_row("cast_bf16_to_fp32", shape, "bf16->fp32", 6.0 * n,
               [&] { CUDA_CHECK(gpu::cast_bf16_to_fp32(b0, f1, n, s)); });
    CUDA_CHECK(gpu::fill_uniform(f1, n, 2, -1e-3f, 1e-3f, s));
    memory_row("fill_bf16", shape, "bf16", 2.0 * n, [&] { CUDA_CHECK(gpu::fill(b3, 0.5f, n, s)); });
    memory_row("fill_fp32", shape, "fp32", 4.0 * n, [&] { CUDA_CHECK(gpu::fill(f2, 0.5f, n, s)); });
    CUDA_CHECK(gpu::fill_uniform(f2, n, 3, 0.f, 1e-4f, s));
    memory_row("add", shape, "bf16", 6.0 * n, [&] { CUDA_CHECK(gpu::add(b0, b1, b3, n, s)); });
    // The executor's gradient accumulation into bf16 G: from an fp32 scratch, and from a reduce-scattered bf16 shard.
    CUDA_CHECK(gpu::fill(b4, 0.f, n, s));
    memory_row("accumulate_fp32_bf16", shape, "fp32 into bf16", 8.0 * n,
               [&] { CUDA_CHECK(gpu::accumulate(f1, b4, n, s)); });
    memory_row("accumulate_bf16_bf16", shape, "bf16 into bf16", 6.0 * n,
               [&] { CUDA_CHECK(gpu::accumulate(b1, b4, n, s)); });
    memory_row("swiglu_forward", shape, "bf16", 6.0 * n, [&] { CUDA_CHECK(gpu::swiglu_forward(b0, b1, b3, n, s)); });
    memory_row("swiglu_backward", shape, "bf16", 10.0 * n,
               [&] { CUDA_CHECK(gpu::swiglu_backward(b2, b0, b1, b3, b4, n, s)); });
    gpu::AdamWConfig cfg;
    int step = 1;
    memory_row("adamw", shape, "fp32 states, bf16 grad+param", 28.0 * n,
               [&] { CUDA_CHECK(gpu::adamw(f0, b2, f1, f2, b3, n, cfg, step++, 1.f, s)); });

    // Row kernels on [rows, hidden] views of the same buffers.
    const int64_t dim = o.hidden, nrows = n / dim;
    const std::string rshape = "rows=" + std::to_string(nrows) + ",dim=" + std::to_string(dim);
    bf16* w = device_alloc<bf16>(dim);
    float* rstd = device_alloc<float>(nrows);
    float* dw = device_alloc<float>(dim);
    CUDA_CHECK(gpu::fill_uniform(w, dim, 7, 0.5f, 1.5f, s));
    CUDA_CHECK(gpu::fill(dw, 0.f, dim, s));
    memory_row("rmsnorm_forward", rshape, "bf16", 4.0 * nrows * dim,
               [&] { CUDA_CHECK(gpu::rmsnorm_forward(b0, w, b3, rstd, nrows, dim, 1e-5f, s)); });
    memory_row("rmsnorm_backward", rshape, "bf16", 6.0 * nrows * dim,
               [&] { CUDA_CHECK(gpu::rmsnorm_backward(b2, b0, w, rstd, b3, dw, nrows, dim, s)); });
    const int heads = o.heads, hd = o.head_dim;
    const int rope_seq = o.seq, rope_batch = static_cast<int>(n / (int64_t{rope_seq} * heads * hd));
    if (rope_batch >= 1) {
      memory_row("rope",
                 "batch=" + std::to_string(rope_batch) + ",seq=" + std::to_string(rope_seq) +
                     ",heads=" + std::to_string(heads) + ",head_dim=" + std::to_string(hd),
                 "bf16", 4.0 * rope_batch * rope_seq * heads * hd,
                 [&] { CUDA_CHECK(gpu::rope(b1, rope_batch, rope_seq, heads, hd, 10000.f, false, s)); });
    }
    const int64_t vocab = o.vocab, ce_rows = n / vocab;
    std::vector<int32_t> host_ids(std::max<int64_t>(ce_rows, nrows));
    std::mt19937 gen(9);
    for (auto& id : host_ids) id = static_cast<int32_t>(gen() % static_cast<uint32_t>(vocab));
    int32_t* ids = device_alloc<int32_t>(host_ids.size());
    CUDA_CHECK(cudaMemcpy(ids, host_ids.data(), host_ids.size() * 4, cudaMemcpyHostToDevice));
    float* loss_rows = device_alloc<float>(ce_rows);
    memory_row("cross_entropy", "rows=" + std::to_string(ce_rows) + ",vocab=" + std::to_string(vocab), "bf16",
               4.0 * ce_rows * vocab,
               [&] { CUDA_CHECK(gpu::cross_entropy(b0, ids, b3, loss_rows, ce_rows, vocab, 1.f, s)); });
    // Embedding gather: the table is the first vocab x dim of b1; rows of out in b3.
    if (vocab * dim <= n) {
      memory_row("embedding_forward", "n=" + std::to_string(nrows) + ",dim=" + std::to_string(dim), "bf16",
                 4.0 * nrows * dim, [&] { CUDA_CHECK(gpu::embedding_forward(b1, ids, b3, nrows, dim, s)); });
    }
    for (void* p : std::initializer_list<void*>{f0, f1, f2, b0, b1, b2, b3, b4, w, rstd, dw, ids, loss_rows})
      CUDA_CHECK(cudaFree(p));
  }

  // --- GEMMs: the wrapper against a direct cublasGemmEx with the same arguments -------------------------------
  {
    gpu::BlasHandle blas;
    CUBLAS_CHECK(gpu::blas_create(&blas));
    cublasHandle_t direct = nullptr;
    CUBLAS_CHECK(cublasCreate(&direct));
    CUBLAS_CHECK(cublasSetStream(direct, s));
    const int64_t t = o.seq, h = o.hidden, f = o.ffn;
    struct Shape {
      const char* what;
      bool ta, tb;
      int64_t m, n, k;
    };
    // One LLaMA layer at T tokens: forward X W^T (weights stored [out, in]), backward dX = dY W, dW = dY^T X.
    const std::vector<Shape> shapes = {
        {"qkv_fwd", false, true, t, 3 * h, h},         {"attn_out_fwd", false, true, t, h, h},
        {"gate_up_fwd", false, true, t, 2 * f, h},     {"down_fwd", false, true, t, h, f},
        {"down_bwd_dx", false, false, t, f, h},        {"down_bwd_dw", true, false, h, f, t},
        {"gate_up_bwd_dx", false, false, t, h, 2 * f}, {"square_8192", false, false, 8192, 8192, 8192},
    };
    for (const Shape& sh : shapes) {
      const std::string name = std::string("gemm_") + sh.what;
      if (!selected(o, name) && !selected(o, "gemm")) continue;
      bf16* a = device_alloc<bf16>(sh.m * sh.k);
      bf16* b = device_alloc<bf16>(sh.k * sh.n);
      bf16* c = device_alloc<bf16>(sh.m * sh.n);
      CUDA_CHECK(gpu::fill_uniform(a, sh.m * sh.k, 11, -1.f, 1.f, s));
      CUDA_CHECK(gpu::fill_uniform(b, sh.k * sh.n, 12, -1.f, 1.f, s));
      const double flops = 2.0 * sh.m * sh.n * sh.k;
      const double us =
          timer.time_us([&] { CUBLAS_CHECK(gpu::gemm(blas, sh.ta, sh.tb, sh.m, sh.n, sh.k, 1.f, a, b, 0.f, c, s)); },
                        o.warmup, o.iters, s);
      const float alpha = 1.f, beta = 0.f;
      const double ref_us = timer.time_us(
          [&] {
            CUBLAS_CHECK(cublasGemmEx(direct, sh.tb ? CUBLAS_OP_T : CUBLAS_OP_N, sh.ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      static_cast<int>(sh.n), static_cast<int>(sh.m), static_cast<int>(sh.k), &alpha, b,
                                      CUDA_R_16BF, static_cast<int>(sh.tb ? sh.k : sh.n), a, CUDA_R_16BF,
                                      static_cast<int>(sh.ta ? sh.m : sh.k), &beta, c, CUDA_R_16BF,
                                      static_cast<int>(sh.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
          },
          o.warmup, o.iters, s);
      char shape[128];
      snprintf(shape, sizeof(shape), "m=%lld,n=%lld,k=%lld,ta=%d,tb=%d", static_cast<long long>(sh.m),
               static_cast<long long>(sh.n), static_cast<long long>(sh.k), sh.ta, sh.tb);
      rows.push_back({name, shape, "bf16 in/out, fp32 acc", 0, flops, us, ref_us, "cublas_direct"});
      fprintf(stderr, "%-24s %-40s %9.1f us %7.1f TFLOP/s (cuBLAS direct %7.1f)\n", name.c_str(), shape, us,
              flops / (us * 1e6), flops / (ref_us * 1e6));
      CUDA_CHECK(cudaFree(a));
      CUDA_CHECK(cudaFree(b));
      CUDA_CHECK(cudaFree(c));
    }
    CUBLAS_CHECK(cublasDestroy(direct));
    gpu::blas_destroy(&blas);
  }

  // --- attention at the step's shapes (causal FLOPs: half of 4 s^2 d per head forward, 2.5x that backward) -----
  if (selected(o, "attention")) {
    const int hd_case = o.head_dim;
    const int batch = 1, seq = o.seq, heads = o.heads;
    const size_t tn = static_cast<size_t>(batch) * seq * heads * hd_case;
    bf16 *q = device_alloc<bf16>(tn), *k = device_alloc<bf16>(tn), *v = device_alloc<bf16>(tn);
    bf16 *out = device_alloc<bf16>(tn), *dout = device_alloc<bf16>(tn);
    bf16 *dq = device_alloc<bf16>(tn), *dk = device_alloc<bf16>(tn), *dv = device_alloc<bf16>(tn);
    float* lse = device_alloc<float>(static_cast<size_t>(batch) * heads * seq);
    const size_t ws_bytes = gpu::attention_backward_workspace_bytes(batch, seq, heads, hd_case);
    void* ws = device_alloc<char>(ws_bytes);
    CUDA_CHECK(gpu::fill_uniform(q, tn, 21, -1.f, 1.f, s));
    CUDA_CHECK(gpu::fill_uniform(k, tn, 22, -1.f, 1.f, s));
    CUDA_CHECK(gpu::fill_uniform(v, tn, 23, -1.f, 1.f, s));
    CUDA_CHECK(gpu::fill_uniform(dout, tn, 24, -1.f, 1.f, s));
    char shape[128];
    snprintf(shape, sizeof(shape), "batch=%d,seq=%d,heads=%d,head_dim=%d", batch, seq, heads, hd_case);
    const double fwd_flops = 2.0 * seq * static_cast<double>(seq) * hd_case * heads * batch;  // causal half
    const double fwd_us =
        timer.time_us([&] { CUDA_CHECK(gpu::attention_forward(q, k, v, out, lse, batch, seq, heads, hd_case, s)); },
                      o.warmup, o.iters, s);
    rows.push_back({"attention_forward", shape, "bf16, fp32 acc", 0, fwd_flops, fwd_us, 0, ""});
    const double bwd_us = timer.time_us(
        [&] {
          CUDA_CHECK(gpu::attention_backward(dout, q, k, v, out, lse, dq, dk, dv, batch, seq, heads, hd_case, ws,
                                             ws_bytes, s));
        },
        o.warmup, o.iters, s);
    rows.push_back({"attention_backward", shape, "bf16, fp32 acc", 0, 2.5 * fwd_flops, bwd_us, 0, ""});
    fprintf(stderr, "attention_forward  %s %9.1f us %7.1f TFLOP/s\nattention_backward %s %9.1f us %7.1f TFLOP/s\n",
            shape, fwd_us, fwd_flops / (fwd_us * 1e6), shape, bwd_us, 2.5 * fwd_flops / (bwd_us * 1e6));
    // cuDNN's fused attention (the step's default on bf16) on the same tensors, where the build has it.
    if (gpu::cudnn_attention_available() &&
        gpu::cudnn_attention_forward(q, k, v, out, lse, batch, seq, heads, hd_case, s) == cudaSuccess) {
      const double cf_us = timer.time_us(
          [&] { CUDA_CHECK(gpu::cudnn_attention_forward(q, k, v, out, lse, batch, seq, heads, hd_case, s)); },
          o.warmup, o.iters, s);
      rows.push_back({"attention_cudnn_forward", shape, "bf16, fp32 acc", 0, fwd_flops, cf_us, 0, ""});
      const double cb_us = timer.time_us(
          [&] {
            CUDA_CHECK(gpu::cudnn_attention_backward(dout, q, k, v, out, lse, dq, dk, dv, batch, seq, heads, hd_case,
                                                     s));
          },
          o.warmup, o.iters, s);
      rows.push_back({"attention_cudnn_backward", shape, "bf16, fp32 acc", 0, 2.5 * fwd_flops, cb_us, 0, ""});
      fprintf(stderr, "attention_cudnn_forward  %s %9.1f us %7.1f TFLOP/s\nattention_cudnn_backward %s %9.1f us %7.1f "
              "TFLOP/s\n", shape, cf_us, fwd_flops / (cf_us * 1e6), shape, cb_us, 2.5 * fwd_flops / (cb_us * 1e6));
    } else {
      fprintf(stderr, "attention_cudnn: not measured (%s)\n", gpu::cudnn_attention_last_error().c_str());
    }
    for (void* p : std::initializer_list<void*>{q, k, v, out, dout, dq, dk, dv, lse, ws}) CUDA_CHECK(cudaFree(p));
  }

  // --- CSV ------------------------------------------------------------------------------------------------------
  FILE* csv = o.csv_path.empty() ? stdout : fopen(o.csv_path.c_str(), "w");
  if (csv == nullptr) {
    fprintf(stderr, "cannot write %s\n", o.csv_path.c_str());
    return 1;
  }
  fprintf(csv,
          "kind,kernel,shape,dtype,bytes,flops,time_us,achieved_gbps,achieved_tflops,reference,reference_time_us,"
          "ratio_to_reference,device,git_commit\n");
  for (const Row& r : rows) {
    const double gbps = r.bytes > 0 ? r.bytes / (r.time_us * 1e3) : 0;
    const double tflops = r.flops > 0 ? r.flops / (r.time_us * 1e6) : 0;
    const double ratio = r.ref_time_us > 0 ? r.ref_time_us / r.time_us : 0;  // > 1: faster than the reference
    fprintf(csv, "measured,%s,\"%s\",\"%s\",%.0f,%.0f,%.3f,%.1f,%.2f,%s,%.3f,%.4f,\"%s\",%s\n", r.kernel.c_str(),
            r.shape.c_str(), r.dtype.c_str(), r.bytes, r.flops, r.time_us, gbps, tflops, r.reference.c_str(),
            r.ref_time_us, ratio, prop.name, LINS_GIT_COMMIT);
  }
  if (csv != stdout) fclose(csv);
  write_json(o, prop, copy_gbps);
  CUDA_CHECK(cudaStreamDestroy(s));
  return 0;
}
