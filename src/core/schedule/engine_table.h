// One row per engine: what the code outside an engine's own file needs to know about it. The engine's collectives
// are its build function (engines/engine_<name>.cpp); the rest is what other rooms used to branch on by name: how it
// lays out each rank's shards (layout.cpp), what the memory model's closed form keeps whole (memory_model.cpp), and
// which host-side costs its real system pays (host_model.cpp). Adding an engine: its Engine value (plan.h), its
// preset rows (kPresets, plan.h), its build function, its row here, and its golden program (engines.h says how).
#pragma once

#include "core/model/plan.h"
#include "core/util/result.h"

namespace lins {

class EngineBuilder;

// How each rank's part of P, G and the optimizer states is laid out (ShardLayout, layout.h).
enum class LayoutRule {
  // DeepSpeed ZeRO-1/2: P whole on every rank; the flat buffer of all parameters split into one contiguous partition
  // per rank of the optimizer-state group.
  flat_partition,
  // Every module's P sharded over the P shard group; the optimizer states are the shard's (ZeRO-3, MiCS, ZeRO++, FSDP).
  module_shards,
  // Module shards, with the optimizer states of each shard split among the owners of the os_replica group (Lins's
  // select & drop; DDP's degenerate case).
  owned_shards,
};

// Whose host-side work the host model prices (core/cost/host_model.h): each family pays its own framework's costs.
enum class HostFamily {
  lins,       // lins's own issue cost per collective
  ddp,        // PyTorch DDP: a bucket's hook and launch per all-reduce
  deepspeed,  // DeepSpeed: ZeRO-3's module hooks and per-submodule gathers, the paper-era loss sync
  fsdp,       // PyTorch FSDP2: its hooks around every module's forward and backward
};

struct EngineRow {
  Engine engine;
  Status (*build)(EngineBuilder&);  // fills the schedule's ops (engines.h)
  LayoutRule (*layout)(const Plan&);
  // Whether the memory model's closed form keeps each module's whole gradient even where P is not sharded (ZeRO-2
  // accumulates whole gradients before it reduces them).
  bool (*keeps_whole_gradients)(const Plan&);
  HostFamily host;
};

// The row of `e` (every Engine has one, in enum order: a static_assert in engine_table.cpp holds that).
const EngineRow& engine_row(Engine e);

}  // namespace lins
