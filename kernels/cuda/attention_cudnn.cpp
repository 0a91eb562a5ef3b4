// cuDNN 9 fused attention behind the flash kernels' interface (attention_cudnn.h): one cudnn_frontend graph per
// (device, shape, direction), built on first use and kept. LINS_CUDNN_ATTENTION (set by kernels/CMakeLists.txt) is 1
// when CMake found cuDNN 9 and the frontend headers; with 0 this file is the stubs alone.
//
// Conventions, matched to the flash kernels (attention.cu) and the CPU reference:
// - Layout [batch, seq, heads, head_dim] (token-major): the frontend's logical dims are [b, h, s, d], so the strides
//   are {s*h*d, d, h*d, 1}; lse [batch, heads, seq] is cuDNN's Stats [b, h, s, 1] with strides {h*s, s, 1, 1}.
// - Scale 1/sqrt(head_dim), computed in fp32 as attention.cu does, passed as the graph's attn_scale (applied to Q K^T
//   before the mask and the softmax).
// - Causal: top-left diagonal, right bound 0: query i sees keys 0..i (seq_q = seq_kv, so top-left = bottom-right).
// - lse: the composite SDPA graph of the frontend (node/scaled_dot_product_flash_attention.h, softmax.h) computes
//   Stats = max + log(sum(exp(S - max))) over the scaled, masked scores S with natural exp and log: the natural-log
//   log-sum-exp of the scaled scores, which is what the flash kernels store ((m + log2 l) * ln 2 in attention.cu).
//   So no conversion in either direction, and either forward's lse feeds either backward. The composite
//   implementation is asked for by name so that this reading of the graph stays the one that runs.
// - bf16 inputs and outputs, fp32 intermediates and compute; no dropout, no bias.
//
// State per device (never freed: destroying handles from static destructors could run after the CUDA runtime has gone):
// one cuDNN handle, one workspace grown as needed, the built graphs; one mutex guards them for a whole call, so a
// handle is never used by two threads at once (cuDNN's rule) and a graph always runs with the handle it was built with.
// Stream-ordered assumption: every call on a device shares its workspace, so calls on one device must be ordered on
// the GPU (one stream, or streams the caller orders with events); two calls in flight at once on unordered streams
// would share the scratch. Growing the workspace synchronises the device before freeing the old one.
#include "kernels/cuda/attention_cudnn.h"

#include <cstdint>
#include <string>
#include <utility>

#if LINS_CUDNN_ATTENTION
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cmath>
#include <exception>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>
#endif

