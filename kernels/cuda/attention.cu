// Causal multi-head attention, forward and backward, memory-efficient: flash-attention-2 style tiling with an online
// softmax, so no seq x seq matrix ever reaches device memory. Tensor-core path (head_dim 32, 64, 128): 64x64 tiles,
// 4 warps, bf16 WMMA 16x16x16 with fp32 accumulation, scores and probabilities staged in shared memory. Other head
// dims: one warp per row on CUDA cores, same online softmax. Layout q, k, v, out, d* = [batch, seq, heads, head_dim].
// The fp32 entry points (fp32 tensors) round q, k, v (and dout, out) to bf16 in a workspace, run the same kernels
// and widen the results: bf16 tensor-core attention on fp32 tensors.
#include <mma.h>

#include <cmath>
#include <initializer_list>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace lins::kernels::cuda {
namespace {

namespace wmma = nvcuda::wmma;
using detail::warp_max;
using detail::warp_sum;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---------------------------------------------------------------------------------------------------------------
// Tensor-core path.
constexpr int kTile = 64;  // queries per block (forward) = keys per block (backward) = keys/queries per inner step
constexpr int kWarps = 4;  // each warp owns 16 rows of the block's 64
constexpr int kThreads = kWarps * 32;

template <int kD>
struct Smem {
  static constexpr int kLdX = kD + 8;     // bf16 row stride of q/k/v/dout tiles (16-byte pad against bank conflicts)
  static constexpr int kLdS = kTile + 4;  // fp32 row stride of score tiles
  static constexpr int kLdP = kTile + 8;  // bf16 row stride of probability tiles
  static constexpr int kLdO = kD + 4;     // fp32 row stride of the forward's output accumulator
  static constexpr int kLdScratch = 20;   // fp32 16x16 staging tile per warp (backward)
  static constexpr size_t kX = size_t{kTile} * kLdX * 2;
  static constexpr size_t kS = size_t{kTile} * kLdS * 4;
  static constexpr size_t kP = size_t{kTile} * kLdP * 2;
  static constexpr size_t kO = size_t{kTile} * kLdO * 4;
  static constexpr size_t kRows = size_t{kTile} * 4;
  static constexpr size_t kScratch = size_t{16} * kLdScratch * 4;
  // forward: Q, K, V, S, P, O, m, l, alpha
  static constexpr size_t kForward = 3 * kX + kS + kP + kO + 3 * kRows;
  // backward: K, V, Q, dO, S (P^T fp32), dP^T, P^T bf16, dS^T bf16, lse, delta, per-warp scratch
  static constexpr size_t kBackward = 4 * kX + 2 * kS + 2 * kP + 2 * kRows + kWarps * kScratch;
  static_assert(kX % 128 == 0 && kS % 128 == 0 && kP % 128 == 0 && kO % 128 == 0 && kRows % 128 == 0 &&
                    kScratch % 128 == 0,
                "every shared-memory region starts 128-byte aligned (WMMA needs 32)");
};

// Copies rows [row0, row0 + 64) of one head (ld = heads * kD elements per token) into a [64][kLdX] tile, zero-filling
// rows at or beyond seq. 16-byte accesses.
template <int kD>
__device__ __forceinline__ void load_tile(bf16* tile, const bf16* __restrict__ src, int row0, int seq, int64_t ld) {
  constexpr int kChunks = kD / 8;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < kTile * kChunks; c += kThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < seq) v = *reinterpret_cast<const uint4*>(src + static_cast<int64_t>(row0 + r) * ld + col);
    *reinterpret_cast<uint4*>(tile + r * Smem<kD>::kLdX + col) = v;
  }
}

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragAT = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// grid (ceil(seq/64), batch*heads); the longest query tiles (most key tiles under the mask) start first.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                         bf16* __restrict__ out, float* __restrict__ lse, int seq, int heads, float scale_log2) {
  using L = Smem<kD>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sq = reinterpret_cast<bf16*>(smem);                    // [64][kLdX]
  bf16* sk = sq + kTile * L::kLdX;                             // [64][kLdX]
  bf16* sv = sk + kTile * L::kLdX;                             // [64][kLdX]
  float* ss = reinterpret_cast<float*>(sv + kTile * L::kLdX);  // [64][kLdS] scores, log2 units
  bf16* sp = reinterpret_cast<bf16*>(ss + kTile * L::kLdS);    // [64][kLdP] probabilities
  float* so = reinterpret_cast<float*>(sp + kTile * L::kLdP);  // [64][kLdO] unnormalised output
  float* sm = so + kTile * L::kLdO;                            // [64] running max (log2 units)
  float* sl = sm + kTile;                                      // [64] running sum
  float* salpha = sl + kTile;                                  // [64] rescale factor of this step

  const int q_tile = gridDim.x - 1 - blockIdx.x;
  const int q0 = q_tile * kTile;
  const int bh = blockIdx.y, b = bh / heads, h = bh % heads;
  const int64_t ld = static_cast<int64_t>(heads) * kD;
  const int64_t head_base = static_cast<int64_t>(b) * seq * ld + static_cast<int64_t>(h) * kD;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r0 = warp * 16;

  load_tile<kD>(sq, q + head_base, q0, seq, ld);
  for (int i = threadIdx.x; i < kTile * L::kLdO; i += kThreads) so[i] = 0.f;
  for (int i = threadIdx.x; i < kTile; i += kThreads) {
    sm[i] = -INFINITY;
    sl[i] = 0.f;
  }
  __syncthreads();
  FragA qf[kD / 16];  // this warp's 16 query rows stay in registers for the whole loop
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) wmma::load_matrix_sync(qf[kk], sq + r0 * L::kLdX + kk * 16, L::kLdX);

  for (int k_tile = 0; k_tile <= q_tile; ++k_tile) {
    const int k0 = k_tile * kTile;
    __syncthreads();  // everyone is done with the previous K and V
    load_tile<kD>(sk, k + head_base, k0, seq, ld);
    load_tile<kD>(sv, v + head_base, k0, seq, ld);
    __syncthreads();

    // S[16 rows of this warp, 64 keys] = Q K^T
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n) {
      FragC acc;
      wmma::fill_fragment(acc, 0.f);
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        FragBT kf;  // K^T: element (d, key) at sk[key * kLdX + d]
        wmma::load_matrix_sync(kf, sk + n * 16 * L::kLdX + kk * 16, L::kLdX);
        wmma::mma_sync(acc, qf[kk], kf, acc);
      }
      wmma::store_matrix_sync(ss + r0 * L::kLdS + n * 16, acc, L::kLdS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax over this warp's rows: lane handles keys lane and lane + 32.
    for (int r = 0; r < 16; ++r) {
      const int row = r0 + r, qpos = q0 + row;
      const int kp0 = k0 + lane, kp1 = k0 + lane + 32;
      float s0 = ss[row * L::kLdS + lane] * scale_log2;
      float s1 = ss[row * L::kLdS + lane + 32] * scale_log2;
      if (kp0 > qpos || kp0 >= seq) s0 = -INFINITY;
      if (kp1 > qpos || kp1 >= seq) s1 = -INFINITY;
      const float m_old = sm[row];
      const float m_new = fmaxf(m_old, warp_max(fmaxf(s0, s1)));
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a fully masked row so far: keep exp2 finite
      const float p0 = exp2f(s0 - m_use), p1 = exp2f(s1 - m_use);
      const float row_sum = warp_sum(p0 + p1);
      sp[row * L::kLdP + lane] = __float2bfloat16_rn(p0);
      sp[row * L::kLdP + lane + 32] = __float2bfloat16_rn(p1);
      __syncwarp();  // every lane has read sm[row] before lane 0 rewrites it
      if (lane == 0) {
        const float alpha = exp2f(m_old - m_use);  // m_old = -inf gives 0
        salpha[row] = alpha;
        sl[row] = sl[row] * alpha + row_sum;
        sm[row] = m_new;
      }
    }
    __syncwarp();

    // O = alpha * O + P V on this warp's rows.
    for (int i = lane; i < 16 * kD; i += 32) {
      const int r = r0 + i / kD, c = i % kD;
      so[r * L::kLdO + c] *= salpha[r];
    }
    __syncwarp();
#pragma unroll
    for (int n = 0; n < kD / 16; ++n) {
      FragC acc;
      wmma::load_matrix_sync(acc, so + r0 * L::kLdO + n * 16, L::kLdO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        FragA pf;
        FragB vf;
        wmma::load_matrix_sync(pf, sp + r0 * L::kLdP + kk * 16, L::kLdP);
        wmma::load_matrix_sync(vf, sv + kk * 16 * L::kLdX + n * 16, L::kLdX);
        wmma::mma_sync(acc, pf, vf, acc);
      }
      wmma::store_matrix_sync(so + r0 * L::kLdO + n * 16, acc, L::kLdO, wmma::mem_row_major);
    }
    __syncwarp();
  }

  // out = O / l (16-byte stores), lse = (m + log2 l) * ln 2.
  for (int i = lane; i < 16 * (kD / 8); i += 32) {
    const int r = r0 + i / (kD / 8), c = (i % (kD / 8)) * 8;
    const int qpos = q0 + r;
    if (qpos >= seq) continue;
    const float inv_l = 1.f / sl[r];
    float o[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] = so[r * L::kLdO + c + j] * inv_l;
    detail::store<8>(out + head_base + static_cast<int64_t>(qpos) * ld + c, o);
  }
  if (lane < 16) {
    const int r = r0 + lane, qpos = q0 + r;
    if (qpos < seq) lse[static_cast<int64_t>(bh) * seq + qpos] = (sm[r] + log2f(sl[r])) * kLn2;
  }
}

