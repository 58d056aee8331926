// The backward's task list and tasks (docs/MEGAKERNEL.md "Backward"). Same rules as the
// forward's (task_list.cuh): a rank's tasks come in levels, a task waits only on tasks of lower
// levels, the CTAs of a (rank, role) take them by tickets in list order, and each output tile,
// row or token chunk has one owner that reduces it in one fixed order — so the bits depend on
// the problem alone (D1, D2), and the launch cannot deadlock (cta_role's argument, unchanged).
//
//   level 0  dy dispatch         per plan chunk of the rank's tokens: for each (t, j) the row
//                                dy = bf16(w[t,j]·dout[t]) pushed to its expert's rank at the
//                                forward's row, d_topk_w[t,j] = ⟨dout[t], y[t,j]⟩ → dy_ready
//   level 1  shared da           per (128 tokens, 256 columns of Fs): dout·Ws_down, dSwiGLU → dhs
//   level 2  da                  per (m-block, 256 columns of F): dy·W_down[e], dSwiGLU with the
//                                saved h → dh; waits dy_ready of its m-block → dh_done
//   level 3  shared dx           per (128 tokens, 256 columns of H): dhs·Ws_gate_up → dxs
//   level 4  dx                  per (m-block, 256 columns of H): dh·W_gate_up[e], each row pushed
//                                to its source rank's dx slot (t, j) → dx_ready; waits dh_done
//   level 5  d_x sum             per kSumChunkTokens tokens: Σ_j dx slots (j order) + dxs
//   level 6  dW_down             per (expert, 128 rows of H, 256 columns of F): Σ over the
//                                expert's rows of dyᵀ·a; waits dy_ready of all its m-blocks
//   level 7  dWs_down            per (128 rows of H, 256 columns of Fs): doutᵀ·a_s (no wait)
//   level 8  dW_gate_up          per (expert, 128 rows of 2F, 256 columns of H): dhᵀ·x_recv;
//                                waits dh_done of all its m-blocks
//   level 9  dWs_gate_up         per (128 rows of 2Fs, 256 columns of H): dhsᵀ·x; waits shared dh
//
// A level is the phase's place in the list, and every task waits only on phases listed before its
// own (of any rank), which is all cta_role's no-deadlock argument needs. The weight gradients
// come last although most could start earlier: they wait on nothing late, so placed after the
// d_x sum they fill the grid while the sum's chunks wait for the last dx rows (before, the sum
// ran alone after them: 0.33 ms on qwen3-30b-a3b, 0.55 ms on deepseek-v3), and their short tiles
// end the launch evenly.
// The dependency counters are the forward's words (dy_ready = dispatch_ready, dh_done =
// gemm1_done, shared dh / dx done = shared1_done / shared2_done, dx_ready = slots_ready),
// stamped with this launch's epoch by its first step.
#pragma once

#include <cstdint>

#include "detmoe/numeric.h"
#include "megakernel/gemm/band_order.h"
#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/layer/backward_params.h"
#include "megakernel/layer/backward_tiles.cuh"
#include "megakernel/layer/copy_tasks.cuh"
#include "megakernel/layer/sync.cuh"
#include "megakernel/layer/task_list.cuh"

