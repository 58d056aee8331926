// The routing plan inside the fused kernel: the same tables as build_routing_plan (host) and the
// reference's plan kernels, bit for bit, as three grid-wide phases of the persistent grid.
//
//   A  one warp per chunk of plan_chunk_tokens tokens (global order: source rank, token):
//      validate the routing (the smallest bad (token, slot) wins, so the reported fault does not
//      depend on timing) and count the chunk's rows per expert. The count uses __match_any_sync
//      over 32 (token, slot) pairs at a time: one leader per expert adds the group's count, so
//      the histogram is a plain sequential sum — no atomics at all.
//   B  one warp per expert: exclusive scan of its chunk counts in global chunk order → the base
//      of each chunk inside the expert's segment (a stable counting sort by global token).
//   C  CTA 0: expert offsets, m-block offsets, rank ranges; the capacity check.
// Row placement (each pair's row) happens inside the dispatch task of its chunk (dispatch.cuh).
// Every CTA runs every phase with all its threads, before the warp roles split.
#pragma once

#include <cstdint>

#include "megakernel/gemm/band_order.h"
#include "megakernel/layer/device_error.h"
#include "megakernel/layer/layer_params.h"
#include "megakernel/layer/sync.cuh"
#include "megakernel/ptx/common.cuh"

namespace detmoe::mk {

inline constexpr int kPlanThreads = 384;  // the kernel's block size
inline constexpr int kPlanWarps = kPlanThreads / 32;

using ptx::lanemask_lt;

// Bad-input key: smaller = reported first. Per token: an id fault (out of range or repeated) at
// the lowest slot, else a non-finite weight at the lowest slot.
DETMOE_DEVICE unsigned long long bad_key(int64_t token, int slot, bool weight_fault) {
  return (static_cast<unsigned long long>(token) << 7) | (weight_fault ? 64u : 0u) | static_cast<uint32_t>(slot);
}

// Phase A for one chunk, by one warp; hist: E ints of this warp's shared memory.
DETMOE_DEVICE void plan_count_chunk(const LayerParams& p, int32_t chunk, int* hist) {
  const uint32_t lane = ptx::lane_id();
  const int32_t s = chunk / p.chunks_per_rank;
  const int32_t t0 = (chunk % p.chunks_per_rank) * p.plan_chunk_tokens;
  const int32_t n = min(p.plan_chunk_tokens, p.T - t0);
  const int32_t pairs = n * p.k;
  const int32_t* idx = p.rank[s].topk_idx + static_cast<int64_t>(t0) * p.k;
  const float* w = p.rank[s].topk_w + static_cast<int64_t>(t0) * p.k;
  for (int e = lane; e < p.E; e += 32) hist[e] = 0;
  __syncwarp();
  unsigned long long worst = ~0ull;
  for (int32_t base = 0; base < pairs; base += 32) {
    const int32_t i = base + static_cast<int32_t>(lane);
    int32_t key = p.E + static_cast<int32_t>(lane);  // distinct non-expert value: a lane of its own
    if (i < pairs) {
      const int32_t t = i / p.k, j = i % p.k;
      const int32_t e = __ldg(idx + i);
      bool id_fault = e < 0 || e >= p.E;
      for (int jp = 0; jp < j && !id_fault; ++jp) id_fault = __ldg(idx + t * p.k + jp) == e;
      const int64_t g = static_cast<int64_t>(s) * p.T + t0 + t;
      if (id_fault) {
        worst = min(worst, bad_key(g, j, false));
      } else {
        key = e;
        if (!isfinite(__ldg(w + i))) worst = min(worst, bad_key(g, j, true));
      }
    }
    const uint32_t peers = __match_any_sync(0xffffffffu, key);
    const bool leader = (peers & lanemask_lt()) == 0;
    if (leader && key < p.E) hist[key] += __popc(peers);
    __syncwarp();
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) worst = min(worst, __shfl_xor_sync(0xffffffffu, worst, off));
  if (lane == 0 && worst != ~0ull) atomicMin(p.ws.bad_key, worst);
  int32_t* out = p.ws.chunk_base + static_cast<int64_t>(chunk) * p.E;
  for (int e = lane; e < p.E; e += 32) out[e] = hist[e];
}

// Phase B for one expert, by one warp.
DETMOE_DEVICE void plan_scan_expert(const LayerParams& p, int32_t e) {
  const uint32_t lane = ptx::lane_id();
  const int32_t chunks = p.P * p.chunks_per_rank;
  int32_t running = 0;
  for (int32_t c0 = 0; c0 < chunks; c0 += 32) {
    const int32_t c = c0 + static_cast<int32_t>(lane);
    int32_t* cell = p.ws.chunk_base + static_cast<int64_t>(c) * p.E + e;
    const int32_t v = c < chunks ? __ldcg(cell) : 0;
    int32_t incl = v;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const int32_t up = __shfl_up_sync(0xffffffffu, incl, off);
      if (static_cast<int>(lane) >= off) incl += up;
    }
    if (c < chunks) *cell = running + incl - v;
    running += __shfl_sync(0xffffffffu, incl, 31);
  }
  if (lane == 0) p.ws.expert_count[e] = running;
}

