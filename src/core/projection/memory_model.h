// Memory per GPU of one plan: model states from the same ShardLayout the executor allocates, activations
// (Megatron-style estimate, under no, selective or full recomputation) and communication buffers; plus the reserve a
// real GPU run loses outside those tensors (CUDA context, cuBLAS workspace, NCCL buffers, allocator fragmentation),
// which the planner adds before comparing with the GPU's memory. docs/cost-model.md gives the formulas and their
// sources.
#pragma once

#include <cstdint>

#include "core/cost/cost_options.h"  // MemoryReserve
#include "core/schedule/schedule.h"
#include "core/schedule/workload.h"

namespace lins {

// Bytes per parameter of each state. Mixed precision (the paper's): bf16 P and G, fp32 master + momentum + variance;
// fp32 P and G: {4, 4, 12}. `activation`: bytes per activation element, 2 (bf16, the paper's) or 4 (fp32 compute),
// which scales the bf16 activation estimate and is also the dtype the running module's parameters are read in.
// `weight_grad`: bytes per element of the weight gradient the backward writes. The paper's systems write G's dtype
// (the default, 2); lins's kernels write fp32 weight gradients (4), which the executor rounds into bf16 G from a
// scratch buffer of one module.
struct StateBytes {
  double p = 2, g = 2, os = 12;
  double activation = 2;
  double weight_grad = 2;
  // The dtype P is stored in: fp32 at 4 bytes an element, else bf16 (what ZeRO++'s quantizers convert from).
  DType storage() const { return p >= 4 ? DType::fp32 : DType::bf16; }
};

// The bytes of lins's own executor (lins step and the step tests): P and G in the storage dtype with fp32 master
// weights and Adam moments ({2, 2, 12} or {4, 4, 12}), activations in the compute dtype, and the fp32 weight gradients
// its kernels write.
StateBytes executor_state_bytes(DType storage, DType compute);

struct MemoryEstimate {
  double p_bytes = 0;                  // local parameter shard (plus the ZeRO++ secondary partition)
  double g_bytes = 0;                  // gradients kept across micro-batches
  double os_bytes = 0;                 // optimizer states owned
  double state_bytes = 0;              // p + g + os
  double activation_bytes = 0;         // activations of one micro-batch in flight (plus the logits)
  double buffer_bytes = 0;             // gathered parameters/gradients of in-flight modules and gradient buckets
  double total_bytes = 0;              // state + activation + buffer
  double closed_form_state_bytes = 0;  // 2Phi/s_p + 2Phi/s_g + 12Phi/s_os with the same bytes per element
  // Filled by add_memory_reserve (0 until then): what the run loses beyond total_bytes.
  double reserve_bytes = 0;
  int communicators = 0;  // NCCL communicators of the schedule (group roles with more than one rank)
  double required_bytes() const { return total_bytes + reserve_bytes; }
};

// Fills m.reserve_bytes and m.communicators for schedule `s`: context + cuBLAS + communicators x NCCL per
// communicator + fragmentation x m.total_bytes.
void add_memory_reserve(MemoryEstimate& m, const Schedule& s, const MemoryReserve& r);
// The communicators a rank of `s` creates: one per group role its collectives use (groups of one rank move nothing
// and are left out of the schedule).
int schedule_communicators(const Schedule& s);

// Which rank the estimate describes. Padded shards are the same size on every rank, but inter-tensor owners are
// uneven, so the largest owner is what has to fit (the memory limit holds on every GPU).
enum class MemoryOf { worst_rank, schedule_rank };

// The estimate for the schedule's plan, topology and layout (s.layout of s.options.rank) under workload `w`.
MemoryEstimate estimate_memory(const Schedule& s, const Workload& w, StateBytes b = {},
                               MemoryOf which = MemoryOf::worst_rank);

// Activation bytes of one micro-batch on one GPU in bf16 (estimate_memory scales them to the compute dtype); split
// out for tests and the planner.
double activation_bytes(const ModelSpec& model, int seq, int micro_batch_size, Recompute recompute);
// `m` with its activations replaced by `bytes`: total_bytes again, and the reserve's fragmentation share of it when
// add_memory_reserve has filled the reserve. What the planner asks of each recomputation level: the states and
// buffers are the same under every level.
void set_activation_bytes(MemoryEstimate& m, double bytes, const MemoryReserve& r);

}  // namespace lins
