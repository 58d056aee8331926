// The fused MoE forward: one persistent cooperative launch (sm_90a), read top to bottom like
// its task graph (docs/MEGAKERNEL.md):
//
//   every thread        plan phases A, B, C with grid barriers (plan_phases.cuh)
//   warpgroup 0         producer: for each GEMM task of the CTA's list, describe it into the
//                       task ring (task_ring.cuh), wait for its inputs (dependency counter,
//                       acquire), then stream its k-blocks with TMA (a routed GEMM2 tile also
//                       its row table, row_table.cuh)
//   warpgroups 1, 2     consumers: GEMM mainloop + epilogue + signal for GEMM tasks (routed
//                       GEMM2's epilogue is the combine); dispatch and weighted sum otherwise
//   thread 0, at exit   the last CTA to finish advances the launch epoch
//
// The CTA's list is its role's (cta_role, task_list.cuh): with LayerConfig::comm_sms a few CTAs
// of each rank slice run only dispatch and weighted sum (their producer finds no GEMM task) and
// the others only GEMM tiles. Producer and consumers derive the same role and list.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "detmoe/problem.h"
#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/gemm/smem_layout.cuh"
#include "megakernel/layer/copy_tasks.cuh"
#include "megakernel/layer/gemm_tasks.cuh"
#include "megakernel/layer/gemm_tiles.cuh"
#include "megakernel/layer/layer_params.h"
#include "megakernel/layer/plan_phases.cuh"
#include "megakernel/layer/epilogue_copier.cuh"
#include "megakernel/layer/row_table.cuh"
#include "megakernel/layer/sync.cuh"
#include "megakernel/layer/task_list.cuh"
#include "megakernel/layer/task_ring.cuh"
#include "megakernel/layer/trace.cuh"
#include "megakernel/layer/wave_gate.cuh"
#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/tma.cuh"

