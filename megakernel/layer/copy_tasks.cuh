// The data-movement tasks of the fused kernel, run by the 256 threads of the two consumer
// warpgroups: place+dispatch (level 0) and the weighted sum (level 3). The combine is GEMM2's
// epilogue (tile_epilogues.cuh).
//
// Peers: rank d's slice of a symmetric buffer is base + d·stride (loopback: one allocation;
// NCCL: the LSA pointer of peer d — docs/MEGAKERNEL.md). Dispatch and the combine (GEMM2's
// epilogue, tile_epilogues.cuh) PUSH rows: the sender reads its local rows and writes the
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
#include "megakernel/ptx/mbarrier.cuh"
#include "megakernel/ptx/tma.cuh"

namespace detmoe::mk {

inline constexpr int kCopyThreads = 256;
inline constexpr int kCopyWarps = kCopyThreads / 32;
inline constexpr uint32_t kCopyBarrier = 3;  // named barrier of the consumer threads (1, 2: slab stores)
// place_and_dispatch's shared memory, from the staging's start: the histogram (E ≤ 1024 ints),
// one mbarrier and one 32-entry destination table per copy warp, and one row buffer per copy
// warp of kDispatchPieceBytes (a multiple of 128: bulk copies want 16-byte sizes and addresses).
inline constexpr int32_t kDispatchBarrierOffset = 4096;
inline constexpr int32_t kDispatchDstOffset = kDispatchBarrierOffset + 128;
inline constexpr int32_t kDispatchBufferOffset = kDispatchDstOffset + kCopyWarps * 32 * 8;
inline constexpr int32_t kDispatchPieceBytes = 7808;

DETMOE_DEVICE void copy_barrier() { ptx::named_barrier_sync(kCopyBarrier, kCopyThreads); }
// The copy barrier, returning whether every thread passed `ok` (one thread's wait decides for all).
DETMOE_DEVICE bool copy_barrier_and(bool ok) { return ptx::named_barrier_and(kCopyBarrier, kCopyThreads, ok); }

// Level 0: place the rows of one chunk of source rank s's tokens (stable counting sort: the
// chunk's base in each expert from the plan's scan plus the rank inside the chunk, found with
// __match_any_sync 32 pairs at a time), then copy each x row into its destination rank's
// receive buffer and signal the destination m-blocks' dispatch counters.
// `staging`: the consumers' staging (free between GEMM epilogues, and dispatch runs before any):
// E ints of histogram, then the copy warps' mbarriers, destination tables and row buffers.
DETMOE_DEVICE void place_and_dispatch(const LayerParams& p, const LaunchContext& ctx, int32_t s, int32_t chunk_in_rank,
                                      uint8_t* staging) {
  int* hist = reinterpret_cast<int*>(staging);
  const int tid = static_cast<int>(threadIdx.x) - 128;
  const int warp = tid / 32;
  const uint32_t lane = ptx::lane_id();
  const int32_t chunk = s * p.chunks_per_rank + chunk_in_rank;
  const int32_t t0 = chunk_in_rank * p.plan_chunk_tokens;
  const int32_t n = min(p.plan_chunk_tokens, p.T - t0);
  const int32_t pairs = n * p.k;
  const int32_t* idx = p.rank[s].topk_idx + static_cast<int64_t>(t0) * p.k;
  const int32_t* chunk_base = p.ws.chunk_base + static_cast<int64_t>(chunk) * p.E;
  const int64_t g0 = static_cast<int64_t>(s) * p.T + t0;

  copy_barrier();  // the slabs' last TMA stores have been waited for by their issuers
  // One decision for all 256 threads, taken by thread 0.
  const bool go = tid != 0 || !launch_aborted(ctx);
  for (int e = tid; e < p.E; e += kCopyThreads) hist[e] = 0;
  if (!copy_barrier_and(go)) return;
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
  // The copies: one warp per token of the chunk, its lane 0 driving the bulk-copy engine. The x
  // row comes into the warp's buffer in the staging once (cp.async.bulk, completing on the warp's
  // mbarrier) and goes out to its k destination rows as k bulk stores from that one copy, in
  // pieces of at most kDispatchPieceBytes. (Copied by the warp's lanes with 16-byte loads and
  // stores, each of the k copies re-read the row and the dispatch moved ≈ 1.8 TB/s on an H100,
  // 0.6 ms per CTA on deepseek-v3, docs/PERF.md session 23.) The bytes are the same.
  const int32_t row_bytes = p.H * 2;
  uint64_t* bar = reinterpret_cast<uint64_t*>(staging + kDispatchBarrierOffset) + warp;
  unsigned long long* dsts = reinterpret_cast<unsigned long long*>(staging + kDispatchDstOffset) + warp * 32;
  uint8_t* buffer = staging + kDispatchBufferOffset + warp * kDispatchPieceBytes;
  if (lane == 0) {
    ptx::mbarrier_init(bar, 1);
    ptx::fence_mbarrier_init();
  }
  __syncwarp();
  uint32_t phase = 0;
#pragma unroll 1
  for (int32_t q = warp; q < n; q += kCopyWarps) {
    // Lane j < k looks up the destination of pair (q, j) (a chain of dependent loads).
    if (lane < static_cast<uint32_t>(p.k)) {
      const int32_t i = q * p.k + static_cast<int32_t>(lane);
      const int32_t row = __ldcg(p.ws.slot_row + g0 * p.k + i);  // written by warp 0 before the barrier
      const int32_t d = __ldg(idx + i) / p.experts_per_rank;
      const int64_t local = row - __ldcg(p.ws.rank_row_begin + d);
      dsts[lane] = reinterpret_cast<unsigned long long>(p.ws.recv + (static_cast<int64_t>(d) * p.capacity + local) * p.H);
    }
    __syncwarp();
    if (lane == 0) {
      const char* src = reinterpret_cast<const char*>(p.rank[s].x + static_cast<int64_t>(t0 + q) * p.H);
#pragma unroll 1
      for (int32_t off = 0; off < row_bytes; off += kDispatchPieceBytes) {
        const uint32_t bytes = static_cast<uint32_t>(min(kDispatchPieceBytes, row_bytes - off));
        ptx::bulk_wait_group_read<0>();  // the previous piece's stores have read the buffer
        ptx::mbarrier_arrive_expect_tx(bar, bytes);
        ptx::bulk_load(buffer, src + off, bytes, bar);
        ptx::mbarrier_wait_parity(bar, phase);
        phase ^= 1u;
#pragma unroll 1
        for (int32_t j = 0; j < p.k; ++j) ptx::bulk_store(reinterpret_cast<char*>(dsts[j]) + off, ptx::smem_u32(buffer), bytes);
        ptx::bulk_commit_group();
      }
    }
    __syncwarp();  // dsts is rewritten for the next token only after lane 0 issued these stores
  }
  if (lane == 0) {
    ptx::bulk_wait_group_all();  // every row written to global memory
    fence_proxy_async_global();  // the bulk stores (async proxy) before the release below
    ptx::mbarrier_inval(bar);    // its bytes are staging again after the task
  }
  __syncwarp();
  fence_acq_rel_gpu();
  copy_barrier();
  // One signal per (expert, m-block) the chunk's rows fall in: at most two per expert, since a
  // chunk holds at most plan_chunk_tokens ≤ kMaxPlanChunkTokens ≤ 128 rows of one expert.
  for (int e = tid; e < p.E; e += kCopyThreads) {
    const int32_t count = hist[e];
    if (count == 0) continue;
    const int32_t d = e / p.experts_per_rank;
    const int32_t pos = __ldcg(chunk_base + e);
    const int32_t mb_base = __ldcg(p.ws.mblock_offset + e) - __ldcg(p.ws.mblock_offset + d * p.experts_per_rank);
    unsigned long long* ready = rank_counters(p, d) + p.counters.dispatch_ready + mb_base;
    for (int32_t mb = pos / kRowsPerMBlock; mb <= (pos + count - 1) / kRowsPerMBlock; ++mb) {
      const int32_t lo = max(pos, mb * kRowsPerMBlock), hi = min(pos + count, (mb + 1) * kRowsPerMBlock);
      signal_stamped(ready + mb, static_cast<uint32_t>(hi - lo));
    }
  }
  copy_barrier();  // hist lives in warpgroup 0's staging slab: read out before its next epilogue
}

// Level 3: out[t] = bf16(Σ_j fma(w[t,j], y[t,j]) + s[t]) for kSumChunkTokens of rank s's tokens,
// the reference's order element by element (contract_combine_step), so it compares bitwise. The
// y rows were written by GEMM2's epilogue straight into y_slots(s) (the caller's y when asked).
DETMOE_DEVICE void weighted_sum(const LayerParams& p, const LaunchContext& ctx, const Task& task, int32_t s) {
  const int tid = static_cast<int>(threadIdx.x) - 128;
  const int32_t t0 = task.index * kSumChunkTokens;
  const int32_t n = min(kSumChunkTokens, p.T - t0);
  bool ok = true;
  if (tid == 0) {
    const WaitSite site{task.id, CounterKind::kSlotsReady, static_cast<uint32_t>(s), task.index};
    // Every row of the chunk lands in H/64 slabs of 64 columns (GEMM2's epilogue signals runs of
    // rows, counted in row-slabs, so it does not matter which warpgroup stored which columns).
    ok = wait_counter(ctx, rank_counters(p, s) + p.counters.slots_ready + task.index,
                      static_cast<uint32_t>(n * p.k * (p.H / 64)), site);
    if (ok && p.Fs > 0) {
      const int32_t tm = t0 / kRowsPerMBlock;
      const WaitSite shared_site{task.id, CounterKind::kShared2Done, static_cast<uint32_t>(s), tm};
      ok = wait_counter(ctx, rank_counters(p, s) + p.counters.shared2_done + tm,
                        2u * static_cast<uint32_t>(div_up(p.H, kGemm2Cols)), shared_site);
    }
  }
  if (!copy_barrier_and(ok)) return;
  const RankTensors& rt = p.rank[s];
  const uint16_t* slots = y_slots(p, s);
  // The chunk's n·H/8 pieces (8 columns of one token's row) are dealt to all 256 threads at once,
  // kSumPieces per thread per pass, and each thread loads kSumBatch slots of all its pieces before
  // their FMAs: 16 loads of 16 bytes in flight per thread. (One token per warp with two pieces per
  // lane had 8 in flight and twice the round trips; gpt-oss's tail summed at ≈ 2 TB/s, 58 µs per
  // chunk, docs/PERF.md step 8.) The FMAs of an element still run slot by slot in order
  // j = 0 … k − 1, so the bits are unchanged.
  constexpr int kSumPieces = 4;
  constexpr int kSumBatch = 4;
  const int32_t row_pieces = p.H / 8;
  const int32_t pieces = n * row_pieces;
  for (int32_t q0 = tid; q0 < pieces; q0 += kCopyThreads * kSumPieces) {
    int64_t t[kSumPieces];
    int32_t c[kSumPieces];
    bool has[kSumPieces];
    float acc[kSumPieces][8];
#pragma unroll
    for (int i = 0; i < kSumPieces; ++i) {
      const int32_t q = q0 + i * kCopyThreads;
      has[i] = q < pieces;
      const int32_t tt = has[i] ? q / row_pieces : 0;
      t[i] = t0 + tt;
      c[i] = (q - tt * row_pieces) * 8;
#pragma unroll
      for (int v = 0; v < 8; ++v) acc[i][v] = 0.0f;
    }
    for (int32_t j0 = 0; j0 < p.k; j0 += kSumBatch) {
      float w[kSumPieces][kSumBatch];
      uint4 raw[kSumPieces][kSumBatch];
#pragma unroll
      for (int i = 0; i < kSumPieces; ++i) {
#pragma unroll
        for (int u = 0; u < kSumBatch; ++u) {
          const bool load = has[i] && j0 + u < p.k;
          const int64_t slot = t[i] * p.k + j0 + u;
          w[i][u] = load ? __ldg(rt.topk_w + slot) : 0.0f;
          raw[i][u] = load ? __ldcg(reinterpret_cast<const uint4*>(slots + slot * p.H + c[i])) : uint4{};
        }
      }
#pragma unroll
      for (int u = 0; u < kSumBatch; ++u) {
        if (j0 + u >= p.k) break;
#pragma unroll
        for (int i = 0; i < kSumPieces; ++i) {
          const uint16_t* y = reinterpret_cast<const uint16_t*>(&raw[i][u]);
#pragma unroll
          for (int v = 0; v < 8; ++v) acc[i][v] = contract_combine_step(acc[i][v], w[i][u], float_from_bf16_bits(y[v]));
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kSumPieces; ++i) {
      if (!has[i]) continue;
      if (p.Fs > 0) {
        const uint4 raw =
            __ldcg(reinterpret_cast<const uint4*>(p.ws.s + (static_cast<int64_t>(s) * p.T + t[i]) * p.H + c[i]));
        const uint16_t* sv = reinterpret_cast<const uint16_t*>(&raw);
#pragma unroll
        for (int v = 0; v < 8; ++v) acc[i][v] = acc[i][v] + float_from_bf16_bits(sv[v]);
      }
      uint4 packed;
      uint16_t* o = reinterpret_cast<uint16_t*>(&packed);
#pragma unroll
      for (int v = 0; v < 8; ++v) o[v] = bf16_bits_from_float(acc[i][v]);
      *reinterpret_cast<uint4*>(rt.out + t[i] * p.H + c[i]) = packed;
    }
  }
}

}  // namespace detmoe::mk
