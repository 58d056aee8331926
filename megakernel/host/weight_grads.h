// The routed experts' weight gradients as a second launch after the fused backward (issue 18's
// "if a second launch is measurably better"; docs/MEGAKERNEL.md "Backward"): the GEMM core's
// grouped weight-grad GEMM (detmoe/gemm.h) over the rows the fused launch left in the workspace,
// per rank and local expert dW_down = dyᵀ·a and dW_gate_up = dhᵀ·x_recv.
//
// Same bits as the fused kernel's weight-gradient tiles: the same 128 × 256 output tiles, each
// reducing its expert's rows in 64-row k-blocks from the first with the same wgmma sequence
// (gemm::consume_k_blocks over the weight-grad operand form) and the same fp32 or bf16 store; only
// the depth of the operand ring differs (the core's four stages against the fused kernel's three,
// whose shared memory also holds the epilogues' staging).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "detmoe/config.h"
#include "detmoe/device_tensors.h"
#include "detmoe/shapes.h"
#include "detmoe/status.h"
#include "megakernel/layer/layer_params.h"

namespace detmoe::mk {

// ws.rank_group_offsets[r·(E/P + 1) + e] = the first row of rank r's local expert e within the
// rank's receive rows (e = E/P: the end of its rows), from the forward's plan: the groups of
// recompute_h and of routed_weight_grads. Asynchronous.
Status rank_group_offsets(const Shape& shape, const Workspace& ws, cudaStream_t stream);

// Which routed weight gradients run after the fused launch.
struct LaterWeightGrads {
  bool down = false;     // dW_down
  bool gate_up = false;  // dW_gate_up
  bool any() const { return down || gate_up; }
};

// LayerConfig::weight_grad_launch resolved (kAuto: the measured rule, docs/PERF.md sessions 26
// and 27).
LaterWeightGrads later_weight_grads(const LayerConfig& config);

// Every rank's routed dW_down and/or dW_gate_up (`which`; fp32 or bf16) from ws.dy, ws.act, ws.dh
// and ws.recv, on `grid` CTAs (0: one per SM), with `config`'s speed knobs for them: the static or
// the ticket tile deal (weight_grad_tickets, through ws.wgrad_tickets), each expert's tile order
// (weight_grad_band_budget_kb), evict-first stores (weight_grad_stream_stores) and the deep store
// ring (weight_grad_deep_ring). Needs
// rank_group_offsets() earlier on `stream`.
Status routed_weight_grads(const Shape& shape, int64_t capacity, const Workspace& ws,
                           std::span<const DeviceGradOutputs> outputs, bool fp32, LaterWeightGrads which, int grid,
                           const LayerConfig& config, cudaStream_t stream);

}  // namespace detmoe::mk