// delta[bh, s] = sum_d dout * out (the D term of dS = P * (dP - D)); zeroes the dq accumulator rows it visits.
// One warp per (token, head).
__global__ void attention_delta_kernel(const bf16* __restrict__ dout, const bf16* __restrict__ out,
                                       float* __restrict__ delta, float* __restrict__ dq_acc, int batch, int seq,
                                       int heads, int head_dim) {
  const int64_t rows = static_cast<int64_t>(batch) * seq * heads;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5); w < rows; w += warps) {
    const int64_t token = w / heads;  // b * seq + s
    const int h = static_cast<int>(w % heads);
    const int64_t base = w * head_dim;  // [T, heads, head_dim] flattened = token * H + h * head_dim
    float acc = 0.f;
    for (int d = lane; d < head_dim; d += 32) {
      acc += __bfloat162float(dout[base + d]) * __bfloat162float(out[base + d]);
      if (dq_acc != nullptr) dq_acc[base + d] = 0.f;
    }
    acc = warp_sum(acc);
    if (lane == 0) {
      const int64_t b = token / seq, s = token % seq;
      delta[(b * heads + h) * seq + s] = acc;
    }
  }
}

// Backward, key-major: grid (ceil(seq/64), batch*heads), block j owns keys [64j, 64j+64) and walks the query tiles
// i >= j. Warp w owns keys 16w..16w+15: S^T, P^T, dP^T, dS^T rows and the dK, dV accumulators (registers) are
// warp-private; dQ += dS K needs every warp's dS^T and goes to an fp32 accumulator with atomics.
template <int kD>
__global__ void __launch_bounds__(kThreads, 1)
    flash_backward_kernel(const bf16* __restrict__ dout, const bf16* __restrict__ q, const bf16* __restrict__ k,
                          const bf16* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ delta,
                          float* __restrict__ dq_acc, bf16* __restrict__ dk, bf16* __restrict__ dv, int seq, int heads,
                          float scale, float scale_log2) {
  using L = Smem<kD>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sk = reinterpret_cast<bf16*>(smem);                       // [64 keys][kLdX]
  bf16* sv = sk + kTile * L::kLdX;                                // [64 keys][kLdX]
  bf16* sq = sv + kTile * L::kLdX;                                // [64 queries][kLdX]
  bf16* sdo = sq + kTile * L::kLdX;                               // [64 queries][kLdX]
  float* ss = reinterpret_cast<float*>(sdo + kTile * L::kLdX);    // [64 keys][kLdS] S^T, then P^T (fp32)
  float* sdp = ss + kTile * L::kLdS;                              // [64 keys][kLdS] dP^T
  bf16* sp = reinterpret_cast<bf16*>(sdp + kTile * L::kLdS);      // [64 keys][kLdP] P^T
  bf16* sds = sp + kTile * L::kLdP;                               // [64 keys][kLdP] dS^T
  float* slse = reinterpret_cast<float*>(sds + kTile * L::kLdP);  // [64 queries] lse in log2 units
  float* sdelta = slse + kTile;                                   // [64 queries]
  float* sscratch = sdelta + kTile;                               // [warps][16][kLdScratch]

  const int k_tile = blockIdx.x, k0 = k_tile * kTile;
  const int n_q_tiles = (seq + kTile - 1) / kTile;
  const int bh = blockIdx.y, b = bh / heads, h = bh % heads;
  const int64_t ld = static_cast<int64_t>(heads) * kD;
  const int64_t head_base = static_cast<int64_t>(b) * seq * ld + static_cast<int64_t>(h) * kD;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r0 = warp * 16;
  float* scratch = sscratch + warp * 16 * L::kLdScratch;

  load_tile<kD>(sk, k + head_base, k0, seq, ld);
  load_tile<kD>(sv, v + head_base, k0, seq, ld);

  FragC dk_acc[kD / 16], dv_acc[kD / 16];  // [16 keys of this warp][kD]
#pragma unroll
  for (int n = 0; n < kD / 16; ++n) {
    wmma::fill_fragment(dk_acc[n], 0.f);
    wmma::fill_fragment(dv_acc[n], 0.f);
  }

  for (int q_tile = k_tile; q_tile < n_q_tiles; ++q_tile) {
    const int q0 = q_tile * kTile;
    __syncthreads();  // the previous step's readers of Q, dO and dS^T are done
    load_tile<kD>(sq, q + head_base, q0, seq, ld);
    load_tile<kD>(sdo, dout + head_base, q0, seq, ld);
    for (int i = threadIdx.x; i < kTile; i += kThreads) {
      const int qpos = q0 + i;
      slse[i] = qpos < seq ? lse[static_cast<int64_t>(bh) * seq + qpos] * kLog2e : 0.f;
      sdelta[i] = qpos < seq ? delta[static_cast<int64_t>(bh) * seq + qpos] : 0.f;
    }
    __syncthreads();

    // S^T[16 keys, 64 queries] = K_w Q^T and dP^T = V_w dO^T.
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n) {
      FragC s_acc, dp_acc;
      wmma::fill_fragment(s_acc, 0.f);
      wmma::fill_fragment(dp_acc, 0.f);
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        FragA kf, vf;
        FragBT qf, dof;  // Q^T, dO^T: element (d, query) at sx[query * kLdX + d]
        wmma::load_matrix_sync(kf, sk + r0 * L::kLdX + kk * 16, L::kLdX);
        wmma::load_matrix_sync(qf, sq + n * 16 * L::kLdX + kk * 16, L::kLdX);
        wmma::mma_sync(s_acc, kf, qf, s_acc);
        wmma::load_matrix_sync(vf, sv + r0 * L::kLdX + kk * 16, L::kLdX);
        wmma::load_matrix_sync(dof, sdo + n * 16 * L::kLdX + kk * 16, L::kLdX);
        wmma::mma_sync(dp_acc, vf, dof, dp_acc);
      }
      wmma::store_matrix_sync(ss + r0 * L::kLdS + n * 16, s_acc, L::kLdS, wmma::mem_row_major);
      wmma::store_matrix_sync(sdp + r0 * L::kLdS + n * 16, dp_acc, L::kLdS, wmma::mem_row_major);
    }
    __syncwarp();

    // P^T = exp(scale S^T - lse) under the causal mask; dS^T = P^T (dP^T - delta). Lane: queries lane, lane + 32.
    for (int r = 0; r < 16; ++r) {
      const int row = r0 + r, kpos = k0 + row;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int c = lane + half * 32, qpos = q0 + c;
        const bool valid = qpos >= kpos && qpos < seq && kpos < seq;
        const float p = valid ? exp2f(ss[row * L::kLdS + c] * scale_log2 - slse[c]) : 0.f;
        const float ds = p * (sdp[row * L::kLdS + c] - sdelta[c]);
        sp[row * L::kLdP + c] = __float2bfloat16_rn(p);
        sds[row * L::kLdP + c] = __float2bfloat16_rn(ds);
      }
    }
    __syncwarp();

    // dV_w += P^T_w dO, dK_w += dS^T_w Q (scale applied once at the end).
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      FragA pf, dsf;
      wmma::load_matrix_sync(pf, sp + r0 * L::kLdP + kk * 16, L::kLdP);
      wmma::load_matrix_sync(dsf, sds + r0 * L::kLdP + kk * 16, L::kLdP);
