// The fused MoE backward: one persistent cooperative launch (sm_90a) on the forward's machinery
// (tickets, epoch-tagged counters with bounded waits, the fault record, the task trace), read
// top to bottom like its task graph (backward_tasks.cuh, docs/MEGAKERNEL.md "Backward"):
//
//   every thread        stamp this launch's counters, reset the tickets, one grid barrier
//   warpgroup 0         producer: for each GEMM task of the CTA's list, wait for its inputs,
//                       then stream its k-blocks with TMA (data-grad or weight-grad form)
//   warpgroups 1, 2     consumers: mainloop + epilogue (dSwiGLU, the dx scatter, or a store) +
//                       signal for GEMM tasks; dy dispatch and the d_x sum otherwise
//   thread 0, at exit   the last CTA to finish advances the launch epoch
//
// It reads what the last forward left in the workspace: the plan (row of every (token, slot)),
// the dispatched x rows, a, h = [g | u] and y. The forward must have run on the same inputs.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/gemm/smem_layout.cuh"
#include "megakernel/layer/backward_params.h"
#include "megakernel/layer/backward_tasks.cuh"
#include "megakernel/layer/backward_tiles.cuh"
#include "megakernel/layer/copy_tasks.cuh"
#include "megakernel/layer/sync.cuh"
#include "megakernel/layer/task_list.cuh"
#include "megakernel/layer/epilogue_copier.cuh"
#include "megakernel/layer/row_table.cuh"
#include "megakernel/layer/task_ring.cuh"
#include "megakernel/layer/tile_epilogues.cuh"
#include "megakernel/layer/trace.cuh"
#include "megakernel/layer/wave_gate.cuh"
#include "megakernel/ptx/common.cuh"

