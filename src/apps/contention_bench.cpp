// `lins comm --contention FILE`: compute kernels and collectives alone, then side by side, on either backend, through
// the same ComputeBackend and Communicator (with their asynchronous handles) the executor uses, so that the slowdowns
// are the ones a training step meets; then the fit and the [contention] table. See contention_bench.h.
#include "apps/contention_bench.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>

#include "apps/mpi_app.h"
#include "comm/gpu_plugin.h"
#include "comm/provenance.h"
#include "core/cost/contention_fit.h"
#include "core/model/collectives.h"
#include "core/util/json.h"
#include "core/util/units.h"
#include "lins_git_commit.h"  // generated at build time
#include "train/backend.h"
#include "train/pacing.h"

namespace lins {
namespace {

constexpr int kFabrics = 2;
const char* fabric_name(int f) { return f == 0 ? "intra" : "inter"; }
const char* class_name(int c) { return kTaskClassNames.name(TaskClass(c)); }

// The kernels' sizes: a GEMM of a few milliseconds, an array pair far beyond the last-level cache (CPU: tens of
// MiB; GPU: 50 MiB of L2 on an H100/H200, so a GiB).
constexpr int64_t kCpuGemmN = 384, kGpuGemmN = 8192;
constexpr int64_t kCpuMemoryElems = int64_t(8) << 20, kGpuMemoryElems = int64_t(256) << 20;
// B1 issues enough collectives to cover this many times the compute alone (compute under contention may take that
// long; what runs after the compute ended is waited for and thrown away); B2 runs compute for this many times the
// collectives alone.
constexpr double kCover = 3.0;
constexpr int kMaxSeries = 4000;  // collectives in one series, whatever the ratio of the times

double max_over_ranks(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}
double min_over_ranks(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  return v;
}

// The compute kernels of the two task classes on the backend's stream.
struct Kernels {
  ComputeBackend* be = nullptr;
  int64_t gemm_n = 0, memory_elems = 0;
  DeviceBuffer a, b, c, x, y;
  double per_pass_s[kTaskClassCount] = {0, 0};  // calibrated, slowest rank
  int passes[kTaskClassCount] = {1, 1};         // in one sample of o.compute_s
  // An emulated device: each pass's time on it (its work at the device's rate; 0: unpaced), and the passes paced and
  // overrun (the pass's real work took longer than the device's time) on this rank.
  double device_s[kTaskClassCount] = {0, 0};
  long paced[kTaskClassCount] = {0, 0}, overruns[kTaskClassCount] = {0, 0};

