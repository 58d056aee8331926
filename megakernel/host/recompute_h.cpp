#include "megakernel/host/recompute_h.h"

#include <string>

#include "detmoe/gemm.h"

namespace detmoe::mk {
namespace {

// C [rows, n] = bf16(A [rows, k] · B [groups·n, k]ᵀ per group), dense: the forward's GEMM1 without
// its SwiGLU, so C = h. group_offsets null: one group of all rows.
Status gate_up(int64_t rows, int64_t n, int64_t k, int32_t groups, const int32_t* group_offsets, const void* a,
               const void* b, void* c, cudaStream_t stream, const char* what, int64_t rank) {
  gemm::GroupedGemm g;
  g.layout = gemm::Layout::kForward;
  g.epilogue = gemm::Epilogue::kStoreBF16;
  g.rows = rows;
  g.n = n;
  g.k = k;
  g.groups = groups;
  g.group_offsets = group_offsets;
  g.a = a;
  g.lda = k;
  g.b = b;
  g.ldb = k;
  g.c = c;
  g.ldc = n;
  if (const Status s = gemm::run(g, stream); !s.ok())
    return Status(s.code(), "recomputing " + std::string(what) + " of rank " + std::to_string(rank) + ": " + s.message());
  return Status::Ok();
}

}  // namespace

Status recompute_h(const Shape& shape, int64_t capacity, const Workspace& ws, std::span<const DeviceLayerInputs> inputs,
                   cudaStream_t stream) {
  const int64_t P = shape.P, H = shape.H, F = shape.F, Fs = shape.Fs, T = shape.T;
  const int32_t epr = static_cast<int32_t>(shape.experts_per_rank());
  if (static_cast<int64_t>(inputs.size()) != P)
    return invalid_argument("recompute_h: " + std::to_string(inputs.size()) + " inputs for P = " + std::to_string(P) + " ranks");
  for (int64_t r = 0; r < P; ++r) {
    DETMOE_RETURN_IF_ERROR(gate_up(capacity, 2 * F, H, epr, ws.rank_group_offsets + r * (epr + 1), ws.recv + r * capacity * H,
                                   inputs[r].w_gate_up, ws.dh + r * capacity * 2 * F, stream, "h", r));
    if (Fs > 0)
      DETMOE_RETURN_IF_ERROR(gate_up(T, 2 * Fs, H, 1, nullptr, inputs[r].x, inputs[r].ws_gate_up, ws.dhs + r * T * 2 * Fs,
                                     stream, "the shared expert's h", r));
  }
  return Status::Ok();
}

}  // namespace detmoe::mk