#pragma unroll
      for (int n = 0; n < kD / 16; ++n) {
        FragB dof, qf;
        wmma::load_matrix_sync(dof, sdo + kk * 16 * L::kLdX + n * 16, L::kLdX);
        wmma::mma_sync(dv_acc[n], pf, dof, dv_acc[n]);
        wmma::load_matrix_sync(qf, sq + kk * 16 * L::kLdX + n * 16, L::kLdX);
        wmma::mma_sync(dk_acc[n], dsf, qf, dk_acc[n]);
      }
    }
    __syncthreads();  // every warp's dS^T rows are in shared memory

    // dQ[queries 16w..16w+15] += scale * dS K, with dS[query, key] = dS^T[key, query] read column-major.
    const int qrow0 = r0;
#pragma unroll 1
    for (int n = 0; n < kD / 16; ++n) {
      FragC acc;
      wmma::fill_fragment(acc, 0.f);
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        FragAT dsf;
        FragB kf;
        wmma::load_matrix_sync(dsf, sds + kk * 16 * L::kLdP + qrow0, L::kLdP);
        wmma::load_matrix_sync(kf, sk + kk * 16 * L::kLdX + n * 16, L::kLdX);
        wmma::mma_sync(acc, dsf, kf, acc);
      }
      wmma::store_matrix_sync(scratch, acc, L::kLdScratch, wmma::mem_row_major);
      __syncwarp();
