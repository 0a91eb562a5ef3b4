// One plan's projected step; see projection.h.
#include "core/projection/projection.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/cost/host_model.h"
#include "core/schedule/purposes.h"

namespace lins {

std::vector<double> price_ops(const Schedule& s, const CostModel& cost, Pricing pricing, const ModelSpec* model,
                              const HostModel* host, std::vector<double>* latency_s) {
  // A step repeats a few shapes (every layer's modules, equal buckets, every micro-batch's copy): price each once.
  std::map<std::tuple<int, int64_t, int64_t, int, int>, double> priced;
  auto price = [&](const CommOp& op) {
    const auto key = std::make_tuple(int(op.kind), op.bytes(), op.scale_bytes(), op.mesh.intra, op.mesh.inter);
    auto it = priced.find(key);
    if (it == priced.end()) it = priced.emplace(key, cost.op_time_s(op, s.topo, pricing)).first;
    return it->second;
  };
  std::map<std::tuple<int, int, int>, double> latencies;
  auto latency = [&](const CommOp& op) {
    const auto key = std::make_tuple(int(op.kind), op.mesh.intra, op.mesh.inter);
    auto it = latencies.find(key);
    if (it == latencies.end()) {
      const int conc = pricing == Pricing::shared_links ? concurrent_groups(op.mesh, s.topo) : 1;
      it = latencies.emplace(key, cost.model_time_s(op.kind, 1.0, op.mesh, conc)).first;
    }
    return it->second;
  };
  std::vector<double> out(s.ops.size());
  if (latency_s) latency_s->assign(s.ops.size(), 0.0);
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const CommOp& op = s.ops[i];
    std::size_t call_count = 1;
    if (model && host && op.quant == Quant::none) {  // DeepSpeed's quantized gather is one coalesced call
      const std::vector<int64_t> calls = ds_gather_call_elems(s, *model, op, host);
      if (calls.size() > 1) {  // the real system's collectives for this op, one after another on its stream
        CommOp one = op;
        for (const int64_t elems : calls) {
          one.elems = elems;
          out[i] += price(one);
        }
        call_count = calls.size();
      }
    }
    if (call_count == 1) out[i] = price(op);
    if (latency_s) (*latency_s)[i] = std::min(out[i], double(call_count) * latency(op));
  }
  return out;
}

Result<PlanProjection> project_plan(const ProjectionSetup& setup, const Workload& w, const Topology& topo,
                                    const Plan& plan, std::vector<TraceEvent>* trace) {
  LINS_ASSIGN_OR_RETURN(auto sched, build_schedule(w.model, plan, topo,
                                                   schedule_options(w.micro_batches, setup.bucket_bytes, setup.dtype,
                                                                    setup.engine, setup.overlap)));
  PlanProjection out;
  out.memory = estimate_memory(sched, w, setup.state_bytes);
  add_memory_reserve(out.memory, sched, setup.reserve);
  const Contention& contention = setup.cost->contention();
  std::vector<double> latency_s;
  std::vector<double> op_s =
      price_ops(sched, *setup.cost, setup.pricing, &w.model, setup.host, contention.any() ? &latency_s : nullptr);
  // ZeRO++'s quantize and dequantize passes run on the op's stream before and after its collectives: memory-bound
  // kernels, priced at the memory rate.
  const double memory_rate = setup.compute.rates_for(plan.engine).optimizer_bytes_per_s;
  const DType storage = setup.state_bytes.storage();
  for (std::size_t i = 0; i < sched.ops.size(); ++i)
    if (memory_rate > 0) op_s[i] += double(quantization_pass_bytes(sched.ops[i], storage)) / memory_rate;
  out.step = project_step(sched, w.model, w.seq, w.micro_batch_size, w.recompute, setup.compute.rates_for(plan.engine),
                          op_s, trace, setup.host, &contention, &latency_s);
  out.schedule = std::move(sched);
  return out;
}

}  // namespace lins
