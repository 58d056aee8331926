// The persistent, warp-specialised grouped GEMM kernel (sm_90a).
//
// Warpgroup 0 is the producer: after giving registers back, one thread walks this CTA's tiles
// and streams their k-blocks into the stage ring with TMA. Warpgroups 1 and 2 are consumers:
// each owns 64 rows × 256 columns of the 128×256 tile in fp32 registers, issues m64n256k16
// wgmmas over the stages, releases each stage as soon as the wgmma reading it has finished, and
// runs the epilogue while the producer already loads the next tile.
//
// Bits: an output tile is computed by one CTA, k-blocks in increasing order, the same wgmma
// sequence whatever the grid, the deal or the other groups, so results are identical for any
// grid size and either deal (TileDeal).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "detmoe/gemm.h"
#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/gemm/operand_layout.cuh"
#include "megakernel/gemm/params.cuh"
#include "megakernel/gemm/pipeline.cuh"
#include "megakernel/gemm/scheduler.cuh"
#include "megakernel/gemm/smem_layout.cuh"
#include "megakernel/gemm/task_ring.cuh"
#include "megakernel/gemm/tile_config.cuh"
#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/tma.cuh"
#include "megakernel/ptx/wgmma.cuh"

namespace detmoe::gemm {

// Which tiles a CTA runs, in increasing id. The static deal (tickets = nullptr): CTA c runs
// c, c + grid, c + 2·grid, …, each of the producer and consumers counting for itself. The ticket
// deal: the producer thread takes each next id from the global counter once it has issued the
// previous tile's loads, and hands it to the consumers through the task ring (−1: none left), so
// a CTA that drew short tiles takes more of them. With groups of unequal row counts
// (weight gradients of routed tokens: K = an expert's rows) the static deal gave each CTA its
// own mix of long and short tiles and the launch lasted as long as the unluckiest CTA's sum.
// Either way the tiles running at once are a window of consecutive ids (bands stay together).
template <Layout kLayout, class Cfg>
class TileDeal {
 public:
  DETMOE_DEVICE TileDeal(const KernelParams& p, unsigned int* tickets, TaskRingStorage<NoDescription>* ring)
      : scheduler_(p), tickets_(tickets), ring_(ring), next_(blockIdx.x) {}

  // The producer thread's next tile, false at the end (the consumers are told).
  DETMOE_DEVICE bool producer_next(Tile& t) {
    if (tickets_ == nullptr) return static_next(t);
    const unsigned int ticket = atomicAdd(tickets_, 1u);
    const bool ok = ticket <= 0x7fffffffu && scheduler_.at(ticket, t);
    ring_.push(ok ? static_cast<int32_t>(ticket) : -1);
    return ok;
  }

  // Every consumer thread's next tile: the producer's sequence.
  DETMOE_DEVICE bool consumer_next(Tile& t) {
    if (tickets_ == nullptr) return static_next(t);
    const int32_t ticket = ring_.pop_index();
    return ticket >= 0 && scheduler_.at(ticket, t);
  }

 private:
  DETMOE_DEVICE bool static_next(Tile& t) {
    const bool ok = scheduler_.at(next_, t);
    next_ += gridDim.x;
    return ok;
  }