#pragma unroll
      for (int e = lane; e < 256; e += 32) {
        const int rr = e / 16, cc = e % 16, qpos = q0 + qrow0 + rr;
        if (qpos < seq)
          atomicAdd(dq_acc + head_base + static_cast<int64_t>(qpos) * ld + n * 16 + cc,
                    scale * scratch[rr * L::kLdScratch + cc]);
      }
      __syncwarp();
    }
  }

  // dK = scale * dK_acc, dV = dV_acc, rounded to bf16 through the warp's staging tile.
#pragma unroll 1
  for (int which = 0; which < 2; ++which) {
    bf16* dst = which == 0 ? dk : dv;
#pragma unroll
    for (int n = 0; n < kD / 16; ++n) {
      if (which == 0) {
#pragma unroll
        for (int t = 0; t < dk_acc[n].num_elements; ++t) dk_acc[n].x[t] *= scale;
        wmma::store_matrix_sync(scratch, dk_acc[n], L::kLdScratch, wmma::mem_row_major);
      } else {
        wmma::store_matrix_sync(scratch, dv_acc[n], L::kLdScratch, wmma::mem_row_major);
      }
      __syncwarp();
      // 16 rows x 16 cols: lane handles half a row (8 values, one 16-byte store).
      const int rr = lane / 2, cc = (lane % 2) * 8, kpos = k0 + r0 + rr;
      if (kpos < seq) {
        float o[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) o[j] = scratch[rr * L::kLdScratch + cc + j];
        detail::store<8>(dst + head_base + static_cast<int64_t>(kpos) * ld + n * 16 + cc, o);
      }
      __syncwarp();
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// CUDA-core path for head dims without a tensor-core instantiation: one warp per query row (forward, dq) or key row
// (dk, dv); lane t holds dims t, t+32, ... (head_dim <= 32 * kMaxPerLane).
constexpr int kMaxPerLane = 8;
constexpr int kRowThreads = 128;

__device__ __forceinline__ float dot_row(const float (&a)[kMaxPerLane], const bf16* __restrict__ row, int head_dim) {
  const int lane = threadIdx.x & 31;
  float acc = 0.f;
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < head_dim) acc += a[t] * __bfloat162float(row[d]);
  }
  return warp_sum(acc);
}

