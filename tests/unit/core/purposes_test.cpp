// The op purposes' rules (core/purposes.h), read by both the executor and the memory model: every purpose's rules are
// complete and agree with each other under every context, every engine's ops keep them (their collective, their
// range, what they hold), and the memory model's buffer bytes are exactly the holdings the rules give, walked through
// the step's program, so that the memory model and the executor cannot drift apart.
#include "core/schedule/purposes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/model/plan.h"
#include "core/projection/memory_model.h"
#include "core/schedule/timeline.h"

namespace lins {
namespace {

// The collective an issue runs (written here, apart from purposes.cpp, so that each side checks the other).
CollKind issue_kind(AtIssue a) {
  switch (a) {
    case AtIssue::gather_shard:
    case AtIssue::gather_hpz_part:
    case AtIssue::gather_update:
      return CollKind::all_gather;
    case AtIssue::reduce_scatter_grads:
      return CollKind::reduce_scatter;
    case AtIssue::all_reduce_g:
    case AtIssue::all_reduce_packed_grads:
    case AtIssue::all_reduce_transient:
    case AtIssue::all_reduce_transient_with_g:
      return CollKind::all_reduce;
    case AtIssue::broadcast_update:
      return CollKind::broadcast;
    case AtIssue::exchange_quantized_grads:
    case AtIssue::exchange_reduced_slices:
      return CollKind::all_to_all;
  }
  return CollKind::all_gather;
}

std::vector<PurposeContext> contexts() { return {{false, false}, {false, true}, {true, false}, {true, true}}; }

std::string describe(Purpose p, const PurposeContext& c) {
  return std::string(purpose_name(p)) + (c.g_owned ? " g_owned" : "") + (c.transient_grads ? " transient" : "");
}

TEST(Purposes, EveryPurposeHasCompleteAndConsistentRules) {
  for (const auto& word : kPurposeNames.words) {
    const Purpose p = word.value;
    for (const PurposeContext& c : contexts()) {
      const PurposeRule r = purpose_rule(p, c);
      const std::string what = describe(p, c);
      EXPECT_EQ(r.purpose, p) << what;
      ASSERT_NE(r.summary, nullptr) << what;
      EXPECT_GT(std::string(r.summary).size(), 10u) << what;
      EXPECT_EQ(r.kind, issue_kind(r.at_issue)) << what;

      const bool gathers_module = r.at_issue == AtIssue::gather_shard || r.at_issue == AtIssue::gather_hpz_part;
      const bool packs_grads =
          r.at_issue == AtIssue::reduce_scatter_grads || r.at_issue == AtIssue::all_reduce_packed_grads;
      const bool in_place = r.at_issue == AtIssue::all_reduce_g || r.at_issue == AtIssue::all_reduce_transient ||
                            r.at_issue == AtIssue::all_reduce_transient_with_g || r.at_issue == AtIssue::gather_update;
      // ZeRO++ qgZ's exchanges hold only their quantization buffers (quantization_buffer_bytes).
      const bool exchanges =
          r.at_issue == AtIssue::exchange_quantized_grads || r.at_issue == AtIssue::exchange_reduced_slices;
      const bool transient_issue =
          r.at_issue == AtIssue::all_reduce_transient || r.at_issue == AtIssue::all_reduce_transient_with_g;

      // A gather holds a full-module buffer of P, released by the tasks that read it; it is what compute reads.
      EXPECT_EQ(r.held == HeldBuffer::module_params, gathers_module) << what;
      EXPECT_EQ(is_gather(p), gathers_module) << what;
      if (gathers_module) {
        EXPECT_EQ(r.held_state, HeldState::p) << what;
        EXPECT_EQ(r.bucket_range, BucketRange::none) << what;  // a gather is of one module
        EXPECT_EQ(r.at_completion, AtCompletion::nothing) << what;
        EXPECT_FALSE(r.reads_module_grads) << what;
      }
      // An op reading whole-module gradients packs them into a send buffer of G (a reduce-scatter of one module reads
      // that module's buffer as it is).
      EXPECT_EQ(r.reads_module_grads, packs_grads || r.at_issue == AtIssue::exchange_quantized_grads) << what;
      EXPECT_EQ(r.held == HeldBuffer::send_buffer || r.held == HeldBuffer::bucket_send_buffer, packs_grads) << what;
      if (packs_grads) {
        EXPECT_EQ(r.held_state, HeldState::g) << what;
      }
      EXPECT_EQ(r.held == HeldBuffer::bucket_send_buffer, r.at_issue == AtIssue::reduce_scatter_grads) << what;
      // An op in place holds nothing extra.
      EXPECT_EQ(r.held == HeldBuffer::none, in_place || exchanges) << what;
      // A broadcast holds its payload of P, which the ranks other than the root unpack.
      EXPECT_EQ(r.held == HeldBuffer::payload, r.at_issue == AtIssue::broadcast_update) << what;
      EXPECT_EQ(r.at_completion == AtCompletion::unpack_payload, r.at_issue == AtIssue::broadcast_update) << what;
      if (r.held == HeldBuffer::payload) {
        EXPECT_EQ(r.held_state, HeldState::p) << what;
      }

      // Completions: what lands where.
      switch (r.at_issue) {
        case AtIssue::gather_shard:
        case AtIssue::gather_hpz_part:
        case AtIssue::all_reduce_g:
        case AtIssue::gather_update:
          EXPECT_EQ(r.at_completion, AtCompletion::nothing) << what;
          break;
        case AtIssue::reduce_scatter_grads:
          EXPECT_EQ(r.at_completion,
                    c.transient_grads ? AtCompletion::slice_into_transient : AtCompletion::slice_into_g)
              << what;
          EXPECT_EQ(r.bucket_range, BucketRange::part) << what;  // this rank's part of the input
          break;
        case AtIssue::all_reduce_packed_grads:
        case AtIssue::all_reduce_transient:
          EXPECT_EQ(r.at_completion, AtCompletion::owned_added_into_g) << what;
          break;
        case AtIssue::all_reduce_transient_with_g:  // G's owned part joined the buffer: the result replaces it
          EXPECT_EQ(r.at_completion, AtCompletion::owned_copied_into_g) << what;
          break;
        case AtIssue::broadcast_update:
          EXPECT_EQ(r.bucket_range, BucketRange::none) << what;  // one module's slices
          break;
        case AtIssue::exchange_quantized_grads:  // the node's sums land in the next exchange's buffer
          EXPECT_EQ(r.at_completion, AtCompletion::nothing) << what;
          break;
        case AtIssue::exchange_reduced_slices:  // this rank's slice, as a reduce-scatter's
          EXPECT_EQ(r.at_completion,
                    c.transient_grads ? AtCompletion::slice_into_transient : AtCompletion::slice_into_g)
              << what;
          break;
      }
      // The transient gradient exists only where the schedule has it; an owned-only G is never all-reduced in place
      // by ZeRO's reductions, whose buckets then come from the module gradients.
      if (transient_issue || r.at_completion == AtCompletion::slice_into_transient) {
        EXPECT_TRUE(c.transient_grads) << what;
      }
      if (p == Purpose::zero_grad_reduce) {
        EXPECT_EQ(r.reads_module_grads, c.g_owned) << what;
      }
      if (r.kind == CollKind::all_reduce) {
        EXPECT_EQ(r.bucket_range, BucketRange::elems) << what;
      }
    }
  }
}

// Every engine, on the tiny model over 4 GPUs x 2 nodes, expanded over two micro-batches.
struct EngineCase {
  std::string plan;
  bool hpz = false;  // keeps secondary copies of P (which the holdings walk below leaves out)
};
std::vector<EngineCase> engine_cases() {
  return {{"ddp"},
          {"zero1"},
          {"zero2"},
          {"zero3"},
          {"mics"},
          {"mics:2"},
          {"zeropp", true},
          {"zeropp+qwz+qgz", true},
          {"zero3+qwz+qgz"},
          {"fsdp"},
          {"fsdp:noreshard"},
          {"fsdp:2", true},
          {"hsdp"},
          {"p=2x1,g=2x1,os=4x1"},
          {"p=4x1,g=4x1,os=4x1"},
          {"p=2x1,g=4x2,os=4x2"},
          {"p=1x1,g=1x1,os=4x2"},
          {"p=4x2,g=4x2,os=4x2"}};
}

Schedule engine_schedule(const std::string& plan_text, int rank, Overlap overlap, int64_t persistence_elems) {
  const Topology topo{4, 2};
  auto plan = parse_plan(plan_text, topo);
  EXPECT_TRUE(plan) << plan.error();
  ScheduleOptions o;
  o.micro_batches = 2;
  o.bucket_bytes = 4096;
  o.rank = rank;
  o.expand_micro_batches = true;
  o.overlap = overlap;
  o.engine.bucket_bytes = 4096;
  o.engine.ds_reduce_bucket_elems = 20000;
  o.engine.ds_prefetch_bucket_elems = 20000;
  o.engine.ds_param_persistence_threshold_elems = persistence_elems;
  auto s = build_schedule(make_model_preset("tiny").value(), *plan, topo, o);
  EXPECT_TRUE(s) << plan_text << ": " << s.error();
  return *s;
}

TEST(Purposes, EveryEnginesOpsKeepTheirPurposesRules) {
  int gathers = 0, packed = 0, payloads = 0, in_place = 0;
  for (const EngineCase& e : engine_cases()) {
    for (int rank : {0, 5}) {
      const Schedule s = engine_schedule(e.plan, rank, Overlap::all, 100);
      const ShardLayout& L = s.layout;
      const PurposeContext ctx = purpose_context(s);
      const GradientReaders reads = gradient_readers(s, ctx);
      ASSERT_EQ(reads.op_modules.size(), s.ops.size());
      for (std::size_t i = 0; i < s.ops.size(); ++i) {
        const CommOp& op = s.ops[i];
        const PurposeRule r = purpose_rule(op.purpose, ctx);
        const std::string what = e.plan + " rank " + std::to_string(rank) + " op " + std::to_string(i) + " " +
                                 purpose_name(op.purpose) + " " + op.label;
        EXPECT_EQ(op.kind, r.kind) << what;
        if (r.bucket_range == BucketRange::none) {
          EXPECT_GE(op.module, 0) << what;
        }
        const LocalRange range = op_local_range(op, L, r);
        EXPECT_GE(range.offset, 0) << what;
        EXPECT_LE(range.end(), L.local_elems) << what;
        const auto& mods = reads.op_modules[i];
        const OpHold h = op_hold(op, r, mods.size());
        if (r.reads_module_grads) {
          // The modules read tile the op's range exactly: every element reduced comes from one module's gradient.
          int64_t covered = 0;
          for (int m : mods) {
            const ModuleShard& ms = L.modules[static_cast<std::size_t>(m)];
            EXPECT_GE(ms.local_offset, range.offset) << what;
            EXPECT_LE(ms.local_offset + ms.shard_elems, range.end()) << what;
            covered += ms.shard_elems;
          }
          EXPECT_FALSE(mods.empty()) << what;
          EXPECT_EQ(covered, range.elems) << what;
        } else {
          EXPECT_TRUE(mods.empty()) << what;
        }
        switch (h.buffer) {
          case HeldBuffer::module_params: {  // a gather holds the full module's padded parameters
            const ModuleShard& ms = L.modules[static_cast<std::size_t>(op.module)];
            EXPECT_EQ(h.elems, ms.padded_elems) << what;
            if (r.at_issue == AtIssue::gather_shard) {
              EXPECT_EQ(h.elems, range.elems * op.group.size()) << what;
            }
            EXPECT_TRUE(h.until_task) << what;
            EXPECT_EQ(h.state, HeldState::p) << what;
            ++gathers;
            break;
          }
          case HeldBuffer::send_buffer:  // the whole input of the collective, packed from the modules' gradients
            EXPECT_EQ(h.elems, op.kind == CollKind::reduce_scatter ? range.elems * op.group.size() : range.elems)
                << what;
            EXPECT_FALSE(h.until_task) << what;
            EXPECT_EQ(h.state, HeldState::g) << what;
            ++packed;
            break;
          case HeldBuffer::payload:
            EXPECT_FALSE(op.in_place) << what;
            EXPECT_EQ(h.elems, op.elems) << what;
            EXPECT_FALSE(h.until_task) << what;
            ++payloads;
            break;
          case HeldBuffer::none:  // in place: nothing beyond the buffers it reduces or fills
            EXPECT_EQ(h.elems, 0) << what;
            EXPECT_TRUE(h.in_place()) << what;
            if (r.held == HeldBuffer::bucket_send_buffer) {
              EXPECT_EQ(mods.size(), 1u) << what;
            }
            if (r.held == HeldBuffer::payload) {
              EXPECT_TRUE(op.in_place) << what;
            }
            ++in_place;
            break;
          case HeldBuffer::bucket_send_buffer:
            ADD_FAILURE() << what << ": an op's hold is resolved to a send buffer or none";
            break;
        }
      }
    }
  }
  // The engines between them exercise every kind of holding.
  EXPECT_GT(gathers, 0);
  EXPECT_GT(packed, 0);
  EXPECT_GT(payloads, 0);
  EXPECT_GT(in_place, 0);
}

// The peak, over the step's program, of what the ops hold by their rules: each op's hold from its issue to its wait
// (a gather's until the task that releases it; a next-step wait's from the step's start, carried from the previous
// step), and the whole-module gradients the ops read, from the backward that writes them to their last reader's wait;
// plus the buffers no op holds, alive all step (persistent modules, the transient gradient).
double holdings_peak(const Schedule& s, const StateBytes& b) {
  const ShardLayout& L = s.layout;
  auto padded = [&](int m) { return double(L.modules[static_cast<std::size_t>(m)].padded_elems); };
  const PurposeContext ctx = purpose_context(s);
  const GradientReaders reads = gradient_readers(s, ctx);
  std::vector<OpHold> holds;
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    holds.push_back(op_hold(s.ops[i], purpose_rule(s.ops[i].purpose, ctx), reads.op_modules[i].size()));
  auto bytes = [&](std::size_t i) { return double(holds[i].elems) * (holds[i].state == HeldState::p ? b.p : b.g); };
  // ZeRO++'s quantization buffers, from the op's issue to its wait.
  const DType storage = b.storage();
  auto quantized = [&](std::size_t i) { return double(quantization_buffer_bytes(s.ops[i], storage)); };
  double always = 0;
  for (int m : s.persistent_modules) always += padded(m) * b.p;
  if (s.transient_grads) always += double(L.local_elems) * b.g;
  double live = 0;
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (s.ops[i].wait.next_step) live += bytes(i);
  double peak = live;
  std::vector<int> left(static_cast<std::size_t>(s.shape.modules), 0);
  for (const Action& a : step_program(s)) {
    const std::size_t i = static_cast<std::size_t>(a.index);
    if (a.kind == Action::Kind::compute) {
      const ComputeTask t = s.shape.task(a.index);
      if (t.kind == TaskKind::optimizer) continue;
      const TaskParams& tp = s.task_params[i];
      if (t.kind == TaskKind::backward) {
        const int r = reads.per_module[static_cast<std::size_t>(t.micro_batch)][static_cast<std::size_t>(t.module)];
        if (r > 0) live += padded(t.module) * b.g, left[static_cast<std::size_t>(t.module)] = r;
      }
      peak = std::max(peak, live);
      if (tp.source == TaskParams::Source::gathered && tp.release) {
        EXPECT_TRUE(holds[static_cast<std::size_t>(tp.gather_op)].until_task);
        live -= bytes(static_cast<std::size_t>(tp.gather_op));
      }
    } else if (a.kind == Action::Kind::issue) {
      if (holds[i].until_task || !s.ops[i].wait.next_step) live += bytes(i);
      live += quantized(i);
      peak = std::max(peak, live);
    } else if (a.carried) {
      live -= bytes(i);
    } else {
      if (!holds[i].until_task) live -= bytes(i);
      live -= quantized(i);
      for (int m : reads.op_modules[i])
        if (--left[static_cast<std::size_t>(m)] == 0) live -= padded(m) * b.g;
    }
  }
  EXPECT_EQ(live, 0.0) << "what the ops held is not all released by the step's end";
  return always + peak;
}

TEST(Purposes, MemoryModelBuffersAreTheRulesHoldings) {
  const ModelSpec model = make_model_preset("tiny").value();
  Workload w;
  w.model = model;
  w.seq = 64;
  w.micro_batch_size = 1;
  w.micro_batches = 2;
  // P and G in bf16 and compute in bf16: no working copies of the module computing, only what the ops hold.
  for (const StateBytes& b : {StateBytes{}, StateBytes{4, 4, 12, 4, 4}}) {
    for (const EngineCase& e : engine_cases()) {
      if (e.hpz) continue;
      for (Overlap overlap : {Overlap::all, Overlap::none}) {
        for (int rank : {0, 5}) {
          for (int64_t persistence : {int64_t(0), int64_t(100000)}) {
            const Schedule s = engine_schedule(e.plan, rank, overlap, persistence);
            for (const TaskParams& tp : s.task_params) ASSERT_FALSE(tp.keep_hpz_part) << e.plan;
            const MemoryEstimate m = estimate_memory(s, w, b, MemoryOf::schedule_rank);
            EXPECT_EQ(m.buffer_bytes, holdings_peak(s, b))
                << e.plan << " rank " << rank << " overlap " << kOverlapNames.name(overlap) << " persistence "
                << persistence << " p bytes " << b.p;
          }
        }
      }
    }
  }
  // DDP all-reduces G in place: its ops hold nothing. ZeRO-3 gathers modules: it holds at least the largest one.
  const StateBytes b;
  const MemoryEstimate ddp = estimate_memory(engine_schedule("ddp", 0, Overlap::all, 0), w, b);
  EXPECT_EQ(ddp.buffer_bytes, 0.0);
  const Schedule z3 = engine_schedule("zero3", 0, Overlap::all, 0);
  int64_t largest = 0;
  for (const auto& ms : z3.layout.modules) largest = std::max(largest, ms.padded_elems);
  EXPECT_GE(estimate_memory(z3, w, b).buffer_bytes, double(largest) * b.p);
}

}  // namespace
}  // namespace lins

