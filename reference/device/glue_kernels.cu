#include "glue_kernels.h"

#include <algorithm>

#include "detmoe/contract_math.h"
#include "detmoe/cuda_status.h"
#include "detmoe/numeric.h"
#include "detmoe/test_plant.h"

namespace detmoe::ref {
namespace {

constexpr int kVec = 8;  // bf16 per 16-byte vector

struct Vec8 {
  float v[kVec];
};

__device__ __forceinline__ Vec8 load_bf16x8(const uint16_t* p) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
  Vec8 r;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    r.v[2 * i] = float_from_bf16_bits(static_cast<uint16_t>(w[i] & 0xffffu));
    r.v[2 * i + 1] = float_from_bf16_bits(static_cast<uint16_t>(w[i] >> 16));
  }
  return r;
}

__device__ __forceinline__ void store_bf16x8(uint16_t* p, const Vec8& x) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = static_cast<uint32_t>(bf16_bits_from_float(x.v[2 * i])) |
           (static_cast<uint32_t>(bf16_bits_from_float(x.v[2 * i + 1])) << 16);
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

__global__ void gather_token_rows_kernel(const uint16_t* x, const int32_t* send_pos, int64_t k, int64_t H,
                                         uint16_t* dst) {
  const int64_t i = blockIdx.x;  // local (token, slot)
  const uint4* src = reinterpret_cast<const uint4*>(x + (i / k) * H);
  uint4* out = reinterpret_cast<uint4*>(dst + static_cast<int64_t>(send_pos[i]) * H);
  for (int64_t c = threadIdx.x; c < H / kVec; c += blockDim.x) out[c] = src[c];
}

// dst[r, c] = bf16(src[r, c]) for a [rows, cols] fp32 matrix (contiguous) into bf16 with row
// stride ld.
__global__ void round_to_bf16_kernel(const float* src, int64_t rows, int64_t cols, uint16_t* dst, int64_t ld) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[(i / cols) * ld + i % cols] = bf16_bits_from_float(src[i]);
}

__global__ void swiglu_kernel(const uint16_t* h, int64_t rows, int64_t F, uint16_t* a) {
  const int64_t vecs_per_row = F / kVec, total = rows * vecs_per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / vecs_per_row, f = (i % vecs_per_row) * kVec;
    const Vec8 g = load_bf16x8(h + r * 2 * F + f), u = load_bf16x8(h + r * 2 * F + F + f);
    Vec8 out;
#pragma unroll
    for (int v = 0; v < kVec; ++v) out.v[v] = contract_swiglu(g.v[v], u.v[v]);
    store_bf16x8(a + r * F + f, out);
  }
}

__global__ void dswiglu_kernel(const uint16_t* h, const float* da, int64_t rows, int64_t F, uint16_t* dh) {
  const int64_t vecs_per_row = F / kVec, total = rows * vecs_per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / vecs_per_row, f = (i % vecs_per_row) * kVec;
    const Vec8 g = load_bf16x8(h + r * 2 * F + f), u = load_bf16x8(h + r * 2 * F + F + f);
    const float4 d0 = *reinterpret_cast<const float4*>(da + r * F + f);
    const float4 d1 = *reinterpret_cast<const float4*>(da + r * F + f + 4);
    const float d[kVec] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
    Vec8 dg, du;
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const DSwiGluGrad grad = contract_dswiglu(g.v[v], u.v[v], d[v]);
      dg.v[v] = grad.dg;
      du.v[v] = grad.du;
    }
    store_bf16x8(dh + r * 2 * F + f, dg);
    store_bf16x8(dh + r * 2 * F + F + f, du);
  }
}

