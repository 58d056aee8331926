// GEMM task descriptions: which rows, weights, outputs and counters a GEMM task of the list
// uses. Producer and consumers call describe_gemm_task on the same task and get the same tile.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "megakernel/gemm/scheduler.cuh"
#include "megakernel/layer/gemm_tiles.cuh"
#include "megakernel/layer/layer_params.h"
#include "megakernel/layer/sync.cuh"
#include "megakernel/layer/task_list.cuh"

namespace detmoe::mk {

struct GemmTask : TileWork {
  // Dependency: the producer waits for *wait ≥ wait_target before loading (null: none).
  const unsigned long long* wait;
  uint32_t wait_target;
  WaitSite wait_site;
  // Each consumer warpgroup adds 1 here once its stores are complete (null for kScatterRows,
  // which signals its rows' slots-ready counters instead).
  unsigned long long* done;
};

// The four GEMM task kinds, routed/shared × GEMM1/GEMM2: what each reads, computes and writes.
// describe_gemm_task fills a tile from the row of its phase.
//
//  kind          A rows (map)               B (per rank)        epilogue       out cols  waits on        signals
//  routed GEMM1  dispatched x (recv_load)   w_gate_up[e] halves SwiGLU -> a,h  F         dispatch_ready  gemm1_done
//  shared GEMM1  own x (rank_maps[r].x)     ws_gate_up halves   SwiGLU -> a_s,hs Fs      —               shared1_done
//  routed GEMM2  a (act_load)               w_down[e]           scatter to y   H         gemm1_done      slots_ready
//                                                               slots (combine)                          (per row run)
//  shared GEMM2  a_s (act_s_load)           ws_down             store s        H         shared1_done    shared2_done
struct GemmKind {
  bool routed;            // rows of the experts (the plan) rather than the rank's own tokens
  bool gemm1;             // gate/up with the SwiGLU epilogue rather than down
  TileEpilogue epilogue;
  int32_t width;          // output columns per tile
};

// The kind of a GEMM phase, the table above as code. (Written with the two predicates rather than
// a switch over the phase: the switch compiled to different code, and this table was to leave
// the kernel byte-identical.)
DETMOE_DEVICE GemmKind gemm_kind(Phase phase) {
  const bool routed = phase == Phase::kGemm1 || phase == Phase::kGemm2;
  const bool gemm1 = phase == Phase::kGemm1 || phase == Phase::kSharedGemm1;
  return {routed, gemm1, gemm1 ? TileEpilogue::kSwiGLU : routed ? TileEpilogue::kScatterRows : TileEpilogue::kStore,
          gemm1 ? kGemm1Cols : kGemm2Cols};
}

DETMOE_DEVICE GemmTask describe_gemm_task(const LayerParams& p, const Task& task, int32_t r, const TaskList& list,
                                          ExpertWalker& walker) {
  GemmTask g{};
  unsigned long long* ctr = rank_counters(p, r);
  const GemmKind kind = gemm_kind(task.phase);
  const bool routed = kind.routed, gemm1 = kind.gemm1;
  g.epilogue = kind.epilogue;
  const int32_t width = kind.width;
  const int32_t n_cols = gemm1 ? (routed ? p.F : p.Fs) : p.H;
  // Band order, bands cut inside each expert: a routed phase's tasks are numbered expert by
  // expert (expert e's mb_e m-blocks × n_blocks tiles at [A_e·n_blocks, A_{e+1}·n_blocks), A the
  // rank's m-block offsets), and inside an expert in bands of ≤ fwd_band_mblocks m-blocks for
  // GEMM1, down_band_mblocks for GEMM2 (m fastest, gemm::balanced_band_coords). The tasks that
  // share an expert's weight panel are then
  // consecutive — running at once on neighbouring CTAs, one HBM read in L2 for all of them — and
  // no panel is split between two bands: a band crossing an expert boundary read the straddling
  // expert's panels twice (ncu, gpt-oss: ≈ 14 GB from HBM per launch for 6.4 GB of weights).
  // A band's m-blocks finish GEMM1 together, after which their GEMM2 tiles can start
  // (LayerConfig::overlap_rows). Only the order moves, never a bit.
  const int32_t n_blocks = div_up(n_cols, width);
  const int32_t band = gemm1 ? p.fwd_band_mblocks : p.down_band_mblocks;
  int32_t row_block, col0;
  g.out_cols = n_cols;
  g.tile.up_row = -1;
  g.tile.up_end = -1;

  int32_t rows_begin, rows_end, m0;  // rows of the symmetric buffers (all ranks)
  if (routed) {
    // A_e ≤ ⌊index / n_blocks⌋ < A_{e+1} exactly when index is one of expert e's tasks.
    const int32_t e = walker.expert_of(list.mblock_first() + task.index / n_blocks);
    const int32_t e_mblock0 = __ldcg(p.ws.mblock_offset + e);
    const int32_t e_mblocks = __ldcg(p.ws.mblock_offset + e + 1) - e_mblock0;
    const gemm::BandCoords bc = gemm::balanced_band_coords(
        task.index - (e_mblock0 - list.mblock_first()) * n_blocks, e_mblocks, n_blocks, band);
    row_block = e_mblock0 - list.mblock_first() + bc.m_block;
    col0 = bc.n_block * width;
    g.tile.col0 = col0;
    const int32_t first = __ldcg(p.ws.expert_offset + e), count = __ldcg(p.ws.expert_offset + e + 1) - first;
    m0 = bc.m_block * kRowsPerMBlock;
    rows_begin = r * p.capacity + first - __ldcg(p.ws.rank_row_begin + r);
    rows_end = rows_begin + count;
    const int32_t el = e - r * p.experts_per_rank;
    g.plan_row0 = first + m0;
    if (gemm1) {
      g.tile.map_a = &p.recv_load;
      g.tile.a_row = rows_begin + m0;
      g.tile.a_end = rows_end;
      g.tile.map_b = &p.rank_maps[r].w_gate_up;
      g.tile.b_row = el * 2 * p.F + col0;
      g.tile.b_end = el * 2 * p.F + p.F;
      g.tile.up_row = el * 2 * p.F + p.F + col0;
      g.tile.up_end = (el + 1) * 2 * p.F;
      g.tile.k_blocks = p.H / Cfg::kBlockK;
      g.map_c = &p.act_store;
      g.map_h = p.store_h ? &p.h_store : nullptr;
      g.wait = ctr + p.counters.dispatch_ready + row_block;
      g.wait_target = static_cast<uint32_t>(min(kRowsPerMBlock, count - m0));
      g.wait_site = {task.id, CounterKind::kDispatchReady, static_cast<uint32_t>(r), row_block};
      g.done = ctr + p.counters.gemm1_done + row_block;
    } else {
      g.tile.map_a = &p.act_load;
      g.tile.a_row = rows_begin + m0;
      g.tile.a_end = rows_end;
      g.tile.map_b = &p.rank_maps[r].w_down;
      g.tile.b_row = el * p.H + col0;
      g.tile.b_end = (el + 1) * p.H;
      g.tile.k_blocks = p.F / Cfg::kBlockK;
      g.wait = ctr + p.counters.gemm1_done + row_block;
      g.wait_target = 2u * static_cast<uint32_t>(div_up(p.F, kGemm1Cols));
      g.wait_site = {task.id, CounterKind::kGemm1Done, static_cast<uint32_t>(r), row_block};
    }
  } else {
    const gemm::BandCoords bc = gemm::band_coords(task.index, p.token_mblocks, n_blocks, band);
    row_block = bc.m_block;
    col0 = bc.n_block * width;
    g.tile.col0 = col0;
    m0 = row_block * kRowsPerMBlock;
    rows_begin = r * p.T;
    rows_end = rows_begin + p.T;
    if (gemm1) {
      g.tile.map_a = &p.rank_maps[r].x;  // the rank's own x: rows [0, T)
      g.tile.a_row = m0;
      g.tile.a_end = p.T;
      g.tile.map_b = &p.rank_maps[r].ws_gate_up;
      g.tile.b_row = col0;
      g.tile.b_end = p.Fs;
      g.tile.up_row = p.Fs + col0;
      g.tile.up_end = 2 * p.Fs;
      g.tile.k_blocks = p.H / Cfg::kBlockK;
      g.map_c = &p.act_s_store;
      g.map_h = p.store_h && p.Fs > 0 ? &p.hs_store : nullptr;  // the backward's dSwiGLU reads it
      g.wait = nullptr;
      g.done = ctr + p.counters.shared1_done + row_block;
    } else {
      g.tile.map_a = &p.act_s_load;
      g.tile.a_row = rows_begin + m0;
      g.tile.a_end = rows_end;
      g.tile.map_b = &p.rank_maps[r].ws_down;
      g.tile.b_row = col0;
      g.tile.b_end = p.H;
      g.tile.k_blocks = p.Fs / Cfg::kBlockK;
      g.map_c = &p.s_store;
      g.wait = ctr + p.counters.shared1_done + row_block;
      g.wait_target = 2u * static_cast<uint32_t>(div_up(p.Fs, kGemm1Cols));
      g.wait_site = {task.id, CounterKind::kShared1Done, static_cast<uint32_t>(r), row_block};
      g.done = ctr + p.counters.shared2_done + row_block;
    }
  }
  g.tile.c_row = rows_begin + m0;
  g.tile.c_end = rows_end;
  return g;
}

}  // namespace detmoe::mk
