#include "megakernel/host/recompute_h.h"

#include <string>

#include "detmoe/cuda_status.h"
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

}  // namespace

Status recompute_h(const Shape& shape, int64_t capacity, const Workspace& ws, std::span<const DeviceLayerInputs> inputs,
                   int32_t* group_offsets, cudaStream_t stream) {
  const int64_t P = shape.P, H = shape.H, F = shape.F, Fs = shape.Fs, T = shape.T;
  const int32_t epr = static_cast<int32_t>(shape.experts_per_rank());
  if (static_cast<int64_t>(inputs.size()) != P)
    return invalid_argument("recompute_h: " + std::to_string(inputs.size()) + " inputs for P = " + std::to_string(P) + " ranks");
  const int32_t n = static_cast<int32_t>(P) * (epr + 1);
  rank_group_offsets_kernel<<<(n + 255) / 256, 256, 0, stream>>>(ws.expert_offset, ws.rank_row_begin,
                                                                  static_cast<int32_t>(P), epr, group_offsets);
  DETMOE_CUDA_RETURN(cudaGetLastError());
  for (int64_t r = 0; r < P; ++r) {
    gemm::GroupedGemm g;
    g.layout = gemm::Layout::kForward;
    g.epilogue = gemm::Epilogue::kStoreBF16;
    g.rows = capacity;
    g.n = 2 * F;
    g.k = H;
    g.groups = epr;
    g.group_offsets = group_offsets + r * (epr + 1);
    g.a = ws.recv + r * capacity * H;
    g.lda = H;
    g.b = inputs[r].w_gate_up;
    g.ldb = H;
    g.c = ws.dh + r * capacity * 2 * F;
    g.ldc = 2 * F;
    if (const Status s = gemm::run(g, stream); !s.ok())
      return Status(s.code(), "recomputing h of rank " + std::to_string(r) + ": " + s.message());
    if (Fs > 0) {
      gemm::GroupedGemm sg;
      sg.layout = gemm::Layout::kForward;
      sg.epilogue = gemm::Epilogue::kStoreBF16;
      sg.rows = T;
      sg.n = 2 * Fs;
      sg.k = H;
      sg.a = inputs[r].x;
      sg.lda = H;
      sg.b = inputs[r].ws_gate_up;
      sg.ldb = H;
      sg.c = ws.dhs + r * T * 2 * Fs;
      sg.ldc = 2 * Fs;
      if (const Status s = gemm::run(sg, stream); !s.ok())
        return Status(s.code(), "recomputing the shared expert's h of rank " + std::to_string(r) + ": " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace detmoe::mk
