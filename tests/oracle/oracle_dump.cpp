// oracle_dump: runs real training steps of lins (the Executor, DDP on one rank, CPU backend) and writes what an
// independent reference needs to check them: the initial parameters, each step's loss, every parameter's gradient as
// the optimizer received it, and the parameters (fp32 master weights and the stored P) after each AdamW update.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model/model_spec.h"
#include "core/model/plan.h"
#include "core/model/topology.h"
#include "core/util/bf16.h"
#include "core/util/cli.h"
#include "core/util/json.h"
#include "train/backend.h"
#include "train/executor.h"

namespace lins {
namespace {

namespace fs = std::filesystem;

// One AdamW call of the step: the gradient it read and the master weights it wrote, for n owned elements.
struct AdamwCall {
  const float* master = nullptr;  // where the call's range starts in the owned buffers
  std::vector<float> grad;        // widened to fp32 when stored in bf16 (exact)
  std::vector<float> master_after;
};

// A compute backend that forwards every call to the CPU backend and records each AdamW call's inputs and outputs.
// The executor keeps its gradients and master weights private; the backend interface is where they cross into the
// optimizer, so recording there observes the production step without changing it. Buffers are allocated by (and
// returned to) the wrapped backend, so this class never owns one.
class RecordingBackend final : public ComputeBackend {
 public:
  explicit RecordingBackend(std::unique_ptr<ComputeBackend> inner) : in_(std::move(inner)) {}
  std::vector<AdamwCall> calls;

  const char* name() const override { return in_->name(); }
  Result<DeviceBuffer> allocate(int64_t bytes, MemCategory c, bool zero) override {
    return in_->allocate(bytes, c, zero);
  }
  void upload(void* d, const void* s, int64_t b) override { in_->upload(d, s, b); }
  void download(void* d, const void* s, int64_t b) override { in_->download(d, s, b); }
  void copy(void* d, const void* s, int64_t b) override { in_->copy(d, s, b); }
  void zero(void* d, int64_t b) override { in_->zero(d, b); }
  void fill(float* d, int64_t n, float v) override { in_->fill(d, n, v); }
  void init_normal(float* d, int64_t n, uint64_t seed, int64_t first, float std) override {
    in_->init_normal(d, n, seed, first, std);
  }
  Event record_event() override { return in_->record_event(); }
  double elapsed_s(const Event& a, const Event& b) override { return in_->elapsed_s(a, b); }
  void synchronize() override { in_->synchronize(); }
  void* native_stream() override { return in_->native_stream(); }
  DType compute_dtype() const override { return in_->compute_dtype(); }
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a, const void* b, float beta,
            void* c, DType c_dtype) override {
    in_->gemm(ta, tb, m, n, k, alpha, a, b, beta, c, c_dtype);
  }
  void rmsnorm_forward(const void* x, const void* w, void* y, float* rstd, int64_t rows, int64_t dim,
                       float eps) override {
    in_->rmsnorm_forward(x, w, y, rstd, rows, dim, eps);
  }
  void rmsnorm_backward(const void* dy, const void* x, const void* w, const float* rstd, void* dx, float* dw,
                        int64_t rows, int64_t dim) override {
    in_->rmsnorm_backward(dy, x, w, rstd, dx, dw, rows, dim);
  }
  void swiglu_forward(const void* gate, const void* up, void* out, int64_t n) override {
    in_->swiglu_forward(gate, up, out, n);
  }
  void swiglu_backward(const void* dout, const void* gate, const void* up, void* dgate, void* dup, int64_t n) override {
    in_->swiglu_backward(dout, gate, up, dgate, dup, n);
  }
  void rope(void* x, int batch, int seq, int heads, int head_dim, float theta, bool inverse) override {
    in_->rope(x, batch, seq, heads, head_dim, theta, inverse);
  }
  void attention_forward(const void* q, const void* k, const void* v, void* out, float* lse, int batch, int seq,
                         int heads, int head_dim) override {
    in_->attention_forward(q, k, v, out, lse, batch, seq, heads, head_dim);
  }
  void attention_backward(const void* dout, const void* q, const void* k, const void* v, const void* out,
                          const float* lse, void* dq, void* dk, void* dv, int batch, int seq, int heads,
                          int head_dim) override {
    in_->attention_backward(dout, q, k, v, out, lse, dq, dk, dv, batch, seq, heads, head_dim);
  }
  void cross_entropy(const void* logits, const int32_t* targets, void* dlogits, int64_t rows, int64_t vocab,
                     float grad_scale, double* loss_sum) override {
    in_->cross_entropy(logits, targets, dlogits, rows, vocab, grad_scale, loss_sum);
  }
  void embedding_forward(const void* table, const int32_t* ids, void* out, int64_t n, int64_t dim) override {
    in_->embedding_forward(table, ids, out, n, dim);
  }
  void embedding_backward(const void* dout, const int32_t* ids, float* dtable, int64_t n, int64_t dim) override {
    in_->embedding_backward(dout, ids, dtable, n, dim);
  }
  void adamw(float* master, const void* grad, DType grad_dtype, float* m, float* v, void* param_out, DType param_dtype,
             int64_t n, const kernels::cpu::AdamWConfig& cfg, int step) override {
    AdamwCall call;
    call.master = master;
    call.grad.resize(size_t(n));
    // The CPU backend's device memory is host memory: the pointers can be read directly.
    if (grad_dtype == DType::fp32)
      std::copy_n(static_cast<const float*>(grad), n, call.grad.data());
    else
      kernels::cpu::cast_bf16_to_fp32(static_cast<const uint16_t*>(grad), call.grad.data(), n);
    in_->adamw(master, grad, grad_dtype, m, v, param_out, param_dtype, n, cfg, step);
    call.master_after.assign(master, master + n);
    calls.push_back(std::move(call));
  }
  void convert(const void* src, DType sd, void* dst, DType dd, int64_t n, bool accumulate) override {
    in_->convert(src, sd, dst, dd, n, accumulate);
  }

