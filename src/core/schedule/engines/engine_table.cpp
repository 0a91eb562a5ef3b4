// The engine table (engine_table.h): one row per engine.
#include "core/schedule/engine_table.h"

#include <iterator>

#include "core/schedule/engines.h"

namespace lins {
namespace {

// DeepSpeed's ZeRO: stage 3 runs stage3.py's schedule, stages 1 and 2 stage_1_and_2.py's.
Status build_zero(EngineBuilder& b) {
  return zero_stage(b.plan()) == 3 ? build_deepspeed_zero3_ops(b) : build_deepspeed_zero12_ops(b);
}

LayoutRule zero_layout(const Plan& plan) {
  return zero_stage(plan) < 3 ? LayoutRule::flat_partition : LayoutRule::module_shards;
}
LayoutRule module_shards(const Plan&) { return LayoutRule::module_shards; }
LayoutRule owned_shards(const Plan&) { return LayoutRule::owned_shards; }

bool zero2_keeps_whole_gradients(const Plan& plan) { return zero_stage(plan) == 2; }
bool never(const Plan&) { return false; }

constexpr EngineRow kEngineRows[] = {
    {Engine::lins, build_lins_ops, owned_shards, never, HostFamily::lins},
    {Engine::ddp, build_ddp_ops, owned_shards, never, HostFamily::ddp},
    {Engine::zero, build_zero, zero_layout, zero2_keeps_whole_gradients, HostFamily::deepspeed},
    {Engine::mics, build_deepspeed_zero3_ops, module_shards, never, HostFamily::deepspeed},
    {Engine::zeropp, build_deepspeed_zero3_ops, module_shards, never, HostFamily::deepspeed},
    {Engine::fsdp, build_fsdp_ops, module_shards, never, HostFamily::fsdp},
};
constexpr bool rows_in_engine_order() {
  for (int i = 0; i < kEngineCount; ++i)
    if (static_cast<int>(kEngineRows[i].engine) != i) return false;
  return true;
}
static_assert(std::size(kEngineRows) == kEngineCount && rows_in_engine_order(),
              "one row per engine, in the order of the Engine enum");

}  // namespace

const EngineRow& engine_row(Engine e) { return kEngineRows[static_cast<int>(e)]; }

}  // namespace lins