namespace detmoe::mk {

// The list's phases in list order; each task kind's TaskKind is kDyDispatch + its phase.
enum class BwdPhase : int32_t {
  kDyDispatch,
  kSharedDgrad1,
  kDgrad1,
  kSharedDgrad2,
  kDgrad2,
  kDxSum,
  kWgradDown,
  kSharedWgradDown,
  kWgradGateUp,
  kSharedWgradGateUp,
  kDone
};
static_assert(static_cast<uint32_t>(TaskKind::kDyDispatch) + static_cast<uint32_t>(BwdPhase::kSharedWgradGateUp) ==
                  static_cast<uint32_t>(TaskKind::kSharedWgradGateUp),
              "task kinds follow the phases");
inline constexpr int kBwdListPhases = 10;

constexpr uint32_t bwd_phase_bit(BwdPhase ph) { return 1u << static_cast<int>(ph); }
inline constexpr uint32_t kBwdCommPhases = bwd_phase_bit(BwdPhase::kDyDispatch) | bwd_phase_bit(BwdPhase::kDxSum);
inline constexpr uint32_t kBwdAllPhases = (1u << kBwdListPhases) - 1u;
inline constexpr uint32_t kBwdGemmPhases = kBwdAllPhases & ~kBwdCommPhases;
static_assert(kLaterWgradDown == bwd_phase_bit(BwdPhase::kWgradDown) &&
                  kLaterWgradGateUp == bwd_phase_bit(BwdPhase::kWgradGateUp),
              "backward_params.h names the routed weight gradients' phases");

// Output tile of every backward GEMM: 128 rows × 256 columns.
inline constexpr int32_t kBwdTileRows = 128;
inline constexpr int32_t kBwdTileCols = 256;
// An expert's weight-gradient tiles go in bands (describe_bwd_task) once there are at least this
// many: two waves of a 132-SM grid.
inline constexpr int32_t kWgradBandMinTiles = 256;
static_assert(kDefaultWeightGradBandMBlocks == Cfg::kBandRows,
              "overlap_rows = 0 walks the fused weight-gradient tiles in the GEMM core's band order");

// The CTA's rank and phase set: cta_role's split (comm_sms) with the backward's phases.
// Phases the host runs as a later launch (BackwardParams::later_phases) are left out of every
// role's list; none of the launch's phases waits on them.
DETMOE_DEVICE CtaRole bwd_cta_role(const BackwardParams& bp) {
  const LayerParams& p = bp.f;
  const RankSlice slice = rank_slice(p.P);
  const int32_t comm = comm_ctas_in_slice(p.comm_ctas_per_rank, slice.size);
  if (slice.member < comm) return {slice.rank, kBwdCommPhases};
  return {slice.rank, (comm > 0 ? kBwdGemmPhases : kBwdAllPhases) & ~bp.later_phases};
}

struct BwdTask {
  BwdPhase phase;
  int32_t index;  // within the phase
  uint64_t id;    // make_task_id
};

// The backward task list of one rank restricted to a phase set (as TaskList for the forward).
class BackwardTaskList {
 public:
  DETMOE_DEVICE BackwardTaskList(const LayerParams& p, int32_t rank, uint32_t phases)
      : p_(p), rank_(rank), phases_(phases) {
    const int32_t e0 = rank * p.experts_per_rank;
    mblock_first_ = __ldcg(p.ws.mblock_offset + e0);
    mblocks_ = __ldcg(p.ws.mblock_offset + e0 + p.experts_per_rank) - mblock_first_;
  }

  DETMOE_DEVICE int32_t total() const {
    int32_t n = 0;
    for (int i = 0; i < kBwdListPhases; ++i) n += count(i);
    return n;
  }
  DETMOE_DEVICE int32_t mblock_first() const { return mblock_first_; }
  // The list number of phase ph's first task, and its task count (0 outside the phase set).
  DETMOE_DEVICE int32_t first_of(BwdPhase ph) const {
    int32_t n = 0;
    for (int i = 0; i < static_cast<int>(ph); ++i) n += count(i);
    return n;
  }
  DETMOE_DEVICE int32_t count_of(BwdPhase ph) const { return count(static_cast<int>(ph)); }

  DETMOE_DEVICE BwdTask at(int32_t i) const {
    int32_t ph = 0;
    while (ph < kBwdListPhases - 1 && i >= count(ph)) i -= count(ph++);
    const auto kind = static_cast<TaskKind>(static_cast<uint32_t>(TaskKind::kDyDispatch) + static_cast<uint32_t>(ph));
    return {static_cast<BwdPhase>(ph), i, make_task_id(kind, rank_, static_cast<uint32_t>(i))};
  }

 private:
  DETMOE_DEVICE int32_t count(int ph) const {
    if (((phases_ >> ph) & 1u) == 0) return 0;
    const LayerParams& p = p_;
    const int32_t shared = p.Fs > 0 ? p.token_mblocks : 0;
    const int32_t epr = p.experts_per_rank;
    switch (static_cast<BwdPhase>(ph)) {
      case BwdPhase::kDyDispatch: return p.chunks_per_rank;
      case BwdPhase::kSharedDgrad1: return shared * div_up(p.Fs, kBwdTileCols);
      case BwdPhase::kDgrad1: return mblocks_ * div_up(p.F, kBwdTileCols);
      case BwdPhase::kSharedDgrad2: return shared * div_up(p.H, kBwdTileCols);
      case BwdPhase::kWgradDown: return epr * div_up(p.H, kBwdTileRows) * div_up(p.F, kBwdTileCols);
      case BwdPhase::kSharedWgradDown:
        return p.Fs > 0 ? div_up(p.H, kBwdTileRows) * div_up(p.Fs, kBwdTileCols) : 0;
      case BwdPhase::kDgrad2: return mblocks_ * div_up(p.H, kBwdTileCols);
      case BwdPhase::kWgradGateUp: return epr * div_up(2 * p.F, kBwdTileRows) * div_up(p.H, kBwdTileCols);
      case BwdPhase::kSharedWgradGateUp:
        return p.Fs > 0 ? div_up(2 * p.Fs, kBwdTileRows) * div_up(p.H, kBwdTileCols) : 0;
      default: return p.sum_chunks;
    }
  }

