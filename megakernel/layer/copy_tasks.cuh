// The data-movement tasks of the fused kernel, run by the 256 threads of the two consumer
// warpgroups: place+dispatch (level 0) and the weighted sum (level 3). The combine is GEMM2's
// epilogue (gemm_tiles.cuh).
//
// Peers: rank d's slice of a symmetric buffer is base + d·stride (loopback: one allocation;
// NCCL: the LSA pointer of peer d — docs/MEGAKERNEL.md). Dispatch and the combine (GEMM2's
// epilogue, gemm_tiles.cuh) PUSH rows: the sender reads its local rows and writes the
// receiver's buffer, then signals the receiver's counter, so a rank only ever needs its own
// inputs locally.
#pragma once

#include <cstdint>

#include "detmoe/contract_math.h"
#include "detmoe/numeric.h"
#include "megakernel/layer/layer_params.h"
#include "megakernel/layer/plan_phases.cuh"
#include "megakernel/layer/sync.cuh"
#include "megakernel/layer/task_list.cuh"
#include "megakernel/ptx/common.cuh"

namespace detmoe::mk {

inline constexpr int kCopyThreads = 256;
inline constexpr int kCopyWarps = kCopyThreads / 32;
inline constexpr uint32_t kCopyBarrier = 3;  // named barrier of the consumer threads (1, 2: slab stores)

DETMOE_DEVICE void copy_barrier() { ptx::named_barrier_sync(kCopyBarrier, kCopyThreads); }

// One warp copies a row of `bytes` (a multiple of 16). Each lane has up to kCopyUnroll 16-byte
// loads in flight before it stores: with one at a time an SM moved ≈ 10 GB/s (gpt-oss dispatch:
// 300 µs per 2.9 MB chunk on the H200). 8 in flight made the kernel spill (ptxas -v). The source is a kernel
// input (never written in the launch), so the read-only path is safe.
DETMOE_DEVICE void warp_copy_input_row(void* dst, const void* src, int32_t bytes) {
  constexpr int kCopyUnroll = 4;
  const uint4* s = static_cast<const uint4*>(src);
  uint4* d = static_cast<uint4*>(dst);
  const int32_t n = bytes / 16;
#pragma unroll 1
  for (int32_t base = static_cast<int32_t>(ptx::lane_id()); base < n; base += 32 * kCopyUnroll) {
    uint4 v[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) {
      const int32_t i = base + 32 * u;
      if (i < n) v[u] = __ldg(s + i);
    }
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) {
      const int32_t i = base + 32 * u;
      if (i < n) d[i] = v[u];
    }
  }
}