// Phase C, by warp 0 of CTA 0: lane l scans a contiguous run of experts.
DETMOE_DEVICE void plan_offsets(const LayerParams& p, const LaunchContext& ctx) {
  const uint32_t lane = ptx::lane_id();
  const int32_t per_lane = (p.E + 31) / 32;
  const int32_t e0 = min(p.E, static_cast<int32_t>(lane) * per_lane), e1 = min(p.E, e0 + per_lane);
  // GEMM2's first pass takes gemm::first_pass_mblocks of each expert's m-blocks (gemm_tasks.cuh).
  auto first_pass = [&](int32_t c) {
    return gemm::first_pass_mblocks((c + kRowsPerMBlock - 1) / kRowsPerMBlock, kMinGemm2PassMBlocks);
  };
  int32_t rows = 0, blocks = 0, firsts = 0;
  for (int32_t e = e0; e < e1; ++e) {
    const int32_t c = __ldcg(p.ws.expert_count + e);
    rows += c;
    blocks += (c + kRowsPerMBlock - 1) / kRowsPerMBlock;
    firsts += first_pass(c);
  }
  int32_t rows_incl = rows, blocks_incl = blocks, firsts_incl = firsts;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int32_t r = __shfl_up_sync(0xffffffffu, rows_incl, off);
    const int32_t b = __shfl_up_sync(0xffffffffu, blocks_incl, off);
    const int32_t f = __shfl_up_sync(0xffffffffu, firsts_incl, off);
    if (static_cast<int>(lane) >= off) {
      rows_incl += r;
      blocks_incl += b;
      firsts_incl += f;
    }
  }
  int32_t row = rows_incl - rows, block = blocks_incl - blocks, first = firsts_incl - firsts;
  int32_t* const pass_offset[2] = {p.ws.pass_mblock_offset, p.ws.pass_mblock_offset + p.E + 1};
  for (int32_t e = e0; e < e1; ++e) {
    p.ws.expert_offset[e] = row;
    p.ws.mblock_offset[e] = block;
    pass_offset[0][e] = first;
    pass_offset[1][e] = block - first;
    const int32_t c = __ldcg(p.ws.expert_count + e);
    row += c;
    block += (c + kRowsPerMBlock - 1) / kRowsPerMBlock;
    first += first_pass(c);
  }
  if (lane == 31) {
    p.ws.expert_offset[p.E] = rows_incl;
    p.ws.mblock_offset[p.E] = blocks_incl;
    pass_offset[0][p.E] = firsts_incl;
    pass_offset[1][p.E] = blocks_incl - firsts_incl;
  }
  __syncwarp();
  if (lane == 0) {
    // Rank ranges and the capacity check (lowest rank first, so the report is deterministic).
    bool reported = false;
    for (int32_t r = 0; r <= p.P; ++r) {
      const int32_t begin = __ldcg(p.ws.expert_offset + r * p.experts_per_rank);
      p.ws.rank_row_begin[r] = begin;
      if (r > 0 && !reported) {
        const int32_t need = begin - __ldcg(p.ws.expert_offset + (r - 1) * p.experts_per_rank);
        if (need > p.capacity) {
          record_fault(ctx, FaultCode::kCapacityExceeded, make_task_id(TaskKind::kPlan, r - 1, 2),
                       CounterKind::kGridBarrier, r - 1, 0, p.capacity, need);
          reported = true;
        }
      }
    }
  }
}

// Turns the smallest bad-input key into the fault record (thread 0 of CTA 0, after phase A).
DETMOE_DEVICE void report_bad_input(const LayerParams& p, const LaunchContext& ctx) {
  const unsigned long long key = ld_relaxed_u64(p.ws.bad_key);
  if (key == ~0ull) return;
  const int64_t g = static_cast<int64_t>(key >> 7);
  const int32_t slot = static_cast<int32_t>(key & 63u);
  const int32_t s = static_cast<int32_t>(g / p.T), t = static_cast<int32_t>(g % p.T);
  if (key & 64u) {
    const float w = p.rank[s].topk_w[static_cast<int64_t>(t) * p.k + slot];
    record_fault(ctx, FaultCode::kNonFiniteWeight, make_task_id(TaskKind::kPlan, s, 0), CounterKind::kGridBarrier, s, g,
                 slot, __float_as_uint(w));
    return;
  }
  const int32_t e = p.rank[s].topk_idx[static_cast<int64_t>(t) * p.k + slot];
  const FaultCode code = (e < 0 || e >= p.E) ? FaultCode::kInvalidExpert : FaultCode::kRepeatedExpert;
  record_fault(ctx, code, make_task_id(TaskKind::kPlan, s, 0), CounterKind::kGridBarrier, s, g, slot, e);
}

// The whole plan. `scratch`: kPlanWarps·E ints of shared memory. False (uniformly) when the
// routing is bad, the capacity is too small or a barrier timed out: the launch does nothing else.
DETMOE_DEVICE bool run_plan(const LayerParams& p, const LaunchContext& ctx, int* scratch, int* flag) {
  const int warp = static_cast<int>(ptx::warp_id_uniform());
  const int global_warp = blockIdx.x * kPlanWarps + warp;
  const int warps = gridDim.x * kPlanWarps;
  const int32_t chunks = p.P * p.chunks_per_rank;
  stamp_counters(p, ctx.epoch);  // tickets and task counters; nobody uses them before the last barrier
  for (int32_t c = global_warp; c < chunks; c += warps) plan_count_chunk(p, c, scratch + warp * p.E);
  if (!grid_barrier(ctx, p.ws.barriers + 0, 0, flag)) return false;
  if (blockIdx.x == 0 && threadIdx.x == 0) report_bad_input(p, ctx);
  for (int32_t e = global_warp; e < p.E; e += warps) plan_scan_expert(p, e);
  if (!grid_barrier(ctx, p.ws.barriers + 1, 1, flag)) return false;
  if (blockIdx.x == 0 && warp == 0) plan_offsets(p, ctx);
  return grid_barrier(ctx, p.ws.barriers + 2, 2, flag);
}

}  // namespace detmoe::mk
