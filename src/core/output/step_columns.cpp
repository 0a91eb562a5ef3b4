// Shared step-CSV columns; see step_columns.h.
#include "core/output/step_columns.h"

namespace lins {

void set_run_columns(StepRow& row, const std::string& source, const std::string& strategy, const Plan& plan,
                     const Workload& w, const Topology& topo, const std::string& backend, DType precision,
                     DType compute, Overlap overlap) {
  row.set("source", source).set("strategy", strategy).set("engine", engine_name(plan.engine));
  row.set("plan", plan.to_string()).set("s0_p", plan.p.intra).set("s1_p", plan.p.inter);
  row.set("s0_g", plan.g.intra).set("s1_g", plan.g.inter).set("s0_os", plan.os.intra);
  row.set("s1_os", plan.os.inter).set("os_layout", os_layout_name(plan.os_layout));
  row.set("model", w.model.name).set("params", w.model.param_count()).set("backend", backend);
  row.set("precision", dtype_name(precision)).set("compute", dtype_name(compute));
  row.set("world_size", topo.world()).set("gpus_per_node", topo.gpus_per_node).set("nodes", topo.nodes);
  row.set("seq", w.seq).set("micro_batch_size", w.micro_batch_size).set("micro_batches", w.micro_batches);
  row.set("tokens", w.global_batch_tokens).set("recompute", std::string(recompute_column(w.recompute)));
  row.set("overlap", overlap_name(overlap));
}

PredictedComm predict_comm(const Schedule& s, const CostModel& cost, Pricing pricing) {
  PredictedComm p;
  for (int k = 0; k < kCollKindCount; ++k) {
    const double intra = s.message_bytes(CollKind(k), Axis::intra), inter = s.message_bytes(CollKind(k), Axis::inter);
    p.kind_bytes[k] = intra + inter;
    p.axis_bytes[0] += intra;
    p.axis_bytes[1] += inter;
  }
  p.time = cost.price(s, pricing);
  return p;
}

void set_predicted_columns(StepRow& row, const PredictedComm& p) {
  for (CollKind k : kCollKindNames.values())
    row.set("pred_" + std::string(coll_kind_name(k)) + "_bytes", p.kind_bytes[int(k)]);
  row.set("pred_intra_bytes", p.axis_bytes[0]).set("pred_inter_bytes", p.axis_bytes[1]);
  row.set("pred_comm_s", p.time.total_s()).set("pred_comm_param_s", p.time.param_s);
  row.set("pred_comm_grad_s", p.time.grad_s).set("pred_comm_os_sync_s", p.time.os_sync_s);
  row.set("pred_comm_os_bcast_s", p.time.os_bcast_s);
}

}  // namespace lins
