// Every strategy is the same optimisation as DDP on one rank. On the CPU backend in fp32, for each gpus-per-node
// setting that divides the world, each preset (ddp, zero1, zero2, zero3, mics, mics spanning nodes, hsdp, zeropp)
// and several Lins 6-tuples run k steps of the tiny model with M = 2 micro-batches per rank, and:
//   - the loss of every step equals the one-rank DDP run over the same global batch (M * world micro-batches)
//     within 1e-7 relative (seen: 1e-9);
//   - every rank's final local parameters equal the same elements of the one-rank run within 2e-7 absolute
//     (seen: 2e-8; fp32 sums in another order; 3 AdamW steps at lr 1e-3 move parameters by about 3e-3), and every
//     padding element is still zero;
//   - the bytes the communicators counted per collective kind and mesh axis equal the schedule's, exactly, in every
//     step;
//   - the P + G + OS bytes allocated per rank equal the memory model's states figure (fp32: 4 + 4 + 12 bytes;
//     ZeRO++'s secondary partition included).
// The same in the paper's mixed precision (bf16 P and G, so bf16 collectives; fp32 master weights and moments)
// against one-rank DDP in bf16: bytes and states (2 + 2 + 12) exactly; the first step's loss within 1e-7 (the
// initial bf16 weights are the same rounding of the same fp32 draw on every strategy); later losses and the final
// parameters within bf16 tolerances, since bf16 gradient sums in another order round differently (see kBf16*); and
// the same again with bf16 activations (the GPU's compute, emulated on the CPU) against one-rank DDP doing the same.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "../comm/mpi_world.h"
#include "comm/mesh_comms.h"
#include "core/projection/memory_model.h"
#include "core/schedule/workload.h"
#include "train/executor.h"