__device__ __forceinline__ void load_row(float (&a)[kMaxPerLane], const bf16* __restrict__ row, int head_dim) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    a[t] = d < head_dim ? __bfloat162float(row[d]) : 0.f;
  }
}

__device__ __forceinline__ void store_row(bf16* __restrict__ row, const float (&a)[kMaxPerLane], float mul,
                                          int head_dim) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < head_dim) row[d] = __float2bfloat16_rn(a[t] * mul);
  }
}

// Row index w in [0, batch*heads*seq) -> (bh, position) with bh-major order; returns the token row's base offset.
__device__ __forceinline__ int64_t row_base(int64_t bh, int pos, int seq, int heads, int head_dim) {
  const int64_t b = bh / heads, h = bh % heads;
  return ((b * seq + pos) * heads + h) * head_dim;
}

__global__ void __launch_bounds__(kRowThreads)
    rowwise_forward_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                           bf16* __restrict__ out, float* __restrict__ lse, int batch, int seq, int heads, int head_dim,
                           float scale_log2) {
  const int64_t rows = static_cast<int64_t>(batch) * heads * seq;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5); w < rows; w += warps) {
    const int64_t bh = w / seq;
    const int qpos = static_cast<int>(w % seq);
    float qr[kMaxPerLane], acc[kMaxPerLane] = {};
    load_row(qr, q + row_base(bh, qpos, seq, heads, head_dim), head_dim);
    float m = -INFINITY, l = 0.f;
    for (int kpos = 0; kpos <= qpos; ++kpos) {
      const int64_t kb = row_base(bh, kpos, seq, heads, head_dim);
      const float s = dot_row(qr, k + kb, head_dim) * scale_log2;
      const float m_new = fmaxf(m, s);
      const float alpha = exp2f(m - m_new), p = exp2f(s - m_new);
      l = l * alpha + p;
      float vr[kMaxPerLane];
      load_row(vr, v + kb, head_dim);
#pragma unroll
      for (int t = 0; t < kMaxPerLane; ++t) acc[t] = acc[t] * alpha + p * vr[t];
      m = m_new;
    }
    store_row(out + row_base(bh, qpos, seq, heads, head_dim), acc, 1.f / l, head_dim);
    if ((threadIdx.x & 31) == 0) lse[w] = (m + log2f(l)) * kLn2;  // lse is [bh, seq]: index w
  }
}