// One block per token; each thread owns whole vectors, so every element's slot-order sum is
// one thread's sequential loop.
__global__ void combine_kernel(const uint16_t* y_send, const int32_t* send_pos, const float* topk_w,
                               const uint16_t* shared, int64_t k, int64_t H, uint16_t* out, uint16_t* y_slots,
                               bool reverse_slots) {
  const int64_t t = blockIdx.x;
  for (int64_t c = threadIdx.x * kVec; c < H; c += blockDim.x * kVec) {
    Vec8 acc;
#pragma unroll
    for (int v = 0; v < kVec; ++v) acc.v[v] = 0.0f;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = reverse_slots ? k - 1 - i : i;  // reversed only by the harness's test plant
      const uint16_t* row = y_send + static_cast<int64_t>(send_pos[t * k + j]) * H + c;
      const float w = topk_w[t * k + j];
      const Vec8 y = load_bf16x8(row);
#pragma unroll
      for (int v = 0; v < kVec; ++v) acc.v[v] = contract_combine_step(acc.v[v], w, y.v[v]);
      if (y_slots != nullptr)
        *reinterpret_cast<uint4*>(y_slots + (t * k + j) * H + c) = *reinterpret_cast<const uint4*>(row);
    }
    if (shared != nullptr) {
      const Vec8 s = load_bf16x8(shared + t * H + c);
#pragma unroll
      for (int v = 0; v < kVec; ++v) acc.v[v] = acc.v[v] + s.v[v];
    }
    store_bf16x8(out + t * H + c, acc);
  }
}

// The dot product's order: thread i of kTokenThreads accumulates vectors i, i + kTokenThreads, …
// (elements in order, fma into one fp32), then a shuffle tree inside each warp (offsets 16, 8,
// 4, 2, 1; lane 0 keeps the sum), then the warp sums in warp order.
__device__ float block_dot_sum(float partial, float* warp_sums) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) partial += __shfl_down_sync(0xffffffffu, partial, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = partial;
  __syncthreads();
  float total = 0.0f;
  if (threadIdx.x == 0)
    for (int w = 0; w < kTokenThreads / 32; ++w) total = total + warp_sums[w];
  __syncthreads();  // warp_sums is reused by the next slot
  return total;
}

__global__ void __launch_bounds__(kTokenThreads) slot_backward_kernel(const uint16_t* dout, const uint16_t* y_send,
                                                                      const int32_t* send_pos, const float* topk_w,
                                                                      int64_t k, int64_t H, float* d_topk_w,
                                                                      uint16_t* dy_send) {
  __shared__ float warp_sums[kTokenThreads / 32];
  const int64_t t = blockIdx.x;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t row = send_pos[t * k + j];
    const float w = topk_w[t * k + j];
    float partial = 0.0f;
    for (int64_t c = threadIdx.x * kVec; c < H; c += kTokenThreads * kVec) {
      const Vec8 d = load_bf16x8(dout + t * H + c), y = load_bf16x8(y_send + row * H + c);
      Vec8 dy;
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        partial = fmaf(d.v[v], y.v[v], partial);
        dy.v[v] = w * d.v[v];
      }
      store_bf16x8(dy_send + row * H + c, dy);
    }
    const float dot = block_dot_sum(partial, warp_sums);
    if (threadIdx.x == 0) d_topk_w[t * k + j] = dot;
  }
}

__global__ void dx_sum_kernel(const uint16_t* dx_send, const int32_t* send_pos, const uint16_t* shared, int64_t k,
                              int64_t H, uint16_t* d_x) {
  const int64_t t = blockIdx.x;
  for (int64_t c = threadIdx.x * kVec; c < H; c += blockDim.x * kVec) {
    Vec8 acc;
#pragma unroll
    for (int v = 0; v < kVec; ++v) acc.v[v] = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const Vec8 dx = load_bf16x8(dx_send + static_cast<int64_t>(send_pos[t * k + j]) * H + c);
#pragma unroll
      for (int v = 0; v < kVec; ++v) acc.v[v] = acc.v[v] + dx.v[v];
    }
    if (shared != nullptr) {
      const Vec8 s = load_bf16x8(shared + t * H + c);
#pragma unroll
      for (int v = 0; v < kVec; ++v) acc.v[v] = acc.v[v] + s.v[v];
    }
    store_bf16x8(d_x + t * H + c, acc);
  }
}

