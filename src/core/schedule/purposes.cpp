// Each purpose's rules, one case of one switch (no default: -Wswitch names a purpose left out); see purposes.h.
#include "core/schedule/purposes.h"

namespace lins {

PurposeContext purpose_context(const Schedule& s) {
  return PurposeContext{s.plan.g.total() > s.plan.p.total(), s.transient_grads};
}

PurposeRule purpose_rule(Purpose p, const PurposeContext& c) {
  PurposeRule r;
  r.purpose = p;
  switch (p) {
    case Purpose::forward_gather:
    case Purpose::backward_gather:
      r.kind = CollKind::all_gather;
      r.bucket_range = BucketRange::none;
      r.held = HeldBuffer::module_params;
      r.held_state = HeldState::p;
      r.at_issue = AtIssue::gather_shard;
      r.at_completion = AtCompletion::nothing;
      r.summary = "gathers the module's P shards into a full-module buffer, freed by the tasks that read it";
      break;
    case Purpose::hpz_gather:
      r.kind = CollKind::all_gather;
      r.bucket_range = BucketRange::none;
      r.held = HeldBuffer::module_params;
      r.held_state = HeldState::p;
      r.at_issue = AtIssue::gather_hpz_part;
      r.at_completion = AtCompletion::nothing;
      r.summary =
          "gathers the parts of the module's secondary copy of P into a full-module buffer, freed by the tasks "
          "that read it";
      break;
    case Purpose::grad_reduce_scatter:
      r.kind = CollKind::reduce_scatter;
      r.bucket_range = BucketRange::part;
      r.reads_module_grads = true;
      r.held = HeldBuffer::bucket_send_buffer;
      r.held_state = HeldState::g;
      r.at_issue = AtIssue::reduce_scatter_grads;
      if (c.transient_grads) {
        r.at_completion = AtCompletion::slice_into_transient;
        r.summary =
            "reduce-scatters whole-module gradients (a bucket of several packed first) into this rank's shard "
            "of the transient gradient";
      } else {
        r.at_completion = AtCompletion::slice_into_g;
        r.summary =
            "reduce-scatters whole-module gradients (a bucket of several packed first) into this rank's shard, "
            "added into G";
      }
      break;
    case Purpose::zero_grad_reduce:
      r.kind = CollKind::all_reduce;
      r.bucket_range = BucketRange::elems;
      if (c.g_owned) {
        r.reads_module_grads = true;
        r.held = HeldBuffer::send_buffer;
        r.held_state = HeldState::g;
        r.at_issue = AtIssue::all_reduce_packed_grads;
        r.at_completion = AtCompletion::owned_added_into_g;
        r.summary =
            "packs the module gradients of a bucket into a send buffer, all-reduces it there and adds the owned "
            "part into G";
      } else {
        r.at_issue = AtIssue::all_reduce_g;
        r.at_completion = AtCompletion::nothing;
        r.summary = "all-reduces a bucket of G in place";
      }
      break;
    case Purpose::grad_bucket_all_reduce:
    case Purpose::replica_all_reduce:
      r.kind = CollKind::all_reduce;
      r.bucket_range = BucketRange::elems;
      if (c.transient_grads) {
        r.at_issue = AtIssue::all_reduce_transient;
        r.at_completion = AtCompletion::owned_added_into_g;
        r.summary = "all-reduces a bucket of the transient gradient in place and adds the owned part into G";
      } else {
        r.at_issue = AtIssue::all_reduce_g;
        r.at_completion = AtCompletion::nothing;
        r.summary = "all-reduces a bucket of G in place";
      }
      break;
    case Purpose::sync_bucket_all_reduce:
      r.kind = CollKind::all_reduce;
      r.bucket_range = BucketRange::elems;
      if (c.transient_grads) {
        r.at_issue = AtIssue::all_reduce_transient_with_g;
        r.at_completion = AtCompletion::owned_copied_into_g;
        r.summary =
            "adds G's owned part into a bucket of the transient gradient, all-reduces it in place and copies "
            "the owned part back into G";
      } else {
        r.at_issue = AtIssue::all_reduce_g;
        r.at_completion = AtCompletion::nothing;
        r.summary = "all-reduces a bucket of G in place";
      }
      break;
    case Purpose::update_gather:
      r.kind = CollKind::all_gather;
      r.bucket_range = BucketRange::whole_local;
      r.held_state = HeldState::p;
      r.at_issue = AtIssue::gather_update;
      r.at_completion = AtCompletion::nothing;
      r.summary = "gathers every rank's updated partition in place into P (a persistent module: into its buffer)";
      break;
    case Purpose::update_broadcast:
      r.kind = CollKind::broadcast;
      r.bucket_range = BucketRange::none;
      r.held = HeldBuffer::payload;
      r.held_state = HeldState::p;
      r.at_issue = AtIssue::broadcast_update;
      r.at_completion = AtCompletion::unpack_payload;
      r.summary =
          "broadcasts the root owner's updated slices of the module's shard of P (packed into a payload "
          "unless in place)";
      break;
    case Purpose::qgz_node_exchange:
      r.kind = CollKind::all_to_all;
      r.bucket_range = BucketRange::none;
      r.reads_module_grads = true;
      r.at_issue = AtIssue::exchange_quantized_grads;
      r.at_completion = AtCompletion::nothing;
      r.summary =
          "quantizes the module's whole gradient to int4 blocks, all-to-alls them inside the node and reduces them "
          "into the node's int4 sums";
      break;
    case Purpose::qgz_peer_exchange:
      r.kind = CollKind::all_to_all;
      r.bucket_range = BucketRange::none;
      r.at_issue = AtIssue::exchange_reduced_slices;
      r.held_state = HeldState::g;
      if (c.transient_grads) {
        r.at_completion = AtCompletion::slice_into_transient;
        r.summary =
            "all-to-alls the node's int4 sums across nodes and reduces them into this rank's shard of the transient "
            "gradient";
      } else {
        r.at_completion = AtCompletion::slice_into_g;
        r.summary = "all-to-alls the node's int4 sums across nodes and reduces them into this rank's shard, added into G";
      }
      break;
  }
  return r;
}

QuantBufferLayout quantization_buffer_layout(const CommOp& op, DType storage) {
  QuantBufferLayout l;
  const int n = op.group.size();
  if (op.quant == Quant::none || n <= 0) return l;
  const bool copies = storage != DType::fp32;
  // The arrays in order, each at the end of the one before: fp32 in, fp32 out, scales, received scales, values,
  // received values.
  auto place = [&l](int64_t in, int64_t out, int64_t scales, int64_t got_scales, int64_t values, int64_t got_values) {
    l.fp32_in = 0;
    l.fp32_out = l.fp32_in + in;
    l.scales = l.fp32_out + out;
    l.received_scales = l.scales + scales;
    l.values = l.received_scales + got_scales;
    l.received_values = l.values + values;
    l.bytes = l.received_values + got_values;
  };
  const int64_t elems = op.elems, blocks = op.quant_blocks;
  switch (op.purpose) {
    case Purpose::qgz_node_exchange:  // the module's M values in G blocks, int4, all-to-all'ed inside the node
      place(copies ? 4 * elems : 0, 0, 4 * blocks, 4 * blocks, elems / 2, elems / 2);
      break;
    case Purpose::qgz_peer_exchange:  // the node's sums (M/R in G/R blocks), int4; this rank's slice out in fp32
      place(0, 4 * (elems / n), 4 * blocks, 4 * blocks, elems / 2, elems / 2);
      break;
    default: {  // a qwZ gather: this rank's part (S values, g blocks) in int8, every rank's gathered
      const int64_t part = elems / n, part_blocks = blocks / n;
      place(copies ? 4 * part : 0, copies ? 4 * elems : 0, 4 * part_blocks, 4 * blocks, part, elems);
      break;
    }
  }
  return l;
}

int64_t quantization_buffer_bytes(const CommOp& op, DType storage) {
  return quantization_buffer_layout(op, storage).bytes;
}

LocalRange op_local_range(const CommOp& op, const ShardLayout& L, const PurposeRule& r) {
  if (op.module >= 0) {
    const ModuleShard& ms = L.modules[static_cast<std::size_t>(op.module)];
    return LocalRange{ms.local_offset, ms.shard_elems};
  }
  switch (r.bucket_range) {
    case BucketRange::none:
      return LocalRange{op.local_offset, 0};
    case BucketRange::elems:
      return LocalRange{op.local_offset, op.elems};
    case BucketRange::part:
      return LocalRange{op.local_offset, op.elems / op.group.size()};
    case BucketRange::whole_local:
      return LocalRange{0, L.local_elems};
  }
  return LocalRange{op.local_offset, 0};
}

OpHold op_hold(const CommOp& op, const PurposeRule& r, std::size_t modules_read) {
  OpHold h;
  h.state = r.held_state;
  switch (r.held) {
    case HeldBuffer::none:
      return h;
    case HeldBuffer::module_params:
      h.until_task = true;
      break;
    case HeldBuffer::send_buffer:
      break;
    case HeldBuffer::bucket_send_buffer:
      if (modules_read <= 1) return h;
      break;
    case HeldBuffer::payload:
      if (op.in_place) return h;
      break;
  }
  h.buffer = r.held == HeldBuffer::bucket_send_buffer ? HeldBuffer::send_buffer : r.held;
  h.elems = op.elems;
  return h;
}

GradientReaders gradient_readers(const Schedule& s, const PurposeContext& c) {
  const ShardLayout& L = s.layout;
  const int M = s.shape.micro_batches, n = s.shape.modules;
  GradientReaders g;
  g.per_module.assign(static_cast<std::size_t>(M), std::vector<int>(static_cast<std::size_t>(n), 0));
  g.op_modules.assign(s.ops.size(), {});
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const CommOp& op = s.ops[i];
    const PurposeRule r = purpose_rule(op.purpose, c);
    if (!r.reads_module_grads) continue;
    const LocalRange range = op_local_range(op, L, r);
    for (const auto& ms : L.modules) {
      if (ms.local_offset >= range.end() || ms.local_offset + ms.shard_elems <= range.offset) continue;
      g.op_modules[i].push_back(ms.module);
      if (op.micro_batch >= 0 && op.micro_batch < M && ms.module >= 0 && ms.module < n)
        ++g.per_module[static_cast<std::size_t>(op.micro_batch)][static_cast<std::size_t>(ms.module)];
    }
  }
  return g;
}

int64_t quantization_pass_bytes(const CommOp& op, DType storage) {
  const int n = op.group.size();
  if (op.quant == Quant::none || n <= 0) return 0;
  const int64_t sb = dtype_bytes(storage);
  switch (op.purpose) {
    case Purpose::qgz_node_exchange: {
      const int64_t sums = op.bytes() / n;  // what the reduction writes: 1/R of the values and scales
      return op.elems * sb + 2 * op.bytes() + sums;
    }
    case Purpose::qgz_peer_exchange:
      return op.bytes() + 2 * (op.elems / n) * sb;
    default: {  // a qwZ gather
      const int64_t part = op.elems / n, part_blocks = op.quant_blocks / n;
      return part * sb + (part + 4 * part_blocks) + op.bytes() + op.elems * sb;
    }
  }
}

}  // namespace lins
