// Output stages: room in the stage ring for a whole output tile, so an epilogue writes every
// box of its tile into shared memory and sends all of its TMA stores at once. Through the two
// rotating 8 KB staging slabs per warpgroup (gemm/epilogue.cuh's SlabStore) each store waited
// for the store two slabs back to finish reading shared memory: 3.6–4.2 µs per tile on the H200
// for a weight gradient's 16 fp32 boxes, most of the epilogue.
//
// The producer hands a tile's output stages over after its loads with a plain arrival (no
// bytes: produce_out_stages); the consumers wait for them like any stage, write box j of their
// warpgroup into stage j / 3 (boxes 3·wg … 3·wg + 2 of it: a 48 KB stage is six 8 KB boxes, two
// in its A tile and four in its B tile), send the stores, wait until they have read shared
// memory, and release the stages. Every warp waits for and releases every output stage, whether
// or not its warpgroup has rows, so the ring's count stays in step. The price: while a tile's
// epilogue holds k output stages, the producer can prefetch only 4 − k stages of the next tile.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/layer/tile_mainloop.cuh"
#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/mbarrier.cuh"
#include "megakernel/ptx/tma.cuh"

namespace detmoe::mk {

inline constexpr int kBoxesPerWarpgroupStage = 3;

// Output stages a plain store tile takes: its warpgroup's 64 rows × 256 columns are 8 fp32 or
// 4 bf16 boxes of 8 KB.
DETMOE_DEVICE int32_t store_out_stages(bool fp32) { return fp32 ? 3 : 2; }

// Producer: `count` stages handed to the epilogue, empty.
DETMOE_DEVICE void produce_out_stages(int32_t count, const Pipe& pipe, Stage& st) {
  for (int32_t s = 0; s < count; ++s) {
    ptx::mbarrier_wait_parity(pipe.empty + st.stage, st.phase ^ 1u);
    ptx::mbarrier_arrive(pipe.full + st.stage);
    st.advance();
  }
}

// A consumer warpgroup's view of the `count` output stages starting at the ring position `st`.
class OutStages {
 public:
  DETMOE_DEVICE OutStages(const Smem& smem, const Pipe& pipe, const Stage& st, int wg, int32_t count)
      : smem_(smem), pipe_(pipe), first_(st.stage), wg_(wg), count_(count) {
    Stage w = st;
    for (int32_t r = 0; r < count; ++r) {
      pipe.consumer_wait(w);
      w.advance();
    }
  }

  // Shared-memory address of the warpgroup's box j (j < 3·count).
  DETMOE_DEVICE uint32_t box(int j) const {
    const int32_t stage = (first_ + j / kBoxesPerWarpgroupStage) % Cfg::kStages;
    const int32_t i = kBoxesPerWarpgroupStage * wg_ + j % kBoxesPerWarpgroupStage;
    return i < 2 ? ptx::smem_u32(smem_.a_stage(stage)) + i * Smem::kBoxBytes
                 : ptx::smem_u32(smem_.b_stage(stage)) + (i - 2) * Smem::kBoxBytes;
  }

  // Every warp, after its reads of the boxes (and, for TMA stores, after the issuer saw them
  // read): the stages go back to the producer and `st` moves past them.
  DETMOE_DEVICE void release(Stage& st) const {
    __syncwarp();
    for (int32_t r = 0; r < count_; ++r) {
      pipe_.consumer_release(st.stage);
      st.advance();
    }
  }

 private:
  const Smem& smem_;
  const Pipe& pipe_;
  int32_t first_;
  int wg_;
  int32_t count_;
};

// The warpgroup's boxes are written (generic proxy): the issuer sends the stores `send()` issues
// and waits until they have read shared memory; the warpgroup waits for it.
template <class Send>
DETMOE_DEVICE void send_out_boxes(uint32_t barrier, bool issuer, Send&& send) {
  ptx::fence_proxy_async_shared();  // generic writes → the TMA stores' async-proxy reads
  ptx::named_barrier_sync(barrier, 128);
  if (issuer) {
    send();
    ptx::bulk_commit_group();
    ptx::bulk_wait_group_read<0>();
  }
  ptx::named_barrier_sync(barrier, 128);
}

// Plain store tiles (the weight gradients, fp32 or bf16; the shared expert's dx and its GEMM2
// output, bf16). `zero`: the tile had no k-block (an expert without rows): exact zeros.
struct StageStoreEpilogue {
  DETMOE_DEVICE static void apply(const float (&acc)[Cfg::kAccumulators], bool zero, const gemm::EpilogueTile& t,
                                  bool fp32, int32_t out_cols, const CUtensorMap* map_c, int wg, bool issuer,
                                  const Smem& smem, const Pipe& pipe, Stage& st) {
    const OutStages out(smem, pipe, st, wg, store_out_stages(fp32));
    if (t.row < t.row_end) {  // uniform over the warpgroup
      if (fp32) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (t.col0 + 32 * j >= out_cols) break;  // uniform
          gemm::write_fp32_slab(out.box(j), t.warp, t.lane, [&](int i) { return zero ? 0.0f : acc[16 * j + i]; });
        }
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (t.col0 + 64 * j >= out_cols) break;
          gemm::write_bf16_slab(out.box(j), t.warp, t.lane, [&](int i) { return zero ? 0.0f : acc[32 * j + i]; });
        }
      }
      send_out_boxes(1 + static_cast<uint32_t>(wg), issuer, [&] {
        const gemm::RaggedCoords rc = gemm::ragged_coords(t.row, t.row_end, 64);
        const int32_t width = fp32 ? 32 : 64;
        for (int j = 0; j < (fp32 ? 8 : 4); ++j) {
          const int32_t col = t.col0 + width * j;
          if (col >= out_cols) break;
          ptx::tma_store_3d(map_c, out.box(j), col, rc.y, rc.z);
        }
      });
    }
    out.release(st);
  }
};

}  // namespace detmoe::mk
