// The Hopper GEMM core: a persistent, warp-specialised bf16 grouped GEMM (TMA + wgmma, sm_90a).
//
// One call multiplies many row segments ("groups", e.g. the token rows of each expert) of one
// buffer against per-group weights. Group row offsets live on the device, so a routing plan
// computed by an earlier kernel feeds the GEMM with no host synchronisation. Every output tile
// has one owner that reduces its whole K range in one fixed order, so the bits depend only on
// the problem: not on grid_ctas, the SM count, or which other groups run in the same call.
//
// All matrices are row-major bf16 (C: per epilogue), with leading dimensions in elements
// (0 = dense). Shapes, for group g owning token rows [off[g], off[g+1]):
//   kForward    C[r, n] = Σ_k A[r, k] · B[g·N + n, k]   A [rows, K], B [groups·N, K] (nn.Linear
//                                                        weights), C [rows, N]
//   kDataGrad   C[r, n] = Σ_k A[r, k] · B[g·K + k, n]   A [rows, K], B [groups·K, N], C [rows, N]
//   kWeightGrad C[g·M + m, n] = Σ_{r in g} A[r, m]·B[r, n]
//                                                        A [rows, M], B [rows, N], C [groups·M, N];
//                                                        the reduction runs over the group's
//                                                        rows (any count, 0 gives exact zeros)
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "detmoe/status.h"

namespace detmoe::gemm {

enum class Layout { kForward, kDataGrad, kWeightGrad };

enum class Epilogue {
  kStoreBF16,     // C = bf16(acc)
  kStoreFP32,     // C = acc (fp32)
  kRowScaleBF16,  // C[r, :] = bf16(row_scale[r] · acc), the product in fp32 (kForward, kDataGrad)
  // kForward only. B's rows interleave gate and up in blocks of 8 (gate 0–7, up 0–7, gate 8–15,
  // …), see interleaved_gate_up_source_row(). C [rows, N/2] = bf16(silu(g)·u) with g = bf16(gate acc) and
  // u = bf16(up acc), silu and the product in fp32 (DESIGN.md §2; `contract_swiglu` of
  // detmoe/contract_math.h, the one formula of every GPU path). Optionally h [rows, N] = bf16(acc) in the same interleaved order.
  kSwiGLU,
};

const char* to_string(Layout layout);
const char* to_string(Epilogue epilogue);

struct GroupedGemm {
  Layout layout = Layout::kForward;
  Epilogue epilogue = Epilogue::kStoreBF16;
  int64_t rows = 0;  // rows of the token-indexed buffers: A, and C unless kWeightGrad
  int64_t m = 0;     // kWeightGrad: rows of each group's C block (= columns of A); else unused
  int64_t n = 0;     // columns of C (kSwiGLU: the GEMM's N; C then has N/2 columns)
  int64_t k = 0;     // kForward / kDataGrad: reduction length; unused by kWeightGrad
  int32_t groups = 1;
  // Device [groups + 1], non-decreasing: group g owns rows [off[g], off[g+1]). nullptr: one
  // group holding all `rows` (groups must be 1). Offsets are clamped to [0, rows] on the
  // device, so bad offsets can never make the kernel touch memory outside the buffers.
  const int32_t* group_offsets = nullptr;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  const float* row_scale = nullptr;  // kRowScaleBF16: device [rows], indexed by C's row
  void* h = nullptr;                 // kSwiGLU: optional bf16 [rows, N] pre-activation
  int64_t ldh = 0;
  // CTAs of the persistent grid; 0 = one per SM. Changes speed, never bits (tests use it).
  int32_t grid_ctas = 0;
  // The tile deal. nullptr: static, tile i to CTA i mod grid. A device counter (one 4-byte
  // aligned word): where the groups are uneven (the largest group's rows above 1.5× the mean,
  // decided on the device from group_offsets), each CTA takes its next tile number from it
  // (atomicAdd) once it has issued the previous tile's loads, so CTAs that drew short tiles take
  // more of them — for kWeightGrad, where a tile's K is its group's row count; with even groups
  // the deal stays static (tickets cost there: docs/PERF.md session 33). run() zeroes it on
  // `stream` before the launch, so launches on one stream may share it and launches that can run
  // at once may not. Changes speed, never bits.
  unsigned int* tile_tickets = nullptr;
  // kWeightGrad only: the tile order inside each group. 0: bands of 8 m-blocks, m fastest (the
  // other layouts' order). > 0: each group's own order for its rows — bands of m-blocks (m
  // fastest) or of n-blocks (n fastest), whichever reads fewer operand bytes with at most this many
  // KB of operand panels per band (gemm/band_order.h weight_grad_order): with K = the group's rows
  // a group's tiles span many waves, and fixed m-bands re-read B once per band. Changes speed,
  // never bits.
  int32_t band_budget_kb = 0;
  // C's TMA stores with an L2 evict-first priority, so an output that nothing in the launch reads
  // again streams through L2 without displacing operand panels that later tiles read (the layer's
  // fp32 weight gradients write 3.7 GB per launch on mixtral-8x7b while re-reading their operands:
  // docs/PERF.md sessions 37 and 40). Changes speed, never bits.
  bool stream_stores = false;
  // kWeightGrad only: 3 operand stages and 5 staging slabs per consumer warpgroup instead of 4 and
  // 2, so a short tile's fp32 output (a small expert's: 8 k-blocks of mainloop for 16 slabs of
  // output) drains behind the next tile's mainloop instead of between them (gemm/tile_config.cuh
  // Tile128x256DeepRing; tile_config() reports the default form). Changes speed, never bits.
  bool deep_store_ring = false;
};

// Block shape and pipeline depth of one launch: a pure function of (layout, n, k), never of
// the device or the group sizes, so a problem always runs the same tiles.
struct TileConfig {
  int block_m = 0;
  int block_n = 0;
  int block_k = 0;
  int stages = 0;
};
TileConfig tile_config(Layout layout, int64_t n, int64_t k);

// Checks sizes, pointers, alignment and epilogue/layout pairing; the message names the
// offending field and value. Needs no GPU.
Status validate(const GroupedGemm& gemm);

// Validates, then launches on `stream` (asynchronous; no host synchronisation). A problem with
// no output element (rows = 0 for kForward/kDataGrad, n = 0, m = 0) returns Ok without a launch.
Status run(const GroupedGemm& gemm, cudaStream_t stream);

// Host helper for kSwiGLU weights: stacked [G, 2F, H] rows (gate rows 0..F-1 then up rows) of
// one expert → the interleaved order the epilogue expects. `row` is the destination row;
// returns the source row. F must be a multiple of 8.
inline int64_t interleaved_gate_up_source_row(int64_t row, int64_t f) {
  const int64_t block = row / 16, within = row % 16;
  return within < 8 ? block * 8 + within : f + block * 8 + (within - 8);
}

}  // namespace detmoe::gemm
