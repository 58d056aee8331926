// Backward of the reference layer, phase by phase over the local ranks:
// d_topk_w and the weighted dout rows at the source → dispatch → (recompute h if not saved) →
// per expert: da = dy·W_down (fp32), dSwiGLU → dh, per-slot dx = dh·W_gate_up, weight gradients
// over the expert's rows in one GEMM each → exchange dx back → shared expert → slot-order d_x.
#include <vector>

#include "detmoe/cuda_status.h"
#include "detmoe/phase_marks.h"
#include "glue_kernels.h"
#include "layer_state.h"

namespace detmoe {

using ref::GemmOut;
using ref::GemmProblem;
using ref::RankState;

namespace {

int64_t grad_bytes(GradPrecision p) { return p == GradPrecision::kFP32 ? 4 : 2; }

}  // namespace

Status ReferenceLayer::Impl::run_backward(std::span<const DeviceLayerInputs> inputs,
                                          std::span<const DeviceGradInputs> grads,
                                          std::span<const DeviceGradOutputs> outputs) {
  const int64_t T = shape.T, k = shape.k, H = shape.H, F = shape.F, Fs = shape.Fs, epr = shape.experts_per_rank();
  const GemmOut wgrad = config.grad_precision == GradPrecision::kFP32 ? GemmOut::kFP32 : GemmOut::kBF16;
  const int64_t gbytes = grad_bytes(config.grad_precision);
  const size_t n = ranks.size();
  std::vector<const void*> src(n);
  std::vector<void*> dst(n);

  for (auto& r : ranks) {
    DETMOE_CUDA_RETURN(cudaSetDevice(r->device));
    DETMOE_RETURN_IF_ERROR(ref::launch_slot_backward(grads[r->slot].dout, r->y_send, r->send_pos, inputs[r->slot].topk_w,
                                                     T, k, H, outputs[r->slot].d_topk_w, r->dy_send, r->stream));
    mark_phase(r->stream, "dy build + d_topk_w");
    src[r->slot] = r->dy_send;
    dst[r->slot] = r->dy_exp;
  }
  DETMOE_RETURN_IF_ERROR(exchange->exchange(dispatch_segments, src, dst, H * 2));
  for (auto& r : ranks) mark_phase(r->stream, "dy exchange");

  for (auto& r : ranks) {
    DETMOE_CUDA_RETURN(cudaSetDevice(r->device));
    const DeviceLayerInputs& in = inputs[r->slot];
    const DeviceGradOutputs& out = outputs[r->slot];
    if (!config.save_h) DETMOE_RETURN_IF_ERROR(routed_gate_up(*r, in, "recompute h: gate_up GEMMs", "recompute h: SwiGLU"));
    const int64_t begin = rank_row_begin(r->rank), rows_total = expert_offset[(r->rank + 1) * epr] - begin;
    std::vector<GemmProblem> da, dx, dw_down, dw_gate_up;
    for (int64_t el = 0; el < epr; ++el) {
      const int64_t e = r->rank * epr + el, rows = expert_rows(e), at = expert_offset[e] - begin;
      char* dwd = static_cast<char*>(out.dw_down) + el * H * F * gbytes;
      char* dwgu = static_cast<char*>(out.dw_gate_up) + el * 2 * F * H * gbytes;
      if (rows == 0) {  // an expert without rows has exactly zero weight gradients
        DETMOE_CUDA_RETURN(cudaMemsetAsync(dwd, 0, H * F * gbytes, r->stream));
        DETMOE_CUDA_RETURN(cudaMemsetAsync(dwgu, 0, 2 * F * H * gbytes, r->stream));
        continue;
      }
      const uint16_t* dy = r->dy_exp + at * H;
      const uint16_t* dh = r->dh + at * 2 * F;
      // da[rows, F] = dy · W_down[e]        (W_down[e] is [H, F])
      da.push_back({rows, F, H, dy, H, in.w_down + el * H * F, F, r->da + at * F, F});
      // dx[rows, H] = dh · W_gate_up[e]     (one K = 2F sum: gate, then up)
      dx.push_back({rows, H, 2 * F, dh, 2 * F, in.w_gate_up + el * 2 * F * H, H, r->dx_exp + at * H, H});
      // dW_down[e][H, F] = dyᵀ · a;  dW_gate_up[e][2F, H] = dhᵀ · x — K = the expert's rows, one call
      dw_down.push_back({H, F, rows, dy, H, r->a + at * F, F, dwd, F});
      dw_gate_up.push_back({2 * F, H, rows, dh, 2 * F, r->x_exp + at * H, H, dwgu, H});
    }
    DETMOE_RETURN_IF_ERROR(r->gemm.run(options.gemm, false, false, GemmOut::kFP32, da, "da = dy·W_down"));
    mark_phase(r->stream, "da GEMMs");
    DETMOE_RETURN_IF_ERROR(ref::launch_dswiglu(r->h, r->da, rows_total, F, r->dh, r->stream));
    mark_phase(r->stream, "dSwiGLU");
    DETMOE_RETURN_IF_ERROR(r->gemm.run(options.gemm, false, false, GemmOut::kBF16, dx, "dx = dh·W_gate_up"));
    mark_phase(r->stream, "dx GEMMs");
    DETMOE_RETURN_IF_ERROR(r->gemm.run(options.gemm, true, false, wgrad, dw_down, "dW_down = dyᵀ·a"));
    mark_phase(r->stream, "dW_down");
    DETMOE_RETURN_IF_ERROR(r->gemm.run(options.gemm, true, false, wgrad, dw_gate_up, "dW_gate_up = dhᵀ·x"));
    mark_phase(r->stream, "dW_gate_up");
    src[r->slot] = r->dx_exp;
    dst[r->slot] = r->dx_send;
  }
  DETMOE_RETURN_IF_ERROR(exchange->exchange(combine_segments, src, dst, H * 2));
  for (auto& r : ranks) mark_phase(r->stream, "dx exchange");

  for (auto& r : ranks) {
    DETMOE_CUDA_RETURN(cudaSetDevice(r->device));
    const DeviceLayerInputs& in = inputs[r->slot];
    const DeviceGradOutputs& out = outputs[r->slot];
    const uint16_t* shared_dx = nullptr;
    if (Fs > 0) {
      const uint16_t* x = r->x_pad != nullptr ? r->x_pad : in.x;  // x_pad still holds x from forward
      if (!config.save_h) DETMOE_RETURN_IF_ERROR(shared_gate_up(*r, x, in.ws_gate_up));
      const uint16_t* dout = grads[r->slot].dout;
      if (r->dout_pad != nullptr) {
        DETMOE_CUDA_RETURN(cudaMemcpyAsync(r->dout_pad, dout, T * H * 2, cudaMemcpyDeviceToDevice, r->stream));
        dout = r->dout_pad;
      }
      std::vector<GemmProblem> das, dxs;
      for (int64_t at = 0; at < shared_rows; at += ref::kSharedRowChunk) {
        das.push_back({ref::kSharedRowChunk, Fs, H, dout + at * H, H, in.ws_down, Fs, r->das + at * Fs, Fs});
        dxs.push_back({ref::kSharedRowChunk, H, 2 * Fs, r->dhs + at * 2 * Fs, 2 * Fs, in.ws_gate_up, H, r->dxs + at * H, H});
      }
      DETMOE_RETURN_IF_ERROR(r->gemm.run(ReferenceGemm::kPerExpert, false, false, GemmOut::kFP32, das, "das = dout·Ws_down"));
      DETMOE_RETURN_IF_ERROR(ref::launch_dswiglu(r->hs, r->das, shared_rows, Fs, r->dhs, r->stream));
      DETMOE_RETURN_IF_ERROR(r->gemm.run(ReferenceGemm::kPerExpert, false, false, GemmOut::kBF16, dxs, "dxs = dhs·Ws_gate_up"));
      const GemmProblem dws_down{H, Fs, shared_rows, dout, H, r->as, Fs, out.dws_down, Fs};
      const GemmProblem dws_gate_up{2 * Fs, H, shared_rows, r->dhs, 2 * Fs, x, H, out.dws_gate_up, H};
      DETMOE_RETURN_IF_ERROR(r->gemm.run(ReferenceGemm::kPerExpert, true, false, wgrad, {&dws_down, 1}, "dWs_down = doutᵀ·as"));
      DETMOE_RETURN_IF_ERROR(
          r->gemm.run(ReferenceGemm::kPerExpert, true, false, wgrad, {&dws_gate_up, 1}, "dWs_gate_up = dhsᵀ·x"));
      shared_dx = r->dxs;
      mark_phase(r->stream, "shared expert backward");
    }
    DETMOE_RETURN_IF_ERROR(ref::launch_dx_sum(r->dx_send, r->send_pos, shared_dx, T, k, H, out.d_x, r->stream));
    mark_phase(r->stream, "d_x sum");
  }
  return Status::Ok();
}

}  // namespace detmoe
