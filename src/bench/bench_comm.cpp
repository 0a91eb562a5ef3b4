// Collectives of the MPI backend against the raw MPI calls on the same buffers in the same run (run it under
// mpirun): bus bandwidth of both at 64 MiB for all_gather, reduce_scatter, all_reduce, all_to_all, and the per-call
// overhead at 4 KiB. Rank 0 reports; every rank runs the same fixed iteration count, timed as the slowest rank. No
// assertions.
//   mpirun --bind-to core:overload-allowed -np 4 bench/bench_comm   (unbound threads migrate and add noise)
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"

namespace lins {
namespace {

constexpr int64_t kBigBytes = 64ll << 20;
constexpr int64_t kSmallBytes = 4 << 10;

MPI_Comm g_raw = MPI_COMM_NULL;              // a duplicate of MPI_COMM_WORLD for the raw calls
std::unique_ptr<MpiCommunicator> g_ours[2];  // thread and nonblocking progress
std::vector<float> g_send, g_recv;           // shared by every variant: fp32, kBigBytes each
int g_size = 1;

// Median seconds per call of every repetition of a benchmark, by name (filled by rank 0 and the others alike).
std::map<std::string, std::vector<double>> g_seconds;

enum class Impl { raw, ours_thread, ours_nonblocking };
const char* impl_name(Impl i) {
  return i == Impl::raw ? "raw_mpi" : i == Impl::ours_thread ? "lins_mpi_thread" : "lins_mpi_nonblocking";
}

// The raw MPI call of each collective (collective(kind).mpi_call), fp32, `count` as its row counts it.
void raw_mpi(CollKind kind, const float* s, float* r, int count) {
  switch (kind) {
    case CollKind::all_gather:
      MPI_Allgather(s, count, MPI_FLOAT, r, count, MPI_FLOAT, g_raw);
      return;
    case CollKind::reduce_scatter:
      MPI_Reduce_scatter_block(s, r, count, MPI_FLOAT, MPI_SUM, g_raw);
      return;
    case CollKind::all_reduce:
      MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, g_raw);
      return;
    case CollKind::broadcast:
      MPI_Bcast(r, count, MPI_FLOAT, 0, g_raw);
      return;
    case CollKind::all_to_all:
      MPI_Alltoall(s, count, MPI_FLOAT, r, count, MPI_FLOAT, g_raw);
      return;
  }
}

// One collective of `bytes` message bytes (the schedule's convention) with implementation `impl`.
void run_one(Impl impl, CollKind kind, int64_t bytes) {
  const int64_t count = count_for_message(kind, double(bytes), g_size, 4);
  float* s = g_send.data();
  float* r = g_recv.data();
  if (impl == Impl::raw) return raw_mpi(kind, s, r, int(count));
  g_ours[impl == Impl::ours_thread ? 0 : 1]->run(kind, s, r, count, DType::fp32, 0).wait();
}

void bm_collective(benchmark::State& state, std::string key, Impl impl, CollKind kind, int64_t bytes) {
  run_one(impl, kind, bytes);  // warm-up: connections, buffers, the progress thread
  std::vector<double> times;
  for (auto _ : state) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    run_one(impl, kind, bytes);
    double t = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // the slowest rank's time
    state.SetIterationTime(t);
    times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  g_seconds[key].push_back(med);
  const double bus = double(bytes) * bus_factor(kind, g_size);
  state.counters["median_us"] = med * 1e6;
  state.counters["algbw_gbps"] = bytes / med / 1e9;
  state.counters["busbw_gbps"] = bus / med / 1e9;
  state.counters["ranks"] = g_size;
}

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

// The slowest rank's time of one call.
double timed_call(Impl impl, CollKind kind, int64_t bytes) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  run_one(impl, kind, bytes);
  double t = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace
}  // namespace lins

