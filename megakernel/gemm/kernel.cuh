// The persistent, warp-specialised grouped GEMM kernel (sm_90a).
//
// Warpgroup 0 is the producer: after giving registers back, one thread walks this CTA's tiles
// and streams their k-blocks into the stage ring with TMA. Warpgroups 1 and 2 are consumers:
// each owns 64 rows × 256 columns of the 128×256 tile in fp32 registers, issues m64n256k16
// wgmmas over the stages, releases each stage as soon as the wgmma reading it has finished, and
// runs the epilogue while the producer already loads the next tile.
//
// Bits: an output tile is computed by one CTA, k-blocks in increasing order, the same wgmma
// sequence whatever the grid or the other groups, so results are identical for any grid size.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "detmoe/gemm.h"
#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/gemm/gather_rows.cuh"
#include "megakernel/gemm/operand_layout.cuh"
#include "megakernel/gemm/params.cuh"
#include "megakernel/gemm/pipeline.cuh"
#include "megakernel/gemm/scheduler.cuh"
#include "megakernel/gemm/smem_layout.cuh"
#include "megakernel/gemm/tile_config.cuh"
#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/cp_async.cuh"
#include "megakernel/ptx/tma.cuh"
#include "megakernel/ptx/wgmma.cuh"

namespace detmoe::gemm {

template <Layout kLayout, class Cfg>
DETMOE_DEVICE void run_producer(const CUtensorMap* map_a, const CUtensorMap* map_b, const KernelParams& p,
                                const SmemLayout<Cfg>& smem, const Pipeline<Cfg>& pipe) {
  using Operands = OperandLayout<kLayout, Cfg>;
  ptx::prefetch_tensor_map(map_a);
  ptx::prefetch_tensor_map(map_b);
  TileScheduler<kLayout, Cfg> scheduler(p);
  PipelineState<Cfg::kStages> st;
  Tile tile;
  while (scheduler.next(tile)) {
    const uint32_t bytes = Operands::stage_bytes(tile, p.n, p.m);
    for (int32_t kb = 0; kb < tile.k_blocks; ++kb) {
      pipe.producer_acquire(st, bytes);
      Operands::load(map_a, map_b, tile, kb, p.n, p.k, p.m, smem.a_stage(st.stage), smem.b_stage(st.stage),
                     pipe.full + st.stage);
      st.advance();
    }
  }
}

// kForward with a gathered A (KernelParams::a_gather), run by the whole producer warp: each lane
// holds the source rows of 4 of the tile's 128 rows and issues their boxes {64, 1} into the
// swizzled stage at row·128 B, which must land as the one-box load would (the 128-byte swizzle
// XORs a row's 16-byte chunks with the shared-memory address bits 7–9, and stages are 1024-byte
// aligned) — the GEMM tests compare it bit for bit with the contiguous A. Lane 0 waits for the
// stage, announces its bytes and loads B as run_producer does.
template <class Cfg>
DETMOE_DEVICE void run_producer_gather(const CUtensorMap* map_a, const CUtensorMap* map_b, const KernelParams& p,
                                       const SmemLayout<Cfg>& smem, const Pipeline<Cfg>& pipe) {
  static_assert(Cfg::kBlockM == 128, "4 rows per lane");
  const uint32_t lane = ptx::lane_id();
  if (lane == 0) {
    ptx::prefetch_tensor_map(map_a);
    ptx::prefetch_tensor_map(map_b);
  }
  TileScheduler<Layout::kForward, Cfg> scheduler(p);
  PipelineState<Cfg::kStages> st;
  Tile tile;
  const bool single = (p.a_gather_mode & 1) != 0;
  const bool plain = (p.a_gather_mode & 2) != 0;
  while (scheduler.next(tile)) {
    RaggedCoords src[4];  // ragged: (0, source row + 1), or (1, 0) outside; plain: (source row or rows, 0)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int32_t row = tile.rows_begin + tile.m0 + static_cast<int32_t>(lane) + 32 * i;
      const int32_t s = row < tile.rows_end ? __ldg(p.a_gather + row) : -1;
      const bool in = s >= 0 && s < p.a_source_rows;
      if (plain)
        src[i] = RaggedCoords{in ? s : p.a_source_rows, 0};
      else
        src[i] = in ? RaggedCoords{0, s + 1} : RaggedCoords{1, 0};
    }
    const int32_t b_row = tile.group * p.n + tile.n0;
    const RaggedCoords rb = ragged_coords(b_row, (tile.group + 1) * p.n, Cfg::kBlockN);
    for (int32_t kb = 0; kb < tile.k_blocks; ++kb) {
      const int32_t k0 = kb * Cfg::kBlockK;
      if (lane == 0) pipe.producer_acquire(st, SmemLayout<Cfg>::kStageBytes);
      __syncwarp();
      uint8_t* a = smem.a_stage(st.stage);
      if (single) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll 1
          for (int l = 0; l < 32; ++l) {
            const int32_t y = __shfl_sync(0xffffffffu, src[i].y, l);
            const int32_t z = __shfl_sync(0xffffffffu, src[i].z, l);
            if (lane == 0) {
              if (plain)
                ptx::tma_load_2d(a + (l + 32 * i) * 128, map_a, pipe.full + st.stage, k0, y);
              else
                ptx::tma_load_3d(a + (l + 32 * i) * 128, map_a, pipe.full + st.stage, k0, y, z);
            }
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (plain)
            ptx::tma_load_2d(a + (lane + 32 * i) * 128, map_a, pipe.full + st.stage, k0, src[i].y);
          else
            ptx::tma_load_3d(a + (lane + 32 * i) * 128, map_a, pipe.full + st.stage, k0, src[i].y, src[i].z);
        }
      }
      if (lane == 0) ptx::tma_load_3d(smem.b_stage(st.stage), map_b, pipe.full + st.stage, k0, rb.y, rb.z);
      st.advance();
    }
  }
}

