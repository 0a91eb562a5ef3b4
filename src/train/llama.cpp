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

#define LINS_TRY(expr)                    \
  do {                                    \
    if (auto s_ = (expr); !s_) return s_; \
  } while (0)

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

#define LINS_ALLOC(dst, elems, cat)                 \
  do {                                              \
    auto r_ = alloc((elems), (cat));                \
    if (!r_) return Status(make_error(r_.error())); \
    dst = std::move(*r_);                           \
  } while (0)

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
    auto l = be_->allocate(8, MemCategory::activation);
    auto d = be_->allocate(T * H * 4, MemCategory::activation);
    if (!i || !t || !l || !d) return make_error("model: out of memory for the micro-batch inputs");
    ids_ = std::move(*i), targets_ = std::move(*t), loss_sum_ = std::move(*l), dx_ = std::move(*d);
  }
  be_->upload(ids_.data(), host_ids, T * 4);
  be_->upload(targets_.data(), host_targets, T * 4);
  be_->zero(loss_sum_.data(), 8);
  for (auto& s : saved_) s = std::make_unique<Saved>();
  return {};
}

double LlamaModel::end_micro_batch() {
  double loss = 0.0;
  be_->download(&loss, loss_sum_.data(), 8);
  for (auto& s : saved_) s.reset();
  return loss;
}

Status LlamaModel::forward(int m, const float* p) {
  const auto& kind = spec_->modules[m].kind;
  const int64_t T = tokens(), H = spec_->dims.hidden, V = spec_->dims.vocab;
  Saved& s = *saved_[m];
  const bool last = m + 1 == int(spec_->modules.size());
  if (!last && !saved_[m + 1]->input.empty()) return make_error("model: module forwarded twice in a micro-batch");
  if (kind == "embed") {
    LINS_ALLOC(saved_[m + 1]->input, T * H, MemCategory::activation);
    be_->embedding_forward(p + slot(m, "tok_embeddings.weight")->offset, ids_.i32(), saved_[m + 1]->input.f32(), T, H);
    return {};
  }
  if (s.input.empty()) return make_error("model: forward of '" + spec_->modules[m].name + "' before its input");
  if (kind == "attn" || kind == "mlp") {
    const bool keep = !options_.recompute;
    LINS_ALLOC(saved_[m + 1]->input, T * H, MemCategory::activation);
    be_->copy(saved_[m + 1]->input.data(), s.input.data(), T * H * 4);  // residual
    LINS_TRY(kind == "attn" ? forward_attn(m, p, s, true) : forward_mlp(m, p, s, true));
    if (!keep) s.drop_intermediates();
    return {};
  }
  // head: logits are turned into dlogits in place by the loss, which is all backward needs from them.
  const float* normw = p + slot(m, "norm.weight")->offset;
  const float* wout = p + slot(m, "output.weight")->offset;
  LINS_ALLOC(s.rstd, T, MemCategory::activation);
  LINS_ALLOC(s.xn, T * H, MemCategory::activation);
  LINS_ALLOC(s.dlogits, T * V, MemCategory::activation);
  be_->rmsnorm_forward(s.input.f32(), normw, s.xn.f32(), s.rstd.f32(), T, H, options_.norm_eps);
  be_->gemm(false, true, T, V, H, 1.0f, s.xn.f32(), wout, 0.0f, s.dlogits.f32());
  be_->cross_entropy(s.dlogits.f32(), targets_.i32(), s.dlogits.f32(), T, V, grad_scale_, loss_sum_.f64());
  return {};
}

// Computes the attention block's intermediates from s.input into s; adds the block's output to the next module's
// input when `write_output` (false when recomputing in backward).
Status LlamaModel::forward_attn(int m, const float* p, Saved& s, bool write_output) {
  const int64_t T = tokens(), H = spec_->dims.hidden;
  const int heads = spec_->dims.heads, hd = int(H / heads), B = options_.micro_batch_size, S = options_.seq;
  LINS_ALLOC(s.rstd, T, MemCategory::activation);
  LINS_ALLOC(s.xn, T * H, MemCategory::activation);
  LINS_ALLOC(s.q, T * H, MemCategory::activation);
  LINS_ALLOC(s.k, T * H, MemCategory::activation);
  LINS_ALLOC(s.v, T * H, MemCategory::activation);
  LINS_ALLOC(s.o, T * H, MemCategory::activation);
  LINS_ALLOC(s.lse, int64_t(B) * heads * S, MemCategory::activation);
  be_->rmsnorm_forward(s.input.f32(), p + slot(m, "attention_norm.weight")->offset, s.xn.f32(), s.rstd.f32(), T, H,
                       options_.norm_eps);
  be_->gemm(false, true, T, H, H, 1.0f, s.xn.f32(), p + slot(m, "attention.wq.weight")->offset, 0.0f, s.q.f32());
  be_->gemm(false, true, T, H, H, 1.0f, s.xn.f32(), p + slot(m, "attention.wk.weight")->offset, 0.0f, s.k.f32());
  be_->gemm(false, true, T, H, H, 1.0f, s.xn.f32(), p + slot(m, "attention.wv.weight")->offset, 0.0f, s.v.f32());
  be_->rope(s.q.f32(), B, S, heads, hd, options_.rope_theta, false);
  be_->rope(s.k.f32(), B, S, heads, hd, options_.rope_theta, false);
  be_->attention_forward(s.q.f32(), s.k.f32(), s.v.f32(), s.o.f32(), s.lse.f32(), B, S, heads, hd);
  if (write_output)  // next input already holds the residual: add wo(o)
    be_->gemm(false, true, T, H, H, 1.0f, s.o.f32(), p + slot(m, "attention.wo.weight")->offset, 1.0f,
              saved_[m + 1]->input.f32());
  return {};
}

