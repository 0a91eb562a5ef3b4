// One plan's projected step exactly as `lins simulate` makes it: the expanded schedule on the plan's engine under an
// overlap mode, its memory walked through the step program plus the reserve, and the step program timed with the
// compute model and the cost model (simulator.h). The simulator's rows and the planner's step objective both come
// from project_plan, so the plan the planner ranks first is the one the simulator projects fastest.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cost/compute_model.h"
#include "core/cost/cost_model.h"
#include "core/model/plan.h"
#include "core/model/topology.h"
#include "core/projection/memory_model.h"
#include "core/projection/simulator.h"
#include "core/schedule/overlap.h"
#include "core/schedule/schedule.h"
#include "core/schedule/workload.h"
#include "core/util/trace.h"

namespace lins {

// What a projection assumes besides the plan and the workload.
struct ProjectionSetup {
  const CostModel* cost = nullptr;  // required
  Pricing pricing = Pricing::paper_isolated;
  ComputeModel compute;
  EngineOptions engine;
  int64_t bucket_bytes = 25ll << 20;  // U
  DType dtype = DType::bf16;          // P and G on the wire
  Overlap overlap = Overlap::all;
  StateBytes state_bytes;
  MemoryReserve reserve;
  const HostModel* host = nullptr;  // the host side of the real systems (host_model.h); null: device schedule only
};

struct PlanProjection {
  Schedule schedule;      // expanded, rank 0
  MemoryEstimate memory;  // worst rank, reserve added
  StepProjection step;    // the timed step program
};

// Seconds of one run of every op of `s` under `pricing`; ops of equal (kind, bytes, mesh) are priced once. With a
// host model and the model, an op the real system issues as several collectives (ds_gather_calls, host_model.h) is
// the sum of those collectives, each priced at its own size.
// `latency_s`, when given, receives each op's latency terms (the part contention does not stretch): the network
// model's time of the op at one byte, once per collective the op is issued as.
std::vector<double> price_ops(const Schedule& s, const CostModel& cost, Pricing pricing,
                              const ModelSpec* model = nullptr, const HostModel* host = nullptr,
                              std::vector<double>* latency_s = nullptr);

// Projects `plan`; `trace`, when given, receives the projected timeline.
Result<PlanProjection> project_plan(const ProjectionSetup& setup, const Workload& w, const Topology& topo,
                                    const Plan& plan, std::vector<TraceEvent>* trace = nullptr);

}  // namespace lins