unsigned elementwise_blocks(int64_t vectors) {
  return static_cast<unsigned>(std::min<int64_t>((vectors + 255) / 256, int64_t{132} * 16));
}

}  // namespace

Status launch_gather_token_rows(const uint16_t* x, const int32_t* send_pos, int64_t T, int64_t k, int64_t H,
                                uint16_t* dst, cudaStream_t stream) {
  if (T * k == 0) return Status::Ok();
  gather_token_rows_kernel<<<static_cast<unsigned>(T * k), kTokenThreads, 0, stream>>>(x, send_pos, k, H, dst);
  DETMOE_LAUNCH_RETURN("gather_token_rows_kernel");
  return Status::Ok();
}

Status launch_swiglu(const uint16_t* h, int64_t rows, int64_t F, uint16_t* a, cudaStream_t stream) {
  if (rows == 0) return Status::Ok();
  swiglu_kernel<<<elementwise_blocks(rows * F / kVec), 256, 0, stream>>>(h, rows, F, a);
  DETMOE_LAUNCH_RETURN("swiglu_kernel");
  return Status::Ok();
}

Status launch_round_to_bf16(const float* src, int64_t rows, int64_t cols, uint16_t* dst, int64_t ld,
                            cudaStream_t stream) {
  if (rows == 0 || cols == 0) return Status::Ok();
  round_to_bf16_kernel<<<elementwise_blocks(rows * cols), 256, 0, stream>>>(src, rows, cols, dst, ld);
  DETMOE_LAUNCH_RETURN("round_to_bf16_kernel");
  return Status::Ok();
}

Status launch_dswiglu(const uint16_t* h, const float* da, int64_t rows, int64_t F, uint16_t* dh, cudaStream_t stream) {
  if (rows == 0) return Status::Ok();
  dswiglu_kernel<<<elementwise_blocks(rows * F / kVec), 256, 0, stream>>>(h, da, rows, F, dh);
  DETMOE_LAUNCH_RETURN("dswiglu_kernel");
  return Status::Ok();
}

Status launch_combine(const uint16_t* y_send, const int32_t* send_pos, const float* topk_w, const uint16_t* shared,
                      int64_t T, int64_t k, int64_t H, uint16_t* out, uint16_t* y_slots, cudaStream_t stream) {
  if (T == 0) return Status::Ok();
  // DETMOE_TEST_PLANT=combine-reversed: a planted change of summation order for the gate's tests.
  const bool reverse_slots = test_plant_enabled("combine-reversed");
  combine_kernel<<<static_cast<unsigned>(T), kTokenThreads, 0, stream>>>(y_send, send_pos, topk_w, shared, k, H, out,
                                                                          y_slots, reverse_slots);
  DETMOE_LAUNCH_RETURN("combine_kernel");
  return Status::Ok();
}

Status launch_slot_backward(const uint16_t* dout, const uint16_t* y_send, const int32_t* send_pos, const float* topk_w,
                            int64_t T, int64_t k, int64_t H, float* d_topk_w, uint16_t* dy_send, cudaStream_t stream) {
  if (T == 0) return Status::Ok();
  slot_backward_kernel<<<static_cast<unsigned>(T), kTokenThreads, 0, stream>>>(dout, y_send, send_pos, topk_w, k, H,
                                                                               d_topk_w, dy_send);
  DETMOE_LAUNCH_RETURN("slot_backward_kernel");
  return Status::Ok();
}

Status launch_dx_sum(const uint16_t* dx_send, const int32_t* send_pos, const uint16_t* shared, int64_t T, int64_t k,
                     int64_t H, uint16_t* d_x, cudaStream_t stream) {
  if (T == 0) return Status::Ok();
  dx_sum_kernel<<<static_cast<unsigned>(T), kTokenThreads, 0, stream>>>(dx_send, send_pos, shared, k, H, d_x);
  DETMOE_LAUNCH_RETURN("dx_sum_kernel");
  return Status::Ok();
}

}  // namespace detmoe::ref
