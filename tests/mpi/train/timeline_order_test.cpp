// The executor and the simulator read one timeline: for every engine, overlap mode and a few plans, the collectives the
// executor hands to its communicators and the waits its host makes, in the order they happen, are exactly the issue
// and wait actions of the step's program (core/timeline.h), the order in which the simulator times them; and the
// simulator's projected trace lists the same actions in that order.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "../comm/mpi_world.h"
#include "comm/mesh_comms.h"
#include "core/projection/simulator.h"
#include "train/executor.h"

namespace lins {
namespace {

using test::world_rank;
using test::world_size;

std::string describe(const Action& a) {
  return std::string(action_kind_name(a.kind)) + " " + std::to_string(a.index) + (a.carried ? " (carried)" : "");
}

void check_order(const Topology& topo, const std::string& plan_text, Overlap overlap, const EngineOptions& engine) {
  const int rank = world_rank();
  SCOPED_TRACE("plan " + plan_text + ", overlap " + overlap_name(overlap) + ", rank " + std::to_string(rank));
  const ModelSpec model = *make_model_preset("tiny");
  auto plan = parse_plan(plan_text, topo);
  ASSERT_TRUE(plan.ok()) << plan.error();
  auto world = make_communicator(Backend::mpi, MPI_COMM_WORLD);
  ASSERT_TRUE(world.ok()) << world.error();
  auto be = make_cpu_backend();
  ExecutorOptions o;
  o.seq = 8;
  o.micro_batches = 2;
  o.overlap = overlap;
  o.engine = engine;
  o.bucket_bytes = 512;
  auto ex = Executor::create(model, *plan, topo, rank, world->get(), *be, o);
  ASSERT_TRUE(ex.ok()) << ex.error();
  Executor& e = **ex;
  // The program's issues and waits; step 0 has nothing carried into it, so its carried waits do not happen.
  std::vector<Action> expected_first, expected;
  for (const Action& a : e.program()) {
    if (a.kind == Action::Kind::compute) continue;
    expected.push_back(a);
    if (!a.carried) expected_first.push_back(a);
  }
  // The simulator's projected trace goes through the same program: its waits in the same order.
  std::vector<TraceEvent> projected;
  const auto proj = project_step(
      e.schedule(), model, 8, 1, Recompute::none, ComputeRates{1e9, 1e9, 0.0, nullptr},
      [](const CommOp& op) { return 1e-6 * double(op.bytes()); }, &projected);
  EXPECT_GT(proj.step_s, 0);
  for (int step = 0; step < 3; ++step) {
    auto st = e.step();
    ASSERT_TRUE(st.ok()) << st.error();
    const auto& want = step == 0 ? expected_first : expected;
    const auto& got = e.comm_events();
    ASSERT_EQ(got.size(), want.size()) << "step " << step;
    for (std::size_t k = 0; k < got.size(); ++k)
      ASSERT_EQ(got[k], want[k]) << "step " << step << ", event " << k << ": the executor did " << describe(got[k])
                                 << " where the program says " << describe(want[k]);
  }
  ASSERT_TRUE(e.finish().ok());
}

TEST(TimelineOrder, ExecutorFollowsTheProgramOnEveryEngineAndOverlapMode) {
  const int world = world_size();
  const int R = world % 2 == 0 ? 2 : 1;
  const Topology topo{R, world / R};
  const std::string all = std::to_string(R) + "x" + std::to_string(topo.nodes), node = std::to_string(R) + "x1";
  EngineOptions every;  // DeepSpeed gathering every module (its defaults keep the tiny model persistent)
  every.ds_param_persistence_threshold_elems = 0;
  every.ds_max_reuse_distance_elems = 0;
  every.ds_reduce_bucket_elems = 600;
  std::vector<std::pair<std::string, EngineOptions>> cases = {{"ddp", {}},
                                                              {"zero1", {}},
                                                              {"zero2", {}},
                                                              {"zero3", {}},
                                                              {"zero3", every},
                                                              {"mics", every},
                                                              {"zeropp", every},
                                                              {"fsdp", {}},
                                                              {"hsdp", {}},
                                                              {"fsdp:noreshard", {}},
                                                              {"p=1x1,g=1x1,os=" + all, {}},
                                                              {"p=" + node + ",g=" + all + ",os=" + all, {}},
                                                              {"p=" + all + ",g=" + all + ",os=" + all, {}}};
  EngineOptions overlap = every;
  overlap.ds_overlap_comm = true;
  cases.push_back({"zero2", overlap});
  for (const auto& [plan, engine] : cases)
    for (Overlap o : {Overlap::all, Overlap::no_bcast, Overlap::no_allreduce, Overlap::none})
      check_order(topo, plan, o, engine);
}

}  // namespace
}  // namespace lins
