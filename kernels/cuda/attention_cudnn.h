// Causal multi-head attention through cuDNN 9's fused scaled-dot-product attention (the cuDNN C++ frontend's sdpa and
// sdpa_backward graphs): an alternative to the flash kernels of ops_cuda.h with the same layouts, mask, scale and
// log-sum-exp, so either forward's (out, lse) feeds either backward. Built when CMake finds cuDNN 9 and the frontend
// headers (LINS_HAVE_CUDNN_ATTENTION); otherwise every function is a stub (not available, cudaErrorNotSupported), so
// callers need no #if.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/ops_cuda.h"  // bf16

namespace lins::kernels::cuda {

// Whether the cuDNN attention can run here: built with it, and the cuDNN library loaded at run time is 9.0 or newer
// (cudnnGetVersion; no device is touched). When false, cudnn_attention_last_error() says why.
bool cudnn_attention_available();

// As attention_forward (ops_cuda.h): q, k, v, out [batch, seq, heads, head_dim] bf16, causal, scores scaled by
// 1/sqrt(head_dim), fp32 softmax; lse[batch, heads, seq] (fp32) is the natural-log log-sum-exp of each row of scaled
// scores. Every pointer 16-byte aligned (cudaMalloc'd buffers, and sub-ranges at multiples of 8 bf16 or 4 fp32
// elements, are); head_dim as cuDNN supports it (a multiple of 8, up to a limit of 128 or more that depends on the GPU
// and the cuDNN version); an unsupported shape returns cudaErrorNotSupported. Enqueued on `stream`. The first call of
// a shape on a device builds its graph (host work, up to seconds); a call that needs a larger workspace than the
// device's so far synchronises the device once.
cudaError_t cudnn_attention_forward(const bf16* q, const bf16* k, const bf16* v, bf16* out, float* lse, int batch,
                                    int seq, int heads, int head_dim, cudaStream_t stream);
// As attention_backward: dq, dk, dv [batch, seq, heads, head_dim] are overwritten; out and lse are those of a forward
// (this one's or the flash kernels'). No caller workspace: cuDNN's is held per device (see attention_cudnn.cpp).
cudaError_t cudnn_attention_backward(const bf16* dout, const bf16* q, const bf16* k, const bf16* v, const bf16* out,
                                     const float* lse, bf16* dq, bf16* dk, bf16* dv, int batch, int seq, int heads,
                                     int head_dim, cudaStream_t stream);

// The cuDNN or frontend error text of this thread's last cudnn_attention_* call that returned an error (which step
// failed, for which shape, and cuDNN's own message); empty after a call that succeeded.
std::string cudnn_attention_last_error();

}  // namespace lins::kernels::cuda
