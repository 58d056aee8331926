// The epilogues' slow half handed to the producer warpgroup's idle warps: a consumer warpgroup
// writes its tile's output into its staging (stmatrix), hands the job to its copier — warp 1 + w
// of the producer warpgroup for consumer warpgroup w, idle after the plan otherwise — and goes on
// to the next mainloop at once. The copier's work then overlaps that mainloop.
//
// Two kinds of job:
//  - rows (the forward's routed GEMM2, the backward's dx tiles: GEMM2's epilogue with the combine
//    fused in): row i of the warpgroup's 64 rows is plan row plan_row0 + i = (source rank s,
//    token t, slot j) and goes straight to y_slots(s)[t·k + j] (dx_slots), so there is no
//    y_sorted buffer and no separate combine pass. The consumer stages its whole output (≤ 64
//    rows × 256 bf16 columns) at a padded pitch (gemm::write_bf16_rows: rows contiguous,
//    stmatrix conflict-free) with each row's slot beside it; the copier sends each row with one
//    bulk copy (cp.async.bulk, ≤ 512 bytes; H is a multiple of 64 so rows stay 16-byte
//    aligned). Issued by the consumers themselves the copies cost ≈ 3 µs per deepseek-v3 tile
//    (the issue waits for the SM's store path); by generic stores 6.7 µs.
//  - SwiGLU (GEMM1's epilogue): the consumer stages h = [g | u] rounded to bf16 as four
//    swizzled slabs (g columns f0 + 64s in slab s, u in slab 2 + s); the copier stores them with
//    TMA when h is saved, computes a = bf16(swiglu(g, u)) in place over the g slabs — each 16
//    bytes of g against the 16 bytes of u at the same offset, the swizzle being the same in both
//    slabs — with the consumers' batched formula (gemm::swiglu_batch, bitwise the contract's) and
//    stores a with TMA. The math (≈ half of the consumers' 6 µs GEMM1 epilogue) moves off the
//    tensor cores' critical path.
//
// The copier also sends the tile's signal once the job's stores have landed: the rows' slots-ready
// runs (a row job) or the GEMM1 tile's done counter (a SwiGLU job). The consumers used to wait
// for the landing after the next tile's mainloop and signal themselves; their fence.acq_rel.gpu
// and red.release.gpu cost 2.2–2.4 µs per GEMM2 tile on the H100 (docs/PERF.md session 23), on
// the tensor cores' critical path. The copier pays them between jobs instead.
//
// Per consumer warpgroup w, one job at a time (the staging is single-buffered):
//   full[w]    128 arrivals: every consumer thread, after its stmatrix and the job's fields
//   free[w]     32 arrivals: every copier lane, once the job's reads of the staging and of its
//               fields are done
// Job n completes phase n of each. The consumers wait for `free` before writing the staging or
// the job's fields again (the next job, or a slab-store epilogue: reclaim). A job with kind kEnd
// stops the copier. No cycle: the copier waits only for jobs, the consumers only for jobs they
// already handed over.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/gemm/ragged_map.cuh"
#include "megakernel/gemm/swiglu_batch.cuh"
#include "megakernel/layer/layer_params.h"
#include "megakernel/layer/sync.cuh"
#include "megakernel/layer/tile_epilogues.cuh"
#include "megakernel/layer/tile_mainloop.cuh"
#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/mbarrier.cuh"
#include "megakernel/ptx/stmatrix.cuh"
#include "megakernel/ptx/tma.cuh"

