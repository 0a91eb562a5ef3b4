// Shard and owner layout of a rank; see layout.h.
#include "core/schedule/layout.h"

#include <algorithm>
#include <numeric>
#include <queue>

#include "core/model/groups.h"
#include "core/schedule/engine_table.h"

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
  const LayoutRule rule = engine_row(plan.engine).layout(plan);
  if (rule == LayoutRule::flat_partition) {
    // DeepSpeed ZeRO-1/2: P whole on every rank; the flat buffer of all parameters split evenly into one contiguous
    // partition per rank of the optimizer-state group (stage_1_and_2.py partitions the flattened parameter group the
    // same way). Modules are padded so that the buffer divides evenly.
    const GroupSpec os_group = group_spec(GroupRole::os_shard, plan, topo);
    L.shard_count = 1;
    L.shard_index = 0;
    L.owner_count = os_group.size();
    L.owner_index = group_index(os_group, rank);
    L.modules = split_modules(model, 1, 0, L.owner_count, &L.local_elems);
    L.ranges = true;
    L.range_base = L.local_elems / L.owner_count;  // exact: the modules are padded to a multiple of owner_count
    L.range_extra = 0;
    return L;
  }

  const GroupSpec shard_group = group_spec(GroupRole::p_shard, plan, topo);
  L.shard_count = shard_group.size();
  L.shard_index = group_index(shard_group, rank);
  // ZeRO++'s quantized communication quantizes each rank's part in blocks of a multiple of 8 values (DeepSpeed's
  // block rules, core/model/quantization.h): its modules are padded to 8 elements a rank, so that every module's parts
  // (and its secondary copy's) take the quantized path. DeepSpeed gets there per tensor: its small tensors, whose
  // parts are not, are persistent and never gathered.
  const bool quantized = plan.quantized_weights || plan.quantized_gradients;
  L.modules = split_modules(model, L.shard_count, L.shard_index, (quantized ? 8 : 1) * L.shard_count, &L.local_elems);

  if (rule == LayoutRule::owned_shards) {
    const GroupSpec owners = group_spec(GroupRole::os_replica, plan, topo);
    L.owner_count = owners.size();
    L.owner_index = group_index(owners, rank);
  } else {
    L.owner_count = 1;
    L.owner_index = 0;
  }
  auto pieces = tensor_pieces(model, L.modules);

  if (L.owner_count == 1) {
    L.listed_elems.assign(1, 0);
    for (auto& p : pieces) L.listed_elems[0] += p.elems;
    L.pieces = std::move(pieces);
    return L;
  }
  if (plan.os_layout == OsLayout::inter_tensor) {
    // Largest first, each to the least-loaded owner (ties: lowest owner index, then forward order). While some owner
    // owns nothing the least loaded is the lowest such one, so with more owners than pieces piece i goes to owner i
    // and the owners past the pieces own nothing: only min(owners, pieces) owners take part.
    std::vector<std::size_t> order(pieces.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return pieces[a].elems > pieces[b].elems; });
    const int listed = static_cast<int>(std::min<int64_t>(L.owner_count, int64_t(pieces.size())));
    L.listed_elems.assign(static_cast<std::size_t>(std::max(1, listed)), 0);
    // A min-heap of (load, owner index) picks the same owner as a scan for the first least-loaded one, in
    // O(log owners) per piece.
    using Load = std::pair<int64_t, int>;
    std::priority_queue<Load, std::vector<Load>, std::greater<Load>> heap;
    for (int k = 0; k < listed; ++k) heap.push({0, k});
    for (std::size_t i : order) {
      auto [load, owner] = heap.top();
      heap.pop();
      pieces[i].owner = owner;
      L.listed_elems[static_cast<std::size_t>(owner)] += pieces[i].elems;
      heap.push({load + pieces[i].elems, owner});
    }
    L.pieces = std::move(pieces);
    return L;
  }
  // Intra-tensor on the Lins engine: contiguous, even ranges of the local buffer (sizes differ by at most one).
  L.ranges = true;
  L.range_base = L.local_elems / L.owner_count;
  L.range_extra = L.local_elems % L.owner_count;
  return L;
}

int64_t ShardLayout::owner_elems(int owner) const {
  if (ranges) return range_base + (owner < range_extra ? 1 : 0);
  return owner < static_cast<int>(listed_elems.size()) ? listed_elems[static_cast<std::size_t>(owner)] : 0;
}

int64_t ShardLayout::max_owner_elems() const {
  if (ranges) return range_base + (range_extra > 0 ? 1 : 0);
  return listed_elems.empty() ? 0 : *std::max_element(listed_elems.begin(), listed_elems.end());
}

std::vector<OwnedSlice> ShardLayout::slices() const {
  if (!ranges) return pieces;
  std::vector<OwnedSlice> out;
  for (int64_t k = 0; k < owner_count; ++k)
    out.push_back(OwnedSlice{-2, k * range_base + std::min(k, range_extra), range_base + (k < range_extra ? 1 : 0),
                             static_cast<int>(k)});
  return out;
}

// The owner of element e of the local buffer in a range layout: owner k starts at k * base + min(k, extra).
int64_t range_owner_at(const ShardLayout& L, int64_t e) {
  const int64_t big = L.range_base + 1, split = L.range_extra * big;  // the first `extra` owners hold base + 1
  if (e < split) return e / big;
  return L.range_base > 0 ? L.range_extra + (e - split) / L.range_base : int64_t(L.owner_count) - 1;
}

std::vector<OwnedSlice> ShardLayout::slices_in(int64_t lo, int64_t hi) const {
  std::vector<OwnedSlice> out;
  if (hi <= lo) return out;
  if (!ranges) {
    // The pieces are in local order: the first that ends after lo, then on until one starts at hi.
    auto it = std::upper_bound(pieces.begin(), pieces.end(), lo,
                               [](int64_t x, const OwnedSlice& p) { return x < p.local_offset + p.elems; });
    for (; it != pieces.end() && it->local_offset < hi; ++it) out.push_back(*it);
    return out;
  }
  for (int64_t k = range_owner_at(*this, lo); k < owner_count; ++k) {
    const int64_t start = k * range_base + std::min(k, range_extra);
    if (start >= hi) break;
    const int64_t n = range_base + (k < range_extra ? 1 : 0);
    if (n > 0) out.push_back(OwnedSlice{-2, start, n, static_cast<int>(k)});  // -2: a range that may span tensors
  }
  return out;
}

int64_t ShardLayout::count_slices_in(int64_t lo, int64_t hi) const {
  lo = std::max<int64_t>(lo, 0), hi = std::min(hi, local_elems);
  if (hi <= lo) return 0;
  if (!ranges) return static_cast<int64_t>(slices_in(lo, hi).size());
  return range_owner_at(*this, hi - 1) - range_owner_at(*this, lo) + 1;
}

}  // namespace lins