  TileScheduler<kLayout, Cfg> scheduler_;
  unsigned int* tickets_;
  TaskRing<NoDescription> ring_;
  int64_t next_;
};

template <Layout kLayout, class Cfg>
DETMOE_DEVICE void run_producer(const CUtensorMap* map_a, const CUtensorMap* map_b, const KernelParams& p,
                                const SmemLayout<Cfg>& smem, const Pipeline<Cfg>& pipe, unsigned int* tickets,
                                TaskRingStorage<NoDescription>* ring) {
  using Operands = OperandLayout<kLayout, Cfg>;
  ptx::prefetch_tensor_map(map_a);
  ptx::prefetch_tensor_map(map_b);
  TileDeal<kLayout, Cfg> deal(p, tickets, ring);
  PipelineState<Cfg::kStages> st;
  Tile tile;
  while (deal.producer_next(tile)) {
    const uint32_t bytes = Operands::stage_bytes(tile, p.n, p.m);
    for (int32_t kb = 0; kb < tile.k_blocks; ++kb) {
      pipe.producer_acquire(st, bytes);
      Operands::load(map_a, map_b, tile, kb, p.n, p.k, p.m, smem.a_stage(st.stage), smem.b_stage(st.stage),
                     pipe.full + st.stage);
      st.advance();
    }
  }
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

// A consumer warpgroup's store ring over its staging: the two rotating slabs of the core's default
// form (SlabStore), or every slab of a Cfg with more staging (Tile128x256DeepRing: SlabRing<5>).
template <class Cfg>
DETMOE_DEVICE auto consumer_store(const SmemLayout<Cfg>& smem, int wg, bool issuer) {
  constexpr int kSlabs = static_cast<int>(Cfg::kStagingBytesPerWarpgroup / SmemLayout<Cfg>::kBoxBytes);
  if constexpr (kSlabs == 2)
    return SlabStore(smem.staging(wg, 0), smem.staging(wg, 1), /*barrier_id=*/1 + wg, issuer);
  else
    return SlabRing<kSlabs>(smem.staging(wg, 0), /*barrier_id=*/1 + wg, issuer);
}

template <Layout kLayout, class Epi, class Cfg>
DETMOE_DEVICE void run_consumer(int wg, const CUtensorMap* map_c, const CUtensorMap* map_h, const KernelParams& p,
                                const SmemLayout<Cfg>& smem, const Pipeline<Cfg>& pipe, unsigned int* tickets,
                                TaskRingStorage<NoDescription>* ring) {
  using Operands = OperandLayout<kLayout, Cfg>;
  const uint32_t thread = threadIdx.x % 128;
  const bool issuer = thread == 0;
  if (issuer) {
    ptx::prefetch_tensor_map(map_c);
    if (p.store_h) ptx::prefetch_tensor_map(map_h);
  }
  auto out = consumer_store(smem, wg, issuer);
  if (p.stream_stores != 0 && issuer) out.hint_stores(ptx::l2_policy_evict_first());
  TileDeal<kLayout, Cfg> deal(p, tickets, ring);
  PipelineState<Cfg::kStages> st;
  float acc[Cfg::kAccumulators];
  Tile tile;
  while (deal.consumer_next(tile)) {
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

// Whether p's groups are uneven enough for the ticket deal: the largest group's rows above 1.5×
// the mean (the clamped rows load_group_rows gives each group). Every lane of one warp (a warp
// reduction over the offsets, ≈ 1 µs once per CTA); every CTA reads the same offsets, so all
// agree. The ticket deal gained where groups differ (zipf1 backward on an H100, session 33:
// gpt-oss-120b −1.4 ms, deepseek-v3 −0.4, qwen3 −0.2) and cost where they are equal
// (mixtral-8x7b balanced +0.3 ms, deepseek-v3 +0.1): equal tiles keep the static deal in step.
DETMOE_DEVICE bool groups_uneven(const KernelParams& p) {
  if (p.group_offsets == nullptr || p.groups <= 1) return false;
  int32_t largest = 0;
  int64_t total = 0;
  for (int32_t g = static_cast<int32_t>(ptx::lane_id()); g < p.groups; g += 32) {
    const int32_t lo = min(max(__ldg(p.group_offsets + g), 0), p.rows);
    const int32_t hi = min(max(__ldg(p.group_offsets + g + 1), lo), p.rows);
    largest = max(largest, hi - lo);
    total += hi - lo;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    largest = max(largest, __shfl_xor_sync(0xffffffffu, largest, offset));
    total += __shfl_xor_sync(0xffffffffu, total, offset);
  }
  return 2 * static_cast<int64_t>(largest) * p.groups > 3 * total;
}

template <Layout kLayout, class Epi, class Cfg = Tile128x256>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    grouped_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                        const __grid_constant__ CUtensorMap map_c, const __grid_constant__ CUtensorMap map_h,
                        const KernelParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(Cfg::kConsumerWarpgroups * 128 == kTaskRingConsumerThreads, "the ring counts every consumer thread");
  extern __shared__ uint8_t smem_raw[];
  __shared__ TaskRingStorage<NoDescription> ring;  // the ticket deal's (TileDeal)
  __shared__ int32_t by_tickets;
  const SmemLayout<Cfg> smem = SmemLayout<Cfg>::from_dynamic(smem_raw);
  const Pipeline<Cfg> pipe{smem.full_barriers(), smem.empty_barriers()};
  if (ptx::warp_id_uniform() == 0) {
    const bool uneven = p.tickets != nullptr && groups_uneven(p);
    if (threadIdx.x == 0) {
      pipe.init();
      TaskRing<NoDescription>(&ring).init();
      by_tickets = uneven ? 1 : 0;
    }
  }
  __syncthreads();
  unsigned int* const tickets = by_tickets != 0 ? p.tickets : nullptr;

  const int warpgroup = static_cast<int>(ptx::warp_id_uniform() / 4);
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<Cfg::kProducerRegisters>();
    if (threadIdx.x == 0) run_producer<kLayout, Cfg>(&map_a, &map_b, p, smem, pipe, tickets, &ring);
  } else {
    ptx::setmaxnreg_inc<Cfg::kConsumerRegisters>();
    run_consumer<kLayout, Epi, Cfg>(warpgroup - 1, &map_c, &map_h, p, smem, pipe, tickets, &ring);
  }
#endif
}

}  // namespace detmoe::gemm