namespace lins::kernels::cuda {
namespace {

thread_local std::string t_last_error;

cudaError_t fail(cudaError_t code, std::string text) {
  t_last_error = std::move(text);
  return code;
}

}  // namespace

std::string cudnn_attention_last_error() { return t_last_error; }

#if LINS_CUDNN_ATTENTION

namespace {

namespace fe = cudnn_frontend;

enum class Direction { kForward, kBackward };

struct Shape {
  int batch, seq, heads, head_dim;
  Direction direction;
  auto operator<=>(const Shape&) const = default;
};

std::string describe(const Shape& s) {
  return std::string(s.direction == Direction::kForward ? "forward" : "backward") + " (batch " +
         std::to_string(s.batch) + ", seq " + std::to_string(s.seq) + ", heads " + std::to_string(s.heads) +
         ", head_dim " + std::to_string(s.head_dim) + ")";
}

// The graphs' tensors, named by these in the variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

cudaError_t cuda_error_of(fe::error_code_t code) {
  switch (code) {
    case fe::error_code_t::GRAPH_NOT_SUPPORTED:
    case fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED:
    case fe::error_code_t::HEURISTIC_QUERY_FAILED:
    case fe::error_code_t::UNSUPPORTED_GRAPH_FORMAT:
      return cudaErrorNotSupported;
    case fe::error_code_t::ATTRIBUTE_NOT_SET:
    case fe::error_code_t::SHAPE_DEDUCTION_FAILED:
    case fe::error_code_t::INVALID_TENSOR_NAME:
    case fe::error_code_t::INVALID_VARIANT_PACK:
    case fe::error_code_t::INVALID_VALUE:
      return cudaErrorInvalidValue;
    case fe::error_code_t::INVALID_CUDA_DEVICE:
      return cudaErrorInvalidDevice;
    default:  // CUDA or cuDNN API failures, execution failures: the message says which
      return cudaErrorUnknown;
  }
}

cudaError_t cuda_error_of(cudnnStatus_t status) {
  return status == CUDNN_STATUS_ALLOC_FAILED ? cudaErrorMemoryAllocation : cudaErrorUnknown;
}

std::string cudnn_message(cudnnStatus_t status) {
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  std::string text = cudnnGetErrorString(status);
  if (detail[0] != 0) text += std::string(" (") + detail + ")";
  return text;
}

// A built graph, or why it could not be built.
struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace_bytes = 0;
  cudaError_t error = cudaSuccess;
  std::string error_text;
};

// The graph of one shape and direction, not yet validated or built (no handle or device needed). May throw.
std::shared_ptr<fe::graph::Graph> make_graph(const Shape& s) {
  const int64_t b = s.batch, n = s.seq, h = s.heads, d = s.head_dim;
  const std::vector<int64_t> dims{b, h, n, d}, strides{n * h * d, d, h * d, 1};
  const std::vector<int64_t> stats_dims{b, h, n, 1}, stats_strides{h * n, n, 1, 1};
  const float scale = 1.f / std::sqrt(static_cast<float>(s.head_dim));  // as attention.cu
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const auto token_major = [&](const char* name, int64_t uid) {
    return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(strides));
  };
  auto q = token_major("Q", kQ), k = token_major("K", kK), v = token_major("V", kV);
  if (s.direction == Direction::kForward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("lins_attention_forward")
                       .set_generate_stats(true)
                       .set_attn_scale(scale)
                       .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                       .set_diagonal_band_right_bound(0)
                       .set_implementation(fe::AttentionImplementation_t::COMPOSITE);
    auto [o, stats] = g->sdpa(q, k, v, options);
    o->set_output(true).set_uid(kO).set_dim(dims).set_stride(strides);
    stats->set_output(true)
        .set_uid(kStats)
        .set_dim(stats_dims)
        .set_stride(stats_strides)
        .set_data_type(fe::DataType_t::FLOAT);
  } else {
    auto o = token_major("O", kO), dout = token_major("dO", kDO);
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("Stats")
                               .set_uid(kStats)
                               .set_dim(stats_dims)
                               .set_stride(stats_strides)
                               .set_data_type(fe::DataType_t::FLOAT));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("lins_attention_backward")
                       .set_attn_scale(scale)
                       .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                       .set_diagonal_band_right_bound(0);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, options);
    dq->set_output(true).set_uid(kDQ).set_dim(dims).set_stride(strides);
    dk->set_output(true).set_uid(kDK).set_dim(dims).set_stride(strides);
    dv->set_output(true).set_uid(kDV).set_dim(dims).set_stride(strides);
  }
  return g;
}

