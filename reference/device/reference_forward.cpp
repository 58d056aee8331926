// Forward of the reference layer, phase by phase over the local ranks:
// gather x rows into send order → dispatch → per-expert GEMM1 (h = [g|u]) → SwiGLU → per-expert
// GEMM2 (y) → combine exchange back to the source → shared expert → slot-order weighted sum.
#include <vector>

#include "detmoe/cuda_status.h"
#include "detmoe/phase_marks.h"
#include "glue_kernels.h"
#include "layer_state.h"

namespace detmoe {

using ref::GemmOut;
using ref::GemmProblem;
using ref::RankState;

Status ReferenceLayer::Impl::routed_gate_up(RankState& r, const DeviceLayerInputs& in, const char* gemm_phase,
                                            const char* swiglu_phase) {
  const int64_t H = shape.H, F = shape.F, epr = shape.experts_per_rank(), begin = rank_row_begin(r.rank);
  std::vector<GemmProblem> gate_up;
  for (int64_t el = 0; el < epr; ++el) {
    const int64_t e = r.rank * epr + el, rows = expert_rows(e), at = expert_offset[e] - begin;
    if (rows == 0) continue;
    // h_e[rows, 2F] = x_e · W_gate_up[e]ᵀ
    gate_up.push_back({rows, 2 * F, H, r.x_exp + at * H, H, in.w_gate_up + el * 2 * F * H, H, r.h + at * 2 * F, 2 * F});
  }
  DETMOE_RETURN_IF_ERROR(r.gemm.run(options.gemm, false, true, GemmOut::kBF16, gate_up, "h = x·W_gate_upᵀ"));
  mark_phase(r.stream, gemm_phase);
  const int64_t rows = expert_offset[(r.rank + 1) * epr] - begin;
  DETMOE_RETURN_IF_ERROR(ref::launch_swiglu(r.h, rows, F, r.a, r.stream));
  mark_phase(r.stream, swiglu_phase);
  return Status::Ok();
}

// Fixed kSharedRowChunk-row GEMMs (see layer_state.h); x has shared_rows rows.
Status ReferenceLayer::Impl::shared_gate_up(RankState& r, const uint16_t* x, const uint16_t* ws_gate_up) {
  const int64_t H = shape.H, Fs = shape.Fs;
  std::vector<GemmProblem> chunks;
  for (int64_t at = 0; at < shared_rows; at += ref::kSharedRowChunk)
    chunks.push_back({ref::kSharedRowChunk, 2 * Fs, H, x + at * H, H, ws_gate_up, H, r.hs + at * 2 * Fs, 2 * Fs});
  DETMOE_RETURN_IF_ERROR(
      r.gemm.run(ReferenceGemm::kPerExpert, false, true, GemmOut::kBF16, chunks, "hs = x·Ws_gate_upᵀ"));
  return ref::launch_swiglu(r.hs, shared_rows, Fs, r.as, r.stream);
}

Status ReferenceLayer::Impl::run_forward(std::span<const DeviceLayerInputs> inputs,
                                         std::span<const DeviceLayerOutputs> outputs) {
  const int64_t T = shape.T, k = shape.k, H = shape.H, F = shape.F, Fs = shape.Fs, epr = shape.experts_per_rank();
  const size_t n = ranks.size();
  std::vector<const void*> src(n);
  std::vector<void*> dst(n);

  for (auto& r : ranks) {
    DETMOE_CUDA_RETURN(cudaSetDevice(r->device));
    DETMOE_RETURN_IF_ERROR(ref::launch_gather_token_rows(inputs[r->slot].x, r->send_pos, T, k, H, r->x_send, r->stream));
    mark_phase(r->stream, "plan + gather");
    src[r->slot] = r->x_send;
    dst[r->slot] = r->x_exp;
  }
  DETMOE_RETURN_IF_ERROR(exchange->exchange(dispatch_segments, src, dst, H * 2));
  for (auto& r : ranks) mark_phase(r->stream, "dispatch exchange");

  for (auto& r : ranks) {
    DETMOE_CUDA_RETURN(cudaSetDevice(r->device));
    const DeviceLayerInputs& in = inputs[r->slot];
    DETMOE_RETURN_IF_ERROR(routed_gate_up(*r, in, "gate_up GEMMs", "SwiGLU"));
    const int64_t begin = rank_row_begin(r->rank);
    std::vector<GemmProblem> down;
    for (int64_t el = 0; el < epr; ++el) {
      const int64_t e = r->rank * epr + el, rows = expert_rows(e), at = expert_offset[e] - begin;
      if (rows == 0) continue;
      // y_e[rows, H] = a_e · W_down[e]ᵀ
      down.push_back({rows, H, F, r->a + at * F, F, in.w_down + el * H * F, F, r->y_exp + at * H, H});
    }
    DETMOE_RETURN_IF_ERROR(r->gemm.run(options.gemm, false, true, GemmOut::kBF16, down, "y = a·W_downᵀ"));
    mark_phase(r->stream, "down GEMMs");
    if (!config.save_h) {
      // Not saved: the backward must recompute h and a, and poisoning them proves that it does.
      const int64_t rows = expert_offset[(r->rank + 1) * epr] - begin;
      DETMOE_CUDA_RETURN(cudaMemsetAsync(r->h, 0xff, rows * 2 * F * 2, r->stream));
      DETMOE_CUDA_RETURN(cudaMemsetAsync(r->a, 0xff, rows * F * 2, r->stream));
    }
    src[r->slot] = r->y_exp;
    dst[r->slot] = r->y_send;
  }
  DETMOE_RETURN_IF_ERROR(exchange->exchange(combine_segments, src, dst, H * 2));
  for (auto& r : ranks) mark_phase(r->stream, "combine exchange");

  for (auto& r : ranks) {
    DETMOE_CUDA_RETURN(cudaSetDevice(r->device));
    const DeviceLayerInputs& in = inputs[r->slot];
    const uint16_t* shared_out = nullptr;
    if (Fs > 0) {
      const uint16_t* x = in.x;
      if (r->x_pad != nullptr) {
        DETMOE_CUDA_RETURN(cudaMemcpyAsync(r->x_pad, in.x, T * H * 2, cudaMemcpyDeviceToDevice, r->stream));
        x = r->x_pad;
      }
      DETMOE_RETURN_IF_ERROR(shared_gate_up(*r, x, in.ws_gate_up));
      std::vector<GemmProblem> chunks;
      for (int64_t at = 0; at < shared_rows; at += ref::kSharedRowChunk)
        chunks.push_back({ref::kSharedRowChunk, H, Fs, r->as + at * Fs, Fs, in.ws_down, Fs, r->s + at * H, H});
      DETMOE_RETURN_IF_ERROR(r->gemm.run(ReferenceGemm::kPerExpert, false, true, GemmOut::kBF16, chunks, "s = as·Ws_downᵀ"));
      shared_out = r->s;
      mark_phase(r->stream, "shared expert forward");
    }
    DETMOE_RETURN_IF_ERROR(ref::launch_combine(r->y_send, r->send_pos, in.topk_w, shared_out, T, k, H,
                                               outputs[r->slot].out, outputs[r->slot].y, r->stream));
    mark_phase(r->stream, "combine");
    if (!config.save_h && Fs > 0) {
      DETMOE_CUDA_RETURN(cudaMemsetAsync(r->hs, 0xff, shared_rows * 2 * Fs * 2, r->stream));
      DETMOE_CUDA_RETURN(cudaMemsetAsync(r->as, 0xff, shared_rows * Fs * 2, r->stream));
    }
  }
  return Status::Ok();
}

}  // namespace detmoe