// dq (one warp per query row) and dk, dv (one warp per key row), probabilities recomputed from lse.
__global__ void __launch_bounds__(kRowThreads)
    rowwise_backward_kernel(const bf16* __restrict__ dout, const bf16* __restrict__ q, const bf16* __restrict__ k,
                            const bf16* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ delta,
                            bf16* __restrict__ dq, bf16* __restrict__ dk, bf16* __restrict__ dv, int batch, int seq,
                            int heads, int head_dim, float scale, float scale_log2) {
  const int64_t rows = static_cast<int64_t>(batch) * heads * seq;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5); w < 2 * rows;
       w += warps) {
    const bool query_side = w < rows;
    const int64_t r = query_side ? w : w - rows;
    const int64_t bh = r / seq;
    const int pos = static_cast<int>(r % seq);
    const int64_t base = row_base(bh, pos, seq, heads, head_dim);
    if (query_side) {  // dq = scale * sum_k dS[q, k] K[k]
      float qr[kMaxPerLane], dor[kMaxPerLane], acc[kMaxPerLane] = {};
      load_row(qr, q + base, head_dim);
      load_row(dor, dout + base, head_dim);
      const float l2 = lse[r] * kLog2e, dl = delta[r];
      for (int kpos = 0; kpos <= pos; ++kpos) {
        const int64_t kb = row_base(bh, kpos, seq, heads, head_dim);
        const float p = exp2f(dot_row(qr, k + kb, head_dim) * scale_log2 - l2);
        const float ds = p * (dot_row(dor, v + kb, head_dim) - dl);
        float kr[kMaxPerLane];
        load_row(kr, k + kb, head_dim);
#pragma unroll
        for (int t = 0; t < kMaxPerLane; ++t) acc[t] += ds * kr[t];
      }
      store_row(dq + base, acc, scale, head_dim);
    } else {  // dv = sum_q P[q, k] dO[q], dk = scale * sum_q dS[q, k] Q[q]
      float kr[kMaxPerLane], vr[kMaxPerLane], dk_acc[kMaxPerLane] = {}, dv_acc[kMaxPerLane] = {};
      load_row(kr, k + base, head_dim);
      load_row(vr, v + base, head_dim);
      for (int qpos = pos; qpos < seq; ++qpos) {
        const int64_t qb = row_base(bh, qpos, seq, heads, head_dim);
        const int64_t qr_index = bh * seq + qpos;
        const float p = exp2f(dot_row(kr, q + qb, head_dim) * scale_log2 - lse[qr_index] * kLog2e);
        const float ds = p * (dot_row(vr, dout + qb, head_dim) - delta[qr_index]);
        float qr[kMaxPerLane], dor[kMaxPerLane];
        load_row(qr, q + qb, head_dim);
        load_row(dor, dout + qb, head_dim);
#pragma unroll
        for (int t = 0; t < kMaxPerLane; ++t) {
          dv_acc[t] += p * dor[t];
          dk_acc[t] += ds * qr[t];
        }
      }
      store_row(dk + base, dk_acc, scale, head_dim);
      store_row(dv + base, dv_acc, 1.f, head_dim);
    }
  }
}

__global__ void dq_cast_kernel(const float* __restrict__ acc, bf16* __restrict__ dq, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dq[i] = __float2bfloat16_rn(acc[i]);
}

bool tensor_core_head_dim(int head_dim) { return head_dim == 32 || head_dim == 64 || head_dim == 128; }

bool aligned_all(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (!detail::aligned16(p)) return false;
  return true;
}