Plan build_plan(cudnnHandle_t handle, const Shape& s) {
  Plan p;
  const auto ok = [&](fe::error_t e, const char* step) {
    if (e.is_good()) return true;
    p.error = cuda_error_of(e.get_code());
    p.error_text =
        std::string("cuDNN frontend ") + step + " failed for the attention " + describe(s) + ": " + e.get_message();
    return false;
  };
  try {
    auto g = make_graph(s);
    if (!ok(g->validate(), "validate") || !ok(g->build_operation_graph(handle), "build_operation_graph") ||
        !ok(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans") ||
        !ok(g->check_support(handle), "check_support") || !ok(g->build_plans(handle), "build_plans") ||
        !ok(g->get_workspace_size(p.workspace_bytes), "get_workspace_size"))
      return p;
    p.graph = std::move(g);
  } catch (const std::bad_alloc&) {
    p.error = cudaErrorMemoryAllocation;
    p.error_text = "out of host memory building the cuDNN attention " + describe(s);
  } catch (const std::exception& e) {  // the frontend throws for some configurations it cannot express
    p.error = cudaErrorNotSupported;
    p.error_text = "cuDNN frontend failed building the attention " + describe(s) + ": " + e.what();
  }
  return p;
}

struct DeviceState {
  std::mutex mutex;
  cudnnHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::map<Shape, Plan> plans;  // failures that rebuilding would repeat are kept too
};

DeviceState& device_state(int device) {
  static std::mutex mutex;
  static auto* states = new std::map<int, DeviceState*>;  // never freed (see the top of the file)
  std::lock_guard lock(mutex);
  DeviceState*& state = (*states)[device];
  if (state == nullptr) state = new DeviceState;
  return *state;
}

cudaError_t run(const Shape& s, std::unordered_map<int64_t, void*>& pack, cudaStream_t stream) {
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return fail(e, std::string("cudaGetDevice failed: ") + cudaGetErrorString(e));
  const std::string where = " (device " + std::to_string(device) + ", attention " + describe(s) + ")";
  DeviceState& state = device_state(device);
  std::lock_guard lock(state.mutex);
  if (state.handle == nullptr) {
    const cudnnStatus_t status = cudnnCreate(&state.handle);
    if (status != CUDNN_STATUS_SUCCESS) {
      state.handle = nullptr;
      return fail(cuda_error_of(status), "cudnnCreate failed" + where + ": " + cudnn_message(status));
    }
  }
  auto it = state.plans.find(s);
  if (it == state.plans.end()) {
    Plan plan = build_plan(state.handle, s);
    // Unsupported shapes fail the same way every time: kept, so that later calls fail at once. Anything else (out
    // of memory, an API failure) may pass next time: not kept.
    const bool keep =
        plan.graph != nullptr || plan.error == cudaErrorNotSupported || plan.error == cudaErrorInvalidValue;
    if (!keep) return fail(plan.error, plan.error_text);
    it = state.plans.emplace(s, std::move(plan)).first;
  }
  const Plan& plan = it->second;
  if (plan.graph == nullptr) return fail(plan.error, plan.error_text);
  const size_t need = static_cast<size_t>(plan.workspace_bytes);
  if (need > state.workspace_bytes) {
    if (state.workspace != nullptr) {
      // Earlier calls may still be using the old workspace on the GPU.
      if ((e = cudaDeviceSynchronize()) != cudaSuccess)
        return fail(e, std::string("cudaDeviceSynchronize before growing the cuDNN workspace failed") + where + ": " +
                           cudaGetErrorString(e));
      cudaFree(state.workspace);
      state.workspace = nullptr;
      state.workspace_bytes = 0;
    }
    if ((e = cudaMalloc(&state.workspace, need)) != cudaSuccess) {
      state.workspace = nullptr;
      return fail(e, "cudaMalloc of " + std::to_string(need) + " bytes of cuDNN workspace failed" + where + ": " +
                         cudaGetErrorString(e));
    }
    state.workspace_bytes = need;
  }
  const cudnnStatus_t status = cudnnSetStream(state.handle, stream);
  if (status != CUDNN_STATUS_SUCCESS)
    return fail(cuda_error_of(status), "cudnnSetStream failed" + where + ": " + cudnn_message(status));
  try {
    fe::error_t r = plan.graph->execute(state.handle, pack, state.workspace);
    if (r.is_bad())
      return fail(cuda_error_of(r.get_code()), "cuDNN frontend execute failed" + where + ": " + r.get_message());
  } catch (const std::exception& x) {
    return fail(cudaErrorUnknown, "cuDNN frontend execute threw" + where + ": " + x.what());
  }
  t_last_error.clear();
  return cudaSuccess;
}

bool aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// The checks both directions share: *done = false means go on, *done = true means return the value returned.
cudaError_t check_call(int batch, int seq, int heads, int head_dim, bool pointers_ok, bool* done) {
  *done = true;
  if (batch <= 0 || seq <= 0 || heads <= 0) {  // nothing to do, as the flash kernels
    t_last_error.clear();
    return cudaSuccess;
  }
  if (head_dim <= 0) return fail(cudaErrorInvalidValue, "cuDNN attention: head_dim " + std::to_string(head_dim));
  if (!cudnn_attention_available()) return cudaErrorNotSupported;  // the reason is in t_last_error
  if (!pointers_ok)
    return fail(cudaErrorInvalidValue, "cuDNN attention: every pointer must be non-null and 16-byte aligned");
  *done = false;
  return cudaSuccess;
}

}  // namespace