namespace detmoe::mk {

static_assert(Cfg::kThreads == kPlanThreads, "the plan runs on the GEMM's 384 threads");
static_assert(kMaxPlanChunkTokens <= kRowsPerMBlock, "a chunk's rows of one expert span ≤ 2 m-blocks");
static_assert(kDispatchBarrierOffset >= detmoe::kMaxExperts * 4 && kDispatchPieceBytes % 128 == 0 &&
                  kDispatchBufferOffset + kCopyWarps * kDispatchPieceBytes <=
                      Cfg::kConsumerWarpgroups * Cfg::kStagingBytesPerWarpgroup,
              "place_and_dispatch's histogram, barriers, tables and row buffers fit in the consumers' staging");

// Register split after setmaxnreg, the layer's own (gemm::Tile128x256 keeps the GEMM core's
// 40/232). The launch gives each of the 384 threads 168 registers (65536 / 384, in steps of 8),
// so producer + 2·consumer ≤ 3·168 = 504 or setmaxnreg.inc cannot be granted. The producer walks
// the task list, waits on counters with timeouts and fills the task ring's descriptions: it
// spilled with 64 (and with 72) once it wrote the description the consumers take from the ring
// (session 16); with 80 it did not, until the GEMM1 wave gate (wave_gate.cuh) added 16 spill
// instructions in its setup and routed-GEMM2 path (perf/sass_local.py); with 88 it has none, and
// the consumers fit in 208 (88 + 2·208 = 504; 0 spill instructions — checked with nvcc 13.0).
inline constexpr uint32_t kLayerProducerRegisters = 88;
inline constexpr uint32_t kLayerConsumerRegisters = 208;
static_assert(kLayerProducerRegisters + 2 * kLayerConsumerRegisters <= 3 * 168, "setmaxnreg.inc needs the pool the launch gave");

// GEMM1 tiles of ≥ kGemm1GateMinKBlocks k-blocks (deepseek-v3's 112 of the named shapes: the GEMM
// core's gate at every wave took its up-projection −2.5 % and −7 % J, docs/PERF.md session 37) in
// step, wave by wave (wave_gate.cuh).
inline constexpr int32_t kGemm1GateMinKBlocks = 96;

// The producer thread: takes the CTA's tasks (tickets, task_ring.cuh), hands each to the
// consumers, and streams the GEMM tasks' k-blocks.
DETMOE_DEVICE void run_producer_tasks(const LayerParams& p, const LaunchContext& ctx, const Smem& smem,
                                      const Pipe& pipe, TaskRing<GemmTask> ring, RowTable& table) {
  const CtaRole role = cta_role(p);
  const TaskList list(p, role.rank, role.phases);
  ExpertWalker walker(p, role.rank);
  unsigned int* tickets = ticket_counter(p, role.rank, role.phases == kCommPhases);
  const int32_t total = list.total();
  Stage st;
  bool aborted = false;
  RowTableLoader tables(table);
  // The producer takes a ticket only as it starts the tile: none ahead.
  WaveGate</*kAhead=*/0> gate(p.H / Cfg::kBlockK >= kGemm1GateMinKBlocks);
  for (;;) {
    const int32_t i = take_ticket(tickets, total);
    if (i < 0) {
      ring.push(i);
      break;
    }
    const Task task = list.at(i);
    if (task.phase == Phase::kDispatch || task.phase == Phase::kSum) {
      ring.push(i);
      continue;
    }
    // Described in the ring's slot, where the consumers take it from.
    GemmTask* slot = ring.reserve();
    *slot = describe_gemm_task(p, task, role.rank, list, walker);
    ring.publish(i);
    const GemmTask& g = *slot;
    if (!aborted && g.wait != nullptr) {
      aborted = !wait_counter(ctx, g.wait, g.wait_target, g.wait_site);
      // Rows written by generic stores (dispatch) or other CTAs' TMA stores are read by TMA next.
      fence_proxy_async_global();
    }
    if (!aborted && task.phase == Phase::kGemm1 && gate.before(tickets, i, [&] {
          return PhaseTickets{list.first_of(Phase::kGemm1), list.count_of(Phase::kGemm1), gemm_role_ctas(p)};
        }))
      TaskTracer::gate_held(p);
    if (g.epilogue != TileEpilogue::kScatterRows) {
      produce_tile(g.tile, smem, pipe, st, aborted);
      continue;
    }
    // Routed GEMM2: its row table along with its k-blocks.
    const int32_t table_after = RowTableLoader::load_kblock(g.tile.k_blocks);
    const int32_t rows = min(kRowsPerMBlock, g.tile.c_end - g.tile.c_row);
    produce_tile(g.tile, smem, pipe, st, aborted, [&](int32_t kb) {
      if (kb == table_after) tables.load(p, g.plan_row0, rows, aborted);
    });
    if (table_after < 0) tables.load(p, g.plan_row0, rows, aborted);
  }
}

// The two consumer warpgroups.
DETMOE_DEVICE void run_consumer_tasks(const LayerParams& p, const LaunchContext& ctx, const Smem& smem,
                                      const Pipe& pipe, TaskRing<GemmTask> ring, RowTable& table,
                                      CopierStorage& copies) {
  const int wg = static_cast<int>(threadIdx.x / 128) - 1;
  const bool issuer = threadIdx.x % 128 == 0;
  const CtaRole role = cta_role(p);
  const TaskList list(p, role.rank, role.phases);
  LayerSlabs out(smem.staging(wg, 0), /*barrier_id=*/1 + wg, issuer);
  uint8_t* staging = smem.staging(0, 0);  // place_and_dispatch's scratch; slabs are idle between tiles
  EpilogueHandoff handoff(copies, smem, wg);
  Stage st;
  uint32_t table_phase = 0;  // row tables read
  // A slab-store tile's signal (the shared expert's GEMM2, or a warpgroup that handed no job
  // over) waits for the warpgroup's own stores to land. It is sent after the NEXT tile's mainloop
  // (the stores had that long to complete, so the wait is free) when that tile is of the same
  // phase — a task never waits on a counter of its own phase, so the delay cannot deadlock — and
  // at once before a task of another phase and at the end. Tiles handed to the copier are
  // signalled by the copier (epilogue_copier.cuh). Every thread of the warpgroup calls flush()
  // at the same points.
  Phase pending_phase = Phase::kDone;     // kDone: nothing pending
  unsigned long long* pending = nullptr;  // the done counter the issuer adds 1 to (null: none)
  auto flush = [&] {
    if (pending_phase == Phase::kDone) return;
    if (issuer && pending != nullptr) {
      out.drain();  // this warpgroup's own TMA stores (slab-store tiles) are complete in global memory
      fence_proxy_async_global();
      if (!launch_aborted(ctx)) signal_stamped(pending, 1);
    }
    pending_phase = Phase::kDone;
  };
  for (;;) {
    const GemmTask* described;  // a GEMM task's description, as the producer made it (in the ring)
    const int32_t i = ring.pop(described);
    if (i < 0) break;
    const Task task = list.at(i);
    TaskTracer::start(p);
    if (task.phase != pending_phase) flush();
    switch (task.phase) {
      case Phase::kDispatch:
        place_and_dispatch(p, ctx, role.rank, task.index, staging);
        break;
      case Phase::kSum:
        weighted_sum(p, ctx, task, role.rank);
        break;
      default: {
        // After an abort the producer fills stages without data; the epilogue still runs (it
        // writes only the workspace; the y scatter writes nothing) so every thread of a
        // warpgroup takes the same barriers.
        // Defined per tile: the wgmma asm reads its accumulators ("+f"), so an array declared
        // once and never written outside the mainloop stayed live across every other task,
        // and the copy loops spilled (ptxas -v).
        float acc[Cfg::kAccumulators];
#pragma unroll
        for (int r = 0; r < Cfg::kAccumulators; ++r) acc[r] = 0.0f;
        const bool owes = consume_tile(wg, *described, described->done, p, ctx, smem, pipe, st, out, handoff, table,
                                       table_phase, acc, flush);
        pending_phase = task.phase;
        pending = owes ? described->done : nullptr;
        break;
      }
    }
    TaskTracer::record(p, task.id);
    ring.release();
  }
  flush();
  out.drain();
  handoff.finish();
}

__global__ void __launch_bounds__(Cfg::kThreads, 1) layer_forward_kernel(const __grid_constant__ LayerParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ uint8_t smem_raw[];
  __shared__ uint32_t epoch_shared;
  __shared__ int flag_shared;
  __shared__ TaskRingStorage<GemmTask> ring_shared;
  __shared__ RowTable table_shared;
  __shared__ CopierStorage copies_shared;
  const Smem smem = Smem::from_dynamic(smem_raw);
  const Pipe pipe{smem.full_barriers(), smem.empty_barriers()};
  const TaskRing<GemmTask> ring(&ring_shared);
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

  // Plan scratch: one E-int histogram per warp, in the (still idle) operand stages.
  const bool planned = run_plan(p, ctx, reinterpret_cast<int*>(smem.a_stage(0)), &flag_shared);
  TaskTracer::record(p, make_task_id(TaskKind::kPlan, 0, 0));
  if (planned) {
    // The plan's scratch (generic writes) lives in the operand stages the TMA loads write next.
    ptx::fence_proxy_async_shared();
    __syncthreads();
    const int warpgroup = static_cast<int>(ptx::warp_id_uniform() / 4);
    if (warpgroup == 0) {
      ptx::setmaxnreg_dec<kLayerProducerRegisters>();
      const uint32_t warp = ptx::warp_id_uniform();
      if (threadIdx.x == 0) {
        run_producer_tasks(p, ctx, smem, pipe, ring, table_shared);
      } else if (warp == 1 || warp == 2) {
        run_epilogue_copier<true>(p, ctx, smem, copies_shared, static_cast<int>(warp) - 1, YSlotRow{});
      }
      __syncwarp();  // each warp reaches the CTA barrier below converged (bar.sync is .aligned)
    } else {
      ptx::setmaxnreg_inc<kLayerConsumerRegisters>();
      run_consumer_tasks(p, ctx, smem, pipe, ring, table_shared, copies_shared);
    }
  }
  TaskTracer::finish(p);
  __syncthreads();
  if (threadIdx.x == 0) finish_launch(p, ctx.epoch);
#endif
}

}  // namespace detmoe::mk
