// Epilogues: what happens to a consumer warpgroup's 64×256 fp32 accumulator tile.
//
// Every epilogue goes through shared memory: it writes 64-row × 128-byte slabs (64 bf16 or 32
// fp32 columns, 128-byte swizzled so the eight row addresses of a stmatrix hit distinct banks)
// into two rotating staging slabs, and one thread per warpgroup stores each slab with the
// ragged C map, which drops rows past the group and columns past C. (write_bf16_rows stages rows
// unswizzled at a padded pitch instead, for callers that copy rows out one by one.)
//
// An epilogue is a type with
//   template <class Cfg> static void apply(const float (&acc)[128], bool zero, const EpilogueTile&,
//                                          const KernelParams&, const CUtensorMap* map_c,
//                                          const CUtensorMap* map_h, SlabStore&);
// `zero` means the tile had no k-block (K = 0, or a weight-gradient group with no rows): the
// accumulators were never written and the tile is exact zeros. The megakernel plugs its own
// epilogue types into the same kernel skeleton.
//
// Accumulator layout of m64nN (fp32), thread t of the warpgroup, warp w = t/32, lane l:
// register 4j + q holds row 16w + l/4 + 8·(q/2), column 8j + 2·(l%4) + (q%2).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "detmoe/gemm.h"
#include "megakernel/gemm/params.cuh"
#include "megakernel/gemm/ragged_map.cuh"
#include "detmoe/contract_math.h"
#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/stmatrix.cuh"
#include "megakernel/ptx/tma.cuh"

namespace detmoe::gemm {

// Where one consumer warpgroup's 64 rows go.
struct EpilogueTile {
  int32_t row;      // first row of C this warpgroup writes
  int32_t row_end;  // rows from here on belong to another group: never written
  int32_t col0;     // first GEMM column of the tile
  uint32_t warp;    // warp within the warpgroup: rows 16·warp … +15
  uint32_t lane;
};

// One slab's turn: wait until the store issued kSlabs slabs ago has read `slab` (bulk groups
// complete in order, so "at most kSlabs − 1 pending" means only the others' stores may still
// read), fill it with `write`, and let the issuer store it.
template <int kSlabs, class Write>
DETMOE_DEVICE void store_slab(uint32_t slab, uint32_t barrier_id, bool issuer, const CUtensorMap* map, int32_t col,
                              int32_t row, int32_t row_end, Write&& write, ptx::L2Policy policy = {0, false}) {
  if (issuer) ptx::bulk_wait_group_read<kSlabs - 1>();
  ptx::named_barrier_sync(barrier_id, 128);
  write(slab);
  ptx::fence_proxy_async_shared();  // generic writes → the TMA store's async-proxy read
  ptx::named_barrier_sync(barrier_id, 128);
  if (issuer) {
    const RaggedCoords rc = ragged_coords(row, row_end, 64);
    ptx::tma_store_3d(map, slab, col, rc.y, rc.z, policy);
    ptx::bulk_commit_group();
  }
}

// Rotates a warpgroup's two staging slabs and issues their TMA stores.
class SlabStore {
 public:
  DETMOE_DEVICE SlabStore(const uint8_t* slab0, const uint8_t* slab1, uint32_t barrier_id, bool issuer)
      : slab0_(ptx::smem_u32(slab0)), slab1_(ptx::smem_u32(slab1)), barrier_id_(barrier_id), issuer_(issuer) {}

  // Stores one slab at column `col` of rows [row, min(row + 64, row_end)). `write(slab_addr)`
  // fills the slab. Skipped entirely (uniformly across the warpgroup) when no element of it is
  // inside C, so the rotation only counts slabs that were really stored.
  template <class Write>
  DETMOE_DEVICE void store(const CUtensorMap* map, int32_t col, int32_t col_limit, int32_t row, int32_t row_end,
                           Write&& write) {
    if (col >= col_limit || row >= row_end) return;
    const uint32_t slab = (count_ & 1u) ? slab1_ : slab0_;  // a select: an indexed array would live in local memory
    store_slab<2>(slab, barrier_id_, issuer_, map, col, row, row_end, write, policy_);
    ++count_;
  }

  // The stores' L2 eviction priority from here on (GroupedGemm::stream_stores).
  DETMOE_DEVICE void hint_stores(ptx::L2Policy policy) { policy_ = policy; }

  // Before the CTA exits: its stores must finish reading shared memory.
  DETMOE_DEVICE void drain() const {
    if (issuer_) ptx::bulk_wait_group_all();
  }