// Level 0: place the rows of one chunk of source rank s's tokens (stable counting sort: the
// chunk's base in each expert from the plan's scan plus the rank inside the chunk, found with
// __match_any_sync 32 pairs at a time), then copy each x row into its destination rank's
// receive buffer and signal the destination m-blocks' dispatch counters.
// `hist`: E ints of shared memory (the staging slabs, free between GEMM epilogues).
DETMOE_DEVICE void place_and_dispatch(const LayerParams& p, const LaunchContext& ctx, int32_t s, int32_t chunk_in_rank,
                                      int* hist, int* flag) {
  const int tid = static_cast<int>(threadIdx.x) - 128;
  const int warp = tid / 32;
  const uint32_t lane = ptx::lane_id();
  const int32_t chunk = s * p.chunks_per_rank + chunk_in_rank;
  const int32_t t0 = chunk_in_rank * kPlanChunkTokens;
  const int32_t n = min(kPlanChunkTokens, p.T - t0);
  const int32_t pairs = n * p.k;
  const int32_t* idx = p.rank[s].topk_idx + static_cast<int64_t>(t0) * p.k;
  const int32_t* chunk_base = p.ws.chunk_base + static_cast<int64_t>(chunk) * p.E;
  const int64_t g0 = static_cast<int64_t>(s) * p.T + t0;

  copy_barrier();  // the slabs' last TMA stores have been waited for by their issuers
  if (tid == 0) *flag = launch_aborted(ctx) ? 0 : 1;  // one decision for all 256 threads
  for (int e = tid; e < p.E; e += kCopyThreads) hist[e] = 0;
  copy_barrier();
  if (*flag == 0) return;
  if (warp == 0) {
    for (int32_t base = 0; base < pairs; base += 32) {
      const int32_t i = base + static_cast<int32_t>(lane);
      const int32_t e = i < pairs ? __ldg(idx + i) : p.E + static_cast<int32_t>(lane);
      const uint32_t peers = __match_any_sync(0xffffffffu, e);
      int32_t before = 0;
      if (i < pairs) before = hist[e];
      __syncwarp();
      if (i < pairs) {
        const int32_t row = __ldcg(p.ws.expert_offset + e) + __ldcg(chunk_base + e) + before +
                            __popc(peers & lanemask_lt());
        if ((peers & lanemask_lt()) == 0) hist[e] = before + __popc(peers);
        const int64_t g = g0 + i / p.k;
        p.ws.slot_row[g0 * p.k + i] = row;
        p.ws.row_token[row] = static_cast<int32_t>(g);
        p.ws.row_slot[row] = i % p.k;
      }
      __syncwarp();
    }
  }
  copy_barrier();
  // Each lane looks up one row's addresses (a chain of dependent loads), then the warp copies
  // its 32 rows one after another with the addresses shuffled out: the lookups' latency is paid
  // once per 32 rows. Looked up row by row, it dominated: 230–400 µs per chunk on the H200.
  const int32_t row_bytes = p.H * 2;
#pragma unroll 1
  for (int32_t base = warp * 32; base < pairs; base += kCopyWarps * 32) {
    const int32_t i = base + static_cast<int32_t>(lane);
    unsigned long long dst = 0, src = 0;
    if (i < pairs) {
      const int32_t row = __ldcg(p.ws.slot_row + g0 * p.k + i);  // written by warp 0 before the barrier
      const int32_t d = __ldg(idx + i) / p.experts_per_rank;
      const int64_t local = row - __ldcg(p.ws.rank_row_begin + d);
      dst = reinterpret_cast<unsigned long long>(p.ws.recv + (static_cast<int64_t>(d) * p.capacity + local) * p.H);
      src = reinterpret_cast<unsigned long long>(p.rank[s].x + static_cast<int64_t>(t0 + i / p.k) * p.H);
    }
    const int32_t rows = min(32, pairs - base);
#pragma unroll 1
    for (int32_t r = 0; r < rows; ++r) {
      warp_copy_input_row(reinterpret_cast<void*>(__shfl_sync(0xffffffffu, dst, r)),
                          reinterpret_cast<const void*>(__shfl_sync(0xffffffffu, src, r)), row_bytes);
    }
  }
  __threadfence();
  copy_barrier();
  // One signal per (expert, m-block) the chunk's rows fall in: at most two per expert, since a
  // chunk holds at most kPlanChunkTokens ≤ 128 rows of one expert.
  for (int e = tid; e < p.E; e += kCopyThreads) {
    const int32_t count = hist[e];
    if (count == 0) continue;
    const int32_t d = e / p.experts_per_rank;
    const int32_t pos = __ldcg(chunk_base + e);
    const int32_t mb_base = __ldcg(p.ws.mblock_offset + e) - __ldcg(p.ws.mblock_offset + d * p.experts_per_rank);
    unsigned long long* ready = rank_counters(p, d) + p.counters.dispatch_ready + mb_base;
    for (int32_t mb = pos / kRowsPerMBlock; mb <= (pos + count - 1) / kRowsPerMBlock; ++mb) {
      const int32_t lo = max(pos, mb * kRowsPerMBlock), hi = min(pos + count, (mb + 1) * kRowsPerMBlock);
      signal_add(ready + mb, ctx.epoch, static_cast<uint32_t>(hi - lo));
    }
  }
  copy_barrier();  // hist lives in warpgroup 0's staging slab: read out before its next epilogue
}

// Element v of eight packed bf16 values, as fp32 (shifts: no address taken, so the vector stays
// in registers).
DETMOE_DEVICE float bf16_lane(const uint4& r, int v) {
  const uint32_t word = v < 2 ? r.x : v < 4 ? r.y : v < 6 ? r.z : r.w;
  return __uint_as_float(v % 2 == 0 ? word << 16 : word & 0xFFFF0000u);
}