namespace detmoe::mk {

enum class CopyJobKind : int32_t { kRows, kSwiGLU, kEnd };

struct CopyJob {
  CopyJobKind kind;
  int32_t col0;    // first output column of the warpgroup's window (SwiGLU: f0)
  uint32_t bytes;  // kRows: bytes per row (128 per 64-column slab)
  int32_t slabs;   // kSwiGLU: gate slabs (64 columns each) inside F
  int32_t F;       // kSwiGLU: a's columns (h has 2F)
  int32_t row, row_end;  // kSwiGLU: the warpgroup's rows in the maps (ragged)
  const CUtensorMap* map_a;  // kSwiGLU
  const CUtensorMap* map_h;  // kSwiGLU: null when h is not saved
  unsigned long long* done;  // kSwiGLU: +1 once a (and h) landed; null: none
  int32_t slot[Cfg::kWarpgroupRows];  // kRows: row i's global slot g·k + j, −1: not sent
  // kRows: the slots-ready signal owed from row i (the first row of a run: slot_run_of), sent once
  // the job's rows landed; a null counter: none.
  unsigned long long* run_counter[Cfg::kWarpgroupRows];
  uint32_t run_amount[Cfg::kWarpgroupRows];
};

struct CopierStorage {
  uint64_t full[Cfg::kConsumerWarpgroups];
  uint64_t free[Cfg::kConsumerWarpgroups];
  CopyJob job[Cfg::kConsumerWarpgroups];
};

inline constexpr uint32_t kRowPitch = 2 * Cfg::kBlockN + 16;  // bytes per staged row (≡ 16 mod 128)
static_assert(Cfg::kWarpgroupRows * kRowPitch <= Smem::kStagingBytesPerWarpgroup, "a warpgroup's rows fit its staging");
static_assert(4 * Smem::kBoxBytes <= Smem::kStagingBytesPerWarpgroup, "a warpgroup's h slabs fit its staging");

// One thread, before the CTA barrier that precedes any use (covered by the pipeline's
// fence.mbarrier_init).
DETMOE_DEVICE void init_copier(CopierStorage& s) {
  for (int w = 0; w < Cfg::kConsumerWarpgroups; ++w) {
    ptx::mbarrier_init(&s.full[w], 128);
    ptx::mbarrier_init(&s.free[w], 32);
  }
}

// The consumer warpgroup's side; every thread of it keeps one and calls each method at the same
// points (its counters stay uniform).
class EpilogueHandoff {
 public:
  DETMOE_DEVICE EpilogueHandoff(CopierStorage& s, const Smem& smem, int wg)
      : s_(s), wg_(wg), base_(ptx::smem_u32(smem.staging(wg, 0))), thread_(threadIdx.x % 128) {}

  // Rows: acc's columns [t.col0, col_end) of the warpgroup's rows [t.row, t.row_end) to the
  // slots `where` names.
  DETMOE_DEVICE void scatter_rows(const float (&acc)[Cfg::kAccumulators], const gemm::EpilogueTile& t,
                                  int32_t col_end, const LaunchContext& ctx, const ScatterRows& where) {
    const int32_t rows = min(Cfg::kWarpgroupRows, t.row_end - t.row);
    const int32_t slabs = min(4, (col_end - t.col0) / 64);
    if (rows <= 0 || slabs <= 0) return;  // uniform over the warpgroup: no job
    acquire_staging();
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      if (s >= slabs) break;  // uniform: columns past H or another warpgroup's
      gemm::write_bf16_rows(base_, kRowPitch, s, t.warp, t.lane, [&](int j) { return acc[32 * s + j]; });
    }
    CopyJob& job = s_.job[wg_];
    // After an abort the accumulators are garbage and the row table may be stale: the job is
    // still handed over (every barrier keeps its count) but sends and signals nothing.
    if (thread_ < static_cast<uint32_t>(Cfg::kWarpgroupRows)) {
      const bool aborted = launch_aborted(ctx);
      job.slot[thread_] = aborted ? -1 : where.slot;
      job.run_counter[thread_] = aborted ? nullptr : where.run.counter;
      job.run_amount[thread_] = where.run.amount;
    }
    if (thread_ == 0) {
      job.kind = CopyJobKind::kRows;
      job.col0 = t.col0;
      job.bytes = static_cast<uint32_t>(slabs) * 128;
    }
    hand_over();
  }

