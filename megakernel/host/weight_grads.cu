#include "megakernel/host/weight_grads.h"

#include <string>

#include "detmoe/cuda_status.h"
#include "detmoe/phase_marks.h"
#include "detmoe/gemm.h"

namespace detmoe::mk {
namespace {

// out[r·(epr+1) + e] = the first row of rank r's local expert e within the rank's receive rows
// (e = epr: the end of its rows), from the forward's global plan.
__global__ void rank_group_offsets_kernel(const int32_t* expert_offset, const int32_t* rank_row_begin, int32_t P,
                                          int32_t epr, int32_t* out) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= P * (epr + 1)) return;
  const int32_t r = i / (epr + 1), e = i % (epr + 1);
  out[i] = expert_offset[r * epr + e] - rank_row_begin[r];
}

// C [groups·m, n] = Σ over each group's rows of A[r, :]ᵀ·B[r, :].
Status weight_grad(int64_t rows, int64_t m, int64_t n, int32_t groups, const int32_t* offsets, const uint16_t* a,
                   const uint16_t* b, void* c, bool fp32, int grid, unsigned int* tickets, const LayerConfig& config,
                   cudaStream_t stream, const char* what, int64_t rank) {
  gemm::GroupedGemm g;
  g.layout = gemm::Layout::kWeightGrad;
  g.epilogue = fp32 ? gemm::Epilogue::kStoreFP32 : gemm::Epilogue::kStoreBF16;
  g.rows = rows;
  g.m = m;
  g.n = n;
  g.groups = groups;
  g.group_offsets = offsets;
  g.a = a;
  g.lda = m;
  g.b = b;
  g.ldb = n;
  g.c = c;
  g.ldc = n;
  g.grid_ctas = grid;
  g.tile_tickets = tickets;
  g.band_budget_kb = config.weight_grad_band_budget_kb;
  g.stream_stores = config.weight_grad_stream_stores;
  g.deep_store_ring = config.weight_grad_deep_ring;
  if (const Status s = gemm::run(g, stream); !s.ok())
    return Status(s.code(), "backward: " + std::string(what) + " of rank " + std::to_string(rank) + ": " + s.message());
  mark_phase(stream, what);
  return Status::Ok();
}

}  // namespace

Status rank_group_offsets(const Shape& shape, const Workspace& ws, cudaStream_t stream) {
  if (ws.rank_group_offsets == nullptr) return Status(ErrorCode::kInternal, "backward: the workspace has no group offsets");
  const int32_t P = static_cast<int32_t>(shape.P), epr = static_cast<int32_t>(shape.experts_per_rank());
  const int32_t n = P * (epr + 1);
  rank_group_offsets_kernel<<<(n + 255) / 256, 256, 0, stream>>>(ws.expert_offset, ws.rank_row_begin, P, epr,
                                                                  ws.rank_group_offsets);
  DETMOE_CUDA_RETURN(cudaGetLastError());
  return Status::Ok();
}

Status routed_weight_grads(const Shape& shape, int64_t capacity, const Workspace& ws,
                           std::span<const DeviceGradOutputs> outputs, bool fp32, LaterWeightGrads which, int grid,
                           const LayerConfig& config, cudaStream_t stream) {
  // One counter for every launch (layout_backward_workspace always carves it): they run one after
  // another on `stream`, each zeroing it first.
  unsigned int* const deal = config.weight_grad_tickets ? ws.wgrad_tickets : nullptr;
  const int64_t P = shape.P, H = shape.H, F = shape.F;
  const int32_t epr = static_cast<int32_t>(shape.experts_per_rank());
  if (static_cast<int64_t>(outputs.size()) != P)
    return invalid_argument("backward: " + std::to_string(outputs.size()) + " gradient outputs for P = " +
                            std::to_string(P) + " ranks");
  for (int64_t r = 0; r < P; ++r) {
    const int32_t* offsets = ws.rank_group_offsets + r * (epr + 1);
    if (which.down)
      DETMOE_RETURN_IF_ERROR(weight_grad(capacity, H, F, epr, offsets, ws.dy + r * capacity * H, ws.act + r * capacity * F,
                                         outputs[r].dw_down, fp32, grid, deal, config, stream, "dW_down", r));
    if (which.gate_up)
      DETMOE_RETURN_IF_ERROR(weight_grad(capacity, 2 * F, H, epr, offsets, ws.dh + r * capacity * 2 * F,
                                         ws.recv + r * capacity * H, outputs[r].dw_gate_up, fp32, grid, deal, config,
                                         stream, "dW_gate_up", r));
  }
  return Status::Ok();
}

LaterWeightGrads later_weight_grads(const LayerConfig& config) {
  switch (config.weight_grad_launch) {
    case WeightGradLaunch::kFused: return {};
    case WeightGradLaunch::kGateUpLater: return {false, true};
    case WeightGradLaunch::kSecondLaunch: return {true, true};
    case WeightGradLaunch::kAuto: break;
  }
  // Both later on every shape: the second launch's backward was faster on all four named shapes,
  // balanced and zipf1 (H100, docs/PERF.md session 26). Keeping dW_down fused where the d_x sum
  // is heavy (deepseek-v3: dW_down's tiles fill the sum's tail) looked 0.9 ms faster in session
  // 26's call and level with both-later in session 27's two rounds per routing: no rule for it.
  return {true, true};
}

}  // namespace detmoe::mk