Status LlamaModel::forward_mlp(int m, const float* p, Saved& s, bool write_output) {
  const int64_t T = tokens(), H = spec_->dims.hidden, F = spec_->dims.ffn;
  LINS_ALLOC(s.rstd, T, MemCategory::activation);
  LINS_ALLOC(s.xn, T * H, MemCategory::activation);
  LINS_ALLOC(s.gate, T * F, MemCategory::activation);
  LINS_ALLOC(s.up, T * F, MemCategory::activation);
  LINS_ALLOC(s.act, T * F, MemCategory::activation);
  be_->rmsnorm_forward(s.input.f32(), p + slot(m, "ffn_norm.weight")->offset, s.xn.f32(), s.rstd.f32(), T, H,
                       options_.norm_eps);
  be_->gemm(false, true, T, F, H, 1.0f, s.xn.f32(), p + slot(m, "feed_forward.w1.weight")->offset, 0.0f, s.gate.f32());
  be_->gemm(false, true, T, F, H, 1.0f, s.xn.f32(), p + slot(m, "feed_forward.w3.weight")->offset, 0.0f, s.up.f32());
  be_->swiglu_forward(s.gate.f32(), s.up.f32(), s.act.f32(), T * F);
  if (write_output)
    be_->gemm(false, true, T, H, F, 1.0f, s.act.f32(), p + slot(m, "feed_forward.w2.weight")->offset, 1.0f,
              saved_[m + 1]->input.f32());
  return {};
}

Status LlamaModel::backward(int m, const float* p, float* g) {
  const auto& kind = spec_->modules[m].kind;
  const int64_t T = tokens(), H = spec_->dims.hidden, V = spec_->dims.vocab;
  Saved& s = *saved_[m];
  if (kind == "head") {
    if (s.dlogits.empty()) return make_error("model: backward of the head before its forward");
    DeviceBuffer dxn;
    LINS_ALLOC(dxn, T * H, MemCategory::buffer);
    const TensorSlot* out = slot(m, "output.weight");
    const TensorSlot* norm = slot(m, "norm.weight");
    be_->gemm(true, false, V, H, T, 1.0f, s.dlogits.f32(), s.xn.f32(), 1.0f, g + out->offset);
    be_->gemm(false, false, T, H, V, 1.0f, s.dlogits.f32(), p + out->offset, 0.0f, dxn.f32());
    be_->rmsnorm_backward(dxn.f32(), s.input.f32(), p + norm->offset, s.rstd.f32(), dx_.f32(), g + norm->offset, T, H);
  } else if (kind == "attn" || kind == "mlp") {
    if (s.input.empty()) return make_error("model: backward of '" + spec_->modules[m].name + "' before its forward");
    if (options_.recompute) LINS_TRY(kind == "attn" ? forward_attn(m, p, s, false) : forward_mlp(m, p, s, false));
    LINS_TRY(kind == "attn" ? backward_attn(m, p, g, s) : backward_mlp(m, p, g, s));
  } else {  // embed
    be_->embedding_backward(dx_.f32(), ids_.i32(), g + slot(m, "tok_embeddings.weight")->offset, T, H);
  }
  saved_[m]->drop_intermediates();
  if (m + 1 < int(saved_.size())) saved_[m + 1]->input.reset();  // the output is no longer needed
  return {};
}

