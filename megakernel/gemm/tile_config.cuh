// The one tile shape of the GEMM core and its derived constants.
//
// 128x256x64 with 4 stages: two consumer warpgroups each own a 64x256 fp32 accumulator (128
// registers per thread, the m64n256k16 wgmma), the producer warp streams 48 KB per stage. The
// choice is fixed at compile time; the host rule (tile_config()) may only map (layout, N, K) to
// one of the compiled shapes, never the SM count or group sizes, so bits never depend on it.
#pragma once

#include <cstdint>

namespace detmoe::gemm {

struct Tile128x256 {
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 256;
  static constexpr int kBlockK = 64;  // one 128-byte swizzle span of bf16
  static constexpr int kStages = 4;

  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);  // producer warpgroup first
  static constexpr int kWarpgroupRows = kBlockM / kConsumerWarpgroups;  // 64: one wgmma M
  static constexpr int kAccumulators = kBlockN / 2;  // fp32 per thread of an m64n256 tile

  // Register split after setmaxnreg: 56 + 2·224 = 504 ≤ 512 per thread-slot of 3 warpgroups.
  // The producer's ticket deal (TileDeal) spilled 16 instructions' worth at 40 (weight-grad and
  // data-grad forms, perf/sass_local.py); at 56 / 224 no form spills.
  static constexpr uint32_t kProducerRegisters = 56;
  static constexpr uint32_t kConsumerRegisters = 224;

  // Rows of L2-friendly bands: consecutive tiles walk kBandRows m-blocks before moving to the
  // next n-block, so the CTAs in flight share A rows and B columns.
  static constexpr int kBandRows = 8;

  // Epilogue staging per consumer warpgroup: two 8 KB slabs that rotate (smem_layout.cuh).
  static constexpr uint32_t kStagingBytesPerWarpgroup = 2 * 64 * 128;
};

// The weight-gradient form with a deeper store ring (GroupedGemm::deep_store_ring): 3 operand
// stages instead of 4 give each consumer warpgroup 5 staging slabs instead of 2. A weight-gradient
// tile of a small expert is short (gpt-oss-120b: 512 rows, 8 k-blocks, ≈ 6 µs) while its fp32
// output is 16 slabs of 8 KB: with 2 slabs a warpgroup waits for the TMA to read slab i − 2 before
// writing slab i, so most of the store is exposed between mainloops; with 5 it writes its first
// five at once and the rest of the store drains behind the next tile's mainloop. Three stages
// were level with four on the GEMM core's long-K GEMMs (docs/PERF.md session 34).
struct Tile128x256DeepRing : Tile128x256 {
  static constexpr int kStages = 3;
  static constexpr uint32_t kStagingBytesPerWarpgroup = 5 * 64 * 128;
};

}  // namespace detmoe::gemm