  const LayerParams& p_;
  int32_t rank_;
  uint32_t phases_;
  int32_t mblock_first_ = 0;
  int32_t mblocks_ = 0;
};

// What a consumer warpgroup does with a backward tile's accumulators.
enum class BwdEpilogue : int32_t {
  kDSwiGLU,    // da → dh = [dg | du] (TMA stores)
  kScatterDx,  // dx rows straight to their source rank's dx slots (the forward's combine scatter)
  kStore,      // bf16 or fp32 TMA store (shared dx, weight gradients)
};

// One backward GEMM task: its loads, epilogue, dependency and signal.
struct BwdGemmTask {
  BwdTile tile;
  BwdEpilogue epilogue;
  int32_t store_kind;         // kStore: gemm::Epilogue::kStoreBF16 or kStoreFP32
  const CUtensorMap* map_c;   // kStore / kDSwiGLU target
  int32_t c_row, c_end;       // output rows (the warpgroup adds 64·wg)
  int32_t col0, out_cols;     // first output column; output columns (F, Fs, H, M's N)
  int32_t plan_row0;          // kScatterDx: plan row of the tile's first row
  // Dependency: counters wait[0 .. wait_count) (indices wait_index0 ..), each to wait_target, or
  // with wait_rows ≥ 0 to the rows of each m-block out of wait_rows (dy_ready).
  const unsigned long long* wait;
  int32_t wait_count;
  uint32_t wait_target;
  int32_t wait_rows;
  int32_t wait_index0;
  CounterKind wait_kind;
  unsigned long long* done;   // each warpgroup adds 1 once its TMA stores landed (null: none)
};

DETMOE_DEVICE BwdGemmTask describe_bwd_task(const BackwardParams& bp, const BwdTask& task, int32_t r,
                                            const BackwardTaskList& list, ExpertWalker& walker) {
  const LayerParams& p = bp.f;
  BwdGemmTask g{};
  unsigned long long* ctr = rank_counters(p, r);
  const RankGradMaps& gm = bp.grad_maps[r];
  const int32_t epr = p.experts_per_rank;
  g.wait_rows = -1;
  g.store_kind = static_cast<int32_t>(bp.grad_fp32 ? gemm::Epilogue::kStoreFP32 : gemm::Epilogue::kStoreBF16);
  switch (task.phase) {
    case BwdPhase::kDgrad1:
    case BwdPhase::kDgrad2: {
      // Routed data-grad tiles, numbered as the forward's GEMM tiles (band order inside each
      // expert: the tiles sharing a weight panel run at once).
      const bool first = task.phase == BwdPhase::kDgrad1;
      const int32_t n_blocks = div_up(first ? p.F : p.H, kBwdTileCols);
      const int32_t e = walker.expert_of(list.mblock_first() + task.index / n_blocks);
      const int32_t e_mblock0 = __ldcg(p.ws.mblock_offset + e);
      const int32_t e_mblocks = __ldcg(p.ws.mblock_offset + e + 1) - e_mblock0;
      const gemm::BandCoords bc = gemm::balanced_band_coords(
          task.index - (e_mblock0 - list.mblock_first()) * n_blocks, e_mblocks, n_blocks, p.dgrad_band_mblocks);
      const int32_t row_block = e_mblock0 - list.mblock_first() + bc.m_block;
      const int32_t m0 = bc.m_block * kRowsPerMBlock;
      const int32_t rows_first = __ldcg(p.ws.expert_offset + e);
      const int32_t count = __ldcg(p.ws.expert_offset + e + 1) - rows_first;
      const int32_t rows_begin = r * p.capacity + rows_first - __ldcg(p.ws.rank_row_begin + r);
      const int32_t el = e - r * epr;
      g.col0 = bc.n_block * kBwdTileCols;
      g.c_row = rows_begin + m0;
      g.c_end = rows_begin + count;
      g.tile.a_row = g.c_row;
      g.tile.a_end = g.c_end;
      g.tile.b_col = g.col0;
      g.wait_count = 1;
      g.wait_index0 = row_block;
      if (first) {
        g.tile.map_a = &bp.dy_rows;
        g.tile.map_b = &gm.w_down_k;
        g.tile.b_row = el * p.H;
        g.tile.b_end = (el + 1) * p.H;
        g.tile.b_cols = p.F;
        g.tile.k_blocks = p.H / Cfg::kBlockK;
        g.epilogue = BwdEpilogue::kDSwiGLU;
        g.map_c = &bp.dh_k;
        g.out_cols = p.F;
        g.tile.map_h = &p.h_store;  // h rows are indexed like the output rows
        g.tile.h_row = g.c_row;
        g.tile.h_end = g.c_end;
        g.tile.h_col = g.col0;
        g.tile.h_cols = p.F;
        g.wait = ctr + p.counters.dispatch_ready + row_block;
        g.wait_target = static_cast<uint32_t>(min(kRowsPerMBlock, count - m0));
        g.wait_kind = CounterKind::kDyReady;
        g.done = ctr + p.counters.gemm1_done + row_block;
      } else {
        g.tile.map_a = &bp.dh_rows;
        g.tile.map_b = &gm.w_gate_up_k;
        g.tile.b_row = el * 2 * p.F;
        g.tile.b_end = (el + 1) * 2 * p.F;
        g.tile.b_cols = p.H;
        g.tile.k_blocks = 2 * p.F / Cfg::kBlockK;
        g.epilogue = BwdEpilogue::kScatterDx;
        g.plan_row0 = rows_first + m0;
        g.out_cols = p.H;
        g.wait = ctr + p.counters.gemm1_done + row_block;
        g.wait_target = 2u * static_cast<uint32_t>(div_up(p.F, kBwdTileCols));
        g.wait_kind = CounterKind::kDgrad1Done;
      }
      break;
    }
    case BwdPhase::kSharedDgrad1:
    case BwdPhase::kSharedDgrad2: {
      const bool first = task.phase == BwdPhase::kSharedDgrad1;
      const int32_t n_blocks = div_up(first ? p.Fs : p.H, kBwdTileCols);
      const gemm::BandCoords bc = gemm::band_coords(task.index, p.token_mblocks, n_blocks, p.dgrad_band_mblocks);
      const int32_t m0 = bc.m_block * kRowsPerMBlock;
      g.col0 = bc.n_block * kBwdTileCols;
      g.c_row = r * p.T + m0;
      g.c_end = (r + 1) * p.T;
      g.tile.b_col = g.col0;
      g.tile.b_row = 0;
      if (first) {
        g.tile.map_a = &gm.dout_rows;  // the rank's own dout: rows [0, T)
        g.tile.a_row = m0;
        g.tile.a_end = p.T;
        g.tile.map_b = &gm.ws_down_k;
        g.tile.b_end = p.H;
        g.tile.b_cols = p.Fs;
        g.tile.k_blocks = p.H / Cfg::kBlockK;
        g.epilogue = BwdEpilogue::kDSwiGLU;
        g.map_c = &bp.dhs_k;
        g.out_cols = p.Fs;
        g.tile.map_h = &p.hs_store;
        g.tile.h_row = g.c_row;
        g.tile.h_end = g.c_end;
        g.tile.h_col = g.col0;
        g.tile.h_cols = p.Fs;
        g.done = ctr + p.counters.shared1_done + bc.m_block;
      } else {
        g.tile.map_a = &bp.dhs_rows;
        g.tile.a_row = g.c_row;
        g.tile.a_end = g.c_end;
        g.tile.map_b = &gm.ws_gate_up_k;
        g.tile.b_end = 2 * p.Fs;
        g.tile.b_cols = p.H;
        g.tile.k_blocks = 2 * p.Fs / Cfg::kBlockK;
        g.epilogue = BwdEpilogue::kStore;
        g.store_kind = static_cast<int32_t>(gemm::Epilogue::kStoreBF16);
        g.map_c = &bp.dxs_store;
        g.out_cols = p.H;
        g.wait = ctr + p.counters.shared1_done + bc.m_block;
        g.wait_count = 1;
        g.wait_index0 = bc.m_block;
        g.wait_target = 2u * static_cast<uint32_t>(div_up(p.Fs, kBwdTileCols));
        g.wait_kind = CounterKind::kSharedDgrad1Done;
        g.done = ctr + p.counters.shared2_done + bc.m_block;
      }
      break;
    }
    default: {
      // Weight gradients: dW[M, N] = Aᵀ·B over token rows, one tile owner summing every row in
      // order (k-blocks of 64 rows from the first). Routed: the expert's rows in the plan's
      // order (global token order, the same for every P); shared: the rank's tokens.
      const bool down = task.phase == BwdPhase::kWgradDown || task.phase == BwdPhase::kSharedWgradDown;
      const bool routed = task.phase == BwdPhase::kWgradDown || task.phase == BwdPhase::kWgradGateUp;
      const int32_t f = routed ? p.F : p.Fs;
      const int32_t M = down ? p.H : 2 * f, N = down ? f : p.H;
      const int32_t m_tiles = div_up(M, kBwdTileRows), n_tiles = div_up(N, kBwdTileCols);
      const int32_t per = m_tiles * n_tiles;
      const int32_t el = routed ? task.index / per : 0;
      const int32_t i = task.index - el * per;
      // Order of an expert's weight-gradient tiles (speed only: each tile still has one owner
      // summing its rows in order). A large grid goes in bands of wgrad_band_mblocks m-tiles, m fastest
      // (as the data-grad tiles), so the tiles running at once share a few B column panels:
      // n fastest, dW_gate_up's 132 concurrent tiles on deepseek-v3 read the expert's whole x
      // panel (29 MB against ≈ 17 MB in bands of 8); bands measured −0.65 ms (deepseek-v3) and
      // −0.85 ms (mixtral-8x7b) of backward on an H100 (session 23). A grid smaller than
      // kWgradBandMinTiles (qwen3-30b-a3b: 96 and 48 tiles per expert, all in flight together)
      // keeps n fastest: bands measured +0.1 ms (+1.7 %) of backward there.
      int32_t mt, nt;
      if (per >= kWgradBandMinTiles) {
        const gemm::BandCoords bc = gemm::balanced_band_coords(i, m_tiles, n_tiles, p.wgrad_band_mblocks);
        mt = bc.m_block;
        nt = bc.n_block;
      } else {
        mt = i / n_tiles;
        nt = i % n_tiles;
      }
      g.tile.weight_grad = 1;
      g.tile.a_col = mt * kBwdTileRows;
      g.tile.a_cols = M;
      g.tile.b_col = nt * kBwdTileCols;
      g.tile.b_cols = N;
      g.epilogue = BwdEpilogue::kStore;
      g.c_row = el * M + mt * kBwdTileRows;
      g.c_end = (el + 1) * M;
      g.col0 = nt * kBwdTileCols;
      g.out_cols = N;
      if (routed) {
        const int32_t e = r * epr + el;
        const int32_t rows_first = __ldcg(p.ws.expert_offset + e);
        const int32_t count = __ldcg(p.ws.expert_offset + e + 1) - rows_first;
        const int32_t rows_begin = r * p.capacity + rows_first - __ldcg(p.ws.rank_row_begin + r);
        g.tile.a_row = g.tile.b_row = rows_begin;
        g.tile.a_end = g.tile.b_end = rows_begin + count;
        g.tile.k_blocks = div_up(count, Cfg::kBlockK);  // 0: no rows, exact zeros
        const int32_t e_mblock0 = __ldcg(p.ws.mblock_offset + e);
        g.wait_index0 = e_mblock0 - list.mblock_first();
        g.wait_count = __ldcg(p.ws.mblock_offset + e + 1) - e_mblock0;
        if (down) {
          g.tile.map_a = &bp.dy_k;
          g.tile.map_b = &bp.act_k;
          g.map_c = &gm.dw_down;
          g.wait = ctr + p.counters.dispatch_ready + g.wait_index0;
          g.wait_rows = count;
          g.wait_kind = CounterKind::kDyReady;
        } else {
          g.tile.map_a = &bp.dh_k;
          g.tile.map_b = &bp.recv_k;
          g.map_c = &gm.dw_gate_up;
          g.wait = ctr + p.counters.gemm1_done + g.wait_index0;
          g.wait_target = 2u * static_cast<uint32_t>(div_up(p.F, kBwdTileCols));
          g.wait_kind = CounterKind::kDgrad1Done;
        }
      } else {
        g.tile.k_blocks = div_up(p.T, Cfg::kBlockK);
        if (down) {
          g.tile.map_a = &gm.dout_k;  // rows [0, T) of the rank's dout
          g.tile.a_row = 0;
          g.tile.a_end = p.T;
          g.tile.map_b = &bp.act_s_k;
          g.tile.b_row = r * p.T;
          g.tile.b_end = (r + 1) * p.T;
          g.map_c = &gm.dws_down;
        } else {
          g.tile.map_a = &bp.dhs_k;
          g.tile.a_row = r * p.T;
          g.tile.a_end = (r + 1) * p.T;
          g.tile.map_b = &gm.x_k;  // rows [0, T) of the rank's x
          g.tile.b_row = 0;
          g.tile.b_end = p.T;
          g.map_c = &gm.dws_gate_up;
          g.wait = ctr + p.counters.shared1_done;
          g.wait_count = p.token_mblocks;
          g.wait_index0 = 0;
          g.wait_target = 2u * static_cast<uint32_t>(div_up(p.Fs, kBwdTileCols));
          g.wait_kind = CounterKind::kSharedDgrad1Done;
        }
      }
      break;
    }
  }
  return g;
}

// The dy dispatch's steps: kDyPieces column pieces of 256 columns (16 bytes per lane) of the dout
// row and of kDySlots slots' y rows. A warp writes a step's dy pieces (512 bytes each) into one of
// its two buffers in the staging (a step's stores read one while the next step writes the other).
// One piece of four slots: two pieces (or one of eight) per step made ptxas spill ≈ 100 bytes
// more (ptxas -v), and two pieces of four ran mixtral-8x7b's backward 1 ms slower on an H100
// (docs/PERF.md session 24).
inline constexpr int kDyPieces = 1;
inline constexpr int kDySlots = 4;
inline constexpr int32_t kDyPieceBytes = 512;
inline constexpr int32_t kDyWarpBytes = 2 * kDyPieces * kDySlots * kDyPieceBytes;
static_assert(kCopyWarps * kDyWarpBytes <= Cfg::kConsumerWarpgroups * Smem::kStagingBytesPerWarpgroup,
              "the copy warps' dy buffers fit the consumers' staging");

// One token's slots [j0, j0 + kg) (kg ≤ kDySlots) for one warp: each step loads kDyPieces column
// pieces of the dout row (once for the group's slots) and of the kg y rows (yrow: slot j0's),
// adds dout·y into each slot's lane partial (fmaf, columns in increasing order: lane·8 + 256·i,
// then the 8 of a piece), writes the dy pieces bf16(w·dout) into the warp's buffer and lane j
// bulk-stores slot j's pieces to `dst` (lane j's destination row; null: none). `step` counts the
// warp's steps (the buffer parity). Every lane commits one bulk group per step, so "at most one
// pending" leaves only the other buffer being read.
DETMOE_DEVICE void dy_token_slots(const uint16_t* drow, const uint16_t* yrow, int32_t H, int32_t kg,
                                  const float (&wt)[kDySlots], uint16_t* dst, uint32_t buffers, uint32_t& step,
                                  float (&partial)[kDySlots]) {
  constexpr int kPieces = kDyPieces, kSlots = kDySlots;
  const uint32_t lane = ptx::lane_id();
#pragma unroll 1
  for (int32_t c0 = 0; c0 < H; c0 += 256 * kPieces) {
    uint4 dv[kPieces], yv[kPieces][kSlots];
#pragma unroll
    for (int u = 0; u < kPieces; ++u) {
      const int32_t c = c0 + 256 * u + static_cast<int32_t>(lane) * 8;
      if (c < H) {
        dv[u] = __ldg(reinterpret_cast<const uint4*>(drow + c));
#pragma unroll
        for (int j = 0; j < kSlots; ++j) {
          if (j < kg) yv[u][j] = __ldcg(reinterpret_cast<const uint4*>(yrow + static_cast<int64_t>(j) * H + c));
        }
      }
    }
    ptx::bulk_wait_group_read<1>();  // this buffer's stores of two steps ago have read it
    __syncwarp();
    const uint32_t buffer = buffers + (step & 1u) * (kPieces * kSlots * kDyPieceBytes);
#pragma unroll
    for (int u = 0; u < kPieces; ++u) {
      const int32_t c = c0 + 256 * u + static_cast<int32_t>(lane) * 8;
      if (c >= H) break;
      const uint16_t* dd = reinterpret_cast<const uint16_t*>(&dv[u]);
#pragma unroll
      for (int j = 0; j < kSlots; ++j) {
        if (j >= kg) break;
        const uint16_t* yy = reinterpret_cast<const uint16_t*>(&yv[u][j]);
        uint32_t o[4];
#pragma unroll
        for (int v = 0; v < 8; v += 2) {
          const float d0 = float_from_bf16_bits(dd[v]), d1 = float_from_bf16_bits(dd[v + 1]);
          partial[j] = fmaf(d0, float_from_bf16_bits(yy[v]), partial[j]);
          partial[j] = fmaf(d1, float_from_bf16_bits(yy[v + 1]), partial[j]);
          o[v / 2] = static_cast<uint32_t>(bf16_bits_from_float(wt[j] * d0)) |
                     (static_cast<uint32_t>(bf16_bits_from_float(wt[j] * d1)) << 16);
        }
        ptx::st_shared_v4(buffer + static_cast<uint32_t>(u * kSlots + j) * kDyPieceBytes + lane * 16,
                          make_uint4(o[0], o[1], o[2], o[3]));
      }
    }
    ptx::fence_proxy_async_shared();  // st.shared (generic) → the bulk stores' reads
    __syncwarp();
    if (dst != nullptr) {
#pragma unroll
      for (int u = 0; u < kPieces; ++u) {
        const int32_t c = c0 + 256 * u;
        if (c >= H) break;
        ptx::bulk_store(dst + c, buffer + static_cast<uint32_t>(u * kSlots + lane) * kDyPieceBytes,
                        static_cast<uint32_t>(min(256, H - c)) * 2);
      }
    }
    ptx::bulk_commit_group();
    ++step;
  }
}

// Level 0: dy rows and d_topk_w for one plan chunk of source rank s's tokens. One warp per token,
// its slots in groups of kDySlots: the dout row is read once per group and each slot's y row
// once (dy_token_slots: the lanes walk the rows in 8-column pieces, lane·8 + 256·i, each summing
// dout·y with fmaf in that order, then a fixed butterfly over the warp whose lane-0 value is
// kept — the order depends on H alone). The dy row dy = bf16(w·dout)
// (the reference's product) goes through the warp's buffer in the staging to the pair's row of
// the forward's plan in its expert's rank by bulk stores (one lane per slot), then each pair
// adds 1 to its m-block's dy_ready counter (one add per group of lanes with the same counter).
// (With a warp per pair, 16-byte loads and stores from every lane and dout re-read per slot, the
// dispatch moved ≈ 1.8 TB/s on an H100: 1.1 ms per CTA on deepseek-v3, docs/PERF.md session 24.)
// `staging`: the consumers' staging, idle here (the backward's first tasks; the caller reclaimed
// it from the copier).
DETMOE_DEVICE void dy_dispatch(const BackwardParams& bp, const LaunchContext& ctx, int32_t s, int32_t chunk_in_rank,
                               uint8_t* staging) {
  const LayerParams& p = bp.f;
  const int tid = static_cast<int>(threadIdx.x) - 128;
  const int warp = tid / 32;
  const uint32_t lane = ptx::lane_id();
  const int32_t t0 = chunk_in_rank * p.plan_chunk_tokens;
  const int32_t n = min(p.plan_chunk_tokens, p.T - t0);
  const int32_t pairs = n * p.k;
  const int64_t g0 = static_cast<int64_t>(s) * p.T + t0;
  const int32_t* idx = p.rank[s].topk_idx;
  const float* w = p.rank[s].topk_w;
  const uint16_t* dout = bp.grad[s].dout;
  const uint16_t* ys = y_slots(p, s);
  copy_barrier();
  const bool go = tid != 0 || !launch_aborted(ctx);
  if (!copy_barrier_and(go)) return;
  float* d_topk_w = bp.grad[s].d_topk_w + static_cast<int64_t>(t0) * p.k;
  const uint32_t buffers = ptx::smem_u32(staging) + static_cast<uint32_t>(warp) * kDyWarpBytes;
  uint32_t step = 0;
#pragma unroll 1
  for (int32_t q = warp; q < n; q += kCopyWarps) {
    const int32_t t = t0 + q;
#pragma unroll 1
    for (int32_t j0 = 0; j0 < p.k; j0 += kDySlots) {
      const int32_t kg = min(kDySlots, p.k - j0);
      // Lane j < kg: pair (t, j0 + j)'s destination row and weight (a chain of dependent loads).
      uint16_t* dst = nullptr;
      float w_lane = 0.0f;
      if (lane < static_cast<uint32_t>(kg)) {
        const int32_t i = q * p.k + j0 + static_cast<int32_t>(lane);
        const int32_t row = __ldcg(p.ws.slot_row + g0 * p.k + i);
        const int32_t d = __ldg(idx + static_cast<int64_t>(t) * p.k + j0 + lane) / p.experts_per_rank;
        const int64_t local = row - __ldcg(p.ws.rank_row_begin + d);
        // The forward's plan put every row inside its rank's buffer; checked anyway, so that a
        // stale table can never send a store outside dy (such a pair is skipped).
        if (local >= 0 && local < p.capacity) dst = p.ws.dy + (static_cast<int64_t>(d) * p.capacity + local) * p.H;
        w_lane = __ldg(w + static_cast<int64_t>(t) * p.k + j0 + lane);
      }
      const uint32_t sent = __ballot_sync(0xffffffffu, dst != nullptr);
      float wt[kDySlots], partial[kDySlots];
#pragma unroll
      for (int j = 0; j < kDySlots; ++j) {
        wt[j] = __shfl_sync(0xffffffffu, w_lane, j);
        partial[j] = 0.0f;
      }
      dy_token_slots(dout + static_cast<int64_t>(t) * p.H, ys + (static_cast<int64_t>(t) * p.k + j0) * p.H, p.H, kg, wt,
                     dst, buffers, step, partial);
#pragma unroll
      for (int j = 0; j < kDySlots; ++j) {
        if (j >= kg) break;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) partial[j] = partial[j] + __shfl_xor_sync(0xffffffffu, partial[j], off);
        if (lane == 0 && (sent >> j & 1u)) d_topk_w[q * p.k + j0 + j] = partial[j];
      }
    }
  }
  ptx::bulk_wait_group_all();  // every dy piece written to global memory
  fence_proxy_async_global();  // the bulk stores (async proxy) before the release below
  __syncwarp();
  fence_acq_rel_gpu();
  copy_barrier();
  // Signals: lanes whose pairs fall in the same (rank, m-block) add together.
  const int32_t rounds = div_up(pairs, kCopyThreads);
#pragma unroll 1
  for (int32_t round = 0; round < rounds; ++round) {
    const int32_t i = round * kCopyThreads + tid;
    unsigned long long key = ~0ull - lane;  // distinct for lanes without a pair
    unsigned long long* ready = nullptr;
    if (i < pairs) {
      const int32_t t = t0 + i / p.k, j = i % p.k;
      const int32_t e = __ldg(idx + static_cast<int64_t>(t) * p.k + j);
      const int32_t d = e / p.experts_per_rank;
      const int32_t row = __ldcg(p.ws.slot_row + g0 * p.k + i);
      const int32_t mb = __ldcg(p.ws.mblock_offset + e) - __ldcg(p.ws.mblock_offset + d * p.experts_per_rank) +
                         (row - __ldcg(p.ws.expert_offset + e)) / kRowsPerMBlock;
      ready = rank_counters(p, d) + p.counters.dispatch_ready + mb;
      key = reinterpret_cast<unsigned long long>(ready);
    }
    const uint32_t peers = __match_any_sync(0xffffffffu, key);
    if (ready != nullptr && (peers & lanemask_lt()) == 0 && !launch_aborted(ctx))
      signal_stamped(ready, static_cast<uint32_t>(__popc(peers)));
  }
}

