// Shared-memory map of one CTA: operand stages, epilogue staging slabs, pipeline barriers.
//
// Every operand tile and slab starts on a 1024-byte boundary: the 128-byte swizzle pattern
// repeats every 8 rows × 128 B, and the wgmma descriptors assume base offset 0.
#pragma once

#include <cstdint>

#include "megakernel/gemm/tile_config.cuh"

namespace detmoe::gemm {

template <class Cfg>
struct SmemLayout {
  static constexpr uint32_t kRowBytes = 128;  // one swizzle span
  static constexpr uint32_t kATileBytes = Cfg::kBlockM * Cfg::kBlockK * 2;
  static constexpr uint32_t kBTileBytes = Cfg::kBlockN * Cfg::kBlockK * 2;
  static constexpr uint32_t kStageBytes = kATileBytes + kBTileBytes;  // expect_tx of a stage
  // A 64-row × 128-byte box: the unit of every MN-major operand load and of every epilogue store.
  static constexpr uint32_t kBoxBytes = 64 * kRowBytes;
  // Each consumer warpgroup rotates two staging slabs so one slab's TMA store overlaps the
  // writing of the next; a Cfg may give each warpgroup more staging (the fused layer's row
  // scatter stages a whole 64 × 256 output there), whose first boxes are the slabs.
  static constexpr uint32_t kSlabsPerWarpgroup = 2;
  static constexpr uint32_t kStagingBytesPerWarpgroup = Cfg::kStagingBytesPerWarpgroup;
  static_assert(kStagingBytesPerWarpgroup >= kSlabsPerWarpgroup * kBoxBytes && kStagingBytesPerWarpgroup % 1024 == 0,
                "staging holds the slabs and keeps their 1024-byte alignment");

  static constexpr uint32_t kAOffset = 0;
  static constexpr uint32_t kBOffset = kAOffset + Cfg::kStages * kATileBytes;
  static constexpr uint32_t kStagingOffset = kBOffset + Cfg::kStages * kBTileBytes;
  static constexpr uint32_t kBarrierOffset =
      kStagingOffset + Cfg::kConsumerWarpgroups * kStagingBytesPerWarpgroup;
  static constexpr uint32_t kBytes = kBarrierOffset + 2 * Cfg::kStages * sizeof(uint64_t);
  // The dynamic shared-memory base is only 16-byte aligned by contract: reserve room to round up.
  static constexpr uint32_t kDynamicBytes = kBytes + 1024;
  static_assert(kDynamicBytes <= 227 * 1024, "exceeds the 227 KB of dynamic shared memory per block");
  static_assert(kATileBytes % 1024 == 0 && kBTileBytes % 1024 == 0, "tiles must keep 1024-byte alignment");

  uint8_t* base;

  __device__ uint8_t* a_stage(int s) const { return base + kAOffset + s * kATileBytes; }
  __device__ uint8_t* b_stage(int s) const { return base + kBOffset + s * kBTileBytes; }
  __device__ uint8_t* staging(int warpgroup, int slab) const {
    return base + kStagingOffset + warpgroup * kStagingBytesPerWarpgroup + slab * kBoxBytes;
  }
  __device__ uint64_t* full_barriers() const { return reinterpret_cast<uint64_t*>(base + kBarrierOffset); }
  __device__ uint64_t* empty_barriers() const { return full_barriers() + Cfg::kStages; }

  __device__ static SmemLayout from_dynamic(uint8_t* raw) {
    const uintptr_t p = (reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023};
    return SmemLayout{reinterpret_cast<uint8_t*>(p)};
  }
};

}  // namespace detmoe::gemm