int main(int argc, char** argv) {
  using namespace lins;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  // Only rank 0 writes --benchmark_out files.
  std::vector<char*> args(argv, argv + argc);
  if (rank != 0)
    args.erase(std::remove_if(args.begin() + 1, args.end(),
                              [](char* a) { return std::strncmp(a, "--benchmark_out", 15) == 0; }),
               args.end());
  int nargs = static_cast<int>(args.size());
  benchmark::Initialize(&nargs, args.data());

  MPI_Comm_dup(MPI_COMM_WORLD, &g_raw);
  g_ours[0] = MpiCommunicator::create(MPI_COMM_WORLD, "world", Axis::intra, {MpiProgress::thread}).value();
  g_ours[1] = MpiCommunicator::create(MPI_COMM_WORLD, "world", Axis::intra, {MpiProgress::nonblocking}).value();
  g_send.assign(kBigBytes / 4, 1.0f);
  g_recv.assign(kBigBytes / 4, 0.0f);

  constexpr CollKind kinds[] = {CollKind::all_gather, CollKind::reduce_scatter, CollKind::all_reduce,
                                CollKind::all_to_all};
  constexpr int kKinds = int(std::size(kinds));
  const Impl impls[] = {Impl::raw, Impl::ours_thread, Impl::ours_nonblocking};
  for (CollKind k : kinds)
    for (Impl i : impls) {
      const std::string name = std::string(coll_kind_name(k)) + "/64MiB/" + impl_name(i);
      benchmark::RegisterBenchmark(name.c_str(), bm_collective, name, i, k, kBigBytes)
          ->Iterations(5)
          ->Repetitions(3)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  for (CollKind k : kinds)
    for (Impl i : impls) {
      const std::string name = std::string(coll_kind_name(k)) + "/4KiB/" + impl_name(i);
      benchmark::RegisterBenchmark(name.c_str(), bm_collective, name, i, k, kSmallBytes)
          ->Iterations(2000)
          ->Repetitions(3)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }

  NullReporter quiet;
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }

  // The ratio at 64 MiB from interleaved rounds (raw, thread, nonblocking in rotating order), so that load from
  // other processes drifting during the run hits all three alike; on every rank, timed as the slowest.
  constexpr int kRounds = 21;
  double interleaved[kKinds][3] = {};  // [op][impl] median seconds
  double ratio[kKinds][3] = {};        // [op][impl] median over rounds of raw time / impl time within the round
  for (int k = 0; k < kKinds; ++k) {
    std::vector<double> t[3], r[3];
    for (int round = 0; round < kRounds; ++round) {
      double now[3];
      for (int j = 0; j < 3; ++j) {
        const int i = (round + j) % 3;
        now[i] = timed_call(impls[i], kinds[k], kBigBytes);
      }
      for (int i = 0; i < 3; ++i) {
        t[i].push_back(now[i]);
        r[i].push_back(now[0] / now[i]);
      }
    }
    for (int i = 0; i < 3; ++i) {
      interleaved[k][i] = median(t[i]);
      ratio[k][i] = median(r[i]);
    }
  }

  if (rank == 0) {
    auto med = [](const std::string& name) { return median(g_seconds[name]); };
    bool kinds_small_done = true;  // the 4 KiB benchmarks ran (not filtered out)
    std::printf(
        "\n%d ranks: busbw at 64 MiB, median of %d interleaved rounds; ratio = median over rounds of ours / raw "
        "busbw within the round\n",
        g_size, kRounds);
    std::printf("%-16s %12s %14s %10s %18s %10s\n", "op", "raw (GB/s)", "thread (GB/s)", "ratio", "nonblocking (GB/s)",
                "ratio");
    for (int k = 0; k < kKinds; ++k) {
      const double bus = double(kBigBytes) * bus_factor(kinds[k], g_size) / 1e9;
      const double raw = interleaved[k][0], th = interleaved[k][1], nb = interleaved[k][2];
      std::printf("%-16s %12.3f %14.3f %10.3f %18.3f %10.3f\n", coll_kind_name(kinds[k]), bus / raw, bus / th,
                  ratio[k][1], bus / nb, ratio[k][2]);
    }
    if (g_seconds.count("all_reduce/4KiB/raw_mpi") == 0) kinds_small_done = false;
    if (kinds_small_done) std::printf("\nper-call time at 4 KiB (median), overhead = ours - raw\n");
    if (kinds_small_done)
      std::printf("%-16s %10s %12s %14s %16s %18s\n", "op", "raw (us)", "thread (us)", "overhead (us)",
                  "nonblocking (us)", "overhead (us)");
    for (CollKind k : kinds) {
      if (!kinds_small_done) break;
      const std::string base = std::string(coll_kind_name(k)) + "/4KiB/";
      const double raw = med(base + "raw_mpi"), th = med(base + "lins_mpi_thread"),
                   nb = med(base + "lins_mpi_nonblocking");
      std::printf("%-16s %10.2f %12.2f %14.2f %16.2f %18.2f\n", coll_kind_name(k), raw * 1e6, th * 1e6,
                  (th - raw) * 1e6, nb * 1e6, (nb - raw) * 1e6);
    }
  }
  g_ours[0].reset();
  g_ours[1].reset();
  MPI_Comm_free(&g_raw);
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
