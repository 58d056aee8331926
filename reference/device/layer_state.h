// Internal state of ReferenceLayer: one RankState per local rank (its stream, cuBLAS handle,
// plan and buffers) and the host copy of the plan's counts with the exchange segments.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cublas_gemm.h"
#include "detmoe/reference_layer.h"
#include "device_buffer.h"
#include "device_plan.h"

namespace detmoe::ref {

// The shared expert runs in GEMMs of exactly this many rows (the last chunk zero-padded), so
// its cuBLAS calls — and so its bits — are the same whatever T = N/P is (D2).
inline constexpr int64_t kSharedRowChunk = 1024;

struct RankState {
  int slot = 0;
  int rank = 0;
  int device = 0;
  cudaStream_t stream = nullptr;
  CublasGemm gemm;
  DevicePlan plan;
  DeviceBuffer memory;

  int32_t* idx_global = nullptr;  // [P·T, k] every rank's routing
  float* w_global = nullptr;      // [P·T, k]
  int64_t* send_base = nullptr;   // [E] scratch of the send positions
  int32_t* send_pos = nullptr;    // [T·k] row of (t, j) in this rank's send buffers

  // Routed experts. "send" buffers [T·k, ·] are in send order (destination, expert, token);
  // "exp" buffers [capacity, ·] hold the rank's received rows in expert order. On one stream
  // with P = 1 the two orders coincide and each pair is one buffer.
  uint16_t* x_send = nullptr;   // gathered x rows
  uint16_t* x_exp = nullptr;    // the expert GEMMs' input (kept for dW_gate_up)
  uint16_t* h = nullptr;        // [capacity, 2F] = [g | u]
  uint16_t* a = nullptr;        // [capacity, F]
  uint16_t* y_exp = nullptr;    // [capacity, H]
  uint16_t* y_send = nullptr;   // y back at the source, kept for d_topk_w
  uint16_t* dy_send = nullptr;  // bf16(w·dout) rows
  uint16_t* dy_exp = nullptr;
  float* da = nullptr;          // [capacity, F] fp32, not rounded
  uint16_t* dh = nullptr;       // [capacity, 2F]
  uint16_t* dx_exp = nullptr;   // per-slot input gradients
  uint16_t* dx_send = nullptr;

  // Shared expert over T_pad = ⌈T / kSharedRowChunk⌉·kSharedRowChunk rows; x_pad / dout_pad are
  // null when T is a multiple of the chunk and the caller's tensors are used directly.
  uint16_t* x_pad = nullptr;
  uint16_t* hs = nullptr;   // [T_pad, 2Fs]
  uint16_t* as = nullptr;   // [T_pad, Fs]
  uint16_t* s = nullptr;    // [T_pad, H]
  uint16_t* dout_pad = nullptr;
  float* das = nullptr;     // [T_pad, Fs]
  uint16_t* dhs = nullptr;  // [T_pad, 2Fs]
  uint16_t* dxs = nullptr;  // [T_pad, H]
};

}  // namespace detmoe::ref

namespace detmoe {

struct ReferenceLayer::Impl {
  Shape shape;
  LayerConfig config;
  ReferenceOptions options;
  std::shared_ptr<RowExchange> exchange;
  int64_t capacity_rows = 0;  // receive rows per rank
  int64_t shared_rows = 0;    // T_pad
  std::vector<std::unique_ptr<ref::RankState>> ranks;

  // Host copy of the current plan's counts (identical on every rank) and what follows from them.
  bool planned = false;
  bool forward_done = false;
  std::vector<int32_t> expert_src_count;  // [E, P]
  std::vector<int64_t> expert_offset;     // [E+1]
  std::vector<RowSegment> routing_segments;   // all-gather of topk rows
  std::vector<RowSegment> dispatch_segments;  // send order at the source -> expert order at the owner
  std::vector<RowSegment> combine_segments;   // the reverse

  int64_t rank_row_begin(int64_t rank) const { return expert_offset[rank * shape.experts_per_rank()]; }
  int64_t expert_rows(int64_t e) const { return expert_offset[e + 1] - expert_offset[e]; }

  Status check_slots(size_t n, const char* what) const;
  Status run_forward(std::span<const DeviceLayerInputs> inputs, std::span<const DeviceLayerOutputs> outputs);
  Status run_backward(std::span<const DeviceLayerInputs> inputs, std::span<const DeviceGradInputs> grads,
                      std::span<const DeviceGradOutputs> outputs);
  // The forward's first GEMM and SwiGLU of the routed experts and of the shared expert
  // (backward calls them again when h was not saved).
  // h = x·W_gate_upᵀ per expert, then a = swiglu(h); the two phases are marked with the caller's
  // names (detmoe/phase_marks.h), so the backward's recompute is not counted as the forward's.
  Status routed_gate_up(ref::RankState& r, const DeviceLayerInputs& in, const char* gemm_phase, const char* swiglu_phase);
  Status shared_gate_up(ref::RankState& r, const uint16_t* x, const uint16_t* ws_gate_up);
};

}  // namespace detmoe
