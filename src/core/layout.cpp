// Shard and owner layout of a rank; see layout.h.
#include "core/layout.h"

#include <algorithm>
#include <numeric>
#include <queue>

#include "core/groups.h"

namespace lins {
namespace {

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

}  // namespace

std::vector<OwnedSlice> tensor_pieces(const ModelSpec& model, const std::vector<ModuleShard>& shards) {
  std::vector<OwnedSlice> pieces;
  for (const auto& ms : shards) {
    const auto& mod = model.modules[ms.module];
    const int64_t lo = ms.module_offset, hi = ms.module_offset + ms.shard_elems;
    int64_t tensor_start = 0;
    for (int t : mod.tensors) {
      const int64_t tensor_end = tensor_start + model.tensors[t].elems;
      const int64_t a = std::max(lo, tensor_start), b = std::min(hi, tensor_end);
      if (a < b) pieces.push_back(OwnedSlice{t, ms.local_offset + (a - lo), b - a, 0});
      tensor_start = tensor_end;
    }
    const int64_t a = std::max(lo, mod.elems), b = hi;  // padding after the module's last tensor
    if (a < b) pieces.push_back(OwnedSlice{-1, ms.local_offset + (a - lo), b - a, 0});
  }
  return pieces;
}

std::vector<ModuleShard> split_modules(const ModelSpec& model, int shards, int index, int pad_multiple,
                                       int64_t* local_elems) {
  std::vector<ModuleShard> out;
  int64_t offset = 0;
  for (std::size_t m = 0; m < model.modules.size(); ++m) {
    ModuleShard ms;
    ms.module = static_cast<int>(m);
    ms.padded_elems = round_up(model.modules[m].elems, pad_multiple);
    ms.shard_elems = ms.padded_elems / shards;
    ms.module_offset = ms.shard_elems * index;
    ms.local_offset = offset;
    offset += ms.shard_elems;
    out.push_back(ms);
  }
  *local_elems = offset;
  return out;
}

ShardLayout make_layout(const ModelSpec& model, const Plan& plan, const Topology& topo, int rank) {
  ShardLayout L;
  const int stage = zero_stage(plan);
  if (plan.engine == Engine::zero && stage < 3) {
    // DeepSpeed ZeRO-1/2: P whole on every rank; the flat buffer of all parameters split evenly into one contiguous
    // partition per rank of the optimizer-state group (stage_1_and_2.py partitions the flattened parameter group the
    // same way). Modules are padded so that the buffer divides evenly.
    const GroupSpec os_group = group_spec(GroupRole::os_shard, plan, topo);
    L.shard_count = 1;
    L.shard_index = 0;
    L.owner_count = os_group.size();
    L.owner_index = group_index(os_group, rank);
    L.modules = split_modules(model, 1, 0, L.owner_count, &L.local_elems);
    const int64_t part = L.local_elems / L.owner_count;
    L.owner_elems.assign(L.owner_count, part);
    for (int k = 0; k < L.owner_count; ++k) L.slices.push_back(OwnedSlice{-2, k * part, part, k});  // -2: a range
    return L;
  }

  const GroupSpec shard_group = group_spec(GroupRole::p_shard, plan, topo);
  L.shard_count = shard_group.size();
  L.shard_index = group_index(shard_group, rank);
  L.modules = split_modules(model, L.shard_count, L.shard_index, L.shard_count, &L.local_elems);

  if (plan.engine == Engine::lins || plan.engine == Engine::ddp) {
    const GroupSpec owners = group_spec(GroupRole::os_replica, plan, topo);
    L.owner_count = owners.size();
    L.owner_index = group_index(owners, rank);
  } else {
    L.owner_count = 1;
    L.owner_index = 0;
  }
  L.owner_elems.assign(L.owner_count, 0);
  auto pieces = tensor_pieces(model, L.modules);

  if (L.owner_count == 1) {
    for (auto& p : pieces) L.owner_elems[0] += p.elems;
    L.slices = std::move(pieces);
    return L;
  }
  if (plan.os_layout == OsLayout::inter_tensor) {
    // Largest first, each to the least-loaded owner (ties: lowest owner index, then forward order).
    std::vector<std::size_t> order(pieces.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return pieces[a].elems > pieces[b].elems; });
    // A min-heap of (load, owner index) picks the same owner as a scan for the first least-loaded one, in
    // O(log owners) per piece (owners reach the world size when P is replicated).
    using Load = std::pair<int64_t, int>;
    std::priority_queue<Load, std::vector<Load>, std::greater<Load>> heap;
    for (int k = 0; k < L.owner_count; ++k) heap.push({0, k});
    for (std::size_t i : order) {
      auto [load, owner] = heap.top();
      heap.pop();
      pieces[i].owner = owner;
      L.owner_elems[owner] += pieces[i].elems;
      heap.push({load + pieces[i].elems, owner});
    }
    L.slices = std::move(pieces);
    return L;
  }
  // Intra-tensor on the Lins engine: contiguous, even ranges of the local buffer (sizes differ by at most one).
  const int64_t base = L.local_elems / L.owner_count, extra = L.local_elems % L.owner_count;
  int64_t start = 0;
  for (int k = 0; k < L.owner_count; ++k) {
    const int64_t n = base + (k < extra ? 1 : 0);
    L.slices.push_back(OwnedSlice{-2, start, n, k});
    L.owner_elems[k] = n;
    start += n;
  }
  return L;
}

}  // namespace lins