  // A pass's work: 2 n^3 FLOPs for the GEMM, 12 bytes per element for the memory pass.
  double work(int cls) const {
    return cls == int(TaskClass::gemm) ? 2.0 * double(gemm_n) * gemm_n * gemm_n : 12.0 * double(memory_elems);
  }
  // One GEMM (C = A B, square, in the backend's compute dtype: bf16 tensor cores on the GPU), or one pass of
  // y += x over fp32 arrays (a triad's traffic: two reads and a write per element). Paced as the executor paces a
  // task: the host sleeps until the pass's start + its device time (the CPU backend is synchronous).
  void pass(int cls) {
    const double start_s = device_s[cls] > 0 ? steady_now_s() : 0;
    if (cls == int(TaskClass::gemm))
      be->gemm(false, false, gemm_n, gemm_n, gemm_n, 1.0f, a.data(), b.data(), 0.0f, c.data(), be->compute_dtype());
    else
      be->convert(x.data(), DType::fp32, y.data(), DType::fp32, memory_elems, true);
    if (device_s[cls] <= 0) return;
    ++paced[cls];
    if (!pace_until(start_s + device_s[cls])) ++overruns[cls];
  }
  // `n` passes timed on the compute stream (host clock on the CPU, CUDA events on the GPU).
  double timed(int cls, int n) {
    const Event e0 = be->record_event();
    for (int i = 0; i < n; ++i) pass(cls);
    const Event e1 = be->record_event();
    be->synchronize();
    return be->elapsed_s(e0, e1);
  }
  // On the host-timed CPU backend: passes until `done` (at least `min_passes`, at most 50 times as many), so that
  // compute outlasts collectives however much it slows them; the GPU backend cannot poll its stream from here and
  // runs the `min_passes` sized with kCover.
  template <class Done>
  double timed_until(int cls, int min_passes, Done done) {
    if (be->native_stream() != nullptr) return timed(cls, min_passes);
    const Event e0 = be->record_event();
    for (int i = 0; i < 50 * min_passes && (i < min_passes || !done()); ++i) pass(cls);
    const Event e1 = be->record_event();
    return be->elapsed_s(e0, e1);
  }
  std::string describe(int cls) const {
    char t[160];
    if (cls == int(TaskClass::gemm))
      std::snprintf(t, sizeof t, "gemm %lld^3 %s x %d", static_cast<long long>(gemm_n),
                    dtype_name(be->compute_dtype()), passes[cls]);
    else
      std::snprintf(t, sizeof t, "y += x, 2 x %s fp32 x %d", format_bytes(4.0 * double(memory_elems)).c_str(),
                    passes[cls]);
    return t;
  }
  double work_per_s(int cls, double sample_s) const {  // GFLOP/s or GB/s of one sample
    return sample_s > 0 ? work(cls) * passes[cls] / sample_s / 1e9 : 0;
  }
};

// A send and a receive buffer for one series of collectives at a time.
struct CollBuffers {
  DeviceBuffer send, recv;
};

// Collectives issued back to back on one communicator: the executor's asynchronous handles, waited for at the end.
struct Series {
  Communicator* comm = nullptr;
  CollKind kind = CollKind::all_reduce;
  std::vector<Request> reqs;
  double counted_before_s = 0;
};

int64_t count_of(CollKind kind, uint64_t bytes, int group, DType dtype) {
  return count_for_message(kind, double(bytes), group, dtype_bytes(dtype));
}

Series issue(Communicator& c, CollKind kind, int64_t count, DType dtype, CollBuffers& buf, int n) {
  Series s;
  s.comm = &c;
  s.kind = kind;
  // The device timings of earlier collectives are settled first, so the counter's growth is this series alone.
  c.synchronize();
  s.counted_before_s = c.counters().seconds[int(kind)];
  s.reqs.reserve(n);
  for (int i = 0; i < n; ++i) s.reqs.push_back(c.run(kind, buf.send.data(), buf.recv.data(), count, dtype, 0));
  return s;
}

// Waits for the series; its span (first start to last end on the MPI backend's progress thread; the sum of the
// collectives' device times with NCCL, which times each with CUDA events on its stream).
double finish(Series& s) {
  for (Request& r : s.reqs) r.wait();
  s.comm->synchronize();
  double first_start = 0, first_end = 0, last_start = 0, last_end = 0;
  if (!s.reqs.empty() && s.reqs.front().executed(&first_start, &first_end) &&
      s.reqs.back().executed(&last_start, &last_end))
    return last_end - first_start;
  return s.comm->counters().seconds[int(s.kind)] - s.counted_before_s;
}

// One timed series alone: seconds per collective, slowest rank (ranks that do not take part give 0).
double series_alone(Communicator* c, CollKind kind, int64_t count, DType dtype, CollBuffers& buf, int n) {
  double t = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (c) {
    Series s = issue(*c, kind, count, dtype, buf, n);
    t = finish(s) / n;
  }
  return max_over_ranks(t);
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
std::string fmt(const char* f, const char* v) {
  char b[256];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
// "median [min, max]" of seconds in `unit` (1e3 ms, 1e6 us).
std::string range(const Estimate& e, double unit, const char* f = "%.5g") {
  if (e.n == 0) return "-";
  return fmt(f, e.median * unit) + " [" + fmt(f, e.min * unit) + ", " + fmt(f, e.max * unit) + "]";
}

// Everything the run measured, kept for the tables and the file's header (rank 0 prints; every rank holds the same).
struct Run {
  ContentionSamples samples;
  double coverage_b1[kTaskClassCount][kFabrics] = {{1e9, 1e9}, {1e9, 1e9}};  // collectives' span / compute, min
  double coverage_b2[kFabrics] = {1e9, 1e9};                                  // compute / collectives' span, min
  double coverage_b4[kTaskClassCount] = {1e9, 1e9};
  int series_b1[kTaskClassCount][kFabrics] = {{0, 0}, {0, 0}};
  int series_b2[kFabrics] = {0, 0};
  int series_b3 = 0;
  std::vector<double> serial_ratio;  // B3: two collectives of one group / one
  double coll_alone_s[kFabrics] = {0, 0};
  bool fabric[kFabrics] = {false, false};
  int group_size[kFabrics] = {1, 1};
  std::vector<std::string> b0_rows;
};

// The backend's compute side: the CPU kernels, or the GPU plugin's backend on this rank's device (local rank %
// devices, the device NCCL's bootstrap selects).
Result<std::unique_ptr<ComputeBackend>> make_compute(const ContentionOptions& o) {
  if (o.backend == Backend::mpi) return make_cpu_backend(DType::fp32);
  LINS_ASSIGN_OR_RETURN(auto rank, rank_gpu("(or use --backend mpi)", "(one rank per GPU)"));
  GpuBackendOptions go;
  go.device = rank.device;
  go.compute = DType::bf16;
  auto made = rank.plugin->make_backend(go);
  LINS_TRY(agree_any(made ? Status() : Status(make_error(made.error()))));
  return std::move(*made);
}

Status allocate_all(ComputeBackend& be, Kernels& k, CollBuffers bufs[2], uint64_t coll_bytes) {
  const bool gpu = be.native_stream() != nullptr;
  k.be = &be;
  k.gemm_n = gpu ? kGpuGemmN : kCpuGemmN;
  k.memory_elems = gpu ? kGpuMemoryElems : kCpuMemoryElems;
  const int64_t gemm_bytes = k.gemm_n * k.gemm_n * dtype_bytes(be.compute_dtype());
  Status st;
  auto get = [&](DeviceBuffer& d, int64_t bytes) {
    if (!st) return;
    auto r = be.allocate(bytes, MemCategory::buffer, true);
    if (!r) {
      st = make_error("cannot allocate " + format_bytes(double(bytes)) + ": " + r.error());
      return;
    }
    d = std::move(*r);
  };
  get(k.a, gemm_bytes);
  get(k.b, gemm_bytes);
  get(k.c, gemm_bytes);
  get(k.x, 4 * k.memory_elems);
  get(k.y, 4 * k.memory_elems);
  for (int i = 0; i < 2; ++i) {
    get(bufs[i].send, int64_t(coll_bytes));
    get(bufs[i].recv, int64_t(coll_bytes));
  }
  if (st) be.synchronize();
  return agree_any(st);
}

// B0's compute rows and the calibration: passes per sample so that one lasts o.compute_s on the slowest rank.
void calibrate(Kernels& k, const ContentionOptions& o) {
  for (int c = 0; c < kTaskClassCount; ++c) {
    k.timed(c, 1);  // warm-up: first touch, cuBLAS heuristics
    MPI_Barrier(MPI_COMM_WORLD);
    k.per_pass_s[c] = max_over_ranks(k.timed(c, 2) / 2);
    k.passes[c] = int(std::clamp(std::ceil(o.compute_s / std::max(k.per_pass_s[c], 1e-9)), 1.0, 1e6));
  }
}

// B0: each kind over each fabric, every group of the fabric at once (as the step runs them), a short sweep.
void measure_b0(const ContentionOptions& o, Communicator* comms[2], CollBuffers& buf, Run& run, int rank) {
  for (int f = 0; f < kFabrics; ++f) {
    if (!comms[f]) continue;
    const int n = comms[f]->size();
    for (CollKind kind : o.sweep_kinds) {
      for (uint64_t bytes = o.sweep_min_bytes; bytes <= o.sweep_max_bytes;) {
        const int64_t count = count_of(kind, bytes, n, o.dtype);
        if (count > 0) {
          series_alone(comms[f], kind, count, o.dtype, buf, 1);  // warm-up
          std::vector<double> t;
          for (int r = 0; r < o.repeats; ++r) t.push_back(series_alone(comms[f], kind, count, o.dtype, buf, 4));
          const Estimate e = estimate_of(t);
          const double mb = message_bytes(kind, count, n, dtype_bytes(o.dtype));
          if (rank == 0)
            run.b0_rows.push_back(fmt("  %-32s", coll_kind_name(kind)) + fmt(" %-6s", fabric_name(f)) +
                                  fmt(" %10s", format_bytes(mb).c_str()) + fmt(" %-36s", range(e, 1e6).c_str()) +
                                  fmt(" %8.3f", e.median > 0 ? mb / e.median / 1e9 * bus_factor(kind, n) : 0));
        }
        if (bytes > o.sweep_max_bytes / uint64_t(o.step_factor)) break;
        bytes *= uint64_t(o.step_factor);
      }
    }
  }
}

// B1 and B4: each compute class alone, beside a continuous collective on each fabric, beside both.
void measure_b1_b4(const ContentionOptions& o, Kernels& k, Communicator* comms[2], CollBuffers bufs[2], Run& run) {
  const bool both = comms[0] && comms[1];
  int64_t count[kFabrics] = {0, 0};
  for (int f = 0; f < kFabrics; ++f)
    if (comms[f]) count[f] = count_of(o.kind, o.bytes, comms[f]->size(), o.dtype);
  for (int c = 0; c < kTaskClassCount; ++c) {
    const double alone_guess = k.per_pass_s[c] * k.passes[c];
    int m[kFabrics] = {0, 0};
    for (int f = 0; f < kFabrics; ++f)
      if (comms[f])
        m[f] = run.series_b1[c][f] =
            int(std::clamp(std::ceil(kCover * alone_guess / std::max(run.coll_alone_s[f], 1e-9)) + 1, 2.0,
                           double(kMaxSeries)));
    for (int r = 0; r < o.repeats; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double alone = max_over_ranks(k.timed(c, k.passes[c]));
      double under[kFabrics] = {0, 0};
      for (int f = 0; f < kFabrics; ++f) {
        if (!comms[f]) continue;
        MPI_Barrier(MPI_COMM_WORLD);
        // The collectives first: each is ordered after the compute stream's work so far (none), and the compute
        // enqueued after them runs beside them, as a layer's compute beside the prefetch the executor issued.
        Series s = issue(*comms[f], o.kind, count[f], o.dtype, bufs[0], m[f]);
        const double t = k.timed(c, k.passes[c]);
        const double span = finish(s);
        under[f] = max_over_ranks(t);
        run.coverage_b1[c][f] = std::min(run.coverage_b1[c][f], min_over_ranks(span / std::max(t, 1e-12)));
        run.samples.compute[c][f].alone_s.push_back(alone);
        run.samples.compute[c][f].under_s.push_back(under[f]);
      }
      if (both) {
        MPI_Barrier(MPI_COMM_WORLD);
        Series s0 = issue(*comms[0], o.kind, count[0], o.dtype, bufs[0], m[0]);
        Series s1 = issue(*comms[1], o.kind, count[1], o.dtype, bufs[1], m[1]);
        const double t = k.timed(c, k.passes[c]);
        const double span = std::min(finish(s0), finish(s1));
        run.coverage_b4[c] = std::min(run.coverage_b4[c], min_over_ranks(span / std::max(t, 1e-12)));
        run.samples.compute_both[c].alone_s.push_back(alone);
        run.samples.compute_both[c].under_s.push_back(max_over_ranks(t));
      }
    }
  }
}

// B2: the collective alone, then beside GEMMs that outlast it (the compute the executor overlaps collectives with).
void measure_b2(const ContentionOptions& o, Kernels& k, Communicator* comms[2], CollBuffers& buf, Run& run) {
  const int g = int(TaskClass::gemm);
  for (int f = 0; f < kFabrics; ++f) {
    if (!comms[f]) continue;
    const int64_t count = count_of(o.kind, o.bytes, comms[f]->size(), o.dtype);
    const int m = run.series_b2[f] =
        int(std::clamp(std::round(o.compute_s / std::max(run.coll_alone_s[f], 1e-9)), 2.0, double(kMaxSeries)));
    const int passes =
        int(std::clamp(std::ceil(kCover * m * run.coll_alone_s[f] / std::max(k.per_pass_s[g], 1e-9)), 1.0, 1e6));
    for (int r = 0; r < o.repeats; ++r) {
      const double alone = series_alone(comms[f], o.kind, count, o.dtype, buf, m);
      MPI_Barrier(MPI_COMM_WORLD);
      Series s = issue(*comms[f], o.kind, count, o.dtype, buf, m);
      const double t = k.timed_until(g, passes, [&s] {
        double a = 0, b = 0;
        return s.reqs.back().executed(&a, &b);
      });
      const double span = finish(s);
      run.coverage_b2[f] = std::min(run.coverage_b2[f], min_over_ranks(t / std::max(span, 1e-12)));
      run.samples.transfer[f].alone_s.push_back(alone);
      run.samples.transfer[f].under_s.push_back(max_over_ranks(span / m));
    }
  }
}

// B3: the inter-node groups of local ranks 0 and 1 cross the same nodes' links: one alone, then both at once (eta);
// and two collectives issued at once on one group (one stream: expected one after the other).
void measure_b3(const ContentionOptions& o, Communicator* inter, CollBuffers& buf, Run& run, int rank) {
  const int local = o.topo.local_of(rank);
  const int64_t count = count_of(o.kind, o.bytes, inter->size(), o.dtype);
  const int m = run.series_b3 =
      int(std::clamp(std::round(o.compute_s / std::max(run.coll_alone_s[1], 1e-9)), 2.0, double(kMaxSeries)));
  run.samples.shared_n = 2;
  for (int r = 0; r < o.repeats; ++r) {
    const double alone = series_alone(local == 0 ? inter : nullptr, o.kind, count, o.dtype, buf, m);
    const double both = series_alone(local <= 1 ? inter : nullptr, o.kind, count, o.dtype, buf, m);
    run.samples.shared.alone_s.push_back(alone);
    run.samples.shared.under_s.push_back(both);
    const double one = series_alone(local == 0 ? inter : nullptr, o.kind, count, o.dtype, buf, 1);
    const double two = series_alone(local == 0 ? inter : nullptr, o.kind, count, o.dtype, buf, 2) * 2;
    run.serial_ratio.push_back(one > 0 ? two / one : 0);
  }
}

std::string utc_now() {
  char b[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

// The emulated device the compute was paced to, and the passes that overran it (summed over the ranks), or "unpaced".
std::string device_text(const ContentionOptions& o, const Kernels& k, const long overruns[], const long paced[]) {
  if (o.device_tflops <= 0 && o.device_gbps <= 0)
    return "compute unpaced (no emulated device: the ranks' own rates, sharing the cores as they do)";
  std::string t = "compute paced to an emulated device of ";
  t += o.device_tflops > 0 ? fmt("%.6g TFLOP/s", o.device_tflops) : std::string("unpaced GEMMs");
  t += o.device_gbps > 0 ? fmt(", %.6g GB/s", o.device_gbps) : std::string(", memory pass unpaced");
  t += " per rank (" + o.device_source + "); a pass's device time: gemm " + fmt("%.4g ms", k.device_s[0] * 1e3) +
       ", memory " + fmt("%.4g ms", k.device_s[1] * 1e3) + "; overruns (all ranks): gemm " +
       std::to_string(overruns[0]) + " of " + std::to_string(paced[0]) + ", memory " + std::to_string(overruns[1]) +
       " of " + std::to_string(paced[1]);
  return t;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& w : v) s += (s.empty() ? "" : " ") + w;
  return s;
}

// The tables, on rank 0; the same lines (less B0's) go into the file's header.
std::vector<std::string> report(const ContentionOptions& o, const Kernels& k, const Run& run, const ContentionFit& fit) {
  std::vector<std::string> out;
  auto line = [&](const std::string& s) { out.push_back(s); };
  const std::string what = std::string(coll_kind_name(o.kind)) + " of " + format_bytes(double(o.bytes)) + " " +
                           dtype_name(o.dtype);
  line("B1 kappa = T_compute_under / T_compute_alone - 1, beside " + what +
       " re-issued back to back; times in ms, median [min, max] of " + std::to_string(o.repeats) + ":");
  line(fmt("  %-7s", "class") + fmt(" %-6s", "fabric") + fmt(" %-26s", "alone_ms") + fmt(" %-26s", "under_ms") +
       fmt(" %-28s", "kappa") + " colls covered");
  for (int c = 0; c < kTaskClassCount; ++c)
    for (int f = 0; f < kFabrics; ++f) {
      const PairedTimes& p = run.samples.compute[c][f];
      if (!p.measured()) continue;
      line(fmt("  %-7s", class_name(c)) + fmt(" %-6s", fabric_name(f)) +
           fmt(" %-26s", range(estimate_of(p.alone_s), 1e3).c_str()) +
           fmt(" %-26s", range(estimate_of(p.under_s), 1e3).c_str()) +
           fmt(" %-28s", range(fit.kappa[c][f], 1, "%.3f").c_str()) + fmt(" %5.0f", run.series_b1[c][f]) +
           (run.coverage_b1[c][f] < 1 ? fmt(" NO (%.2f)", run.coverage_b1[c][f]) : " yes"));
    }
  line("B2 lambda = T_coll_under / T_coll_alone - 1, " + what + " beside continuous GEMMs; us per collective:");
  line(fmt("  %-6s", "fabric") + fmt(" %-26s", "alone_us") + fmt(" %-26s", "under_us") + fmt(" %-28s", "lambda") +
       " colls covered");
  for (int f = 0; f < kFabrics; ++f) {
    const PairedTimes& p = run.samples.transfer[f];
    if (!p.measured()) continue;
    line(fmt("  %-6s", fabric_name(f)) + fmt(" %-26s", range(estimate_of(p.alone_s), 1e6).c_str()) +
         fmt(" %-26s", range(estimate_of(p.under_s), 1e6).c_str()) +
         fmt(" %-28s", range(fit.lambda[f], 1, "%.3f").c_str()) + fmt(" %5.0f", run.series_b2[f]) +
         (run.coverage_b2[f] < 1 ? fmt(" NO (%.2f)", run.coverage_b2[f]) : " yes"));
  }
  if (run.samples.shared.measured()) {
    line("B3 eta = 2 T_alone / T_concurrent: the inter groups of local ranks 0 and 1 (one link per node), " + what +
         " x " + std::to_string(run.series_b3) + "; us per collective:");
    line("  one group alone " + range(estimate_of(run.samples.shared.alone_s), 1e6) + ", two groups at once " +
         range(estimate_of(run.samples.shared.under_s), 1e6) + ", eta " + range(fit.eta, 1, "%.3f"));
    line("  two collectives issued at once on one group: " + range(estimate_of(run.serial_ratio), 1, "%.2f") +
         " x one (2 = one after the other)");
  } else {
    line("B3 eta: not measured (needs 2 or more ranks per node and 2 or more nodes)");
  }
  if (fit.combine_measured) {
    line("B4 compute beside " + what + " on both fabrics at once: slowdown vs sum and max of the single kappas:");
    for (int c = 0; c < kTaskClassCount; ++c)
      if (fit.both[c].n)
        line(fmt("  %-7s", class_name(c)) + " measured " + range(fit.both[c], 1, "%.3f") +
             fmt(", sum %.3f", fit.both_sum[c]) + fmt(", max %.3f", fit.both_max[c]) +
             (run.coverage_b4[c] < 1 ? fmt(" (collectives covered only %.2f)", run.coverage_b4[c]) : ""));
  } else {
    line("B4: not measured (needs both fabrics)");
  }
  line("fitted: " + fit.params.summary());
  for (const auto& n : fit.notes) line("  note: " + n);
  (void)k;
  return out;
}

}  // namespace

double contention_buffer_bytes(const ContentionOptions& o) {
  const bool gpu = o.backend == Backend::nccl;
  const double coll = 4.0 * double(std::max(o.bytes, o.sweep_max_bytes));
  const double kernels = gpu ? 3.0 * kGpuGemmN * kGpuGemmN * 2 + 8.0 * kGpuMemoryElems
                             : 3.0 * kCpuGemmN * kCpuGemmN * 4 + 8.0 * kCpuMemoryElems;
  return coll + kernels;
}

Status run_contention(const ContentionOptions& o, int rank) {
  const Topology& topo = o.topo;
  const int world = topo.world();
  const std::string fabric_label_text = fabric_label(MPI_COMM_WORLD);

  // Declared in the order of their teardown's reverse: the communicators' streams are ordered after the backend's.
  LINS_ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> be, make_compute(o));
  Kernels k;
  CollBuffers bufs[2];
  LINS_TRY(allocate_all(*be, k, bufs, std::max(o.bytes, o.sweep_max_bytes)));
  if (o.device_tflops > 0 || o.device_gbps > 0) {
    if (be->native_stream() != nullptr)
      return make_error("--device-rate paces the CPU backend's compute; a GPU keeps its own time");
    if (o.device_tflops > 0) k.device_s[int(TaskClass::gemm)] = k.work(int(TaskClass::gemm)) / (o.device_tflops * 1e12);
    if (o.device_gbps > 0) k.device_s[int(TaskClass::memory)] = k.work(int(TaskClass::memory)) / (o.device_gbps * 1e9);
  }

  CommOptions co;
  co.mpi.progress = o.progress;
  co.compute_stream = be->native_stream();
  auto world_comm = make_communicator(o.backend, MPI_COMM_WORLD, "world", topo.nodes > 1 ? Axis::inter : Axis::intra, co);
  LINS_TRY(agree_any(world_comm ? Status() : Status(make_error(world_comm.error()))));
  Run run;
  std::unique_ptr<Communicator> owned[kFabrics];
  Communicator* comms[kFabrics] = {nullptr, nullptr};
  const GroupSpec specs[kFabrics] = {GroupSpec{topo.gpus_per_node, 1}, GroupSpec{world, topo.gpus_per_node}};
  for (int f = 0; f < kFabrics; ++f) {
    if (specs[f].size() < 2) continue;  // a group of one rank moves nothing
    LINS_ASSIGN_OR_RETURN(owned[f], split_group(**world_comm, specs[f], topo, fabric_name(f)));
    comms[f] = owned[f].get();
    run.fabric[f] = true;
    run.group_size[f] = comms[f]->size();
  }
  if (!comms[0] && !comms[1])
    return make_error("--contention needs groups of 2 or more ranks: run 2 or more ranks (and give --gpus-per-node)");

  if (rank == 0) {
    std::printf("# lins comm --contention %s (commit %s): backend %s", LINS_VERSION, LINS_GIT_COMMIT,
                backend_name(o.backend));
    if (o.backend == Backend::mpi) std::printf(" (%s progress)", mpi_progress_name(o.progress));
    std::printf(", %d ranks = %d per node x %d nodes, fabric %s; %d repeats, compute samples of %.3g s\n", world,
                topo.gpus_per_node, topo.nodes, fabric_label_text.c_str(), o.repeats, o.compute_s);
    if (o.device_tflops > 0 || o.device_gbps > 0)
      std::printf("# compute paced to an emulated device of %.6g TFLOP/s, %.6g GB/s per rank (0: unpaced) (%s)\n",
                  o.device_tflops, o.device_gbps, o.device_source.c_str());
    std::fflush(stdout);
  }
  calibrate(k, o);
  for (int f = 0; f < kFabrics; ++f) {  // the collective of B1-B4 alone, to size the series that cover compute
    if (!comms[f]) continue;
    const int64_t count = count_of(o.kind, o.bytes, comms[f]->size(), o.dtype);
    if (count <= 0) return make_error("--contention-bytes " + std::to_string(o.bytes) + " is too small for one element");
    series_alone(comms[f], o.kind, count, o.dtype, bufs[0], 2);  // warm-up
    std::vector<double> t;
    for (int r = 0; r < 3; ++r) t.push_back(series_alone(comms[f], o.kind, count, o.dtype, bufs[0], 2));
    run.coll_alone_s[f] = estimate_of(t).median;
  }

  measure_b0(o, comms, bufs[0], run, rank);
  measure_b1_b4(o, k, comms, bufs, run);
  measure_b2(o, k, comms, bufs[0], run);
  if (comms[1] && topo.gpus_per_node >= 2) measure_b3(o, comms[1], bufs[0], run, rank);

  for (auto& c : owned) c.reset();
  world_comm->reset();

  long overruns[kTaskClassCount] = {k.overruns[0], k.overruns[1]}, paced[kTaskClassCount] = {k.paced[0], k.paced[1]};
  MPI_Allreduce(MPI_IN_PLACE, overruns, kTaskClassCount, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, paced, kTaskClassCount, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  char src[256];
  std::snprintf(src, sizeof src, "measured: lins comm --contention on %s, %dx%d", backend_name(o.backend),
                topo.gpus_per_node, topo.nodes);
  std::string source = src;
  if (o.device_tflops > 0) source += fmt(", paced at %.6g TFLOP/s", o.device_tflops);
  if (o.device_gbps > 0) source += fmt(" and %.6g GB/s", o.device_gbps);
  const std::string device = device_text(o, k, overruns, paced);
  const ContentionFit fit = fit_contention(run.samples, source);
  Status st;
  if (rank == 0) {
    std::printf("#\n# B0 alone; times per collective (every group of the fabric at once) or per compute sample, "
                "median [min, max] of %d:\n", o.repeats);
    std::printf("# %-32s %-6s %10s %-36s %8s\n", "what", "fabric", "size", "time_us", "busbw_GB/s");
    for (int c = 0; c < kTaskClassCount; ++c) {
      const Estimate e = estimate_of(run.samples.compute[c][comms[0] ? 0 : 1].alone_s);
      std::printf("  %-32s %-6s %10s %-36s %8.1f %s\n", k.describe(c).c_str(), "-", "-", range(e, 1e6).c_str(),
                  k.work_per_s(c, e.median), c == int(TaskClass::gemm) ? "GFLOP/s" : "GB/s");
    }
    for (const auto& row : run.b0_rows) std::printf("%s\n", row.c_str());
    const std::vector<std::string> lines = report(o, k, run, fit);
    std::printf("# %s\n", device.c_str());
    for (const auto& l : lines) std::printf("# %s\n", l.c_str());
    std::string header = "lins comm --contention: " + join(o.argv) + "\n";
    header += std::to_string(world) + " ranks = " + std::to_string(topo.gpus_per_node) + " per node x " +
              std::to_string(topo.nodes) + " nodes (topology " + topo.to_string() + "), fabric " + fabric_label_text +
              ", backend " + backend_name(o.backend) + "\n";
    header += "date " + utc_now() + ", lins " + LINS_VERSION + " commit " + LINS_GIT_COMMIT + "\n";
    header += "compute: " + k.describe(0) + "; " + k.describe(1) + "\n";
    header += device + "\n";
    for (const auto& l : lines) header += l + "\n";
    st = write_file_atomic(o.path, contention_toml(fit.params, header));
    if (st) std::printf("# wrote %s\n", o.path.c_str());
    std::fflush(stdout);
  }
  return agree(st, rank);
}

}  // namespace lins
