// Parameters of the fused forward kernel: the problem's sizes, the workspace, every rank's
// tensors and the TMA maps. Plain data built by the host launcher (megakernel/host/
// layer_launch.cu) and passed as one __grid_constant__ argument (≈ 7 KB with 8 ranks; CUDA ≥ 12.1
// allows 32 KB of kernel parameters), so map addresses can be handed to TMA directly.
//
// Symmetric buffers: every rank owns a slice of the same size, rank r's at base + r·stride
// (elements). In loopback all slices are in one allocation on one GPU, so one TMA map covers
// every rank and a rank's rows are addressed as r·rows_per_rank + row. The NCCL backend keeps
// the layout per GPU and reaches peers through LSA pointers (docs/MEGAKERNEL.md).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "megakernel/layer/device_error.h"

namespace detmoe::mk {

// Ranks one megakernel launch holds (loopback: all of them in one grid). Not detmoe::kMaxRanks,
// the problem-level limit of validate().
inline constexpr int kMaxMegakernelRanks = 8;
// Tokens per plan chunk (the unit of the histogram, of the row placement and of a dispatch task):
// at most kMaxPlanChunkTokens, at least kMinPlanChunkTokens; the host picks it per launch
// (plan_chunk_tokens(), layer_sizes.h) so that the dispatch tasks fill the grid. The chunking
// decides who places and copies a row, never where it goes (the placement is a stable sort).
inline constexpr int kMaxPlanChunkTokens = 128;
inline constexpr int kMinPlanChunkTokens = 32;
// Tokens per weighted-sum task (and per slots-ready counter).
inline constexpr int kSumChunkTokens = 32;
// Rows per m-block (= the GEMM core's BLOCK_M) and output columns per tile of each GEMM.
inline constexpr int kRowsPerMBlock = 128;
inline constexpr int kGemm1Cols = 128;  // a columns per GEMM1 tile: 128 gate + 128 up = N 256
inline constexpr int kGemm2Cols = 256;  // y columns per GEMM2 tile
// Grid barriers of the plan: after validate+count, after the chunk scan, after the offsets.
inline constexpr int kPlanBarriers = 3;
// m-blocks per GEMM band when LayerConfig::overlap_rows = 0. The backward's weight-gradient tiles
// (when the fused launch runs them) keep the GEMM core's kBandRows (static_assert in backward_tasks.cuh).
// The forward walks 16: a 2048-row expert (deepseek-v3, mixtral-8x7b) is then one band, so each
// weight panel is read from HBM once instead of twice — measured −0.9 % (deepseek) and −1.7 %
// (mixtral) on the H200 (session 19) and −2 to −4 % on deepseek on an H100 (session 20), while the
// backward's weight-gradient walk was a little slower at 16 (docs/PERF.md). The backward's
// data-grad tiles (da, dx) walk 32: mixtral-8x7b's dx panels are 7–15 MB (K = 2F = 28,672), and in
// bands of 8 each expert's W_gate_up and W_down were read twice (four or five times for a zipf1 hot
// expert); bands of 32 measured −0.4 ms (balanced) and −0.5 ms (zipf1) of mixtral-8x7b's backward on
// an H100 and level on the other three shapes (session 31, two rounds; docs/PERF.md). Shapes with
// ≤ 8 m-blocks per expert are unchanged.
inline constexpr int32_t kDefaultWeightGradBandMBlocks = 8;
inline constexpr int32_t kDefaultForwardBandMBlocks = 16;
// The forward's GEMM2 (down projection) tiles walk 8: they run after every GEMM1 tile is taken,
// at uneven start times (GEMM1's 64-k-block tiles end wherever they end), so the tiles that share
// an operand meet in L2 only if they run near each other in ticket order. mixtral-8x7b's band of
// 16–17 m-blocks of a (F = 14,336: 62 MB) is more than the L2 holds, and each of its m-blocks is
// read by 16 tiles 17 tickets apart; a band of 8 (29 MB) stays in L2 while the W_down panels
// stream (perf/tile_drift_dram.py --spread 1: 8.2 → 2.4 GB; docs/PERF.md session 37).
inline constexpr int32_t kDefaultForwardDownBandMBlocks = 8;
inline constexpr int32_t kDefaultDataGradBandMBlocks = 32;

// CTAs of a rank slice of `slice_size` CTAs that run only dispatch and weighted-sum tasks, for
// LayerParams::comm_ctas_per_rank requested. At least one CTA is left for the GEMM tasks, so a
// 1-CTA slice never splits. Host and device (cta_role in task_list.cuh) share this rule.
constexpr int32_t comm_ctas_in_slice(int32_t comm_ctas_per_rank, int32_t slice_size) {
  return comm_ctas_per_rank < slice_size - 1 ? comm_ctas_per_rank : slice_size - 1;
}

// One rank's user tensors (device pointers of the rank's GPU).
struct RankTensors {
  const uint16_t* x;         // [T, H] bf16
  const int32_t* topk_idx;   // [T, k]
  const float* topk_w;       // [T, k]
  uint16_t* out;             // [T, H] bf16
  uint16_t* y;               // [T, k, H] bf16 or null
};

// One rank's user tensors as TMA maps (ragged 3-D maps, megakernel/gemm/ragged_map.cuh).
struct RankMaps {
  CUtensorMap x;           // [T, H], box 64 × 128: the shared expert's A
  CUtensorMap w_gate_up;   // [E/P·2F, H], box 64 × 128: GEMM1's B, loaded as gate and up halves
  CUtensorMap w_down;      // [E/P·H, F], box 64 × 256
  CUtensorMap ws_gate_up;  // [2Fs, H], box 64 × 128 (Fs > 0)
  CUtensorMap ws_down;     // [H, Fs], box 64 × 256 (Fs > 0)
};

// Counters of one rank (64-bit, epoch-tagged: (epoch << 32) | count). Offsets in counters.
struct CounterLayout {
  int32_t dispatch_ready;  // [mblock_capacity]
  int32_t gemm1_done;      // [mblock_capacity]
  int32_t shared1_done;    // [token_mblocks]
  int32_t shared2_done;    // [token_mblocks]
  int32_t slots_ready;     // [sum_chunks]
  int32_t per_rank;        // counters per rank (the stride)
};

struct Workspace {
  // The plan: global (every rank's routing), one copy per device.
  int32_t* chunk_base;      // [P·chunks_per_rank, E] histogram, then bases within each expert
  int32_t* expert_count;    // [E]
  int32_t* expert_offset;   // [E+1] global row of each expert's first row
  int32_t* mblock_offset;   // [E+1] global m-block index of each expert's first m-block
  int32_t* rank_row_begin;  // [P+1]
  int32_t* slot_row;        // [P·T·k] global row of (global token, slot)
  int32_t* row_token;       // [P·T·k] global token of each row
  int32_t* row_slot;        // [P·T·k]
  unsigned long long* bad_key;   // [1] smallest bad (token, slot) key; all ones = none
  unsigned long long* barriers;  // [kPlanBarriers] epoch-tagged
  unsigned int* launch_state;    // [0] epoch of the running launch, [1] CTAs finished
  unsigned int* tickets;         // [P, 2] tasks taken of each (rank, role) list (task_ring.cuh)
  DeviceErrorRecord* error;