  // SwiGLU: h = [g | u] of the warpgroup's window to the copier, which stores h (map_h, when
  // not null) and a, then adds 1 to `done` (null: none). Gate column c in register c, up column
  // c in register kUp + c (the tile's form, gemm_tiles.cuh). After an abort the copier stores
  // garbage into the workspace only, as the consumers' own epilogue did, and signals nothing.
  // False (uniformly) when the window is empty: no job, and the caller owes `done` itself.
  template <int kUp>
  DETMOE_DEVICE bool swiglu(const float (&acc)[Cfg::kAccumulators], const gemm::EpilogueTile& t, int32_t F,
                            const CUtensorMap* map_a, const CUtensorMap* map_h, unsigned long long* done) {
    if (t.row >= t.row_end || t.col0 >= F) return false;  // uniform: no job
    const int32_t slabs = t.col0 + 64 < F ? 2 : 1;  // gate slabs inside F (F is a multiple of 64)
    acquire_staging();
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      if (s >= slabs) break;
      gemm::write_bf16_slab(base_ + s * Smem::kBoxBytes, t.warp, t.lane, [&](int j) { return acc[32 * s + j]; });
      gemm::write_bf16_slab(base_ + (2 + s) * Smem::kBoxBytes, t.warp, t.lane,
                            [&](int j) { return acc[kUp + 32 * s + j]; });
    }
    if (thread_ == 0) {
      CopyJob& job = s_.job[wg_];
      job.kind = CopyJobKind::kSwiGLU;
      job.col0 = t.col0;
      job.slabs = slabs;
      job.F = F;
      job.row = t.row;
      job.row_end = t.row_end;
      job.map_a = map_a;
      job.map_h = map_h;
      job.done = done;
    }
    hand_over();
    return true;
  }

  // Before a slab-store epilogue (gemm::SlabStore) writes the staging's first two boxes.
  DETMOE_DEVICE void reclaim() {
    wait_free();
    slabs_written_ = true;
  }

  // After the warpgroup's last task: stops its copier.
  DETMOE_DEVICE void finish() {
    wait_free();
    if (thread_ == 0) s_.job[wg_].kind = CopyJobKind::kEnd;
    ptx::mbarrier_arrive(&s_.full[wg_]);
  }

 private:
  // The last job's reads of the staging (and of its fields) are done.
  DETMOE_DEVICE void wait_free() const {
    if (jobs_ > 0) ptx::mbarrier_wait_parity(&s_.free[wg_], (jobs_ - 1) & 1u);
  }

  DETMOE_DEVICE void acquire_staging() {
    wait_free();
    if (slabs_written_) {
      // A slab-store epilogue since the last job: its TMA stores (thread 0's) read the staging.
      if (thread_ == 0) ptx::bulk_wait_group_read<0>();
      ptx::named_barrier_sync(1 + static_cast<uint32_t>(wg_), 128);
      slabs_written_ = false;
    }
  }

  DETMOE_DEVICE void hand_over() {
    ptx::fence_proxy_async_shared();  // stmatrix (generic) → the copier's TMA reads
    ptx::mbarrier_arrive(&s_.full[wg_]);  // release: the staging and the job's fields
    ++jobs_;
  }

  CopierStorage& s_;
  int wg_;
  uint32_t base_;
  uint32_t thread_;
  uint32_t jobs_ = 0;
  bool slabs_written_ = false;  // a slab-store epilogue since the last job
};

// a = swiglu(g, u) over one gate slab, in place: 16 bytes per lane and step.
DETMOE_DEVICE void swiglu_slab_in_place(uint32_t g_slab, uint32_t u_slab, uint32_t lane) {
#pragma unroll 2
  for (uint32_t i = 0; i < Smem::kBoxBytes / 16 / 32; ++i) {
    const uint32_t offset = (lane + 32 * i) * 16;
    const uint4 g = ptx::ld_shared_v4(g_slab + offset);
    const uint4 u = ptx::ld_shared_v4(u_slab + offset);
    const uint32_t gw[4] = {g.x, g.y, g.z, g.w};
    const uint32_t uw[4] = {u.x, u.y, u.z, u.w};
    float a[8];
    gemm::swiglu_batch(
        a, [&](int j) { return (j & 1) ? ptx::bf16_hi(gw[j / 2]) : ptx::bf16_lo(gw[j / 2]); },
        [&](int j) { return (j & 1) ? ptx::bf16_hi(uw[j / 2]) : ptx::bf16_lo(uw[j / 2]); });
    ptx::st_shared_v4(g_slab + offset, make_uint4(ptx::pack_bf16x2(a[0], a[1]), ptx::pack_bf16x2(a[2], a[3]),
                                                  ptx::pack_bf16x2(a[4], a[5]), ptx::pack_bf16x2(a[6], a[7])));
  }
}