 protected:
  void release(void*, int64_t, MemCategory) override {}  // never called: every buffer belongs to in_

 private:
  std::unique_ptr<ComputeBackend> in_;
};

// A little-endian fp32 .npy file (format 1.0), readable with numpy.load.
Status write_npy(const fs::path& path, const float* data, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();  // (3,) for one dimension, (3,4) for two
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64, ending in '\n'.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  const uint16_t len = uint16_t(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << header;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  f.write(reinterpret_cast<const char*>(data), std::streamsize(n * 4));
  if (!f) return make_error("oracle_dump: cannot write " + path.string());
  return {};
}

// Where each tensor starts in the local buffer of a one-rank run (every module whole, in forward order).
Result<std::vector<int64_t>> tensor_offsets(const ModelSpec& spec, const Executor& ex) {
  std::vector<int64_t> offsets(spec.tensors.size(), -1);
  for (const ModuleShard& msh : ex.layout().modules) {
    if (msh.module_offset != 0 || msh.shard_elems < spec.modules[msh.module].elems)
      return make_error("oracle_dump: module '" + spec.modules[msh.module].name + "' is not whole on one rank");
    for (int t : spec.modules[msh.module].tensors) {
      std::string short_name = spec.tensors[t].name;
      if (short_name.rfind("layers.", 0) == 0) short_name = short_name.substr(short_name.find('.', 7) + 1);
      const TensorSlot* slot = ex.model().slot(msh.module, short_name);
      if (!slot) return make_error("oracle_dump: no slot for tensor '" + spec.tensors[t].name + "'");
      offsets[t] = msh.local_offset + slot->offset;
    }
  }
  return offsets;
}

Status write_tensors(const ModelSpec& spec, const std::vector<int64_t>& offsets, const std::vector<float>& local,
                     const fs::path& dir) {
  fs::create_directories(dir);
  for (size_t t = 0; t < spec.tensors.size(); ++t)
    if (auto s = write_npy(dir / (spec.tensors[t].name + ".npy"), local.data() + offsets[t], spec.tensors[t].shape); !s)
      return s;
  return {};
}

// The recorded AdamW calls, laid side by side in owned order. On one rank every element of the local buffer is
// owned, in local order, so the owned offset of an element is its local offset; checked here, not assumed.
Status gather_calls(const std::vector<AdamwCall>& calls, int64_t local_elems, std::vector<float>* grad,
                    std::vector<float>* master) {
  if (calls.empty()) return make_error("oracle_dump: the step made no AdamW call");
  const float* base = calls.front().master;
  for (const auto& c : calls) base = std::min(base, c.master);
  grad->assign(size_t(local_elems), 0.0f);
  master->assign(size_t(local_elems), 0.0f);
  int64_t covered = 0;
  for (const auto& c : calls) {
    const int64_t off = c.master - base, n = int64_t(c.grad.size());
    if (off != covered) return make_error("oracle_dump: AdamW calls do not cover the owned buffer in order");
    std::copy(c.grad.begin(), c.grad.end(), grad->begin() + off);
    std::copy(c.master_after.begin(), c.master_after.end(), master->begin() + off);
    covered += n;
  }
  if (covered != local_elems)
    return make_error("oracle_dump: AdamW updated " + std::to_string(covered) + " elements of a local buffer of " +
                      std::to_string(local_elems));
  return {};
}

const CommandSpec kSpec{
    "oracle_dump",
    "Run one lins training step on one rank and write its loss, gradients and updated parameters",
    "oracle_dump --out DIR [options]",
    {
        {"model", 0, "NAME", "tiny", "model preset (tiny, small, ...)"},
        {"precision", 0, "DTYPE", "fp32", "storage of P and G: fp32, or bf16 (with fp32 master weights and moments)"},
        {"micro-batches", 0, "M", "1", "micro-batches accumulated into the step's gradient"},
        {"micro-batch-size", 0, "B", "2", "sequences per micro-batch"},
        {"seq", 0, "S", "16", "tokens per sequence"},
        {"seed", 0, "N", "1", "seed of the initial weights and the data"},
        {"lr", 0, "RATE", "0.001", "AdamW learning rate"},
        {"steps", 0, "N", "2",
         "optimizer steps (AdamW's betas show only from the second: the first normalises them away)"},
        {"out", 0, "DIR", "", "output folder: meta.json, init/ and per step stepN/{grad,master,param}/ (.npy files)"},
    },
    "meta.json's loss lists each step's mean token loss over the global batch. In stepN/, grad/ holds the gradient\n"
    "the optimizer read (accumulated over the micro-batches, in the storage dtype widened to fp32); master/ the fp32\n"
    "master weights after the update; param/ the stored parameters P after it (bf16 widened to fp32 with\n"
    "--precision bf16)."};

int run(int argc, char** argv) {
  auto args = parse_args(kSpec, std::vector<std::string>(argv + 1, argv + argc));
  if (!args) return std::cerr << args.error() << "\n", 2;
  if (args->flag("help")) return std::cout << help_text(kSpec), 0;
  auto fail = [](const std::string& m) { return std::cerr << m << "\n", 1; };
  if (args->get("out").empty()) return fail("oracle_dump: --out is required");
  auto model = make_model_preset(args->get("model"));
  if (!model) return fail(model.error());
  const std::string precision = args->get("precision");
  if (precision != "fp32" && precision != "bf16") return fail("--precision: valid dtypes are fp32 and bf16");
  auto M = args->get_positive_int("micro-batches");
  auto B = args->get_positive_int("micro-batch-size");
  auto S = args->get_positive_int("seq");
  auto seed = args->get_size("seed");
  auto lr = args->get_double("lr");
  auto steps = args->get_positive_int("steps");
  for (const std::string* e :
       {M ? nullptr : &M.error(), B ? nullptr : &B.error(), S ? nullptr : &S.error(), seed ? nullptr : &seed.error(),
        lr ? nullptr : &lr.error(), steps ? nullptr : &steps.error()})
    if (e) return fail(*e);

  ExecutorOptions o;
  o.seq = *S;
  o.micro_batch_size = *B;
  o.micro_batches = *M;
  o.seed = *seed;
  o.adamw.lr = float(*lr);
  o.state_dtype = precision == "bf16" ? DType::bf16 : DType::fp32;
  RecordingBackend be(make_cpu_backend(DType::fp32));  // compute stays fp32 with bf16 storage, as `lins step` on CPU
  const Topology one{1, 1};
  auto plan = parse_plan("ddp", one);
  if (!plan) return fail(plan.error());
  auto ex = Executor::create(*model, *plan, one, 0, nullptr, be, o);
  if (!ex) return fail(ex.error());
  auto offsets = tensor_offsets(*model, **ex);
  if (!offsets) return fail(offsets.error());

  const fs::path out = args->get("out");
  if (auto s = write_tensors(*model, *offsets, (*ex)->local_parameters(), out / "init"); !s) return fail(s.error());
  Json losses = Json::array();
  for (int step = 1; step <= *steps; ++step) {
    be.calls.clear();
    auto st = (*ex)->step();
    if (!st) return fail(st.error());
    if (auto s = (*ex)->finish(); !s) return fail(s.error());
    losses.push_back(st->loss_sum / double((*ex)->global_tokens()));
    std::vector<float> grad, master;
    if (auto s = gather_calls(be.calls, (*ex)->layout().local_elems, &grad, &master); !s) return fail(s.error());
    const fs::path dir = out / ("step" + std::to_string(step));
    if (auto s = write_tensors(*model, *offsets, grad, dir / "grad"); !s) return fail(s.error());
    if (auto s = write_tensors(*model, *offsets, master, dir / "master"); !s) return fail(s.error());
    if (auto s = write_tensors(*model, *offsets, (*ex)->local_parameters(), dir / "param"); !s) return fail(s.error());
  }

  Json meta = Json::object();
  meta["model"] = args->get("model");
  meta["precision"] = precision;
  meta["micro_batches"] = *M;
  meta["micro_batch_size"] = *B;
  meta["seq"] = *S;
  meta["seed"] = (long long)*seed;
  meta["steps"] = *steps;
  meta["lr"] = double(o.adamw.lr);
  meta["beta1"] = double(o.adamw.beta1);
  meta["beta2"] = double(o.adamw.beta2);
  meta["eps"] = double(o.adamw.eps);
  meta["weight_decay"] = double(o.adamw.weight_decay);
  meta["global_tokens"] = (long long)(*ex)->global_tokens();
  meta["loss"] = std::move(losses);
  std::ofstream(out / "meta.json") << json_dump(meta) << "\n";
  return 0;
}

}  // namespace
}  // namespace lins

int main(int argc, char** argv) { return lins::run(argc, argv); }
