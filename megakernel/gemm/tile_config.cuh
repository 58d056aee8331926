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
  // next n-block, so the CTAs in flight share A rows and B columns. The default of
  // GroupedGemm::band_mblocks (a launch may set another).
  static constexpr int kBandRows = 8;

  // Epilogue staging per consumer warpgroup: two 8 KB slabs that rotate (smem_layout.cuh).
  static constexpr uint32_t kStagingBytesPerWarpgroup = 2 * 64 * 128;
};

}  // namespace detmoe::gemm
