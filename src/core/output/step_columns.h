// The step-CSV columns that a measured row (`lins step`) and a projected row (`lins simulate`) fill the same way:
// what ran (strategy, plan, model, workload, topology) and what the schedule and cost model predicted.
#pragma once

#include <array>
#include <string>

#include "core/cost/cost_model.h"
#include "core/model/plan.h"
#include "core/model/topology.h"
#include "core/output/results_schema.h"
#include "core/schedule/overlap.h"
#include "core/schedule/workload.h"

namespace lins {

// source, strategy, engine, plan and its six factors, os_layout, model, params, backend, precision, compute, world
// size, topology, seq, micro-batch size and count, tokens, recompute, overlap.
void set_run_columns(StepRow& row, const std::string& source, const std::string& strategy, const Plan& plan,
                     const Workload& w, const Topology& topo, const std::string& backend, DType precision,
                     DType compute, Overlap overlap);

// Predicted message bytes per collective kind and per axis (schedule) and predicted seconds per term (cost model).
struct PredictedComm {
  std::array<double, kCollKindCount> kind_bytes{};
  std::array<double, 2> axis_bytes{};  // intra, inter
  CommTimeBreakdown time;
};
PredictedComm predict_comm(const Schedule& s, const CostModel& cost, Pricing pricing);
void set_predicted_columns(StepRow& row, const PredictedComm& p);

}  // namespace lins