Status LlamaModel::backward_attn(int m, const float* p, float* g, Saved& s) {
  const int64_t T = tokens(), H = spec_->dims.hidden;
  const int heads = spec_->dims.heads, hd = int(H / heads), B = options_.micro_batch_size, S = options_.seq;
  const TensorSlot *nw = slot(m, "attention_norm.weight"), *wq = slot(m, "attention.wq.weight"),
                   *wk = slot(m, "attention.wk.weight"), *wv = slot(m, "attention.wv.weight"),
                   *wo = slot(m, "attention.wo.weight");
  DeviceBuffer dout, dq, dk, dv, dxn;  // [T, H] each
  LINS_ALLOC(dout, T * H, MemCategory::buffer);
  LINS_ALLOC(dq, T * H, MemCategory::buffer);
  LINS_ALLOC(dk, T * H, MemCategory::buffer);
  LINS_ALLOC(dv, T * H, MemCategory::buffer);
  LINS_ALLOC(dxn, T * H, MemCategory::buffer);
  float* dx = dx_.f32();
  be_->gemm(false, false, T, H, H, 1.0f, dx, p + wo->offset, 0.0f, dout.f32());
  be_->gemm(true, false, H, H, T, 1.0f, dx, s.o.f32(), 1.0f, g + wo->offset);
  be_->attention_backward(dout.f32(), s.q.f32(), s.k.f32(), s.v.f32(), s.o.f32(), s.lse.f32(), dq.f32(), dk.f32(),
                          dv.f32(), B, S, heads, hd);
  be_->rope(dq.f32(), B, S, heads, hd, options_.rope_theta, true);
  be_->rope(dk.f32(), B, S, heads, hd, options_.rope_theta, true);
  be_->gemm(true, false, H, H, T, 1.0f, dq.f32(), s.xn.f32(), 1.0f, g + wq->offset);
  be_->gemm(true, false, H, H, T, 1.0f, dk.f32(), s.xn.f32(), 1.0f, g + wk->offset);
  be_->gemm(true, false, H, H, T, 1.0f, dv.f32(), s.xn.f32(), 1.0f, g + wv->offset);
  be_->gemm(false, false, T, H, H, 1.0f, dq.f32(), p + wq->offset, 0.0f, dxn.f32());
  be_->gemm(false, false, T, H, H, 1.0f, dk.f32(), p + wk->offset, 1.0f, dxn.f32());
  be_->gemm(false, false, T, H, H, 1.0f, dv.f32(), p + wv->offset, 1.0f, dxn.f32());
  // The branch's input gradient (into dout, free again) is added to the residual gradient.
  be_->rmsnorm_backward(dxn.f32(), s.input.f32(), p + nw->offset, s.rstd.f32(), dout.f32(), g + nw->offset, T, H);
  be_->add(dx, dout.f32(), T * H);
  return {};
}

Status LlamaModel::backward_mlp(int m, const float* p, float* g, Saved& s) {
  const int64_t T = tokens(), H = spec_->dims.hidden, F = spec_->dims.ffn;
  const TensorSlot *nw = slot(m, "ffn_norm.weight"), *w1 = slot(m, "feed_forward.w1.weight"),
                   *w3 = slot(m, "feed_forward.w3.weight"), *w2 = slot(m, "feed_forward.w2.weight");
  DeviceBuffer dgate, dup, dxn, dbranch;
  LINS_ALLOC(dgate, T * F, MemCategory::buffer);
  LINS_ALLOC(dup, T * F, MemCategory::buffer);
  LINS_ALLOC(dxn, T * H, MemCategory::buffer);
  LINS_ALLOC(dbranch, T * H, MemCategory::buffer);
  float* dx = dx_.f32();
  be_->gemm(false, false, T, F, H, 1.0f, dx, p + w2->offset, 0.0f, dgate.f32());  // d(act), turned into d(gate)
  be_->gemm(true, false, H, F, T, 1.0f, dx, s.act.f32(), 1.0f, g + w2->offset);
  be_->swiglu_backward(dgate.f32(), s.gate.f32(), s.up.f32(), dgate.f32(), dup.f32(), T * F);
  be_->gemm(true, false, F, H, T, 1.0f, dgate.f32(), s.xn.f32(), 1.0f, g + w1->offset);
  be_->gemm(true, false, F, H, T, 1.0f, dup.f32(), s.xn.f32(), 1.0f, g + w3->offset);
  be_->gemm(false, false, T, H, F, 1.0f, dgate.f32(), p + w1->offset, 0.0f, dxn.f32());
  be_->gemm(false, false, T, H, F, 1.0f, dup.f32(), p + w3->offset, 1.0f, dxn.f32());
  be_->rmsnorm_backward(dxn.f32(), s.input.f32(), p + nw->offset, s.rstd.f32(), dbranch.f32(), g + nw->offset, T, H);
  be_->add(dx, dbranch.f32(), T * H);
  return {};
}

}  // namespace lins