// Level 3: out[t] = bf16(Σ_j fma(w[t,j], y[t,j]) + s[t]) for kSumChunkTokens of rank s's tokens,
// the reference's order element by element (contract_combine_step), so it compares bitwise. The
// y rows were written by GEMM2's epilogue straight into y_slots(s) (the caller's y when asked).
DETMOE_DEVICE void weighted_sum(const LayerParams& p, const LaunchContext& ctx, const Task& task, int32_t s, int* flag,
                                  const uint8_t* stage_base) {
  const int tid = static_cast<int>(threadIdx.x) - 128;
  const int warp = tid / 32;
  const uint32_t lane = ptx::lane_id();
  const int32_t t0 = task.index * kSumChunkTokens;
  const int32_t n = min(kSumChunkTokens, p.T - t0);
  copy_barrier();
  if (tid == 0) {
    const WaitSite site{task.id, CounterKind::kSlotsReady, static_cast<uint32_t>(s), task.index};
    // Every row of the chunk lands in H/64 slabs of 64 columns (GEMM2's epilogue signals runs of
    // rows, counted in row-slabs, so it does not matter which warpgroup stored which columns).
    bool ok = wait_counter(ctx, rank_counters(p, s) + p.counters.slots_ready + task.index,
                           static_cast<uint32_t>(n * p.k * (p.H / 64)), site);
    if (ok && p.Fs > 0) {
      const int32_t tm = t0 / kRowsPerMBlock;
      const WaitSite shared_site{task.id, CounterKind::kShared2Done, static_cast<uint32_t>(s), tm};
      ok = wait_counter(ctx, rank_counters(p, s) + p.counters.shared2_done + tm,
                        2u * static_cast<uint32_t>(div_up(p.H, kGemm2Cols)), shared_site);
    }
    *flag = ok ? 1 : 0;
  }
  copy_barrier();
  if (*flag == 0) return;
  const RankTensors& rt = p.rank[s];
  const uint16_t* slots = y_slots(p, s);
  // A lane's items are (column piece cp, slot j) in the order of the sum: piece cp covers columns
  // 8·(lane + 32·cp) … +7, and slots are added j = 0, 1, … per element (the contract's order). It
  // copies kSumBatch items at a time into its warp's 4 KB of the staging slabs with cp.async (no
  // registers held while in flight), then adds them from shared memory. One register load per
  // slot kept about one load in flight per lane: the sum ran at ≈ 1.3 TB/s (gpt-oss: 0.23 ms
  // after GEMM2's last tile).
  constexpr int kSumBatch = 8;  // 8 × 16 B × 32 lanes = 4 KB per warp; 8 warps: the 4 slabs
  const uint32_t stash = ptx::smem_u32(stage_base) + static_cast<uint32_t>(warp) * 4096u + lane * 16u;
  const int32_t pieces = div_up(p.H / 8 - static_cast<int32_t>(lane), 32);  // this lane's column pieces
  const int32_t items = pieces * p.k;
  for (int32_t tt = warp; tt < n; tt += kCopyWarps) {
    const int64_t t = t0 + tt;
    const uint16_t* yt = slots + t * p.k * p.H;
    const float* wt = rt.topk_w + t * p.k;
    uint16_t* out_row = rt.out + t * p.H;
    float acc[8];
#pragma unroll
    for (int v = 0; v < 8; ++v) acc[v] = 0.0f;
    for (int32_t q0 = 0; q0 < items; q0 += kSumBatch) {
#pragma unroll
      for (int i = 0; i < kSumBatch; ++i) {
        const int32_t q = q0 + i, cp = q / p.k, j = q % p.k;
        if (q < items) ptx::cp_async_16(stash + i * 512u, yt + static_cast<int64_t>(j) * p.H + 8 * (lane + 32 * cp));
      }
      ptx::cp_async_commit();
      ptx::cp_async_wait_all();
#pragma unroll 1
      for (int i = 0; i < kSumBatch && q0 + i < items; ++i) {
        const int32_t q = q0 + i, cp = q / p.k, j = q % p.k;
        const uint4 raw = ptx::ld_shared_v4(stash + i * 512u);
        const float w = __ldg(wt + j);
#pragma unroll
        for (int v = 0; v < 8; ++v) acc[v] = contract_combine_step(acc[v], w, bf16_lane(raw, v));
        if (j + 1 < p.k) continue;
        // The piece's last slot: add the shared expert, round, store, start the next piece.
        const int32_t c = 8 * (static_cast<int32_t>(lane) + 32 * cp);
        if (p.Fs > 0) {
          const int64_t at = (static_cast<int64_t>(s) * p.T + t) * p.H + c;
          const uint4 sraw = __ldcg(reinterpret_cast<const uint4*>(p.ws.s + at));
#pragma unroll
          for (int v = 0; v < 8; ++v) acc[v] = acc[v] + bf16_lane(sraw, v);
        }
        uint32_t o[4];
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          o[h] = bf16_bits_from_float(acc[2 * h]) | static_cast<uint32_t>(bf16_bits_from_float(acc[2 * h + 1])) << 16;
          acc[2 * h] = acc[2 * h + 1] = 0.0f;
        }
        *reinterpret_cast<uint4*>(out_row + c) = make_uint4(o[0], o[1], o[2], o[3]);
      }
    }
  }
}

}  // namespace detmoe::mk
