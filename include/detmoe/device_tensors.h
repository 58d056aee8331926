// Per-rank device arguments of one MoE layer step: what the reference layer and the megakernel
// both take (DESIGN.md §2). Pointers are device memory of the rank's GPU; bf16 tensors are
// passed as their 16-bit patterns (uint16_t) so these headers need no CUDA types.
//
// Layouts are row-major. The gate and up projections of an expert are stacked into one
// [2F, H] matrix (rows 0..F−1 = W_gate[e], rows F..2F−1 = W_up[e]): h = x·[W_gate; W_up]ᵀ is one
// GEMM, the input gradient dh·[W_gate; W_up] is one K = 2F sum (the order the oracle uses:
// gate f = 0..F−1, then up f = 0..F−1), and so is each weight gradient. The shared expert uses
// the same stacking.
#pragma once

#include <cstdint>
#include <span>

#include "detmoe/config.h"
#include "detmoe/problem.h"
#include "detmoe/status.h"

namespace detmoe {

struct DeviceLayerInputs {
  const uint16_t* x = nullptr;           // [T, H] bf16, this rank's tokens
  const int32_t* topk_idx = nullptr;     // [T, k] global expert ids
  const float* topk_w = nullptr;         // [T, k]
  const uint16_t* w_gate_up = nullptr;   // [E/P, 2F, H] bf16, the rank's experts r·E/P … (r+1)·E/P − 1
  const uint16_t* w_down = nullptr;      // [E/P, H, F] bf16
  const uint16_t* ws_gate_up = nullptr;  // [2Fs, H] bf16 (Fs > 0 only)
  const uint16_t* ws_down = nullptr;     // [H, Fs] bf16 (Fs > 0 only)
};

struct DeviceLayerOutputs {
  uint16_t* out = nullptr;  // [T, H] bf16
  uint16_t* y = nullptr;    // [T, k, H] bf16 per-slot expert outputs; null = not written
};

struct DeviceGradInputs {
  const uint16_t* dout = nullptr;  // [T, H] bf16
};

// Weight gradients are fp32 or bf16 per LayerConfig::grad_precision. The shared-expert
// gradients cover this rank's T tokens only: summing them over ranks is data parallelism's job.
struct DeviceGradOutputs {
  uint16_t* d_x = nullptr;      // [T, H] bf16
  float* d_topk_w = nullptr;    // [T, k] fp32
  void* dw_gate_up = nullptr;   // [E/P, 2F, H]
  void* dw_down = nullptr;      // [E/P, H, F]
  void* dws_gate_up = nullptr;  // [2Fs, H] (Fs > 0 only)
  void* dws_down = nullptr;     // [H, Fs] (Fs > 0 only)
};

// Every vectorised access is 16 bytes wide: activation and weight base pointers must be
// 16-byte aligned (H, F, Fs are multiples of 64, so every row then is too).
inline constexpr uintptr_t kDevicePointerAlignment = 16;

// Null and alignment checks for rank `rank`'s arguments; the message names the field and rank.
Status validate_device_inputs(const Shape& shape, const DeviceLayerInputs& in, int rank);
Status validate_device_outputs(const Shape& shape, const DeviceLayerOutputs& out, int rank);
Status validate_device_grad_inputs(const Shape& shape, const DeviceGradInputs& in, int rank);
Status validate_device_grad_outputs(const Shape& shape, const DeviceGradOutputs& out, int rank);

}  // namespace detmoe