 private:
  uint32_t slab0_;
  uint32_t slab1_;
  uint32_t barrier_id_;
  bool issuer_;
  uint32_t count_ = 0;
  ptx::L2Policy policy_ = {0, false};
};

// SlabStore over kSlabs consecutive slabs (64 × 128 bytes each) from `first`: for a caller with
// more staging than the core's two slabs (the fused layer: four per warpgroup), so a tile's
// epilogue waits only for the reads of its slabs beyond the first kSlabs (an fp32 tile's eight:
// four, not six) and leaves up to kSlabs stores reading behind it when it returns.
template <int kSlabs>
class SlabRing {
 public:
  static_assert(kSlabs >= 2 && kSlabs <= 8, "bulk_wait_group_read takes 0 … 7 pending groups");
  static constexpr uint32_t kSlabBytes = 64 * 128;

  DETMOE_DEVICE SlabRing(const uint8_t* first, uint32_t barrier_id, bool issuer)
      : first_(ptx::smem_u32(first)), barrier_id_(barrier_id), issuer_(issuer) {}

  template <class Write>
  DETMOE_DEVICE void store(const CUtensorMap* map, int32_t col, int32_t col_limit, int32_t row, int32_t row_end,
                           Write&& write) {
    if (col >= col_limit || row >= row_end) return;
    const uint32_t slab = first_ + (count_ % static_cast<uint32_t>(kSlabs)) * kSlabBytes;
    store_slab<kSlabs>(slab, barrier_id_, issuer_, map, col, row, row_end, write, policy_);
    ++count_;
  }

  // The stores' L2 eviction priority from here on (GroupedGemm::stream_stores).
  DETMOE_DEVICE void hint_stores(ptx::L2Policy policy) { policy_ = policy; }

  DETMOE_DEVICE void drain() const {
    if (issuer_) ptx::bulk_wait_group_all();
  }

 private:
  uint32_t first_;
  uint32_t barrier_id_;
  bool issuer_;
  uint32_t count_ = 0;
  ptx::L2Policy policy_ = {0, false};
};

// 64 bf16 columns into a swizzled slab with stmatrix. value(j), j in [0, 32): the fp32 value of
// this thread's fragment register j of the slab (column block j/4, register j%4).
template <class Value>
DETMOE_DEVICE void write_bf16_slab(uint32_t slab, uint32_t warp, uint32_t lane, Value&& value) {
  const uint32_t matrix = lane >> 3;  // this lane addresses a row of matrix `matrix`
  const uint32_t row = warp * 16 + (matrix & 1u) * 8 + (lane & 7u);
  const uint32_t row_addr = slab + row * 128;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    // Matrices: (rows 0-7, block 2p), (rows 8-15, block 2p), (rows 0-7, block 2p+1), (8-15, 2p+1).
    const uint32_t chunk = 2 * p + (matrix >> 1);
    ptx::stmatrix_x4(row_addr + ((chunk ^ (lane & 7u)) << 4), ptx::pack_bf16x2(value(8 * p + 0), value(8 * p + 1)),
                     ptx::pack_bf16x2(value(8 * p + 2), value(8 * p + 3)),
                     ptx::pack_bf16x2(value(8 * p + 4), value(8 * p + 5)),
                     ptx::pack_bf16x2(value(8 * p + 6), value(8 * p + 7)));
  }
}

// The same 64 bf16 columns (slab `block` of a row, bytes [128·block, 128·block + 128)) into a
// plain row-major block of `pitch` bytes per row, unswizzled, so each row is contiguous: the
// source of one bulk copy per row (the fused layer's row scatter). With pitch ≡ 16 (mod 128) the
// 8 rows of each stmatrix matrix fall in 8 different 16-byte bank groups, as the swizzle does.
template <class Value>
DETMOE_DEVICE void write_bf16_rows(uint32_t base, uint32_t pitch, int block, uint32_t warp, uint32_t lane,
                                   Value&& value) {
  const uint32_t matrix = lane >> 3;
  const uint32_t row = warp * 16 + (matrix & 1u) * 8 + (lane & 7u);
  const uint32_t row_addr = base + row * pitch + static_cast<uint32_t>(block) * 128;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const uint32_t chunk = 2 * p + (matrix >> 1);
    ptx::stmatrix_x4(row_addr + (chunk << 4), ptx::pack_bf16x2(value(8 * p + 0), value(8 * p + 1)),
                     ptx::pack_bf16x2(value(8 * p + 2), value(8 * p + 3)),
                     ptx::pack_bf16x2(value(8 * p + 4), value(8 * p + 5)),
                     ptx::pack_bf16x2(value(8 * p + 6), value(8 * p + 7)));
  }
}

// write_bf16_slab with the values made 8 at a time: batch(p, v) fills v[0 … 7] with values
// 8p … 8p + 7 (the eight of one stmatrix.x4), so a caller that computes them in batches (the
// backward's dSwiGLU) keeps 8 of them live instead of 32.
template <class Batch>
DETMOE_DEVICE void write_bf16_slab_batched(uint32_t slab, uint32_t warp, uint32_t lane, Batch&& batch) {
  const uint32_t matrix = lane >> 3;
  const uint32_t row = warp * 16 + (matrix & 1u) * 8 + (lane & 7u);
  const uint32_t row_addr = slab + row * 128;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    float v[8];
    batch(p, v);
    const uint32_t chunk = 2 * p + (matrix >> 1);
    ptx::stmatrix_x4(row_addr + ((chunk ^ (lane & 7u)) << 4), ptx::pack_bf16x2(v[0], v[1]), ptx::pack_bf16x2(v[2], v[3]),
                     ptx::pack_bf16x2(v[4], v[5]), ptx::pack_bf16x2(v[6], v[7]));
  }
}

