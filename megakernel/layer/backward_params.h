// Parameters of the fused backward kernel (backward_kernel.cuh): the last forward's parameters
// (sizes, workspace with the plan and the saved tensors, every rank's inputs and maps) plus the
// gradients' tensors and the TMA maps only the backward reads or writes. Plain data built by the
// host (megakernel/host/layer_backward.cpp), passed as one __grid_constant__ argument
// (≈ 20 KB with 8 ranks; the limit is 32 KB).
//
// Operand forms (the GEMM core's layouts, gemm/operand_layout.cuh):
//   data-grad   A K-major rows (box 64 × 128), B a weight read MN-major (boxes 64 × 64 over its
//               K rows): da = dy·W_down, dx = dh·W_gate_up (and the shared expert's)
//   weight-grad A and B both rows-as-K (boxes 64 × 64): dW = Aᵀ·B over an expert's rows
#pragma once

#include <cuda.h>

#include <cstdint>

#include "megakernel/layer/layer_params.h"

namespace detmoe::mk {

// One rank's gradient tensors (device pointers of the rank's GPU).
struct RankGradTensors {
  const uint16_t* dout;  // [T, H] bf16
  uint16_t* d_x;         // [T, H] bf16
  float* d_topk_w;       // [T, k] fp32
};

// One rank's maps of the backward.
struct RankGradMaps {
  CUtensorMap w_down_k;      // [E/P·H, F] box 64 × 64: da's B (K = H rows of W_down[e])
  CUtensorMap w_gate_up_k;   // [E/P·2F, H] box 64 × 64: dx's B (K = 2F rows of W_gate_up[e])
  CUtensorMap ws_down_k;     // [H, Fs] box 64 × 64 (Fs > 0)
  CUtensorMap ws_gate_up_k;  // [2Fs, H] box 64 × 64 (Fs > 0)
  CUtensorMap dout_rows;     // [T, H] box 64 × 128: the shared da's A (Fs > 0)
  CUtensorMap dout_k;        // [T, H] box 64 × 64: dWs_down's A (Fs > 0)
  CUtensorMap x_k;           // [T, H] box 64 × 64: dWs_gate_up's B (Fs > 0)
  CUtensorMap dw_down;       // [E/P·H, F] store: fp32 box 32 × 64 or bf16 box 64 × 64
  CUtensorMap dw_gate_up;    // [E/P·2F, H]
  CUtensorMap dws_down;      // [H, Fs] (Fs > 0)
  CUtensorMap dws_gate_up;   // [2Fs, H] (Fs > 0)
};

// BackwardParams::later_phases bits of the routed weight gradients (list phases 6 and 8, checked
// against BwdPhase in backward_tasks.cuh).
inline constexpr uint32_t kLaterWgradDown = 1u << 6;
inline constexpr uint32_t kLaterWgradGateUp = 1u << 8;

struct BackwardParams {
  LayerParams f;        // the last forward's (its rank tensors: the forward's x, routing and y)
  int32_t grad_fp32;    // weight gradients in fp32 (else bf16)
  // Phases (bit ph of BwdPhase) the host runs as a second launch after this one instead
  // (megakernel/host/weight_grads.h: the routed weight gradients), 0: all in this launch.
  uint32_t later_phases;
  // Maps over the workspace's symmetric buffers (rows of every rank, as the forward's).
  CUtensorMap dy_rows;   // [P·cap, H] box 64 × 128: da's A
  CUtensorMap dy_k;      // [P·cap, H] box 64 × 64: dW_down's A
  CUtensorMap act_k;     // [P·cap, F] box 64 × 64: dW_down's B (the forward's a)
  CUtensorMap dh_k;      // [P·cap, 2F] box 64 × 64: dSwiGLU's store and dW_gate_up's A
  CUtensorMap dh_rows;   // [P·cap, 2F] box 64 × 128: dx's A
  CUtensorMap recv_k;    // [P·cap, H] box 64 × 64: dW_gate_up's B (the dispatched x)
  CUtensorMap dhs_k;     // [P·T, 2Fs] box 64 × 64: shared dSwiGLU's store and dWs_gate_up's A
  CUtensorMap dhs_rows;  // [P·T, 2Fs] box 64 × 128: the shared dx's A
  CUtensorMap act_s_k;   // [P·T, Fs] box 64 × 64: dWs_down's B
  CUtensorMap dxs_store; // [P·T, H] box 64 × 64: the shared dx (in the forward's s buffer)
  RankGradTensors grad[kMaxMegakernelRanks];
  RankGradMaps grad_maps[kMaxMegakernelRanks];
};

}  // namespace detmoe::mk