  // Symmetric buffers, rank r at + r·stride.
  uint16_t* recv;     // [cap, H]: dispatched x rows in global row order
  uint16_t* act;      // [cap, F]: a = SwiGLU(h)
  uint16_t* h;        // [cap, 2F]: [g | u] when save_h, else null
  uint16_t* slots;    // [T·k, H]: y rows pushed back to their source rank (when the caller gives no y)
  uint16_t* act_s;    // [T, Fs]: shared expert's a
  uint16_t* s;        // [T, H]: shared expert's output; the backward's shared dx
  uint16_t* hs;       // [T, 2Fs]: shared expert's [g | u] when save_h and Fs > 0, else null
  // The backward's own (backward_params.h):
  uint16_t* dy;        // [cap, H]: dy = w·dout rows, dispatched in the forward's row order
  uint16_t* dh;        // [cap, 2F]: [dg | du]
  uint16_t* dx_slots;  // [T·k, H]: dx rows pushed back to their source rank's (token, slot)
  uint16_t* dhs;       // [T, 2Fs]: shared expert's [dg | du] (Fs > 0)
  int32_t* rank_group_offsets;  // [P, E/P + 1]: the GEMM core's groups (recompute_h, weight_grads.h)
  unsigned int* wgrad_tickets;  // [1]: the weight-gradient launches' tile deal (weight_grads.h)
  unsigned long long* counters;  // [P, CounterLayout::per_rank]
};

struct LayerParams {
  int32_t T, H, F, E, k, P, Fs;
  int32_t experts_per_rank;
  int32_t capacity;         // receive rows per rank
  int32_t plan_chunk_tokens;  // tokens per plan chunk (≤ kMaxPlanChunkTokens)
  int32_t chunks_per_rank;    // ⌈T / plan_chunk_tokens⌉
  int32_t sum_chunks;       // ⌈T / kSumChunkTokens⌉
  int32_t token_mblocks;    // ⌈T / 128⌉
  int32_t store_h;
  // Scheduling knobs (LayerConfig; they change who runs a task and when, never a bit):
  int32_t comm_ctas_per_rank;  // ⌈comm_sms / P⌉, 0 = no CTA dedicated to data movement
  // m-blocks per GEMM band (≥ 1), from overlap_rows: forward GEMM1 and GEMM2 tiles, the
  // backward's data-grad tiles (da, dx) and its weight-gradient tiles.
  int32_t fwd_band_mblocks;
  int32_t down_band_mblocks;
  int32_t dgrad_band_mblocks;
  int32_t wgrad_band_mblocks;
  long long timeout_ns;
  unsigned long long force_timeout_task;  // a task id, or ~0 = none
  // Task timeline (LayerOptions::trace_tasks_per_cta; null = off): CTA c writes records
  // [c·trace_capacity, …) of (task id, start ns, end ns, aux; trace.cuh) and its record count to
  // trace_count[c].
  unsigned long long* trace;
  int32_t* trace_count;
  int32_t trace_capacity;
  CounterLayout counters;
  Workspace ws;

  // Maps over the symmetric buffers (rows of every rank: r·cap + row, or r·T + token).
  CUtensorMap recv_load;   // [P·cap, H] box 64 × 128: GEMM1's A
  CUtensorMap act_store;   // [P·cap, F] box 64 × 64: GEMM1's C
  CUtensorMap act_load;    // [P·cap, F] box 64 × 128: GEMM2's A
  CUtensorMap h_store;     // [P·cap, 2F] box 64 × 64 (save_h)
  CUtensorMap act_s_store; // [P·T, Fs] box 64 × 64 (Fs > 0)
  CUtensorMap act_s_load;  // [P·T, Fs] box 64 × 128 (Fs > 0)
  CUtensorMap s_store;     // [P·T, H] box 64 × 64 (Fs > 0)
  CUtensorMap hs_store;    // [P·T, 2Fs] box 64 × 64 (Fs > 0 and save_h)

  RankTensors rank[kMaxMegakernelRanks];
  RankMaps rank_maps[kMaxMegakernelRanks];
};

}  // namespace detmoe::mk
