// Where each rank's shards of P, G and the optimizer states live (docs/method.md, "Optimizer states by whole tensors"):
// - every module's parameters are one flat buffer padded to a multiple of the shard count and split evenly, so a
//   rank's shard is a 1/s slice of every module, concatenated in forward order (the "local buffer");
// - the optimizer states of that local buffer are owned by the ranks holding the same shard inside one OS block:
//   inter-tensor = whole local tensor slices, largest first, each to the least-loaded owner (Lins);
//   intra-tensor = the local buffer split evenly into contiguous ranges (DeepSpeed/FSDP style).
// The schedule, the executor and the memory model all read this one layout.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model_spec.h"
#include "core/plan.h"
#include "core/topology.h"

namespace lins {

struct ModuleShard {
  int module = -1;
  int64_t padded_elems = 0;   // module elements rounded up to a multiple of the shard count
  int64_t shard_elems = 0;    // padded_elems / shard count
  int64_t module_offset = 0;  // where this rank's shard starts inside the module's flat buffer
  int64_t local_offset = 0;   // where it starts inside the rank's local buffer
};

// One tensor's part of the local buffer, owned by one rank of the owner group.
struct OwnedSlice {
  int tensor = -1;           // index into ModelSpec::tensors; -1 for padding; -2 for a range that may span tensors
  int64_t local_offset = 0;  // inside the local buffer
  int64_t elems = 0;
  int owner = 0;  // index inside the owner group
};

struct ShardLayout {
  int shard_count = 1;               // how many ranks split each module (s_p on the Lins engine)
  int shard_index = 0;               // this rank's slice of every module
  std::vector<ModuleShard> modules;  // forward order, one per ModelSpec module
  int64_t local_elems = 0;           // size of the local buffer

  int owner_count = 1;               // ranks that split the optimizer states of the local buffer
  int owner_index = 0;               // this rank's index among them
  std::vector<OwnedSlice> slices;    // in local-buffer order; every element of the local buffer exactly once
  std::vector<int64_t> owner_elems;  // elements owned by each owner

  int64_t owned_elems() const { return owner_elems[owner_index]; }
};

// Layout of `rank` for `plan`. Shard count and owner count by engine:
//   lins/ddp: shard by s_p, owners s_os/s_p with plan.os_layout;
//   zero: stage 3 shards by the world; stages 1-2 keep P whole (shard count 1 for P) and own one contiguous 1/s_os
//         range of the whole buffer (DeepSpeed's flat partition);
//   mics/zeropp/fsdp: shard by the group (s_p), every rank owns its own shard.
ShardLayout make_layout(const ModelSpec& model, const Plan& plan, const Topology& topo, int rank);

// The local buffer of `shards` (this rank's shard of every module) cut at tensor boundaries, in local order: one
// piece per tensor part inside the shard (tensor >= 0), padding as tensor -1; owner left 0.
std::vector<OwnedSlice> tensor_pieces(const ModelSpec& model, const std::vector<ModuleShard>& shards);

// Module-level even split: every module padded to a multiple of `pad_multiple` (a multiple of `shards`), rank takes
// slice `index` of `shards`. Returns the shards and sets *local_elems to their total.
std::vector<ModuleShard> split_modules(const ModelSpec& model, int shards, int index, int pad_multiple,
                                       int64_t* local_elems);

}  // namespace lins