template <int kD>
cudaError_t launch_forward(const bf16* q, const bf16* k, const bf16* v, bf16* out, float* lse, int batch, int seq,
                           int heads, float scale_log2, cudaStream_t stream) {
  const size_t smem = Smem<kD>::kForward;
  cudaError_t e = cudaFuncSetAttribute(flash_forward_kernel<kD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid((seq + kTile - 1) / kTile, batch * heads);
  flash_forward_kernel<kD><<<grid, kThreads, smem, stream>>>(q, k, v, out, lse, seq, heads, scale_log2);
  return cudaGetLastError();
}

template <int kD>
cudaError_t launch_backward(const bf16* dout, const bf16* q, const bf16* k, const bf16* v, const float* lse,
                            const float* delta, float* dq_acc, bf16* dk, bf16* dv, int batch, int seq, int heads,
                            float scale, float scale_log2, cudaStream_t stream) {
  const size_t smem = Smem<kD>::kBackward;
  cudaError_t e = cudaFuncSetAttribute(flash_backward_kernel<kD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid((seq + kTile - 1) / kTile, batch * heads);
  flash_backward_kernel<kD>
      <<<grid, kThreads, smem, stream>>>(dout, q, k, v, lse, delta, dq_acc, dk, dv, seq, heads, scale, scale_log2);
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention_forward(const bf16* q, const bf16* k, const bf16* v, bf16* out, float* lse, int batch, int seq,
                              int heads, int head_dim, cudaStream_t stream) {
  if (batch <= 0 || seq <= 0 || heads <= 0) return cudaSuccess;
  if (head_dim <= 0 || head_dim > 32 * kMaxPerLane) return cudaErrorInvalidValue;
  const float scale_log2 = kLog2e / std::sqrt(static_cast<float>(head_dim));
  if (tensor_core_head_dim(head_dim) && aligned_all({q, k, v, out})) {
    switch (head_dim) {
      case 32:
        return launch_forward<32>(q, k, v, out, lse, batch, seq, heads, scale_log2, stream);
      case 64:
        return launch_forward<64>(q, k, v, out, lse, batch, seq, heads, scale_log2, stream);
      default:
        return launch_forward<128>(q, k, v, out, lse, batch, seq, heads, scale_log2, stream);
    }
  }
  const int64_t rows = static_cast<int64_t>(batch) * heads * seq;
  rowwise_forward_kernel<<<detail::grid_size(rows * 32, kRowThreads), kRowThreads, 0, stream>>>(
      q, k, v, out, lse, batch, seq, heads, head_dim, scale_log2);
  return cudaGetLastError();
}

size_t attention_backward_workspace_bytes(int batch, int seq, int heads, int head_dim) {
  const size_t tokens = static_cast<size_t>(batch) * seq;
  const size_t dq_bytes = tokens * heads * head_dim * sizeof(float);
  const size_t delta_bytes = tokens * heads * sizeof(float);
  return (dq_bytes + 255) / 256 * 256 + delta_bytes;
}

cudaError_t attention_backward(const bf16* dout, const bf16* q, const bf16* k, const bf16* v, const bf16* out,
                               const float* lse, bf16* dq, bf16* dk, bf16* dv, int batch, int seq, int heads,
                               int head_dim, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (batch <= 0 || seq <= 0 || heads <= 0) return cudaSuccess;
  if (head_dim <= 0 || head_dim > 32 * kMaxPerLane) return cudaErrorInvalidValue;
  if (workspace == nullptr || workspace_bytes < attention_backward_workspace_bytes(batch, seq, heads, head_dim))
    return cudaErrorInvalidValue;
  const size_t n = static_cast<size_t>(batch) * seq * heads * head_dim;
  float* dq_acc = static_cast<float*>(workspace);  // [T, H]
  float* delta = reinterpret_cast<float*>(static_cast<char*>(workspace) + (n * sizeof(float) + 255) / 256 * 256);
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim));
  const float scale_log2 = scale * kLog2e;
  const bool tensor_cores = tensor_core_head_dim(head_dim) && aligned_all({dout, q, k, v, dk, dv});
  const int64_t rows = static_cast<int64_t>(batch) * seq * heads;
  attention_delta_kernel<<<detail::grid_size(rows * 32, 256), 256, 0, stream>>>(
      dout, out, delta, tensor_cores ? dq_acc : nullptr, batch, seq, heads, head_dim);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  if (!tensor_cores) {
    rowwise_backward_kernel<<<detail::grid_size(2 * rows * 32, kRowThreads), kRowThreads, 0, stream>>>(
        dout, q, k, v, lse, delta, dq, dk, dv, batch, seq, heads, head_dim, scale, scale_log2);
    return cudaGetLastError();
  }
  switch (head_dim) {
    case 32:
      e = launch_backward<32>(dout, q, k, v, lse, delta, dq_acc, dk, dv, batch, seq, heads, scale, scale_log2, stream);
      break;
    case 64:
      e = launch_backward<64>(dout, q, k, v, lse, delta, dq_acc, dk, dv, batch, seq, heads, scale, scale_log2, stream);
      break;
    default:
      e = launch_backward<128>(dout, q, k, v, lse, delta, dq_acc, dk, dv, batch, seq, heads, scale, scale_log2, stream);
      break;
  }
  if (e != cudaSuccess) return e;
  dq_cast_kernel<<<detail::grid_size(static_cast<int64_t>(n), 256), 256, 0, stream>>>(dq_acc, dq,
                                                                                      static_cast<int64_t>(n));
  return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------------------------------
// fp32 tensors: bf16 copies in the workspace, carved in 256-byte aligned regions.
namespace {

size_t round256(size_t b) { return (b + 255) / 256 * 256; }

struct Carver {
  char* p;
  template <class T>
  T* take(size_t elems) {
    T* r = reinterpret_cast<T*>(p);
    p += round256(elems * sizeof(T));
    return r;
  }
};

}  // namespace

size_t attention_forward_fp32_workspace_bytes(int batch, int seq, int heads, int head_dim) {
  const size_t n = static_cast<size_t>(batch) * seq * heads * head_dim;
  return 4 * round256(n * sizeof(bf16));  // q, k, v, out
}

cudaError_t attention_forward(const float* q, const float* k, const float* v, float* out, float* lse, int batch,
                              int seq, int heads, int head_dim, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  if (batch <= 0 || seq <= 0 || heads <= 0) return cudaSuccess;
  if (workspace == nullptr || workspace_bytes < attention_forward_fp32_workspace_bytes(batch, seq, heads, head_dim))
    return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(batch) * seq * heads * head_dim;
  Carver c{static_cast<char*>(workspace)};
  bf16 *q16 = c.take<bf16>(n), *k16 = c.take<bf16>(n), *v16 = c.take<bf16>(n), *o16 = c.take<bf16>(n);
  cudaError_t e = cudaSuccess;
  if ((e = cast_fp32_to_bf16(q, q16, n, stream)) != cudaSuccess) return e;
  if ((e = cast_fp32_to_bf16(k, k16, n, stream)) != cudaSuccess) return e;
  if ((e = cast_fp32_to_bf16(v, v16, n, stream)) != cudaSuccess) return e;
  if ((e = attention_forward(q16, k16, v16, o16, lse, batch, seq, heads, head_dim, stream)) != cudaSuccess) return e;
  return cast_bf16_to_fp32(o16, out, n, stream);
}

size_t attention_backward_fp32_workspace_bytes(int batch, int seq, int heads, int head_dim) {
  const size_t n = static_cast<size_t>(batch) * seq * heads * head_dim;
  // dout, q, k, v, out, dq, dk, dv in bf16, then the bf16 backward's own workspace.
  return 8 * round256(n * sizeof(bf16)) + attention_backward_workspace_bytes(batch, seq, heads, head_dim);
}

cudaError_t attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                               const float* lse, float* dq, float* dk, float* dv, int batch, int seq, int heads,
                               int head_dim, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (batch <= 0 || seq <= 0 || heads <= 0) return cudaSuccess;
  if (workspace == nullptr || workspace_bytes < attention_backward_fp32_workspace_bytes(batch, seq, heads, head_dim))
    return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(batch) * seq * heads * head_dim;
  Carver c{static_cast<char*>(workspace)};
  bf16 *do16 = c.take<bf16>(n), *q16 = c.take<bf16>(n), *k16 = c.take<bf16>(n), *v16 = c.take<bf16>(n);
  bf16 *o16 = c.take<bf16>(n), *dq16 = c.take<bf16>(n), *dk16 = c.take<bf16>(n), *dv16 = c.take<bf16>(n);
  void* inner = c.p;
  const size_t inner_bytes = attention_backward_workspace_bytes(batch, seq, heads, head_dim);
  cudaError_t e = cudaSuccess;
  const float* ins[5] = {dout, q, k, v, out};
  bf16* outs16[5] = {do16, q16, k16, v16, o16};
  for (int i = 0; i < 5; ++i)
    if ((e = cast_fp32_to_bf16(ins[i], outs16[i], n, stream)) != cudaSuccess) return e;
  e = attention_backward(do16, q16, k16, v16, o16, lse, dq16, dk16, dv16, batch, seq, heads, head_dim, inner,
                         inner_bytes, stream);
  if (e != cudaSuccess) return e;
  if ((e = cast_bf16_to_fp32(dq16, dq, n, stream)) != cudaSuccess) return e;
  if ((e = cast_bf16_to_fp32(dk16, dk, n, stream)) != cudaSuccess) return e;
  return cast_bf16_to_fp32(dv16, dv, n, stream);
}

}  // namespace lins::kernels::cuda
