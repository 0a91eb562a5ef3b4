// Memory model against the closed form 2Phi/s_p + 2Phi/s_g + 12Phi/s_os (the paper's memory analysis: bf16 P and G,
// fp32 master weights and Adam moments), uneven inter-tensor owners, activations with and without recomputation,
// buffers, and the reserve a GPU run loses beyond them.
#include "core/projection/memory_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace lins {
namespace {

// Every module's size is a multiple of 64: no padding up to 64 shards.
ModelSpec even_model() { return make_model({64, 2, 4, 128, 256}).value(); }

Workload workload(const ModelSpec& m, int M = 1, Recompute recompute = Recompute::none) {
  Workload w;
  w.model = m;
  w.seq = 128;
  w.micro_batch_size = 1;
  w.micro_batches = M;
  w.recompute = recompute;
  return w;
}

Schedule schedule(const ModelSpec& m, const Plan& plan, Topology topo, int rank = 0, int64_t bucket = 1 << 20) {
  ScheduleOptions o;
  o.rank = rank;
  o.bucket_bytes = bucket;
  auto s = build_schedule(m, plan, topo, o);
  EXPECT_TRUE(s) << s.error();
  return *s;
}

TEST(MemoryModel, EvenLayoutsMatchTheClosedFormExactly) {
  const auto m = even_model();
  const double phi = m.param_count();
  for (Topology t : {Topology{4, 2}, Topology{8, 4}, Topology{2, 8}}) {
    for (auto plan : enumerate_legal_plans(t)) {
      plan.os_layout = OsLayout::intra_tensor;  // even split of the local buffer: no owner is larger
      const auto s = schedule(m, plan, t);
      const auto e = estimate_memory(s, workload(m));
      const double closed = 2 * phi / plan.p.total() + 2 * phi / plan.g.total() + 12 * phi / plan.os.total();
      EXPECT_DOUBLE_EQ(e.closed_form_state_bytes, closed) << plan.to_string();
      // Padding of each module to the shard count is the only difference (none for this model), plus at most one
      // element per owner from the even split.
      EXPECT_NEAR(e.state_bytes, closed, 16.0) << plan.to_string() << " on " << t.to_string();
      EXPECT_DOUBLE_EQ(e.state_bytes, e.p_bytes + e.g_bytes + e.os_bytes);
      EXPECT_DOUBLE_EQ(e.total_bytes, e.state_bytes + e.activation_bytes + e.buffer_bytes);
    }
  }
}

TEST(MemoryModel, PresetsMatchTheClosedFormOnLlama7b) {
  const auto m = make_model_preset("llama-7b").value();
  const double phi = m.param_count();
  const Topology t{8, 128};
  struct Case {
    const char* plan;
    double sp, sg, sos;
  };
  for (const Case& c : {Case{"ddp", 1, 1, 1}, Case{"zero1", 1, 1, 1024}, Case{"zero2", 1, 1024, 1024},
                        Case{"zero3", 1024, 1024, 1024}, Case{"mics", 8, 8, 8}, Case{"mics:32", 32, 32, 32}}) {
    const auto s = schedule(m, parse_plan(c.plan, t).value(), t, 0, 25 << 20);
    const auto e = estimate_memory(s, workload(m));
    const double closed = 2 * phi / c.sp + 2 * phi / c.sg + 12 * phi / c.sos;
    EXPECT_NEAR(e.state_bytes / closed, 1.0, 1e-4) << c.plan;  // padding only
  }
  // ZeRO++'s secondary partition of P over the node's 8 GPUs lives from the step's first gathers to its end: a buffer.
  const auto zpp = estimate_memory(schedule(m, parse_plan("zeropp", t).value(), t), workload(m));
  EXPECT_NEAR(zpp.state_bytes / (16 * phi / 1024), 1.0, 1e-4);
  EXPECT_GE(zpp.buffer_bytes, 2 * phi / 8);
}

TEST(MemoryModel, UnevenInterTensorOwnersAreBoundedAndSumToTheShard) {
  const auto m = make_model_preset("small").value();  // embedding and head dwarf the layers' tensors
  std::mt19937 rng(5);
  for (Topology t : {Topology{4, 2}, Topology{8, 2}, Topology{2, 4}}) {
    auto plans = enumerate_legal_plans(t);
    for (const auto& plan : plans) {
      if (plan.os.total() == plan.p.total()) continue;  // one owner: even by construction
      const auto s0 = schedule(m, plan, t, 0);
      const int owners = s0.layout.owner_count;
      int64_t largest_piece = 0;
      for (const auto& sl : s0.layout.slices()) largest_piece = std::max(largest_piece, sl.elems);
      // The ranks of one OS block share one local buffer; their owned parts add up to it exactly.
      double sum_os = 0;
      const GroupSpec replica = group_spec(GroupRole::os_replica, plan, t);
      for (int r : group_ranks(replica, 0)) {
        const auto e = estimate_memory(schedule(m, plan, t, r), workload(m), {}, MemoryOf::schedule_rank);
        sum_os += e.os_bytes;
      }
      EXPECT_DOUBLE_EQ(sum_os, 12.0 * s0.layout.local_elems) << plan.to_string();
      // The worst rank owns at least the average and at most the average plus one piece (greedy, largest first).
      const auto worst = estimate_memory(s0, workload(m));
      const double avg = double(s0.layout.local_elems) / owners;
      EXPECT_GE(worst.os_bytes, 12.0 * avg - 1e-6) << plan.to_string();
      EXPECT_LE(worst.os_bytes, 12.0 * (avg + largest_piece)) << plan.to_string();
      // G sharded like OS when s_g > s_p.
      if (plan.g.total() > plan.p.total()) {
        EXPECT_DOUBLE_EQ(worst.g_bytes, worst.os_bytes / 6.0) << plan.to_string();
      } else {
        EXPECT_DOUBLE_EQ(worst.g_bytes, 2.0 * s0.layout.local_elems) << plan.to_string();
      }
    }
  }
}

TEST(MemoryModel, CpuStateBytes) {
  const auto m = even_model();
  const Topology t{4, 1};
  const auto s = schedule(m, parse_plan("ddp", t).value(), t);
  const auto e = estimate_memory(s, workload(m), StateBytes{4, 4, 12});
  EXPECT_DOUBLE_EQ(e.state_bytes, 20.0 * m.param_count());
}

TEST(MemoryModel, Activations) {
  const auto m = make_model_preset("llama-7b").value();
  const double s = 4096, h = 4096, L = 32, V = 32000;
  const Recompute none = Recompute::none, selective = Recompute::selective, full = Recompute::full;
  EXPECT_DOUBLE_EQ(activation_bytes(m, 4096, 1, none), L * 34 * s * h + 6 * s * V);
  EXPECT_DOUBLE_EQ(activation_bytes(m, 4096, 1, full), L * 2 * s * h + 34 * s * h + 6 * s * V);
  // Selective: every layer's attention output o (2sbh of Megatron's 34) dropped, one layer's recomputed in backward.
  EXPECT_DOUBLE_EQ(activation_bytes(m, 4096, 1, selective), L * 32 * s * h + 2 * s * h + 6 * s * V);
  EXPECT_DOUBLE_EQ(activation_bytes(m, 4096, 2, none), 2 * activation_bytes(m, 4096, 1, none));
  EXPECT_DOUBLE_EQ(activation_bytes(m, 4096, 2, selective), 2 * activation_bytes(m, 4096, 1, selective));
  EXPECT_LT(activation_bytes(m, 4096, 1, full), activation_bytes(m, 4096, 1, none) / 5);
  EXPECT_LT(activation_bytes(m, 4096, 1, full), activation_bytes(m, 4096, 1, selective));
  EXPECT_LT(activation_bytes(m, 4096, 1, selective), activation_bytes(m, 4096, 1, none));
  // set_activation_bytes: another level's activations with the reserve's fragmentation share following the total.
  {
    const Topology t4{4, 1};
    const auto sched = schedule(m, parse_plan("zero3", t4).value(), t4);
    const MemoryReserve r;
    auto at_none = estimate_memory(sched, workload(m));
    add_memory_reserve(at_none, sched, r);
    auto at_selective = estimate_memory(sched, workload(m, 1, selective));
    add_memory_reserve(at_selective, sched, r);
    MemoryEstimate derived = at_none;
    set_activation_bytes(derived, at_selective.activation_bytes, r);
    EXPECT_DOUBLE_EQ(derived.total_bytes, at_selective.total_bytes);
    EXPECT_NEAR(derived.reserve_bytes, at_selective.reserve_bytes, 1e-6 * at_selective.reserve_bytes);
  }
  // fp32 compute keeps every activation in 4 bytes instead of bf16's 2: twice the estimate, states unchanged.
  const Topology t{4, 1};
  const auto sched = schedule(m, parse_plan("zero3", t).value(), t);
  StateBytes fp32_compute;
  fp32_compute.activation = 4;
  const auto bf16 = estimate_memory(sched, workload(m)), fp32 = estimate_memory(sched, workload(m), fp32_compute);
  EXPECT_DOUBLE_EQ(fp32.activation_bytes, 2 * bf16.activation_bytes);
  EXPECT_DOUBLE_EQ(fp32.state_bytes, bf16.state_bytes);
}

TEST(MemoryModel, Buffers) {
  const auto m = make_model_preset("small").value();
  const Topology t{2, 2};
  auto expanded = [&](const std::string& plan, int M) {
    ScheduleOptions o;
    o.micro_batches = M;
    o.bucket_bytes = 64 << 10;
    o.expand_micro_batches = true;
    o.engine.ds_param_persistence_threshold_elems = 0;
    o.engine.ds_max_reuse_distance_elems = 0;
    return build_schedule(m, parse_plan(plan, t).value(), t, o).value();
  };
  // DDP and ZeRO-1 reduce in place in G: no buffers at all.
  EXPECT_DOUBLE_EQ(estimate_memory(expanded("ddp", 2), workload(m, 2)).buffer_bytes, 0.0);
  EXPECT_DOUBLE_EQ(estimate_memory(expanded("zero1", 2), workload(m, 2)).buffer_bytes, 0.0);
  // The Lins engine with P replicated and s_g > s_p: the transient gradient of a micro-batch, and the payloads of the
  // broadcasts whose owner's part of a module is not one range (all in flight as the next step starts).
  const auto lins = expanded("p=1,g=2x2,os=2x2", 2);
  double payloads = 0;
  for (const auto& op : lins.ops)
    if (op.purpose == Purpose::update_broadcast && !op.in_place) payloads += double(op.bytes());
  EXPECT_DOUBLE_EQ(estimate_memory(lins, workload(m, 2)).buffer_bytes, 2.0 * lins.layout.local_elems + payloads);
  // ZeRO-3 gathering every module: at least the module computing and the one prefetched.
  int64_t largest = 0;
  for (const auto& ms : expanded("zero3", 1).layout.modules) largest = std::max(largest, ms.padded_elems);
  EXPECT_GE(estimate_memory(expanded("zero3", 1), workload(m)).buffer_bytes, 2.0 * 2 * largest);
  // The planner's closed form bounds the walk of every Lins-engine plan from above.
  for (const auto& plan : enumerate_legal_plans(t)) {
    ScheduleOptions o;
    o.micro_batches = 2;
    o.bucket_bytes = 64 << 10;
    const auto compressed = build_schedule(m, plan, t, o).value();
    o.expand_micro_batches = true;
    const auto full = build_schedule(m, plan, t, o).value();
    EXPECT_GE(estimate_memory(compressed, workload(m, 2)).buffer_bytes,
              estimate_memory(full, workload(m, 2)).buffer_bytes)
        << plan.to_string();
  }
}

// The executor's working copies of the running module: its parameters in the compute dtype when that differs from
// P's storage, and the fp32 weight-gradient scratch that is rounded into bf16 G.
TEST(MemoryModel, WorkingCopies) {
  const auto m = make_model_preset("llama-7b").value();
  const Topology t{8, 4};
  // DDP, bf16 P and G, fp32 weight gradients, bf16 compute: an fp32 gradient scratch of the largest module.
  const auto ddp_sched = schedule(m, parse_plan("ddp", t).value(), t);
  int64_t largest = 0;  // the MLP (3 * 4096 * 11008 + 4096 elements), a little more than the embedding
  for (const auto& ms : ddp_sched.layout.modules) largest = std::max(largest, ms.shard_elems);
  EXPECT_EQ(largest, 3 * 4096 * 11008 + 4096);
  StateBytes lins_bf16;
  lins_bf16.weight_grad = 4;
  const double base = estimate_memory(ddp_sched, workload(m)).buffer_bytes;
  EXPECT_DOUBLE_EQ(estimate_memory(ddp_sched, workload(m), lins_bf16).buffer_bytes - base, 4.0 * double(largest));
  // fp32 compute on bf16 P adds the module's parameters widened to fp32 (forward and backward).
  StateBytes cpu_default = lins_bf16;
  cpu_default.activation = 4;
  EXPECT_DOUBLE_EQ(estimate_memory(ddp_sched, workload(m), cpu_default).buffer_bytes - base, 8.0 * double(largest));
  // fp32 storage and fp32 compute: no copy, no scratch.
  EXPECT_DOUBLE_EQ(estimate_memory(ddp_sched, workload(m), StateBytes{4, 4, 12, 4, 4}).buffer_bytes, base);
  // ZeRO-3: the working copies come on top of the backward's gathered buffers, sized by the padded whole module.
  const auto z3_sched = schedule(m, parse_plan("zero3", t).value(), t);
  const auto z3 = estimate_memory(z3_sched, workload(m)), z3_lins = estimate_memory(z3_sched, workload(m), lins_bf16);
  int64_t padded = 0;
  for (const auto& ms : z3_sched.layout.modules) padded = std::max(padded, ms.padded_elems);
  EXPECT_DOUBLE_EQ(z3_lins.buffer_bytes - z3.buffer_bytes, 4.0 * double(padded));
  EXPECT_DOUBLE_EQ(z3_lins.state_bytes, z3.state_bytes);
}

TEST(MemoryModel, ReserveCountsContextCublasCommunicatorsAndFragmentation) {
  const auto m = even_model();
  const Topology t{8, 4};
  // ZeRO-3 gathers and reduce-scatters over one group of all 32 ranks: one communicator. Defaults:
  // 666632192 (context) + 33554432 (cuBLAS, 32 MiB) + 1 x 462422016 (16 channels x 3 connections x
  // (524288 + 4915200 + 4194304) NCCL buffer bytes) = 1162608640 bytes, plus 5% of the tensors.
  const auto z3 = schedule(m, parse_plan("zero3", t).value(), t);
  auto e = estimate_memory(z3, workload(m));
  const double tensors = e.total_bytes;
  add_memory_reserve(e, z3, MemoryReserve{});
  EXPECT_EQ(e.communicators, 1);
  EXPECT_DOUBLE_EQ(e.reserve_bytes, 1162608640.0 + 0.05 * tensors);
  EXPECT_DOUBLE_EQ(e.total_bytes, tensors);  // the tensors stay what an allocator would report
  EXPECT_DOUBLE_EQ(e.required_bytes(), tensors + e.reserve_bytes);
  // A Lins plan with P sharded in the node, G and OS over the 8 x 4 block, broadcasts to replicas: its roles each
  // get a communicator. Given reserve values: 100 + 10 + communicators x 1000 + 0.5 x tensors.
  const auto lins = schedule(m, parse_plan("p=8x1,g=8x1,os=8x4", t).value(), t);
  auto l = estimate_memory(lins, workload(m, 2));
  int roles = 0;
  bool seen[kGroupRoleCount] = {};
  for (const auto& op : lins.ops)
    if (!seen[int(op.role)]) seen[int(op.role)] = true, ++roles;
  EXPECT_GE(roles, 2);
  add_memory_reserve(l, lins, MemoryReserve{100, 10, 1000, 0.5});
  EXPECT_EQ(l.communicators, roles);
  EXPECT_DOUBLE_EQ(l.reserve_bytes, 110 + 1000.0 * roles + 0.5 * l.total_bytes);
}

}  // namespace
}  // namespace lins
