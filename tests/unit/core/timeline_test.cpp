// The step program, against its rule written out the slow way: at each point the previous step's ops waited for
// there, the waits for ops issued earlier, the issues, the waits for ops issued at this very point, then the task the
// point comes before; ops of each group in op order. Every engine and overlap mode.
#include "core/schedule/timeline.h"

#include <gtest/gtest.h>

namespace lins {
namespace {

std::vector<Action> program_by_rule(const Schedule& s) {
  std::vector<Action> out;
  const int slots = 2 * s.shape.task_count() + 1;
  for (int slot = 1; slot < slots; ++slot) {
    for (int i = 0; i < int(s.ops.size()); ++i)
      if (s.ops[i].wait.next_step && s.ops[i].wait.slot == slot) out.push_back({Action::Kind::wait, i, true});
    for (int i = 0; i < int(s.ops.size()); ++i)
      if (!s.ops[i].wait.next_step && s.ops[i].wait.slot == slot && s.ops[i].issue.slot < slot)
        out.push_back({Action::Kind::wait, i, false});
    for (int i = 0; i < int(s.ops.size()); ++i)
      if (s.ops[i].issue.slot == slot) out.push_back({Action::Kind::issue, i, false});
    for (int i = 0; i < int(s.ops.size()); ++i)
      if (!s.ops[i].wait.next_step && s.ops[i].wait.slot == slot && s.ops[i].issue.slot == slot)
        out.push_back({Action::Kind::wait, i, false});
    if (slot % 2 == 1) out.push_back({Action::Kind::compute, slot / 2, false});
  }
  return out;
}

TEST(StepProgram, FollowsItsRuleForEveryEngineAndOverlapMode) {
  const ModelSpec model = make_model_preset("small").value();
  const Topology topo{4, 2};
  for (const char* plan : {"ddp", "zero1", "zero2", "zero3", "mics", "zeropp", "fsdp", "hsdp", "p=4x1,g=4x2,os=4x2",
                           "p=1x1,g=1x1,os=4x2", "p=2x1,g=2x1,os=4x1"})
    for (Overlap overlap : kOverlapNames.values()) {
      ScheduleOptions o;
      o.micro_batches = 3;
      o.expand_micro_batches = true;
      o.bucket_bytes = 64 << 10;
      o.overlap = overlap;
      o.engine.ds_reduce_bucket_elems = 100'000;
      o.engine.ds_prefetch_bucket_elems = 10'000;
      auto s = build_schedule(model, parse_plan(plan, topo).value(), topo, o);
      ASSERT_TRUE(s) << s.error();
      EXPECT_EQ(step_program(*s), program_by_rule(*s)) << plan << " " << overlap_name(overlap);
    }
}

}  // namespace
}  // namespace lins
