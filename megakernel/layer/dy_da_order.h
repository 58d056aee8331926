// The backward list's first segment (backward_tasks.cuh): the rank's dy gathers (one per m-block,
// in m-block order) merged with its da tiles (band order, n_f = ⌈F/256⌉ per m-block), so the
// gathers run among the da tiles instead of all before them. Plain arithmetic, host and device:
// the CPU test (layer_sizes_test.cpp) checks the order rule on the same function the kernel calls.
//
// Order: `lead` gathers, then blocks of n_f da tiles each followed by the next gather, then the
// remaining da tiles. Every da tile comes after the gather of its m-block — the list's
// no-deadlock rule (a task waits only on tasks listed before it) — when lead ≥ the GEMM band
// height: da tile d = n_f·j + o (block j) reads an m-block of its band [B0, B1) with B0 ≤ j, and
// the gathers listed before it number lead + j ≥ B1.
#pragma once

#include <cstdint>

#include "megakernel/gemm/band_order.h"  // DETMOE_HOST_DEVICE

namespace detmoe::mk {

struct DyDaSlot {
  bool gather;    // a dy gather (index = its m-block in the rank) or a da tile (index = the tile)
  int32_t index;
};

// Gathers listed ahead of the da tiles, in GEMM band heights: one keeps the order rule, two let a
// band's gathers run while the band before it computes.
inline constexpr int32_t kDyGatherLeadBands = 2;

DETMOE_HOST_DEVICE int32_t dy_gather_lead(int32_t gathers, int32_t band_mblocks) {
  const int32_t lead = kDyGatherLeadBands * band_mblocks;
  return lead < gathers ? lead : gathers;
}

// Entry i of the segment of `gathers` gathers and gathers · n_f da tiles (both > 0).
DETMOE_HOST_DEVICE DyDaSlot dy_da_slot(int32_t i, int32_t gathers, int32_t n_f, int32_t lead) {
  if (i < lead) return {true, i};
  i -= lead;
  const int32_t paired = gathers - lead;  // gathers that follow a block of n_f da tiles
  if (i < paired * (n_f + 1)) {
    const int32_t j = i / (n_f + 1), o = i % (n_f + 1);
    return o < n_f ? DyDaSlot{false, j * n_f + o} : DyDaSlot{true, lead + j};
  }
  return {false, paired * n_f + (i - paired * (n_f + 1))};
}

}  // namespace detmoe::mk