namespace lins {
namespace {

constexpr int kSteps = 3;
constexpr int kMicroBatches = 2;
constexpr int kSeq = 8;
constexpr double kLossRelTol = 1e-7;
constexpr double kParamAbsTol = 2e-7;
// bf16: a reduction in another order changes a gradient by about one bf16 ulp (2^-8 relative), AdamW turns that
// into an update difference well below lr = 1e-3 per step, and the stored parameter is the rounding of the master
// weight, so a master weight next to a rounding boundary lands one bf16 ulp away: 3.9e-3 for a norm weight just
// below 1. Seen on 2..8 ranks: loss 2.1e-4 relative (6 ranks; 2e-5 elsewhere), parameters 3.9e-3 apart at worst
// (one rounding flip of a norm weight), 1.5e-5 on average; a wrong gradient moves most weights by about lr.
constexpr double kBf16LossRelTol = 1e-3;
constexpr double kBf16ParamAbsTol = 8e-3;
constexpr double kBf16ParamMeanTol = 5e-5;

using test::world_rank;
using test::world_size;

ExecutorOptions options(int micro_batches, Recompute recompute = Recompute::none, DType dtype = DType::fp32) {
  ExecutorOptions o;
  o.state_dtype = dtype;
  o.seq = kSeq;
  o.micro_batch_size = 1;
  o.micro_batches = micro_batches;
  o.recompute = recompute;
  o.bucket_bytes = 1024;  // 256 fp32 elements: many buckets, so select & drop cuts through owned slices
  o.seed = 42;
  o.adamw.lr = 1e-3f;
  return o;
}

// One-rank DDP over the whole global batch: losses per step and the final parameters of every module (unpadded).
struct Reference {
  std::vector<double> losses;
  std::vector<std::vector<float>> module_params;
};

const Reference& reference(const ModelSpec& model, int world, DType dtype, DType compute) {
  static std::map<std::tuple<int, DType, DType>, Reference> cache;
  if (auto it = cache.find({world, dtype, compute}); it != cache.end()) return it->second;
  Reference ref;
  auto be = make_cpu_backend(compute);
  const Topology one{1, 1};
  auto plan = parse_plan("ddp", one);
  auto ex =
      Executor::create(model, *plan, one, 0, nullptr, *be, options(kMicroBatches * world, Recompute::none, dtype));
  EXPECT_TRUE(ex.ok()) << ex.error();
  for (int s = 0; s < kSteps; ++s) {
    auto st = (*ex)->step();
    EXPECT_TRUE(st.ok()) << st.error();
    ref.losses.push_back(st->loss_sum / double((*ex)->global_tokens()));
  }
  EXPECT_TRUE((*ex)->finish().ok());
  const auto local = (*ex)->local_parameters();
  for (const auto& ms : (*ex)->layout().modules)
    ref.module_params.emplace_back(local.begin() + ms.local_offset,
                                   local.begin() + ms.local_offset + model.modules[ms.module].elems);
  return cache.emplace(std::make_tuple(world, dtype, compute), std::move(ref)).first->second;
}

// DeepSpeed's thresholds are in elements: on the tiny model its defaults keep every module persistent (never gathered
// in the step). This setting gathers every module in forward and again in backward, as on a LLaMA-sized model.
EngineOptions gather_everything() {
  EngineOptions e;
  e.ds_param_persistence_threshold_elems = 0;
  e.ds_max_reuse_distance_elems = 0;
  e.ds_prefetch_bucket_elems = 1;
  e.ds_reduce_bucket_elems = 600;  // a few buckets per backward
  return e;
}

// ZeRO++'s quantized communication changes the numbers on purpose: int8 weights in every gather (a relative error up
// to 1/254 of each block's largest value in the forward and backward), int4 gradients (up to 1/14 of a block's
// largest). AdamW turns a gradient's error into an update error only where the gradient is near zero, where its
// sign can flip: at most 2 lr per step. Seen on 4 ranks (1 x 4 and 2 x 2): loss within 1.1e-3 relative by the third
// step, parameters 4.4e-3 apart at worst (flipped updates), 2.2e-4 on average; a wrong reduction (a missing rank, a
// wrong slice) moves the loss by percent and most parameters by about lr.
struct Tolerances {
  double loss_rel, param_abs, param_mean;
};
constexpr Tolerances kQuantized{3e-3, 6.5e-3, 5e-4};

void run_and_check(const ModelSpec& model, const Topology& topo, const std::string& plan_text, int micro_batches,
                   Recompute recompute = Recompute::none, Overlap overlap = Overlap::all, DType dtype = DType::fp32,
                   DType compute = DType::fp32, const EngineOptions& engine = EngineOptions{},
                   const Tolerances* quantized = nullptr) {
  const int world = topo.world(), rank = world_rank();
  const bool bf16 = dtype == DType::bf16 || compute == DType::bf16;
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " storage, " + dtype_name(compute) + " compute, plan " + plan_text +
               " on " + std::to_string(topo.gpus_per_node) + " per node x " + std::to_string(topo.nodes) +
               " nodes, M " + std::to_string(micro_batches) + ", overlap " + overlap_name(overlap) +
               (recompute != Recompute::none ? std::string(", recompute ") + recompute_name(recompute) : "") +
               ", rank " + std::to_string(rank));
  auto plan = parse_plan(plan_text, topo);
  ASSERT_TRUE(plan.ok()) << plan.error();
  auto world_comm = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  ASSERT_TRUE(world_comm.ok()) << world_comm.error();
  auto be = make_cpu_backend(compute);
  ExecutorOptions o = options(micro_batches, recompute, dtype);
  o.overlap = overlap;
  o.engine = engine;
  auto ex = Executor::create(model, *plan, topo, rank, world_comm->get(), *be, o);
  ASSERT_TRUE(ex.ok()) << ex.error();
  Executor& e = **ex;

  // The reference's global batch is world * M micro-batches of one sequence; ours is the same set.
  const Reference& ref = reference(model, world * kMicroBatches / micro_batches, dtype, compute);
  ASSERT_EQ(world * kMicroBatches % micro_batches, 0);
  ASSERT_EQ(e.global_tokens(), int64_t(world) * kMicroBatches * kSeq * micro_batches / kMicroBatches);