// 32 fp32 columns into a swizzled slab. value(j), j in [0, 16): fragment register j of the slab.
template <class Value>
DETMOE_DEVICE void write_fp32_slab(uint32_t slab, uint32_t warp, uint32_t lane, Value&& value) {
#pragma unroll
  for (int block = 0; block < 4; ++block) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint32_t row = warp * 16 + (lane >> 2) + 8 * half;
      const uint32_t chunk = 2 * block + ((lane & 3u) >> 1);
      const uint32_t addr = slab + row * 128 + ((chunk ^ (lane >> 2)) << 4) + (lane & 1u) * 8;
      ptx::st_shared_v2_f32(addr, value(4 * block + 2 * half), value(4 * block + 2 * half + 1));
    }
  }
}

// kStoreBF16, kStoreFP32, kRowScaleBF16.
struct StoreEpilogue {
  template <class Cfg, class Store>
  DETMOE_DEVICE static void apply(const float (&acc)[Cfg::kAccumulators], bool zero, const EpilogueTile& t,
                                  const KernelParams& p, const CUtensorMap* map_c, const CUtensorMap* /*map_h*/,
                                  Store& out) {
    static_assert(Cfg::kBlockN == 256, "slab loops assume 256 columns");
    const Epilogue kind = static_cast<Epilogue>(p.epilogue);
    if (kind == Epilogue::kStoreFP32) {
#pragma unroll
      for (int s = 0; s < 8; ++s) {
        out.store(map_c, t.col0 + 32 * s, p.out_cols, t.row, t.row_end, [&](uint32_t slab) {
          write_fp32_slab(slab, t.warp, t.lane, [&](int j) { return zero ? 0.0f : acc[16 * s + j]; });
        });
      }
      return;
    }
    const bool scaled = kind == Epilogue::kRowScaleBF16;
    float scale_lo = 1.0f, scale_hi = 1.0f;  // rows r and r + 8 of this thread
    if (scaled) {
      const int32_t r = t.row + static_cast<int32_t>(t.warp * 16 + (t.lane >> 2));
      scale_lo = r < t.row_end ? __ldg(p.row_scale + r) : 0.0f;
      scale_hi = r + 8 < t.row_end ? __ldg(p.row_scale + r + 8) : 0.0f;
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      out.store(map_c, t.col0 + 64 * s, p.out_cols, t.row, t.row_end, [&](uint32_t slab) {
        write_bf16_slab(slab, t.warp, t.lane, [&](int j) {
          const float v = zero ? 0.0f : acc[32 * s + j];
          return scaled ? __fmul_rn(v, (j & 2) ? scale_hi : scale_lo) : v;
        });
      });
    }
  }
};

// kSwiGLU: gate/up interleaved in blocks of 8 columns, so column block 2b is gate and 2b+1 is
// up for the same 8 output columns, in the same thread: a = bf16(silu(bf16 g)·bf16 u).
struct SwiGLUEpilogue {
  template <class Cfg>
  DETMOE_DEVICE static void apply(const float (&acc)[Cfg::kAccumulators], bool zero, const EpilogueTile& t,
                                  const KernelParams& p, const CUtensorMap* map_c, const CUtensorMap* map_h,
                                  SlabStore& out) {
    static_assert(Cfg::kBlockN == 256, "slab loops assume 256 columns");
    if (p.store_h) {
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        out.store(map_h, t.col0 + 64 * s, p.n, t.row, t.row_end, [&](uint32_t slab) {
          write_bf16_slab(slab, t.warp, t.lane, [&](int j) { return zero ? 0.0f : acc[32 * s + j]; });
        });
      }
    }
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      out.store(map_c, t.col0 / 2 + 64 * s, p.out_cols, t.row, t.row_end, [&](uint32_t slab) {
        write_bf16_slab(slab, t.warp, t.lane, [&](int j) {
          // Output block b = 8s + j/4 reads gate block 2b and up block 2b + 1.
          const int gate = 64 * s + 8 * (j / 4) + (j % 4);
          const float g = zero ? 0.0f : __bfloat162float(__float2bfloat16_rn(acc[gate]));
          const float u = zero ? 0.0f : __bfloat162float(__float2bfloat16_rn(acc[gate + 4]));
          return contract_swiglu(g, u);
        });
      });
    }
  }
};

}  // namespace detmoe::gemm