namespace lins {
namespace {

// ZeRO++'s quantization buffers: one layout for the memory model's count and the executor's pointers. The arrays lie
// in order without gaps or overlap, the fp32 ones 4-byte aligned, and each is as long as what it holds: the op's own
// values and scales (sent) and the group's (received), the fp32 copies where the storage is not fp32.
TEST(Purposes, AQuantizedOpsBufferHoldsItsArraysInOneLayout) {
  int quantized = 0;
  for (const char* plan : {"zeropp+qwz+qgz", "zero3+qwz+qgz"})
    for (DType storage : {DType::fp32, DType::bf16}) {
      const Schedule s = engine_schedule(plan, 5, Overlap::all, 100);
      for (const CommOp& op : s.ops) {
        const QuantBufferLayout l = quantization_buffer_layout(op, storage);
        EXPECT_EQ(l.bytes, quantization_buffer_bytes(op, storage));
        if (op.quant == Quant::none) {
          EXPECT_EQ(l.bytes, 0);
          continue;
        }
        ++quantized;
        const int n = op.group.size();
        const bool copies = storage != DType::fp32;
        EXPECT_EQ(l.fp32_in, 0);
        EXPECT_LE(l.fp32_in, l.fp32_out);
        EXPECT_LE(l.fp32_out, l.scales);
        EXPECT_EQ(l.scales % 4, 0);
        EXPECT_EQ(l.received_scales % 4, 0);
        const int64_t scales = l.received_scales - l.scales, got_scales = l.values - l.received_scales;
        const int64_t values = l.received_values - l.values, got_values = l.bytes - l.received_values;
        if (op.purpose == Purpose::qgz_node_exchange || op.purpose == Purpose::qgz_peer_exchange) {
          // An all-to-all sends and receives the op's whole payload.
          EXPECT_EQ(scales + values, op.bytes()) << op.label;
          EXPECT_EQ(got_scales + got_values, op.bytes()) << op.label;
          const int64_t in = l.fp32_out - l.fp32_in, out = l.scales - l.fp32_out;
          EXPECT_EQ(in, op.purpose == Purpose::qgz_node_exchange && copies ? 4 * op.elems : 0) << op.label;
          EXPECT_EQ(out, op.purpose == Purpose::qgz_peer_exchange ? 4 * (op.elems / n) : 0) << op.label;
        } else {
          // A gather sends this rank's part and receives every rank's.
          EXPECT_EQ(n * (scales + values), op.bytes()) << op.label;
          EXPECT_EQ(got_scales + got_values, op.bytes()) << op.label;
          EXPECT_EQ(l.fp32_out - l.fp32_in, copies ? 4 * (op.elems / n) : 0) << op.label;
          EXPECT_EQ(l.scales - l.fp32_out, copies ? 4 * op.elems : 0) << op.label;
        }
      }
    }
  EXPECT_GT(quantized, 0);
}

}  // namespace
}  // namespace lins