  Workload w;
  w.model = model;
  w.seq = kSeq;
  w.micro_batch_size = 1;
  w.micro_batches = micro_batches;
  w.global_batch_tokens = e.global_tokens();
  w.recompute = recompute;
  const MemoryEstimate mem =
      estimate_memory(e.schedule(), w, executor_state_bytes(dtype, compute), MemoryOf::schedule_rank);
  const double expected_states = mem.state_bytes;

  for (int s = 0; s < kSteps; ++s) {
    auto st = e.step();
    ASSERT_TRUE(st.ok()) << st.error();
    double loss = 0;
    MPI_Allreduce(&st->loss_sum, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    loss /= double(e.global_tokens());
    if (micro_batches == kMicroBatches) {
      const double tol = quantized ? quantized->loss_rel : bf16 && s > 0 ? kBf16LossRelTol : kLossRelTol;
      EXPECT_NEAR(loss, ref.losses[s], tol * ref.losses[s]) << "loss of step " << s;
      if (std::getenv("LINS_TEST_VERBOSE") && rank == 0)
        std::printf("%s/%s %s: step %d loss rel diff %.3g\n", dtype_name(dtype), dtype_name(compute), plan_text.c_str(),
                    s, std::fabs(loss - ref.losses[s]) / ref.losses[s]);
    }
    for (int k = 0; k < kCollKindCount; ++k)
      for (int a = 0; a < 2; ++a)
        EXPECT_EQ(st->bytes[k][a], e.schedule().message_bytes(CollKind(k), Axis(a)))
            << coll_kind_name(CollKind(k)) << " bytes on the " << axis_name(Axis(a)) << " axis, step " << s;
    EXPECT_EQ(double(st->state_bytes), expected_states) << "P+G+OS allocated vs memory model";
    // The memory model walks the executor's buffers through the step's program: the steady state's peak, reached
    // from the second step on (the first has no broadcasts carried into it).
    if (s > 0) {
      EXPECT_EQ(double(st->buffer_peak_bytes), mem.buffer_bytes) << "buffer peak vs memory model, step " << s;
    }
  }
  ASSERT_TRUE(e.finish().ok());

  if (micro_batches != kMicroBatches) return;
  const auto local = e.local_parameters();
  double worst = 0, sum = 0;
  int64_t count = 0;
  std::string where;
  for (const auto& ms : e.layout().modules) {
    const auto& full = ref.module_params[ms.module];
    for (int64_t i = 0; i < ms.shard_elems; ++i) {
      const int64_t at = ms.module_offset + i;
      const float got = local[ms.local_offset + i];
      const float want = at < int64_t(full.size()) ? full[at] : 0.0f;  // padding stays zero
      if (at >= int64_t(full.size())) {
        EXPECT_EQ(got, 0.0f) << "padding of " << model.modules[ms.module].name;
      }
      sum += std::fabs(double(got) - want);
      ++count;
      if (std::fabs(double(got) - want) > worst) {
        worst = std::fabs(double(got) - want);
        where = model.modules[ms.module].name + "[" + std::to_string(at) + "]";
      }
    }
  }
  EXPECT_LE(worst, quantized ? quantized->param_abs : bf16 ? kBf16ParamAbsTol : kParamAbsTol)
      << "largest parameter difference at " << where;
  if (bf16 || quantized) {
    EXPECT_LE(sum / double(std::max<int64_t>(count, 1)), quantized ? quantized->param_mean : kBf16ParamMeanTol)
        << "mean parameter difference";
  }
  if (std::getenv("LINS_TEST_VERBOSE") && rank == 0)
    std::printf("%s/%s %s: worst %.3g mean %.3g\n", dtype_name(dtype), dtype_name(compute), plan_text.c_str(), worst,
                sum / double(std::max<int64_t>(count, 1)));
}

std::vector<int> gpus_per_node_settings(int world) {
  std::vector<int> out;
  for (int r : {1, 2, 3, 4, world})
    if (r <= world && world % r == 0 && std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  return out;
}

const ModelSpec& tiny() {
  static ModelSpec m = *make_model_preset("tiny");
  return m;
}

TEST(StepEquivalence, PresetsMatchOneRankDdp) {
  const int world = world_size();
  for (int R : gpus_per_node_settings(world)) {
    const Topology topo{R, world / R};
    std::vector<std::string> plans = {"ddp", "zero1", "zero2", "zero3", "mics", "hsdp", "zeropp"};
    if (topo.nodes % 2 == 0) plans.push_back("mics:" + std::to_string(2 * R));  // MiCS groups spanning two nodes
    for (const auto& p : plans) run_and_check(tiny(), topo, p, kMicroBatches);
  }
}

TEST(StepEquivalence, LinsPlansMatchOneRankDdp) {
  const int world = world_size();
  for (int R : gpus_per_node_settings(world)) {
    const Topology topo{R, world / R};
    const std::string all = std::to_string(R) + "x" + std::to_string(topo.nodes);
    const std::string node = std::to_string(R) + "x1";
    for (const auto& p : {"p=1x1,g=1x1,os=" + all,                    // Lins OS sharding (inter-tensor)
                          "p=1x1,g=1x1,os=" + all + ",layout=intra",  // the even split on the Lins engine
                          "p=" + node + ",g=" + node + ",os=" + all,  // P and G in the node, OS everywhere
                          "p=" + node + ",g=" + all + ",os=" + all,   // T_g over nodes with P sharded in the node
                          "p=1x1,g=" + all + ",os=" + all,            // T_g runs (M > 1)
                          "p=" + all + ",g=" + all + ",os=" + all})   // everything sharded
      run_and_check(tiny(), topo, p, kMicroBatches);
  }
}

TEST(StepEquivalence, OverlapModesAndRecomputationChangeNothing) {
  const int world = world_size();
  const int R = world % 2 == 0 ? 2 : 1;
  const Topology topo{R, world / R};
  const std::string plan = "p=" + std::to_string(R) + "x1,g=" + std::to_string(R) + "x1,os=" + std::to_string(R) + "x" +
                           std::to_string(topo.nodes);
  for (Overlap o : {Overlap::no_bcast, Overlap::no_allreduce, Overlap::none})
    run_and_check(tiny(), topo, plan, kMicroBatches, Recompute::none, o);
  for (Recompute r : {Recompute::selective, Recompute::full}) {
    run_and_check(tiny(), topo, plan, kMicroBatches, r);
    run_and_check(tiny(), topo, "zero3", kMicroBatches, r);
    // In the GPU's precision too (bf16 states and activations): recomputation re-runs the forward from bf16 weights.
    run_and_check(tiny(), topo, plan, kMicroBatches, r, Overlap::none, DType::bf16, DType::bf16);
    run_and_check(tiny(), topo, "zero3", kMicroBatches, r, Overlap::no_bcast, DType::bf16, DType::bf16);
  }
}

TEST(StepEquivalence, MixedPrecisionPresetsAndLinsPlansTrackOneRankDdpInTheSamePrecision) {
  const int world = world_size();
  for (int R : gpus_per_node_settings(world)) {
    const Topology topo{R, world / R};
    const std::string all = std::to_string(R) + "x" + std::to_string(topo.nodes);
    const std::string node = std::to_string(R) + "x1";
    for (const auto& p : {std::string("ddp"), std::string("zero1"), std::string("zero2"), std::string("zero3"),
                          std::string("mics"), std::string("zeropp"), "p=1x1,g=1x1,os=" + all,
                          "p=" + node + ",g=" + all + ",os=" + all, "p=1x1,g=" + all + ",os=" + all})
      for (DType compute : {DType::fp32, DType::bf16})
        run_and_check(tiny(), topo, p, kMicroBatches, Recompute::none, Overlap::all, DType::bf16, compute);
  }
}

TEST(StepEquivalence, EngineSettingsMatchOneRankDdp) {
  // The baselines' own settings: DeepSpeed with every module gathered (several prefetched, some kept for backward,
  // several reduce buckets, overlap_comm), FSDP2's reshard variants, and the defaults checked above.
  const int world = world_size();
  for (int R : gpus_per_node_settings(world)) {
    const Topology topo{R, world / R};
    EngineOptions every = gather_everything();
    EngineOptions prefetch = every;
    prefetch.ds_prefetch_bucket_elems = 2000;     // two or three modules ahead
    prefetch.ds_max_reuse_distance_elems = 1500;  // the last modules stay gathered for their backward
    EngineOptions overlap = every;
    overlap.ds_overlap_comm = true;
    for (const char* p : {"zero3", "mics", "zeropp", "zero2"}) {
      run_and_check(tiny(), topo, p, kMicroBatches, Recompute::none, Overlap::all, DType::fp32, DType::fp32, every);
      run_and_check(tiny(), topo, p, kMicroBatches, Recompute::none, Overlap::all, DType::fp32, DType::fp32, prefetch);
    }
    for (const char* p : {"zero1", "zero2"})
      run_and_check(tiny(), topo, p, kMicroBatches, Recompute::none, Overlap::all, DType::fp32, DType::fp32, overlap);
    // Stage 3 with overlap_comm off: every reduce-scatter (and MiCS replica all-reduce) waited where issued.
    EngineOptions no_overlap = every;
    no_overlap.ds_overlap_comm = false;
    for (const char* p : {"zero3", "mics"})
      run_and_check(tiny(), topo, p, kMicroBatches, Recompute::none, Overlap::all, DType::fp32, DType::fp32,
                    no_overlap);
    std::vector<std::string> fsdp = {"fsdp", "fsdp:noreshard"};
    if (R % 2 == 0) fsdp.push_back("fsdp:2");
    for (const auto& p : fsdp) run_and_check(tiny(), topo, p, kMicroBatches);
    run_and_check(tiny(), topo, "zeropp", kMicroBatches, Recompute::full, Overlap::none, DType::bf16, DType::bf16,
                  every);
    run_and_check(tiny(), topo, "hsdp", kMicroBatches, Recompute::none, Overlap::no_allreduce, DType::bf16,
                  DType::fp32);
  }
}

TEST(StepEquivalence, ZeroppQuantizedTracksOneRankDdp) {
  // qwZ and qgZ on every layout with more than one node (qgZ needs two; with one it reduce-scatters): the bytes, the
  // states and the buffer peak (the quantization buffers included) exactly, the loss and parameters within the
  // quantization's tolerances, in fp32 and in the paper's bf16.
  const int world = world_size();
  for (int R : gpus_per_node_settings(world)) {
    const Topology topo{R, world / R};
    if (topo.nodes < 2) continue;
    for (const char* p : {"zeropp+qwz", "zeropp+qgz", "zeropp+qwz+qgz", "zero3+qwz+qgz"})
      for (DType dtype : {DType::fp32, DType::bf16})
        run_and_check(tiny(), topo, p, kMicroBatches, Recompute::none, Overlap::all, dtype, DType::fp32, gather_everything(),
                      &kQuantized);
  }
  // DeepSpeed's own qgZ average (R times the mean) is not the same optimisation: only bytes, states and buffers hold.
}

TEST(StepEquivalence, OneMicroBatchPerRankStillCountsBytesAndStates) {
  // M = 1: no T_g, ZeRO-2's only reduce-scatter is the last micro-batch's (bytes and states only).
  const int world = world_size();
  const Topology topo{world % 2 == 0 ? 2 : 1, world % 2 == 0 ? world / 2 : world};
  for (const auto& p :
       {std::string("zero2"), "p=1x1,g=" + std::to_string(topo.gpus_per_node) + "x" + std::to_string(topo.nodes) +
                                  ",os=" + std::to_string(topo.gpus_per_node) + "x" + std::to_string(topo.nodes)})
    run_and_check(tiny(), topo, p, 1);
}

}  // namespace
}  // namespace lins