// Level 3: d_x[t] = bf16(Σ_j dx_slot[t, j] + dxs[t]) for kSumChunkTokens of rank s's tokens, the
// reference's order (slots j = 0 … k − 1 from 0, then the shared expert's row), in fp32.
DETMOE_DEVICE void dx_sum(const BackwardParams& bp, const LaunchContext& ctx, const BwdTask& task, int32_t s) {
  const LayerParams& p = bp.f;
  const int tid = static_cast<int>(threadIdx.x) - 128;
  const int32_t t0 = task.index * kSumChunkTokens;
  const int32_t n = min(kSumChunkTokens, p.T - t0);
  bool ok = true;
  if (tid == 0) {
    const WaitSite site{task.id, CounterKind::kDxReady, static_cast<uint32_t>(s), task.index};
    ok = wait_counter(ctx, rank_counters(p, s) + p.counters.slots_ready + task.index,
                      static_cast<uint32_t>(n * p.k * (p.H / 64)), site);
    if (ok && p.Fs > 0) {
      const int32_t tm = t0 / kRowsPerMBlock;
      const WaitSite shared_site{task.id, CounterKind::kSharedDgrad2Done, static_cast<uint32_t>(s), tm};
      ok = wait_counter(ctx, rank_counters(p, s) + p.counters.shared2_done + tm,
                        2u * static_cast<uint32_t>(div_up(p.H, kBwdTileCols)), shared_site);
    }
  }
  if (!copy_barrier_and(ok)) return;
  uint16_t* d_x = bp.grad[s].d_x;
  // The chunk's n·H/8 pieces (8 columns of one token's row) are dealt to all 256 threads,
  // kSumPieces per thread per pass, and each thread loads kSumBatch slots of all its pieces
  // before their adds: 16 loads of 16 bytes in flight per thread, as the forward's weighted sum.
  // (One token per warp with two slots in flight: 336 µs per 32-token deepseek-v3 task, its
  // wait included, docs/PERF.md.) Each element's adds still run slot by slot, j = 0 … k − 1,
  // then the shared row, so the bits are unchanged.
  constexpr int kSumPieces = 4;
  constexpr int kSumBatch = 4;
  const int32_t row_pieces = p.H / 8;
  const int32_t pieces = n * row_pieces;
#pragma unroll 1
  for (int32_t q0 = tid; q0 < pieces; q0 += kCopyThreads * kSumPieces) {
    int64_t g[kSumPieces];
    int32_t c[kSumPieces];
    bool has[kSumPieces];
    float acc[kSumPieces][8];
#pragma unroll
    for (int i = 0; i < kSumPieces; ++i) {
      const int32_t q = q0 + i * kCopyThreads;
      has[i] = q < pieces;
      const int32_t tt = has[i] ? q / row_pieces : 0;
      g[i] = static_cast<int64_t>(s) * p.T + t0 + tt;
      c[i] = (q - tt * row_pieces) * 8;
#pragma unroll
      for (int v = 0; v < 8; ++v) acc[i][v] = 0.0f;
    }
#pragma unroll 1
    for (int32_t j0 = 0; j0 < p.k; j0 += kSumBatch) {
      uint4 raw[kSumPieces][kSumBatch];
#pragma unroll
      for (int i = 0; i < kSumPieces; ++i) {
#pragma unroll
        for (int u = 0; u < kSumBatch; ++u) {
          const bool load = has[i] && j0 + u < p.k;
          const uint16_t* row = p.ws.dx_slots + (g[i] * p.k + j0 + u) * p.H;
          raw[i][u] = load ? __ldcg(reinterpret_cast<const uint4*>(row + c[i])) : uint4{};
        }
      }
#pragma unroll
      for (int u = 0; u < kSumBatch; ++u) {
        if (j0 + u >= p.k) break;
#pragma unroll
        for (int i = 0; i < kSumPieces; ++i) {
          const uint16_t* x = reinterpret_cast<const uint16_t*>(&raw[i][u]);
#pragma unroll
          for (int v = 0; v < 8; ++v) acc[i][v] = acc[i][v] + float_from_bf16_bits(x[v]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kSumPieces; ++i) {
      if (!has[i]) continue;
      if (p.Fs > 0) {
        const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(p.ws.s + g[i] * p.H + c[i]));
        const uint16_t* x = reinterpret_cast<const uint16_t*>(&raw);
#pragma unroll
        for (int v = 0; v < 8; ++v) acc[i][v] = acc[i][v] + float_from_bf16_bits(x[v]);
      }
      uint4 packed;
      uint16_t* o = reinterpret_cast<uint16_t*>(&packed);
#pragma unroll
      for (int v = 0; v < 8; ++v) o[v] = bf16_bits_from_float(acc[i][v]);
      *reinterpret_cast<uint4*>(d_x + (g[i] - static_cast<int64_t>(s) * p.T) * p.H + c[i]) = packed;
    }
  }
}

}  // namespace detmoe::mk