// kForward with a gathered A read by cp.async (KernelParams::a_gather_mode bit 2): each of the
// producer warpgroup's 128 threads owns one row of the A stage and copies its 8 pieces of 16
// bytes to where the 128-byte-swizzled TMA box would put them (piece c of row r at
// r·128 + ((c ^ (r mod 8))·16); stages are 1024-byte aligned). A thread announces a stage on its
// full barrier once its copies have landed (wait_group, then the proxy fence: wgmma reads through
// the async proxy), one stage behind its issue so that two stages' copies are in flight; the
// full barrier counts 1 + 128 arrivals. Thread 0 also announces and loads B with TMA.
template <class Cfg>
DETMOE_DEVICE void run_producer_gather_cp(const CUtensorMap* map_b, const KernelParams& p, const SmemLayout<Cfg>& smem,
                                          const Pipeline<Cfg>& pipe) {
  static_assert(Cfg::kBlockM == 128 && Cfg::kBlockK == 64, "one 128-byte row per thread");
  const int32_t r = static_cast<int32_t>(threadIdx.x);
  if (r == 0) ptx::prefetch_tensor_map(map_b);
  TileScheduler<Layout::kForward, Cfg> scheduler(p);
  PipelineState<Cfg::kStages> st;
  Tile tile;
  int32_t pending = -1;  // the stage whose copies this thread issued last, not yet announced
  while (scheduler.next(tile)) {
    const int32_t row = tile.rows_begin + tile.m0 + r;
    const int32_t s = row < tile.rows_end ? __ldg(p.a_gather + row) : -1;
    const bool in = s >= 0 && s < p.a_source_rows;
    const uint16_t* src = p.a_rows + (in ? static_cast<int64_t>(s) * p.a_lda : 0);
    const int32_t b_row = tile.group * p.n + tile.n0;
    const RaggedCoords rb = ragged_coords(b_row, (tile.group + 1) * p.n, Cfg::kBlockN);
    for (int32_t kb = 0; kb < tile.k_blocks; ++kb) {
      const int32_t k0 = kb * Cfg::kBlockK;
      ptx::mbarrier_wait_parity(pipe.empty + st.stage, st.phase ^ 1u);
      if (r == 0) {
        ptx::mbarrier_arrive_expect_tx(pipe.full + st.stage, SmemLayout<Cfg>::kBTileBytes);
        ptx::tma_load_3d(smem.b_stage(st.stage), map_b, pipe.full + st.stage, k0, rb.y, rb.z);
      }
      cp_async_swizzled_row(ptx::smem_u32(smem.a_stage(st.stage)) + static_cast<uint32_t>(r) * 128u,
                            static_cast<uint32_t>(r), in ? src : nullptr, k0, p.k, p.a_rows);
      ptx::cp_async_commit_group();
      if (pending >= 0) ptx::cp_async_arrive_when_landed<1>(pipe.full + pending);
      pending = st.stage;
      st.advance();
    }
  }
  if (pending >= 0) ptx::cp_async_arrive_when_landed<0>(pipe.full + pending);
}

// The consumer mainloop skeleton: k_blocks stages, each waited for, handed to
// `issue(stage, first)` (which issues the stage's wgmmas; `first`: the tile's first k-block, whose
// first k16 step overwrites the accumulators) and released as soon as the wgmmas reading it have
// finished. The layer kernel (megakernel/layer/) plugs in narrower wgmma shapes for partial
// tiles; the stage handshake is the same for every shape, so both consumer warpgroups always
// pass every stage in step. `fence()` applies ptx::fence_accumulators to the accumulator
// registers the wgmmas write (the compiler must not move their reads or writes across the wgmma
// fences and waits).
template <class Cfg, class Fence, class Issue>
DETMOE_DEVICE void consume_stages(int32_t k_blocks, const Pipeline<Cfg>& pipe, PipelineState<Cfg::kStages>& st,
                                  Fence&& fence, Issue&& issue) {
  if (k_blocks > 0) {
    int32_t previous_stage = 0;
    for (int32_t kb = 0; kb < k_blocks; ++kb) {
      pipe.consumer_wait(st);
      fence();
      ptx::wgmma_fence();
      issue(st.stage, kb == 0);
      ptx::wgmma_commit_group();
      fence();
      // Keep this k-block's wgmmas in flight; the previous one is done, release its stage.
      ptx::wgmma_wait_group<1>();
      if (kb > 0) pipe.consumer_release(previous_stage);
      previous_stage = st.stage;
      st.advance();
    }
    ptx::wgmma_wait_group<0>();
    fence();
    pipe.consumer_release(previous_stage);
  }
}