// Copier warp 1 + w of the producer warpgroup: consumer warpgroup w's jobs until its end job.
// `slot_row(p, slot)`: a slot's destination row (rows jobs). kSwiGLUJobs: whether this kernel
// hands over SwiGLU jobs (the backward does not).
template <bool kSwiGLUJobs, class SlotRow>
DETMOE_DEVICE void run_epilogue_copier(const LayerParams& p, const LaunchContext& ctx, const Smem& smem,
                                       CopierStorage& s, int w, SlotRow slot_row) {
  const uint32_t lane = ptx::lane_id();
  const uint32_t base = ptx::smem_u32(smem.staging(w, 0));
  for (uint32_t n = 0;; ++n) {
    ptx::mbarrier_wait_parity(&s.full[w], n & 1u);
    const CopyJob& job = s.job[w];
    const CopyJobKind kind = job.kind;
    if (kind == CopyJobKind::kEnd) break;
    // The signals this lane owes once the job's stores landed, read before `free` hands the
    // job's fields back: rows l and l + 32's runs, or (lane 0) the SwiGLU tile's done counter.
    unsigned long long* signal[2];
    uint32_t amount[2];
    if (!kSwiGLUJobs || kind == CopyJobKind::kRows) {
#pragma unroll
      for (uint32_t h = 0; h < 2; ++h) {
        signal[h] = job.run_counter[lane + 32 * h];
        amount[h] = job.run_amount[lane + 32 * h];
      }
    } else {
      signal[0] = lane == 0 ? job.done : nullptr;
      amount[0] = 1;
      signal[1] = nullptr;
      amount[1] = 0;
    }
    if (!kSwiGLUJobs || kind == CopyJobKind::kRows) {
      // Lane l sends rows l and l + 32. The rows (y slots, dx slots) are read again only by the
      // weighted / d_x sums at the phase's end, from memory: their L2 lines go first.
      const int32_t col0 = job.col0;
      const uint32_t bytes = job.bytes;
      const uint64_t policy = ptx::l2_evict_first_policy();
#pragma unroll
      for (uint32_t h = 0; h < 2; ++h) {
        const uint32_t r = lane + 32 * h;
        const int32_t slot = job.slot[r];
        if (slot >= 0) ptx::bulk_store_hint(slot_row(p, slot) + col0, base + r * kRowPitch, bytes, policy);
      }
      ptx::bulk_commit_group();
      ptx::bulk_wait_group_read<0>();
    } else {
      const int32_t col0 = job.col0, slabs = job.slabs, F = job.F;
      const gemm::RaggedCoords rc = gemm::ragged_coords(job.row, job.row_end, 64);
      const CUtensorMap* map_a = job.map_a;
      if (lane == 0 && job.map_h != nullptr) {
        // h is read only by the backward: its L2 lines go first.
        const uint64_t policy = ptx::l2_evict_first_policy();
        for (int32_t sl = 0; sl < slabs; ++sl) {
          ptx::tma_store_3d_hint(job.map_h, base + sl * Smem::kBoxBytes, col0 + 64 * sl, rc.y, rc.z, policy);
          ptx::tma_store_3d_hint(job.map_h, base + (2 + sl) * Smem::kBoxBytes, F + col0 + 64 * sl, rc.y, rc.z, policy);
        }
        ptx::bulk_commit_group();
        ptx::bulk_wait_group_read<0>();  // a is written over g next
      }
      __syncwarp();
      for (int32_t sl = 0; sl < slabs; ++sl) {
        swiglu_slab_in_place(base + sl * Smem::kBoxBytes, base + (2 + sl) * Smem::kBoxBytes, lane);
      }
      ptx::fence_proxy_async_shared();  // st.shared (generic) → the TMA store's reads
      __syncwarp();
      if (lane == 0) {
        for (int32_t sl = 0; sl < slabs; ++sl) {
          ptx::tma_store_3d(map_a, base + sl * Smem::kBoxBytes, col0 + 64 * sl, rc.y, rc.z);
        }
        ptx::bulk_commit_group();
        ptx::bulk_wait_group_read<0>();
      }
      __syncwarp();
    }
    ptx::mbarrier_arrive(&s.free[w]);
    ptx::bulk_wait_group_all();
    fence_proxy_async_global();  // this lane's stores (async proxy) before the signals
    __syncwarp();  // every lane's stores landed before any lane signals (a run spans lanes)
    if ((signal[0] != nullptr || signal[1] != nullptr) && !launch_aborted(ctx)) {
      fence_acq_rel_gpu();  // cumulative: the other lanes' writes this lane observed
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (signal[h] != nullptr) signal_stamped(signal[h], amount[h]);
      }
    }
  }
}

}  // namespace detmoe::mk
