// GEMM2's epilogue with the combine fused in (the forward's routed GEMM2; the backward's dx
// tiles): row i of a warpgroup's 64 rows is plan row plan_row0 + i = (source rank s, token t,
// slot j) and goes straight to y_slots(s)[t·k + j] (dx_slots), so there is no y_sorted buffer
// and no separate combine pass.
//
// The consumer warpgroup writes its whole output (≤ 64 rows × 256 columns of bf16) with stmatrix
// into its staging at a padded pitch (gemm::write_bf16_rows; rows contiguous, stmatrix conflict
// free), with each row's destination slot beside it, and hands the job to a copier: warp 1 + w of
// the producer warpgroup (idle after the plan) for consumer warpgroup w. The copier sends each row
// with one bulk copy (cp.async.bulk, ≤ 512 bytes; H is a multiple of 64 so rows stay 16-byte
// aligned), frees the staging once the copies have read it and reports when they have landed.
// The consumers go on to the next mainloop at once: the copies (≈ 3 µs of the SM's store path per
// deepseek-v3 tile when the consumers issued them themselves) overlap it.
//
// Per consumer warpgroup w, one job at a time (the staging is single-buffered):
//   full[w]    128 arrivals: every consumer thread, after its stmatrix and its job fields
//   free[w]     32 arrivals: every copier lane, once its copies have read the staging
//   landed[w]   32 arrivals: every copier lane, once its copies are complete in global memory
// Job n completes phase n of each. The consumers wait for `free` before writing the staging again
// (the next job, or a slab-store epilogue: reclaim) and for `landed` before the rows' slots-ready
// signals (the deferred flush). A job with end = 1 stops the copier. No cycle: the copier waits
// only for jobs, the consumers only for jobs they already handed over.
#pragma once

#include <cstdint>

#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/layer/layer_params.h"
#include "megakernel/layer/sync.cuh"
#include "megakernel/layer/tile_epilogues.cuh"
#include "megakernel/layer/tile_mainloop.cuh"
#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/mbarrier.cuh"
#include "megakernel/ptx/tma.cuh"

namespace detmoe::mk {

struct RowCopyJob {
  int32_t col0;   // first column of the rows' window
  uint32_t bytes; // bytes per row (128 per 64-column slab)
  int32_t end;    // 1: no more jobs
  int32_t slot[Cfg::kWarpgroupRows];  // row i's global slot g·k + j, −1: not sent
};

struct RowCopyStorage {
  uint64_t full[Cfg::kConsumerWarpgroups];
  uint64_t free[Cfg::kConsumerWarpgroups];
  uint64_t landed[Cfg::kConsumerWarpgroups];
  RowCopyJob job[Cfg::kConsumerWarpgroups];
};

inline constexpr uint32_t kRowPitch = 2 * Cfg::kBlockN + 16;  // bytes per staged row (≡ 16 mod 128)
static_assert(Cfg::kWarpgroupRows * kRowPitch <= Smem::kStagingBytesPerWarpgroup, "a warpgroup's rows fit its staging");

// One thread, before the CTA barrier that precedes any use (covered by the pipeline's
// fence.mbarrier_init).
DETMOE_DEVICE void init_row_copies(RowCopyStorage& s) {
  for (int w = 0; w < Cfg::kConsumerWarpgroups; ++w) {
    ptx::mbarrier_init(&s.full[w], 128);
    ptx::mbarrier_init(&s.free[w], 32);
    ptx::mbarrier_init(&s.landed[w], 32);
  }
}

// The consumer warpgroup's side; every thread of it keeps one and calls each method at the same
// points (the counters stay uniform).
class RowScatter {
 public:
  DETMOE_DEVICE RowScatter(RowCopyStorage& s, const Smem& smem, int wg)
      : s_(s), wg_(wg), base_(ptx::smem_u32(smem.staging(wg, 0))), thread_(threadIdx.x % 128) {}

