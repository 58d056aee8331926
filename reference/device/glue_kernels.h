// The reference layer's small CUDA kernels around the GEMMs: gather into send order, SwiGLU,
// dSwiGLU, the slot-order combine, the per-slot backward (d_topk_w and the weighted dout rows),
// and the slot-order d_x sum. Each works on 16-byte vectors of eight bf16 (H, F are multiples
// of 64) and uses the formulas of detmoe/contract_math.h. All launches are asynchronous.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "detmoe/status.h"

namespace detmoe::ref {

// Threads per block of the per-token kernels; part of the d_topk_w summation order.
inline constexpr int kTokenThreads = 128;

// dst[send_pos[t·k + j]] = x[t] for every local (t, j).
Status launch_gather_token_rows(const uint16_t* x, const int32_t* send_pos, int64_t T, int64_t k, int64_t H,
                                uint16_t* dst, cudaStream_t stream);

// a[r, f] = bf16(swiglu(h[r, f], h[r, F + f])) for r < rows; h is [rows, 2F], a is [rows, F].
Status launch_swiglu(const uint16_t* h, int64_t rows, int64_t F, uint16_t* a, cudaStream_t stream);

// dst[r, c] = bf16(src[r, c]): src is [rows, cols] fp32, contiguous; dst has row stride ld.
Status launch_round_to_bf16(const float* src, int64_t rows, int64_t cols, uint16_t* dst, int64_t ld,
                            cudaStream_t stream);

// dh[r, f] = bf16(dg), dh[r, F + f] = bf16(du) from h [rows, 2F] and da [rows, F] (fp32).
Status launch_dswiglu(const uint16_t* h, const float* da, int64_t rows, int64_t F, uint16_t* dh, cudaStream_t stream);

// out[t] = bf16(Σ_j fma(w[t, j], y_send[send_pos[t, j]]) in slot order, + shared[t] if given).
// y_slots (optional): y_slots[t, j] = y_send[send_pos[t, j]].
Status launch_combine(const uint16_t* y_send, const int32_t* send_pos, const float* topk_w, const uint16_t* shared,
                      int64_t T, int64_t k, int64_t H, uint16_t* out, uint16_t* y_slots, cudaStream_t stream);

// d_topk_w[t, j] = ⟨dout[t], y_send[send_pos[t, j]]⟩ (fixed order, see NUMERICS.md) and
// dy_send[send_pos[t, j]] = bf16(w[t, j]·dout[t]).
Status launch_slot_backward(const uint16_t* dout, const uint16_t* y_send, const int32_t* send_pos, const float* topk_w,
                            int64_t T, int64_t k, int64_t H, float* d_topk_w, uint16_t* dy_send, cudaStream_t stream);

// d_x[t] = bf16(Σ_j dx_send[send_pos[t, j]] in slot order, + shared[t] if given).
Status launch_dx_sum(const uint16_t* dx_send, const int32_t* send_pos, const uint16_t* shared, int64_t T, int64_t k,
                     int64_t H, uint16_t* d_x, cudaStream_t stream);

}  // namespace detmoe::ref