bool cudnn_attention_available() {
  static const size_t version = cudnnGetVersion();
  if (version < 90000) {
    t_last_error = "the cuDNN library loaded at run time is version " + std::to_string(version) +
                   " (cudnnGetVersion); the cuDNN attention needs 9.0 or newer";
    return false;
  }
  t_last_error.clear();
  return true;
}

cudaError_t cudnn_attention_forward(const bf16* q, const bf16* k, const bf16* v, bf16* out, float* lse, int batch,
                                    int seq, int heads, int head_dim, cudaStream_t stream) {
  bool done = false;
  const cudaError_t e = check_call(batch, seq, heads, head_dim, aligned16({q, k, v, out, lse}), &done);
  if (done) return e;
  std::unordered_map<int64_t, void*> pack{
      {kQ, const_cast<bf16*>(q)}, {kK, const_cast<bf16*>(k)}, {kV, const_cast<bf16*>(v)}, {kO, out}, {kStats, lse}};
  return run(Shape{batch, seq, heads, head_dim, Direction::kForward}, pack, stream);
}

cudaError_t cudnn_attention_backward(const bf16* dout, const bf16* q, const bf16* k, const bf16* v, const bf16* out,
                                     const float* lse, bf16* dq, bf16* dk, bf16* dv, int batch, int seq, int heads,
                                     int head_dim, cudaStream_t stream) {
  bool done = false;
  const cudaError_t e =
      check_call(batch, seq, heads, head_dim, aligned16({dout, q, k, v, out, lse, dq, dk, dv}), &done);
  if (done) return e;
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<bf16*>(q)},
                                          {kK, const_cast<bf16*>(k)},
                                          {kV, const_cast<bf16*>(v)},
                                          {kO, const_cast<bf16*>(out)},
                                          {kDO, const_cast<bf16*>(dout)},
                                          {kStats, const_cast<float*>(lse)},
                                          {kDQ, dq},
                                          {kDK, dk},
                                          {kDV, dv}};
  return run(Shape{batch, seq, heads, head_dim, Direction::kBackward}, pack, stream);
}

#else  // !LINS_CUDNN_ATTENTION: stubs

namespace {
constexpr const char* kNotBuilt =
    "lins was built without the cuDNN attention: -DLINS_CUDNN=OFF, or CMake found no cuDNN 9 or no cuDNN frontend "
    "headers (run scripts/fetch-cudnn-frontend.sh and configure again; the configure log's line 'lins: cuDNN "
    "attention' says what was missing)";
}  // namespace

bool cudnn_attention_available() {
  t_last_error = kNotBuilt;
  return false;
}

cudaError_t cudnn_attention_forward(const bf16*, const bf16*, const bf16*, bf16*, float*, int, int, int, int,
                                    cudaStream_t) {
  return fail(cudaErrorNotSupported, kNotBuilt);
}

cudaError_t cudnn_attention_backward(const bf16*, const bf16*, const bf16*, const bf16*, const bf16*, const float*,
                                     bf16*, bf16*, bf16*, int, int, int, int, cudaStream_t) {
  return fail(cudaErrorNotSupported, kNotBuilt);
}

#endif  // LINS_CUDNN_ATTENTION

}  // namespace lins::kernels::cuda
