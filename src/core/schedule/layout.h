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

#include "core/model/model_spec.h"
#include "core/model/plan.h"
#include "core/model/topology.h"

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

  int owner_count = 1;  // ranks that split the optimizer states of the local buffer
  int owner_index = 0;  // this rank's index among them
  // Two kinds, so that nothing here grows with the owner count (which reaches the world size):
  // - pieces (one owner, or inter-tensor): `pieces` lists every element of the local buffer exactly once, in local
  //   order, each piece with its owner; `listed_elems[k]` is what owner k owns, owners past its end own nothing;
  // - ranges (intra-tensor, ZeRO-1/2's flat partition): owner k owns the contiguous range of range_base elements,
  //   one more for k < range_extra, in owner order.
  bool ranges = false;
  std::vector<OwnedSlice> pieces;
  std::vector<int64_t> listed_elems;
  int64_t range_base = 0, range_extra = 0;

  int64_t owner_elems(int owner) const;
  int64_t max_owner_elems() const;
  int64_t owned_elems() const { return owner_elems(owner_index); }
  // The slices that overlap [lo, hi) of the local buffer, in local order (the pieces, or one range per owner).
  std::vector<OwnedSlice> slices_in(int64_t lo, int64_t hi) const;
  // How many slices overlap [lo, hi), without listing them (a closed form for ranges).
  int64_t count_slices_in(int64_t lo, int64_t hi) const;
  // Every slice in local order, for ranges one per owner (empty ones too): O(owner count), for the executor, which
  // talks to every owner anyway.
  std::vector<OwnedSlice> slices() const;
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