namespace detmoe::mk {

// The producer's and consumers' registers after setmaxnreg (72 + 2·216 = 3·168 = 504, the
// launch's 168 per thread). The producer also loads the dx tiles' row tables (session 16): at 64
// registers the kernel's spills grew from 112 to 152 bytes (ptxas -v), at 72 they are 108. The
// backward's ring carries task numbers only: with the forward's descriptions in the ring the
// backward ran 2–3 % slower on deepseek-v3 and mixtral-8x7b (same-run A/B, also with 72/216), so
// its consumers still describe each task.
inline constexpr uint32_t kBwdProducerRegisters = 72;
inline constexpr uint32_t kBwdConsumerRegisters = 216;

// Where the backward's dx row of global slot g·k + j lives.
struct DxSlotRow {
  DETMOE_DEVICE uint16_t* operator()(const LayerParams& p, int32_t slot) const {
    return p.ws.dx_slots + static_cast<int64_t>(slot) * p.H;
  }
};

// The launch's first step, every thread of every CTA: tickets at 0 and every dependency counter
// at (epoch << 32) | 0 (the forward's plan does the same), then a grid barrier so no task
// signals or waits before the stamp. False (uniformly) when the barrier timed out, or when a
// fault is still unreported: that is the forward's (only synchronize() clears the record), whose
// plan and saved rows may be incomplete, so the backward runs no task and synchronize() reports
// the forward's fault.
DETMOE_DEVICE bool backward_start(const LayerParams& p, const LaunchContext& ctx, int* flag) {
  stamp_counters(p, ctx.epoch);
  if (!grid_barrier(ctx, p.ws.barriers + 0, 0, flag)) return false;
  __syncthreads();  // every thread has read the barrier's flag before thread 0 reuses it
  if (threadIdx.x == 0) *flag = ld_relaxed_u64(&ctx.error->state) == 0 ? 1 : 0;
  __syncthreads();
  return *flag != 0;
}

// The dx tiles of ≥ kDxGateMinKBlocks k-blocks (mixtral-8x7b's 448 only of the four named shapes)
// in step, wave by wave (wave_gate.cuh).
inline constexpr int32_t kDxGateMinKBlocks = 256;

DETMOE_DEVICE void run_bwd_producer(const BackwardParams& bp, const LaunchContext& ctx, const Smem& smem,
                                    const Pipe& pipe, TaskRing<NoDescription> ring, RowTable& table) {
  const LayerParams& p = bp.f;
  const CtaRole role = bwd_cta_role(bp);
  const BackwardTaskList list(p, role.rank, role.phases);
  ExpertWalker walker(p, role.rank);
  unsigned int* tickets = ticket_counter(p, role.rank, role.phases == kBwdCommPhases);
  const int32_t total = list.total();
  Stage st;
  bool aborted = false;
  RowTableLoader tables(table);
  // The next ticket is taken once the current task's inputs are ready, before its loads are
  // issued, so the atomic's L2 round trip overlaps them instead of delaying the next tile's first
  // load. The CTA still runs its tasks in increasing number, and a held ticket's task waits only on
  // lower numbers, each held by a CTA that runs it after tasks of still lower numbers: the
  // no-deadlock argument (task_ring.cuh) is unchanged.
  WaveGate</*kAhead=*/1> gate(2 * p.F / Cfg::kBlockK >= kDxGateMinKBlocks);
  int32_t next = take_ticket(tickets, total);
  for (;;) {
    const int32_t i = next;
    ring.push(i);
    if (i < 0) break;
    const BwdTask task = list.at(i);
    if (task.phase == BwdPhase::kDyDispatch || task.phase == BwdPhase::kDxSum) {
      next = take_ticket(tickets, total);
      continue;
    }
    const BwdGemmTask g = describe_bwd_task(bp, task, role.rank, list, walker);
    if (!aborted && g.wait != nullptr) {
      // All of the tile's counters (a weight-gradient tile: every m-block of its expert) read in
      // batches, not one acquire round trip after another (sync.cuh wait_counters).
      aborted = !wait_counters(
          ctx, g.wait, g.wait_count,
          [&](int32_t c) {
            return g.wait_rows >= 0 ? static_cast<uint32_t>(min(kRowsPerMBlock, g.wait_rows - c * kRowsPerMBlock))
                                    : g.wait_target;
          },
          [&](int32_t c) {
            return WaitSite{task.id, g.wait_kind, static_cast<uint32_t>(role.rank), g.wait_index0 + c};
          });
      // Rows written by generic stores (dy dispatch) or other CTAs' TMA stores are read by TMA next.
      fence_proxy_async_global();
    }
    next = take_ticket(tickets, total);
    if (g.epilogue != BwdEpilogue::kScatterDx) {
      produce_bwd_tile(g.tile, smem, pipe, st, aborted);
      continue;
    }
    // A dx tile: its row table along with its k-blocks, as the forward's GEMM2 (the tables are the
    // forward's, written before this launch).
    if (!aborted && gate.before(tickets, i, [&] {
          return PhaseTickets{list.first_of(BwdPhase::kDgrad2), list.count_of(BwdPhase::kDgrad2), gemm_role_ctas(p)};
        }))
      TaskTracer::tile_gated(p);
    const int32_t table_after = RowTableLoader::load_kblock(g.tile.k_blocks);
    const int32_t rows = min(kRowsPerMBlock, g.c_end - g.c_row);
    produce_bwd_tile(g.tile, smem, pipe, st, aborted, [&](int32_t kb) {
      if (kb == table_after) tables.load(p, g.plan_row0, rows, aborted);
    });
    if (table_after < 0) tables.load(p, g.plan_row0, rows, aborted);
  }
}

DETMOE_DEVICE void run_bwd_consumer(const BackwardParams& bp, const LaunchContext& ctx, const Smem& smem,
                                    const Pipe& pipe, TaskRing<NoDescription> ring, RowTable& table,
                                    CopierStorage& copies) {
  const LayerParams& p = bp.f;
  const int wg = static_cast<int>(threadIdx.x / 128) - 1;
  const uint32_t thread = threadIdx.x % 128;
  const bool issuer = thread == 0;
  const CtaRole role = bwd_cta_role(bp);
  const BackwardTaskList list(p, role.rank, role.phases);
  ExpertWalker walker(p, role.rank);
  LayerSlabs out(smem.staging(wg, 0), /*barrier_id=*/1 + wg, issuer);
  EpilogueHandoff handoff(copies, smem, wg);
  Stage st;
  uint32_t table_phase = 0;  // row tables read
  // Deferred signals, as the forward's (forward_kernel.cuh): a tile's signal is sent after the
  // next tile's mainloop when that tile is of the same phase (no task waits on its own phase),
  // at once before a task of another phase, and at the end. dx tiles are signalled by the
  // copier that sends their rows (epilogue_copier.cuh).
  BwdPhase pending_phase = BwdPhase::kDone;
  unsigned long long* pending = nullptr;
  auto flush = [&] {
    if (pending_phase == BwdPhase::kDone) return;
    if (pending_phase != BwdPhase::kDgrad2 && issuer) {
      out.drain();
      fence_proxy_async_global();
      if (pending != nullptr && !launch_aborted(ctx)) signal_stamped(pending, 1);
    }
    pending_phase = BwdPhase::kDone;
  };
  for (;;) {
    const int32_t i = ring.pop_index();
    if (i < 0) break;
    const BwdTask task = list.at(i);
    TaskTracer::start(p);
    if (task.phase != pending_phase) flush();
    if (task.phase == BwdPhase::kDyDispatch) {
      handoff.reclaim();  // the copier's last job (if any) has read the staging the dispatch writes
      dy_dispatch(bp, ctx, role.rank, task.index, smem.staging(0, 0));
    } else if (task.phase == BwdPhase::kDxSum) {
      dx_sum(bp, ctx, task, role.rank);
    } else {
      const BwdGemmTask g = describe_bwd_task(bp, task, role.rank, list, walker);
      float acc[Cfg::kAccumulators];
#pragma unroll
      for (int r = 0; r < Cfg::kAccumulators; ++r) acc[r] = 0.0f;
      consume_bwd_tile(wg, g.tile, smem, pipe, st, acc);
      gemm::EpilogueTile et;
      et.row = g.c_row + wg * Cfg::kWarpgroupRows;
      et.row_end = g.c_end;
      et.col0 = g.col0;
      et.warp = thread / 32;
      et.lane = thread % 32;
      const int32_t col_end = min(g.col0 + kBwdTileCols, g.out_cols);
      ScatterRows where{};
      if (g.epilogue == BwdEpilogue::kScatterDx) {
        // From the table the producer copied into shared memory during the mainloop.
        ptx::mbarrier_wait_parity(&table.full, table_phase & 1u);
        where = scatter_rows_of(p, TableRows{table, row_table_base(g.plan_row0)}, g.plan_row0 + wg * Cfg::kWarpgroupRows,
                                min(Cfg::kWarpgroupRows, g.c_end - et.row), min(4, (col_end - et.col0) / 64));
        ptx::mbarrier_arrive(&table.empty);
        ++table_phase;
      }
      TaskTracer::mainloop_done(p, 0);
      flush();
      TaskTracer::epilogue_start(p);
      switch (g.epilogue) {
        case BwdEpilogue::kDSwiGLU:
          DSwiGLUEpilogue::apply(acc, et, g.out_cols, wg, issuer, smem, pipe, st, g.map_c);
          break;
        case BwdEpilogue::kScatterDx:
          handoff.scatter_rows(acc, et, col_end, ctx, where);
          break;
        case BwdEpilogue::kStore: {
          handoff.reclaim();  // the slabs lie in the copier's staging
          gemm::KernelParams kp{};
          kp.epilogue = g.store_kind;
          kp.out_cols = g.out_cols;
          gemm::StoreEpilogue::apply<Cfg>(acc, g.tile.k_blocks == 0, et, kp, g.map_c, nullptr, out);
          break;
        }
      }
      pending_phase = task.phase;
      pending = g.done;
    }
    TaskTracer::record(p, task.id);
  }
  flush();
  out.drain();
  handoff.finish();
}

__global__ void __launch_bounds__(Cfg::kThreads, 1) layer_backward_kernel(const __grid_constant__ BackwardParams bp) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  __shared__ uint32_t epoch_shared;
  __shared__ int flag_shared;
  __shared__ TaskRingStorage<NoDescription> ring_shared;
  __shared__ RowTable table_shared;
  __shared__ CopierStorage copies_shared;
  const LayerParams& p = bp.f;
  const Smem smem = Smem::from_dynamic(smem_raw);
  const Pipe pipe{smem.full_barriers(), smem.empty_barriers()};
  const TaskRing<NoDescription> ring(&ring_shared);
  if (threadIdx.x == 0) {
    epoch_shared = ld_relaxed_u32(p.ws.launch_state);
    ring.init();
    init_row_table(table_shared);
    init_copier(copies_shared);
    pipe.init();  // its fence.mbarrier_init covers the ring's and the row table's barriers too
  }
  __syncthreads();
  const LaunchContext ctx{epoch_shared, p.ws.error, p.timeout_ns, p.force_timeout_task};
  TaskTracer::begin_launch(p);
  TaskTracer::start(p);
  const bool started = backward_start(p, ctx, &flag_shared);
  TaskTracer::record(p, make_task_id(TaskKind::kBackwardStart, 0, 0));
  if (started) {
    const int warpgroup = static_cast<int>(ptx::warp_id_uniform() / 4);
    if (warpgroup == 0) {
      ptx::setmaxnreg_dec<kBwdProducerRegisters>();
      const uint32_t warp = ptx::warp_id_uniform();
      if (threadIdx.x == 0) {
        run_bwd_producer(bp, ctx, smem, pipe, ring, table_shared);
      } else if (warp == 1 || warp == 2) {
        run_epilogue_copier<false>(p, ctx, smem, copies_shared, static_cast<int>(warp) - 1, DxSlotRow{});
      }
      __syncwarp();
    } else {
      ptx::setmaxnreg_inc<kBwdConsumerRegisters>();
      run_bwd_consumer(bp, ctx, smem, pipe, ring, table_shared, copies_shared);
    }
  }
  TaskTracer::finish(p);
  __syncthreads();
  if (threadIdx.x == 0) finish_launch(p, ctx.epoch);
#endif
}

}  // namespace detmoe::mk
