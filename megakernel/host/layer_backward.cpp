// detmoe::Layer::backward: argument checks and the backward kernel's TMA maps; the launch is in
// layer_backward_launch.cu. The backward reads what the last forward saved in the workspace, so
// it needs that forward's inputs (checked by pointer); with LayerConfig::save_h = false it first
// recomputes h (recompute_h.h).
#include <fmt/format.h>

#include <algorithm>

#include "detmoe/cuda_status.h"
#include "detmoe/phase_marks.h"
#include "detmoe/layer.h"
#include "megakernel/host/layer_impl.h"
#include "megakernel/host/layer_kernel.h"
#include "megakernel/host/recompute_h.h"
#include "megakernel/host/tensor_map.h"
#include "megakernel/host/weight_grads.h"

namespace detmoe {

namespace {

using mk::encode_bf16_map;

// The weight-gradient output map: fp32 (boxes of 32 columns, the GEMM core's fp32 store) or bf16.
Status encode_grad_map(CUtensorMap& out, void* p, int64_t rows, int64_t cols, bool fp32) {
  if (!fp32) return encode_bf16_map(out, p, rows, cols, 64);
  auto m = gemm::host::encode_ragged_map(
      gemm::host::MatrixView{p, gemm::host::ElementType::kFP32, rows, cols, cols}, 32, 64);
  if (!m.ok()) return m.status();
  out = *m;
  return Status::Ok();
}

}  // namespace

Status Layer::backward(const LayerBackwardArgs& args, cudaStream_t stream) {
  Impl& m = *impl_;
  const Shape& sh = m.shape;
  const int64_t P = sh.P;
  if (static_cast<int64_t>(args.inputs.size()) != P || static_cast<int64_t>(args.grads.size()) != P ||
      static_cast<int64_t>(args.outputs.size()) != P)
    return invalid_argument(fmt::format("backward: {} inputs, {} grads and {} outputs given, the layer has P = {} ranks",
                                        args.inputs.size(), args.grads.size(), args.outputs.size(), P));
  if (!m.has_forward)
    return invalid_argument(
        "backward: no forward to differentiate — run forward() first (and again after synchronize() reported a "
        "fault)");
  if (m.backward_memory == nullptr) {
    // The first backward allocates the backward's buffers (a forward-only Layer never holds
    // them). cudaMalloc is not a stream operation: refused while the stream is being captured.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    DETMOE_CUDA_RETURN(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone)
      return invalid_argument(fmt::format(
          "backward: the Layer's first backward allocates its {:.2f} GB of backward buffers and cannot be captured "
          "in a CUDA graph; run one backward before capturing",
          static_cast<double>(m.sizes.backward_bytes) / 1e9));
    DETMOE_CUDA_RETURN(cudaMalloc(&m.backward_memory, static_cast<size_t>(std::max<int64_t>(m.sizes.backward_bytes, 256))));
    mk::layout_backward_workspace(reinterpret_cast<uintptr_t>(m.backward_memory), m.sizes, m.ws);
  }

  mk::BackwardParams bp{};
  bp.f = m.last_forward;  // sizes, plan, maps, hooks and rank tensors of the forward it differentiates
  // The backward's buffers (the forward's parameters were built before they existed).
  bp.f.ws.dy = m.ws.dy;
  bp.f.ws.dh = m.ws.dh;
  bp.f.ws.dx_slots = m.ws.dx_slots;
  bp.f.ws.dhs = m.ws.dhs;
  const bool fp32 = m.config.grad_precision == GradPrecision::kFP32;
  bp.grad_fp32 = fp32 ? 1 : 0;
  const mk::Workspace& ws = m.ws;
  const int64_t rows = P * m.sizes.capacity, H = sh.H, F = sh.F, Fs = sh.Fs, T = sh.T;
  const int64_t epr = sh.experts_per_rank();
  DETMOE_RETURN_IF_ERROR(encode_bf16_map(bp.dy_rows, ws.dy, rows, H, 128));
  DETMOE_RETURN_IF_ERROR(encode_bf16_map(bp.dy_k, ws.dy, rows, H, 64));
  DETMOE_RETURN_IF_ERROR(encode_bf16_map(bp.act_k, ws.act, rows, F, 64));
  DETMOE_RETURN_IF_ERROR(encode_bf16_map(bp.dh_k, ws.dh, rows, 2 * F, 64));
  DETMOE_RETURN_IF_ERROR(encode_bf16_map(bp.dh_rows, ws.dh, rows, 2 * F, 128));
  DETMOE_RETURN_IF_ERROR(encode_bf16_map(bp.recv_k, ws.recv, rows, H, 64));
  if (Fs > 0) {
    DETMOE_RETURN_IF_ERROR(encode_bf16_map(bp.dhs_k, ws.dhs, P * T, 2 * Fs, 64));
    DETMOE_RETURN_IF_ERROR(encode_bf16_map(bp.dhs_rows, ws.dhs, P * T, 2 * Fs, 128));
    DETMOE_RETURN_IF_ERROR(encode_bf16_map(bp.act_s_k, ws.act_s, P * T, Fs, 64));
    DETMOE_RETURN_IF_ERROR(encode_bf16_map(bp.dxs_store, ws.s, P * T, H, 64));
  }
  for (int r = 0; r < P; ++r) {
    const DeviceLayerInputs& in = args.inputs[r];
    const DeviceGradInputs& g = args.grads[r];
    const DeviceGradOutputs& out = args.outputs[r];
    DETMOE_RETURN_IF_ERROR(validate_device_inputs(sh, in, r));
    DETMOE_RETURN_IF_ERROR(validate_device_grad_inputs(sh, g, r));
    DETMOE_RETURN_IF_ERROR(validate_device_grad_outputs(sh, out, r));
    const mk::RankTensors& fwd = m.last_forward.rank[r];
    if (in.x != fwd.x || in.topk_idx != fwd.topk_idx || in.topk_w != fwd.topk_w)
      return invalid_argument(fmt::format(
          "backward: inputs[{}] (x {}, topk_idx {}, topk_w {}) are not the last forward's ({}, {}, {}); the backward "
          "differentiates the forward that ran last on this Layer",
          r, static_cast<const void*>(in.x), static_cast<const void*>(in.topk_idx), static_cast<const void*>(in.topk_w),
          static_cast<const void*>(fwd.x), static_cast<const void*>(fwd.topk_idx), static_cast<const void*>(fwd.topk_w)));
    bp.grad[r] = mk::RankGradTensors{g.dout, out.d_x, out.d_topk_w};
    mk::RankGradMaps& gm = bp.grad_maps[r];
    DETMOE_RETURN_IF_ERROR(encode_bf16_map(gm.w_down_k, in.w_down, epr * H, F, 64));
    DETMOE_RETURN_IF_ERROR(encode_bf16_map(gm.w_gate_up_k, in.w_gate_up, epr * 2 * F, H, 64));
    DETMOE_RETURN_IF_ERROR(encode_grad_map(gm.dw_down, out.dw_down, epr * H, F, fp32));
    DETMOE_RETURN_IF_ERROR(encode_grad_map(gm.dw_gate_up, out.dw_gate_up, epr * 2 * F, H, fp32));
    if (Fs > 0) {
      DETMOE_RETURN_IF_ERROR(encode_bf16_map(gm.ws_down_k, in.ws_down, H, Fs, 64));
      DETMOE_RETURN_IF_ERROR(encode_bf16_map(gm.ws_gate_up_k, in.ws_gate_up, 2 * Fs, H, 64));
      DETMOE_RETURN_IF_ERROR(encode_bf16_map(gm.dout_rows, g.dout, T, H, 128));
      DETMOE_RETURN_IF_ERROR(encode_bf16_map(gm.dout_k, g.dout, T, H, 64));
      DETMOE_RETURN_IF_ERROR(encode_bf16_map(gm.x_k, in.x, T, H, 64));
      DETMOE_RETURN_IF_ERROR(encode_grad_map(gm.dws_down, out.dws_down, H, Fs, fp32));
      DETMOE_RETURN_IF_ERROR(encode_grad_map(gm.dws_gate_up, out.dws_gate_up, 2 * Fs, H, fp32));
    }
  }
  // The routed weight gradients in this launch or in GEMM-core launches after it (weight_grads.h).
  // Those launches and recompute_h group the receive rows by the ranks' local experts: one
  // derivation of those offsets from the plan serves both.
  const mk::LaterWeightGrads later = mk::later_weight_grads(m.config);
  if (!m.config.save_h || later.any()) DETMOE_RETURN_IF_ERROR(mk::rank_group_offsets(sh, m.ws, stream));
  if (!m.config.save_h) {
    // h was not kept: recompute it into dh, which the dSwiGLU epilogue reads it from and then
    // overwrites tile by tile (each tile reads only its own h columns, before it stores them).
    DETMOE_RETURN_IF_ERROR(mk::recompute_h(sh, m.sizes.capacity, m.ws, args.inputs, stream));
    mark_phase(stream, "recompute h");
    bp.f.h_store = bp.dh_k;
    if (Fs > 0) bp.f.hs_store = bp.dhs_k;
  }
  bp.later_phases = (later.down ? mk::kLaterWgradDown : 0u) | (later.gate_up ? mk::kLaterWgradGateUp : 0u);
  DETMOE_RETURN_IF_ERROR(mk::launch_backward_kernel(bp, m.grid, stream));
  mark_phase(stream, "fused backward launch");
  if (!later.any()) return Status::Ok();
  return mk::routed_weight_grads(sh, m.sizes.capacity, m.ws, args.outputs, fp32, later, m.grid,
                                 m.config, stream);
}

}  // namespace detmoe
