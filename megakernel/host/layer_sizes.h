// Host-side sizing and checks of the fused layer (no GPU needed): the workspace layout, the
// limits of the megakernel, and the decoding of its device fault record into a Status.
#pragma once

#include <cstdint>
#include <string>

#include "detmoe/config.h"
#include "detmoe/problem.h"
#include "detmoe/status.h"
#include "megakernel/layer/device_error.h"
#include "megakernel/layer/layer_params.h"

namespace detmoe::mk {

struct LayerSizes {
  int64_t capacity = 0;         // receive rows per rank
  int32_t plan_chunk_tokens = 0;  // tokens per plan chunk: plan_chunk_tokens(T, P, grid)
  int64_t chunks_per_rank = 0;    // plan chunks
  int64_t sum_chunks = 0;
  int64_t token_mblocks = 0;
  int64_t mblock_capacity = 0;  // m-blocks a rank can have: capacity/128 + E/P + 1
  CounterLayout counters{};
  // Elements (bf16 unless noted) of each buffer, all ranks together.
  int64_t recv = 0, act = 0, h = 0, slots = 0, act_s = 0, s = 0, hs = 0;
  int64_t dy = 0, dh = 0, dx_slots = 0, dhs = 0;  // the backward's (docs/MEGAKERNEL.md "Backward")
  int64_t rank_group_offsets = 0;  // int32, the backward's GEMM-core groups: P·(E/P + 1) (recompute_h.h, weight_grads.h)
  int64_t counter_words = 0;  // u64
  int64_t chunk_cells = 0;    // int32: P·chunks_per_rank·E
  int64_t rows = 0;           // P·T·k
  int64_t workspace_bytes = 0;  // the forward's buffers (all of the above but the backward's), rounded to 256 bytes
  int64_t backward_bytes = 0;   // dy, dh, dx_slots, dhs, rank_group_offsets, wgrad_tickets: allocated at a Layer's first backward
};

// Checks that the megakernel can run this problem (beyond validate(config, shape)): bf16,
// P ≤ kMaxMegakernelRanks, every row index and TMA coordinate in int32, E ≤ 1024 (plan scratch).
// grid_ctas: the persistent grid; it must give each of the P ranks at least one CTA.
Status check_megakernel_limits(const Shape& shape, const LayerConfig& config, int64_t grid_ctas);

// Tokens per plan chunk for a grid of grid_ctas: kMaxPlanChunkTokens, halved (down to
// kMinPlanChunkTokens) while the halves' P·⌈T / c⌉ dispatch tasks still fit in one wave of the
// grid. With 128-token chunks deepseek-v3 and mixtral-8x7b (T = 8192) had 64 dispatch tasks and 68
// of 132 CTAs waiting for them; at 64 tokens 128 CTAs copy. T = 16384 keeps 128 (256 tasks of 64
// would be two waves of half the work each: no gain, more plan).
int32_t plan_chunk_tokens(int64_t T, int64_t P, int64_t grid_ctas);

StatusOr<LayerSizes> layer_sizes(const Shape& shape, const LayerConfig& config, int64_t grid_ctas);

// The scheduling knobs as the kernel reads them (LayerParams). They move tasks between CTAs and
// in time, never a bit (DESIGN.md D1).
// m-blocks per GEMM band: overlap_rows / 128 (at least 1), or for 0 the tiles' default
// (kDefaultForwardBandMBlocks for the forward's GEMM1 tiles, kDefaultForwardDownBandMBlocks for
// its GEMM2 tiles, kDefaultDataGradBandMBlocks for the backward's data-grad tiles,
// kDefaultWeightGradBandMBlocks for its weight-gradient tiles).
int32_t forward_band_mblocks(const LayerConfig& config);
int32_t forward_down_band_mblocks(const LayerConfig& config);
int32_t data_grad_band_mblocks(const LayerConfig& config);
int32_t weight_grad_band_mblocks(const LayerConfig& config);
// CTAs each rank slice asks for data movement: ⌈comm_sms / P⌉ (0: none). The device keeps at
// least one GEMM CTA per slice: comm_ctas_in_slice (layer_params.h).
int32_t comm_ctas_per_rank(const LayerConfig& config, int64_t P);

// Lays the workspace out from `base` (each piece 256-byte aligned; control words first so one
// memset initialises them) and returns its total bytes. The one place the layout is written:
// layer_sizes() sizes the allocation with it (base 0) and Layer::create carves with it.
struct WorkspaceLayout {
  Workspace ws{};
  int64_t control_bytes = 0;  // launch state, bad key, barriers, fault record, counters
  int64_t total_bytes = 0;
};
WorkspaceLayout layout_workspace(uintptr_t base, const Shape& shape, const LayerSizes& sizes);

// The backward's own buffers (Workspace::dy, dh, dx_slots, dhs) carved from `base`, a second
// allocation of LayerSizes::backward_bytes made at the Layer's first backward, so a forward-only
// Layer never holds them (1.2–2.4 GB on the DESIGN.md shapes). Sets those four fields of `ws`.
int64_t layout_backward_workspace(uintptr_t base, const LayerSizes& sizes, Workspace& ws);

// "GEMM1 tile 7 of rank 1" etc.; plan_chunk_tokens places a dispatch chunk's tokens.
std::string describe_task(uint64_t task_id, int32_t plan_chunk_tokens);
std::string describe_counter(CounterKind kind, uint32_t rank, int64_t index);

// The Status of a fault record (Ok when it holds none).
Status fault_status(const DeviceErrorRecord& record, const Shape& shape, int32_t plan_chunk_tokens);

}  // namespace detmoe::mk
