// Forward and backward of the LLaMA-style decoder, one module at a time; see llama.h. Shapes: T tokens of the
// micro-batch, H hidden, F ffn, V vocab; Linear weights are [out, in] so y = x W^T.
#include "train/llama.h"

#include <algorithm>
#include <cmath>

namespace lins {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// "layers.3.attention.wq.weight" -> "attention.wq.weight"; other names unchanged.
std::string short_name(const std::string& name) {
  if (name.rfind("layers.", 0) != 0) return name;
  const auto dot = name.find('.', 7);
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

}  // namespace

// Activations of one module for one micro-batch. [T, H] unless noted.
struct LlamaModel::Saved {
  DeviceBuffer input;          // the module's input (residual stream); empty for the embedding
  DeviceBuffer rstd;           // [T]
  DeviceBuffer xn;             // normalised input
  DeviceBuffer q, k, v, o;     // attn: q and k after RoPE; o = attention output before wo
  DeviceBuffer lse;            // attn: [batch, heads, seq]
  DeviceBuffer gate, up, act;  // mlp: [T, F] each
  DeviceBuffer dlogits;        // head: [T, V], computed in forward
  void drop_intermediates() {
    rstd.reset(), xn.reset(), q.reset(), k.reset(), v.reset(), o.reset(), lse.reset();
    gate.reset(), up.reset(), act.reset(), dlogits.reset();
  }
};

LlamaModel::LlamaModel(LlamaModel&&) noexcept = default;
LlamaModel& LlamaModel::operator=(LlamaModel&&) noexcept = default;
LlamaModel::~LlamaModel() = default;

Result<LlamaModel> LlamaModel::create(const ModelSpec& spec, ComputeBackend& backend, const ModelOptions& options) {
  if (options.seq < 1 || options.micro_batch_size < 1)
    return make_error("model: sequence length and micro-batch size must be at least 1 (got seq " +
                      std::to_string(options.seq) + ", micro-batch " + std::to_string(options.micro_batch_size) + ")");
  if ((spec.dims.hidden / spec.dims.heads) % 2 != 0)
    return make_error("model: RoPE needs an even head dimension, got hidden " + std::to_string(spec.dims.hidden) +
                      " / heads " + std::to_string(spec.dims.heads));
  LlamaModel m;
  m.spec_ = &spec;
  m.be_ = &backend;
  m.options_ = options;
  m.cd_ = backend.compute_dtype();
  m.ab_ = dtype_bytes(m.cd_);
  m.slot_names_.resize(spec.tensors.size());
  for (const auto& mod : spec.modules) {
    std::vector<TensorSlot> slots;
    int64_t off = 0;
    for (int t : mod.tensors) {
      slots.push_back(TensorSlot{t, off, spec.tensors[t].elems});
      m.slot_names_[t] = short_name(spec.tensors[t].name);
      off += spec.tensors[t].elems;
    }
    m.slots_.push_back(std::move(slots));
  }
  // Every module kind must have the tensors its forward reads.
  const std::vector<std::pair<std::string, std::vector<std::string>>> needs = {
      {"embed", {"tok_embeddings.weight"}},
      {"attn",
       {"attention_norm.weight", "attention.wq.weight", "attention.wk.weight", "attention.wv.weight",
        "attention.wo.weight"}},
      {"mlp", {"ffn_norm.weight", "feed_forward.w1.weight", "feed_forward.w3.weight", "feed_forward.w2.weight"}},
      {"head", {"norm.weight", "output.weight"}},
  };
  for (size_t i = 0; i < spec.modules.size(); ++i)
    for (const auto& [kind, names] : needs)
      if (spec.modules[i].kind == kind)
        for (const auto& n : names)
          if (!m.slot(int(i), n))
            return make_error("model: module '" + spec.modules[i].name + "' has no tensor '" + n + "'");
  m.saved_.resize(spec.modules.size());
  return m;
}

const TensorSlot* LlamaModel::slot(int module, const std::string& name) const {
  for (const auto& s : slots_[module])
    if (slot_names_[s.tensor] == name) return &s;
  return nullptr;
}

void LlamaModel::init_module_range(int module, int64_t first, int64_t n, float* dst, uint64_t seed) const {
  const int64_t last = first + n;
  be_->zero(dst, n * 4);
  const double out_std = options_.init_std / std::sqrt(2.0 * spec_->dims.layers);
  for (const auto& s : slots_[module]) {
    const int64_t a = std::max(first, s.offset), b = std::min(last, s.offset + s.elems);
    if (a >= b) continue;
    const TensorSpec& t = spec_->tensors[s.tensor];
    const std::string& sn = slot_names_[s.tensor];
    float* out = dst + (a - first);
    if (t.shape.size() == 1) {
      be_->fill(out, b - a, 1.0f);  // RMSNorm weights start at one
    } else {
      const bool residual_out = sn == "attention.wo.weight" || sn == "feed_forward.w2.weight";
      be_->init_normal(out, b - a, fnv1a(t.name, seed), a - s.offset,
                       residual_out ? float(out_std) : options_.init_std);
    }
  }
}

Result<DeviceBuffer> LlamaModel::alloc(int64_t elems, MemCategory c, int elem_bytes) {
  return be_->allocate(elems * elem_bytes, c, /*zero=*/false);
}

// Activations and their gradients in the compute dtype; rstd and lse in fp32.
#define LINS_ALLOC_BYTES(dst, elems, cat, elem_bytes) \
  do {                                                \
    auto r_ = alloc((elems), (cat), (elem_bytes));    \
    if (!r_) return Status(make_error(r_.error()));   \
    dst = std::move(*r_);                             \
  } while (0)
#define LINS_ALLOC(dst, elems, cat) LINS_ALLOC_BYTES(dst, elems, cat, ab_)
#define LINS_ALLOC_F32(dst, elems, cat) LINS_ALLOC_BYTES(dst, elems, cat, 4)

Status LlamaModel::begin_micro_batch(const int32_t* host_ids, const int32_t* host_targets, float grad_scale) {
  const int64_t T = tokens(), H = spec_->dims.hidden;
  for (int64_t i = 0; i < T; ++i)
    if (host_ids[i] < 0 || host_ids[i] >= spec_->dims.vocab || host_targets[i] < 0 ||
        host_targets[i] >= spec_->dims.vocab)
      return make_error("model: token id out of the vocabulary of " + std::to_string(spec_->dims.vocab));
  grad_scale_ = grad_scale;
  if (ids_.empty()) {
    auto i = be_->allocate(T * 4, MemCategory::activation);
    auto t = be_->allocate(T * 4, MemCategory::activation);
    auto l = be_->allocate(8 * kLossSlots, MemCategory::activation);
    auto d = be_->allocate(T * H * ab_, MemCategory::activation);
    if (!i || !t || !l || !d) return make_error("model: out of memory for the micro-batch inputs");
    ids_ = std::move(*i), targets_ = std::move(*t), loss_slots_ = std::move(*l), dx_ = std::move(*d);
  }
  be_->upload(ids_.data(), host_ids, T * 4);
  be_->upload(targets_.data(), host_targets, T * 4);
  if (loss_pending_ == kLossSlots) download_losses();
  be_->zero(loss_slot(), 8);
  for (auto& s : saved_) s = std::make_unique<Saved>();
  return {};
}

void LlamaModel::end_micro_batch() {
  ++loss_pending_;
  for (auto& s : saved_) s.reset();
}

void LlamaModel::download_losses() {
  if (loss_pending_ == 0) return;
  double sums[kLossSlots];
  be_->download(sums, loss_slots_.data(), 8 * size_t(loss_pending_));
  for (int i = 0; i < loss_pending_; ++i) loss_host_ += sums[i];
  loss_pending_ = 0;
}

double LlamaModel::take_loss_sum() {
  download_losses();
  const double loss = loss_host_;
  loss_host_ = 0;
  return loss;
}

Status LlamaModel::forward(int m, const void* p) {
  const auto& kind = spec_->modules[m].kind;
  const int64_t T = tokens(), H = spec_->dims.hidden, V = spec_->dims.vocab;
  Saved& s = *saved_[m];
  const bool last = m + 1 == int(spec_->modules.size());
  if (!last && !saved_[m + 1]->input.empty()) return make_error("model: module forwarded twice in a micro-batch");
  if (kind == "embed") {
    LINS_ALLOC(saved_[m + 1]->input, T * H, MemCategory::activation);
    be_->embedding_forward(P(p, slot(m, "tok_embeddings.weight")), ids_.i32(), saved_[m + 1]->input.data(), T, H);
    return {};
  }
  if (s.input.empty()) return make_error("model: forward of '" + spec_->modules[m].name + "' before its input");
  if (kind == "attn" || kind == "mlp") {
    LINS_ALLOC(saved_[m + 1]->input, T * H, MemCategory::activation);
    be_->copy(saved_[m + 1]->input.data(), s.input.data(), T * H * ab_);  // residual
    LINS_TRY(kind == "attn" ? forward_attn(m, p, s, true) : forward_mlp(m, p, s, true));
    if (options_.recompute == Recompute::full) s.drop_intermediates();
    // Selective: the attention core's outputs go; q, k, v (its inputs) and everything outside the core stay.
    if (options_.recompute == Recompute::selective && kind == "attn") s.o.reset(), s.lse.reset();
    return {};
  }
  // head: logits are turned into dlogits in place by the loss, which is all backward needs from them.
  const void* normw = P(p, slot(m, "norm.weight"));
  const void* wout = P(p, slot(m, "output.weight"));
  LINS_ALLOC_F32(s.rstd, T, MemCategory::activation);
  LINS_ALLOC(s.xn, T * H, MemCategory::activation);
  LINS_ALLOC(s.dlogits, T * V, MemCategory::activation);
  be_->rmsnorm_forward(s.input.data(), normw, s.xn.data(), s.rstd.f32(), T, H, options_.norm_eps);
  be_->gemm(false, true, T, V, H, 1.0f, s.xn.data(), wout, 0.0f, s.dlogits.data(), cd_);
  be_->cross_entropy(s.dlogits.data(), targets_.i32(), s.dlogits.data(), T, V, grad_scale_, static_cast<double*>(loss_slot()));
  return {};
}

// Computes the attention block's intermediates from s.input into s; adds the block's output to the next module's
// input when `write_output` (false when recomputing in backward).
Status LlamaModel::forward_attn(int m, const void* p, Saved& s, bool write_output) {
  const int64_t T = tokens(), H = spec_->dims.hidden;
  const int heads = spec_->dims.heads, hd = int(H / heads), B = options_.micro_batch_size, S = options_.seq;
  LINS_ALLOC_F32(s.rstd, T, MemCategory::activation);
  LINS_ALLOC(s.xn, T * H, MemCategory::activation);
  LINS_ALLOC(s.q, T * H, MemCategory::activation);
  LINS_ALLOC(s.k, T * H, MemCategory::activation);
  LINS_ALLOC(s.v, T * H, MemCategory::activation);
  LINS_ALLOC(s.o, T * H, MemCategory::activation);
  LINS_ALLOC_F32(s.lse, int64_t(B) * heads * S, MemCategory::activation);
  be_->rmsnorm_forward(s.input.data(), P(p, slot(m, "attention_norm.weight")), s.xn.data(), s.rstd.f32(), T, H,
                       options_.norm_eps);
  be_->gemm(false, true, T, H, H, 1.0f, s.xn.data(), P(p, slot(m, "attention.wq.weight")), 0.0f, s.q.data(), cd_);
  be_->gemm(false, true, T, H, H, 1.0f, s.xn.data(), P(p, slot(m, "attention.wk.weight")), 0.0f, s.k.data(), cd_);
  be_->gemm(false, true, T, H, H, 1.0f, s.xn.data(), P(p, slot(m, "attention.wv.weight")), 0.0f, s.v.data(), cd_);
  be_->rope(s.q.data(), B, S, heads, hd, options_.rope_theta, false);
  be_->rope(s.k.data(), B, S, heads, hd, options_.rope_theta, false);
  be_->attention_forward(s.q.data(), s.k.data(), s.v.data(), s.o.data(), s.lse.f32(), B, S, heads, hd);
  if (write_output)  // next input already holds the residual: add wo(o)
    be_->gemm(false, true, T, H, H, 1.0f, s.o.data(), P(p, slot(m, "attention.wo.weight")), 1.0f,
              saved_[m + 1]->input.data(), cd_);
  return {};
}

Status LlamaModel::forward_mlp(int m, const void* p, Saved& s, bool write_output) {
  const int64_t T = tokens(), H = spec_->dims.hidden, F = spec_->dims.ffn;
  LINS_ALLOC_F32(s.rstd, T, MemCategory::activation);
  LINS_ALLOC(s.xn, T * H, MemCategory::activation);
  LINS_ALLOC(s.gate, T * F, MemCategory::activation);
  LINS_ALLOC(s.up, T * F, MemCategory::activation);
  LINS_ALLOC(s.act, T * F, MemCategory::activation);
  be_->rmsnorm_forward(s.input.data(), P(p, slot(m, "ffn_norm.weight")), s.xn.data(), s.rstd.f32(), T, H,
                       options_.norm_eps);
  be_->gemm(false, true, T, F, H, 1.0f, s.xn.data(), P(p, slot(m, "feed_forward.w1.weight")), 0.0f, s.gate.data(), cd_);
  be_->gemm(false, true, T, F, H, 1.0f, s.xn.data(), P(p, slot(m, "feed_forward.w3.weight")), 0.0f, s.up.data(), cd_);
  be_->swiglu_forward(s.gate.data(), s.up.data(), s.act.data(), T * F);
  if (write_output)
    be_->gemm(false, true, T, H, F, 1.0f, s.act.data(), P(p, slot(m, "feed_forward.w2.weight")), 1.0f,
              saved_[m + 1]->input.data(), cd_);
  return {};
}

Status LlamaModel::backward(int m, const void* p, float* g) {
  const auto& kind = spec_->modules[m].kind;
  const int64_t T = tokens(), H = spec_->dims.hidden, V = spec_->dims.vocab;
  Saved& s = *saved_[m];
  if (kind == "head") {
    if (s.dlogits.empty()) return make_error("model: backward of the head before its forward");
    DeviceBuffer dxn;
    LINS_ALLOC(dxn, T * H, MemCategory::activation);
    const TensorSlot* out = slot(m, "output.weight");
    const TensorSlot* norm = slot(m, "norm.weight");
    be_->gemm(true, false, V, H, T, 1.0f, s.dlogits.data(), s.xn.data(), 1.0f, g + out->offset, DType::fp32);
    be_->gemm(false, false, T, H, V, 1.0f, s.dlogits.data(), P(p, out), 0.0f, dxn.data(), cd_);
    be_->rmsnorm_backward(dxn.data(), s.input.data(), P(p, norm), s.rstd.f32(), dx_.data(), g + norm->offset, T, H);
  } else if (kind == "attn" || kind == "mlp") {
    if (s.input.empty()) return make_error("model: backward of '" + spec_->modules[m].name + "' before its forward");
    if (options_.recompute == Recompute::full)
      LINS_TRY(kind == "attn" ? forward_attn(m, p, s, false) : forward_mlp(m, p, s, false));
    if (options_.recompute == Recompute::selective && kind == "attn") LINS_TRY(recompute_attention_core(s));
    LINS_TRY(kind == "attn" ? backward_attn(m, p, g, s) : backward_mlp(m, p, g, s));
  } else {  // embed
    be_->embedding_backward(dx_.data(), ids_.i32(), g + slot(m, "tok_embeddings.weight")->offset, T, H);
  }
  saved_[m]->drop_intermediates();
  if (m + 1 < int(saved_.size())) saved_[m + 1]->input.reset();  // the output is no longer needed
  return {};
}

Status LlamaModel::recompute_attention_core(Saved& s) {
  const int64_t T = tokens(), H = spec_->dims.hidden;
  const int heads = spec_->dims.heads, hd = int(H / heads), B = options_.micro_batch_size, S = options_.seq;
  if (s.q.empty() || s.k.empty() || s.v.empty()) return make_error("model: attention recomputed without its q, k, v");
  LINS_ALLOC(s.o, T * H, MemCategory::activation);
  LINS_ALLOC_F32(s.lse, int64_t(B) * heads * S, MemCategory::activation);
  // The same kernel on the same inputs as in forward: o and lse come back bit for bit.
  be_->attention_forward(s.q.data(), s.k.data(), s.v.data(), s.o.data(), s.lse.f32(), B, S, heads, hd);
  return {};
}

Status LlamaModel::backward_attn(int m, const void* p, float* g, Saved& s) {
  const int64_t T = tokens(), H = spec_->dims.hidden;
  const int heads = spec_->dims.heads, hd = int(H / heads), B = options_.micro_batch_size, S = options_.seq;
  const TensorSlot *nw = slot(m, "attention_norm.weight"), *wq = slot(m, "attention.wq.weight"),
                   *wk = slot(m, "attention.wk.weight"), *wv = slot(m, "attention.wv.weight"),
                   *wo = slot(m, "attention.wo.weight");
  DeviceBuffer dout, dq, dk, dv, dxn;  // [T, H] each
  LINS_ALLOC(dout, T * H, MemCategory::activation);
  LINS_ALLOC(dq, T * H, MemCategory::activation);
  LINS_ALLOC(dk, T * H, MemCategory::activation);
  LINS_ALLOC(dv, T * H, MemCategory::activation);
  LINS_ALLOC(dxn, T * H, MemCategory::activation);
  void* dx = dx_.data();
  be_->gemm(false, false, T, H, H, 1.0f, dx, P(p, wo), 0.0f, dout.data(), cd_);
  be_->gemm(true, false, H, H, T, 1.0f, dx, s.o.data(), 1.0f, g + wo->offset, DType::fp32);
  be_->attention_backward(dout.data(), s.q.data(), s.k.data(), s.v.data(), s.o.data(), s.lse.f32(), dq.data(),
                          dk.data(), dv.data(), B, S, heads, hd);
  be_->rope(dq.data(), B, S, heads, hd, options_.rope_theta, true);
  be_->rope(dk.data(), B, S, heads, hd, options_.rope_theta, true);
  be_->gemm(true, false, H, H, T, 1.0f, dq.data(), s.xn.data(), 1.0f, g + wq->offset, DType::fp32);
  be_->gemm(true, false, H, H, T, 1.0f, dk.data(), s.xn.data(), 1.0f, g + wk->offset, DType::fp32);
  be_->gemm(true, false, H, H, T, 1.0f, dv.data(), s.xn.data(), 1.0f, g + wv->offset, DType::fp32);
  be_->gemm(false, false, T, H, H, 1.0f, dq.data(), P(p, wq), 0.0f, dxn.data(), cd_);
  be_->gemm(false, false, T, H, H, 1.0f, dk.data(), P(p, wk), 1.0f, dxn.data(), cd_);
  be_->gemm(false, false, T, H, H, 1.0f, dv.data(), P(p, wv), 1.0f, dxn.data(), cd_);
  // The branch's input gradient (into dout, free again) is added to the residual gradient.
  be_->rmsnorm_backward(dxn.data(), s.input.data(), P(p, nw), s.rstd.f32(), dout.data(), g + nw->offset, T, H);
  be_->add(dx, dout.data(), T * H);
  return {};
}

Status LlamaModel::backward_mlp(int m, const void* p, float* g, Saved& s) {
  const int64_t T = tokens(), H = spec_->dims.hidden, F = spec_->dims.ffn;
  const TensorSlot *nw = slot(m, "ffn_norm.weight"), *w1 = slot(m, "feed_forward.w1.weight"),
                   *w3 = slot(m, "feed_forward.w3.weight"), *w2 = slot(m, "feed_forward.w2.weight");
  DeviceBuffer dgate, dup, dxn, dbranch;
  LINS_ALLOC(dgate, T * F, MemCategory::activation);
  LINS_ALLOC(dup, T * F, MemCategory::activation);
  LINS_ALLOC(dxn, T * H, MemCategory::activation);
  LINS_ALLOC(dbranch, T * H, MemCategory::activation);
  void* dx = dx_.data();
  be_->gemm(false, false, T, F, H, 1.0f, dx, P(p, w2), 0.0f, dgate.data(), cd_);  // d(act), turned into d(gate)
  be_->gemm(true, false, H, F, T, 1.0f, dx, s.act.data(), 1.0f, g + w2->offset, DType::fp32);
  be_->swiglu_backward(dgate.data(), s.gate.data(), s.up.data(), dgate.data(), dup.data(), T * F);
  be_->gemm(true, false, F, H, T, 1.0f, dgate.data(), s.xn.data(), 1.0f, g + w1->offset, DType::fp32);
  be_->gemm(true, false, F, H, T, 1.0f, dup.data(), s.xn.data(), 1.0f, g + w3->offset, DType::fp32);
  be_->gemm(false, false, T, H, F, 1.0f, dgate.data(), P(p, w1), 0.0f, dxn.data(), cd_);
  be_->gemm(false, false, T, H, F, 1.0f, dup.data(), P(p, w3), 1.0f, dxn.data(), cd_);
  be_->rmsnorm_backward(dxn.data(), s.input.data(), P(p, nw), s.rstd.f32(), dbranch.data(), g + nw->offset, T, H);
  be_->add(dx, dbranch.data(), T * H);
  return {};
}

}  // namespace lins