// The consumer mainloop of one tile: k_blocks stages of m64n256k16 wgmmas into `acc`. Shared
// verbatim by the GEMM kernel and the fused layer kernel (full tiles), so both run the same
// instruction sequence and a tile's bits depend only on its operands. k_blocks = 0 leaves acc
// untouched.
template <class Operands, class Cfg>
DETMOE_DEVICE void consume_k_blocks(int wg, int32_t k_blocks, const SmemLayout<Cfg>& smem, const Pipeline<Cfg>& pipe,
                                    PipelineState<Cfg::kStages>& st, float (&acc)[Cfg::kAccumulators]) {
  consume_stages<Cfg>(
      k_blocks, pipe, st, [&] { ptx::fence_accumulators(acc); },
      [&](int32_t stage, bool first) {
        const uint64_t desc_a = Operands::a_desc(smem.a_stage(stage), wg);
        const uint64_t desc_b = Operands::b_desc(smem.b_stage(stage));
#pragma unroll
        for (int kk = 0; kk < Cfg::kBlockK / 16; ++kk) {
          ptx::wgmma_m64n256k16_bf16<Operands::kTransA, Operands::kTransB>(
              acc, ptx::desc_advance(desc_a, kk * Operands::kKStepA),
              ptx::desc_advance(desc_b, kk * Operands::kKStepB), (!first || kk > 0) ? 1u : 0u);
        }
      });
}

template <Layout kLayout, class Epi, class Cfg>
DETMOE_DEVICE void run_consumer(int wg, const CUtensorMap* map_c, const CUtensorMap* map_h, const KernelParams& p,
                                const SmemLayout<Cfg>& smem, const Pipeline<Cfg>& pipe) {
  using Operands = OperandLayout<kLayout, Cfg>;
  const uint32_t thread = threadIdx.x % 128;
  const bool issuer = thread == 0;
  if (issuer) {
    ptx::prefetch_tensor_map(map_c);
    if (p.store_h) ptx::prefetch_tensor_map(map_h);
  }
  SlabStore out(smem.staging(wg, 0), smem.staging(wg, 1), /*barrier_id=*/1 + wg, issuer);
  TileScheduler<kLayout, Cfg> scheduler(p);
  PipelineState<Cfg::kStages> st;
  float acc[Cfg::kAccumulators];
  Tile tile;
  while (scheduler.next(tile)) {
    consume_k_blocks<Operands, Cfg>(wg, tile.k_blocks, smem, pipe, st, acc);
    EpilogueTile et;
    if constexpr (kLayout == Layout::kWeightGrad) {
      et.row = tile.group * p.m + tile.m0 + wg * Cfg::kWarpgroupRows;
      et.row_end = (tile.group + 1) * p.m;
    } else {
      et.row = tile.rows_begin + tile.m0 + wg * Cfg::kWarpgroupRows;
      et.row_end = tile.rows_end;
    }
    et.col0 = tile.n0;
    et.warp = thread / 32;
    et.lane = thread % 32;
    Epi::template apply<Cfg>(acc, tile.k_blocks == 0, et, p, map_c, map_h, out);
  }
  out.drain();
}

template <Layout kLayout, class Epi, class Cfg = Tile128x256>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    grouped_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                        const __grid_constant__ CUtensorMap map_c, const __grid_constant__ CUtensorMap map_h,
                        const KernelParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  const SmemLayout<Cfg> smem = SmemLayout<Cfg>::from_dynamic(smem_raw);
  const Pipeline<Cfg> pipe{smem.full_barriers(), smem.empty_barriers()};
  const bool gather_cp = kLayout == Layout::kForward && p.a_gather != nullptr && (p.a_gather_mode & 4) != 0;
  if (threadIdx.x == 0) pipe.init(gather_cp ? 1u + 128u : 1u);
  __syncthreads();

  const int warpgroup = static_cast<int>(ptx::warp_id_uniform() / 4);
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<Cfg::kProducerRegisters>();
    if constexpr (kLayout == Layout::kForward) {
      if (gather_cp) {
        run_producer_gather_cp<Cfg>(&map_b, p, smem, pipe);
      } else if (p.a_gather != nullptr) {
        if (threadIdx.x < 32) run_producer_gather<Cfg>(&map_a, &map_b, p, smem, pipe);
      } else if (threadIdx.x == 0) {
        run_producer<kLayout, Cfg>(&map_a, &map_b, p, smem, pipe);
      }
    } else if (threadIdx.x == 0) {
      run_producer<kLayout, Cfg>(&map_a, &map_b, p, smem, pipe);
    }
  } else {
    ptx::setmaxnreg_inc<Cfg::kConsumerRegisters>();
    run_consumer<kLayout, Epi, Cfg>(warpgroup - 1, &map_c, &map_h, p, smem, pipe);
  }
#endif
}

}  // namespace detmoe::gemm
