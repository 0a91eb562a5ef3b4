// PyTorch DDP (torch/nn/parallel/distributed.py, torch/csrc/distributed/c10d/reducer.cpp): gradients go into buckets
// of whole tensors in the order backward produces them (the first bucket at most 1 MiB, the rest at most
// bucket_cap_mb = 25 MiB); a bucket's all-reduce is issued on the process group's stream as soon as it and every
// earlier bucket are full (Reducer::mark_bucket_ready), and the compute stream waits for all of them at the end of
// backward (Reducer::finalize_backward). Gradient accumulation uses no_sync(): earlier micro-batches accumulate
// locally and only the last one's backward reduces the sum.
#include "core/schedule/engines.h"

namespace lins {

Status build_ddp_ops(EngineBuilder& b) {
  b.set_streams({"world"});
  const EngineOptions& e = b.engine();
  const int64_t esize = dtype_bytes(b.options().dtype);
  BucketRule rule;
  rule.cap_elems = e.bucket_bytes / esize;
  rule.first_cap_elems = e.ddp_first_bucket_bytes / esize;
  rule.whole_tensors = true;
  rule.option = "--bucket";
  rule.elem_bytes = static_cast<int>(esize);
  auto buckets = cut_buckets(b.model(), b.layout(), rule);
  if (!buckets) return make_error(buckets.error());
  if (auto s = b.check_budget(static_cast<int64_t>(buckets->size()), "--bucket"); !s) return s;
  const StepShape& shape = b.shape();
  for (const MicroBatchCopy& c : b.copies()) {
    if (!c.last) continue;
    int id = 0;
    for (const Bucket& k : *buckets) {
      EngineBuilder::OpSpec op;
      op.purpose = Purpose::sync_bucket_all_reduce;
      op.kind = CollKind::all_reduce;
      op.term = Term::os_sync;
      op.role = GroupRole::p_replica;
      op.elems = k.elems;
      op.local_offset = k.offset;
      op.issue = shape.after_backward(c.mb, k.ready_module);
      op.wait = shape.end_of_backward(c.mb);
      op.label = "bucket ";
      op.label_number = id++;
      b.add(c, Phase::backward, op);
    }
  }
  return {};
}

}  // namespace lins