  // acc's columns [t.col0, col_end) of the warpgroup's rows [t.row, t.row_end) to the slots
  // `where` names; the copier sends them.
  DETMOE_DEVICE void apply(const float (&acc)[Cfg::kAccumulators], const gemm::EpilogueTile& t, int32_t col_end,
                           const LaunchContext& ctx, const ScatterRows& where) {
    const int32_t rows = min(Cfg::kWarpgroupRows, t.row_end - t.row);
    const int32_t slabs = min(4, (col_end - t.col0) / 64);
    if (rows <= 0 || slabs <= 0) return;  // uniform over the warpgroup: no job
    wait_free();
    if (slabs_written_) {
      // A slab-store epilogue since the last job: its TMA stores (thread 0's) read the slabs.
      if (thread_ == 0) ptx::bulk_wait_group_read<0>();
      ptx::named_barrier_sync(1 + static_cast<uint32_t>(wg_), 128);
      slabs_written_ = false;
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      if (s >= slabs) break;  // uniform: columns past H or another warpgroup's
      gemm::write_bf16_rows(base_, kRowPitch, s, t.warp, t.lane, [&](int j) { return acc[32 * s + j]; });
    }
    RowCopyJob& job = s_.job[wg_];
    // After an abort the accumulators are garbage and the row table may be stale: the job is
    // still handed over (every barrier keeps its count) but sends nothing.
    if (thread_ < static_cast<uint32_t>(Cfg::kWarpgroupRows)) job.slot[thread_] = launch_aborted(ctx) ? -1 : where.slot;
    if (thread_ == 0) {
      job.col0 = t.col0;
      job.bytes = static_cast<uint32_t>(slabs) * 128;
      job.end = 0;
    }
    ptx::fence_proxy_async_shared();  // stmatrix (generic) → the bulk copies' (async) reads
    ptx::mbarrier_arrive(&s_.full[wg_]);
    ++jobs_;
    landing_ = true;
  }

  // Before a slab-store epilogue writes the slabs (the first 16 KB of the staging).
  DETMOE_DEVICE void reclaim() {
    wait_free();
    slabs_written_ = true;
  }

  // Before the slots-ready signals of the last job's rows: its copies have landed.
  DETMOE_DEVICE void landed() {
    if (!landing_) return;
    ptx::mbarrier_wait_parity(&s_.landed[wg_], (jobs_ - 1) & 1u);
    landing_ = false;
  }

  // After the warpgroup's last task: stops its copier.
  DETMOE_DEVICE void finish() {
    wait_free();
    if (thread_ == 0) s_.job[wg_].end = 1;
    ptx::mbarrier_arrive(&s_.full[wg_]);
  }

 private:
  // The last job's copies have read the staging (and the copier its fields).
  DETMOE_DEVICE void wait_free() const {
    if (jobs_ > 0) ptx::mbarrier_wait_parity(&s_.free[wg_], (jobs_ - 1) & 1u);
  }

  RowCopyStorage& s_;
  int wg_;
  uint32_t base_;
  uint32_t thread_;
  uint32_t jobs_ = 0;
  bool landing_ = false;        // the last job's landing not yet waited for
  bool slabs_written_ = false;  // a slab-store epilogue since the last job
};

// Copier warp 1 + w of the producer warpgroup: consumer warpgroup w's jobs until its end job.
// Lane l sends rows l and l + 32. `slot_row(p, slot)`: the slot's destination row.
template <class SlotRow>
DETMOE_DEVICE void run_row_copier(const LayerParams& p, const Smem& smem, RowCopyStorage& s, int w, SlotRow slot_row) {
  const uint32_t lane = ptx::lane_id();
  const uint32_t base = ptx::smem_u32(smem.staging(w, 0));
  for (uint32_t n = 0;; ++n) {
    ptx::mbarrier_wait_parity(&s.full[w], n & 1u);
    const RowCopyJob& job = s.job[w];
    if (job.end != 0) break;
    const int32_t col0 = job.col0;
    const uint32_t bytes = job.bytes;
#pragma unroll
    for (uint32_t h = 0; h < 2; ++h) {
      const uint32_t r = lane + 32 * h;
      const int32_t slot = job.slot[r];
      if (slot >= 0) ptx::bulk_store(slot_row(p, slot) + col0, base + r * kRowPitch, bytes);
    }
    ptx::bulk_commit_group();
    ptx::bulk_wait_group_read<0>();
    ptx::mbarrier_arrive(&s.free[w]);
    ptx::bulk_wait_group_all();
    fence_proxy_async_global();  // the copies (async proxy) before the consumers' signal
    ptx::mbarrier_arrive(&s.landed[w]);
  }
}

}  // namespace detmoe::mk
