// The task list of one rank, built from the plan on the device (no host round trip).
//
// Tasks come in levels; a task depends only on tasks of lower levels (of any rank), and every
// CTA runs its tasks in list order, so the lowest unfinished task can always run: no deadlock
// while all CTAs are resident (the launch is cooperative).
//
//   level 0  place+dispatch   one per chunk of kPlanChunkTokens of the rank's tokens
//   level 1  GEMM1            per (m-block of the rank's experts, 128 columns of F)
//            shared GEMM1     per (128 of the rank's tokens, 128 columns of Fs)
//   level 2  GEMM2            per (m-block, 256 columns of H); its epilogue is the combine: the
//                             rows go straight to their source ranks' y slots
//            shared GEMM2     per (128 tokens, 256 columns of H)
//   level 3  weighted sum     per kSumChunkTokens of the rank's tokens
//
// The rank's CTA slice (loopback: CTAs [⌈r·G/P⌉, ⌈(r+1)·G/P⌉)) takes the tasks round robin. Who
// runs a task changes only speed: each task's result depends on the plan and inputs alone.
#pragma once

#include <cstdint>

#include "megakernel/layer/device_error.h"
#include "megakernel/layer/layer_params.h"
#include "megakernel/ptx/common.cuh"

namespace detmoe::mk {

enum class Phase : int32_t { kDispatch, kGemm1, kSharedGemm1, kGemm2, kSharedGemm2, kSum, kDone };
inline constexpr int kListPhases = 6;

DETMOE_DEVICE int32_t div_up(int32_t a, int32_t b) { return (a + b - 1) / b; }

// This CTA's rank and its place in the rank's slice of the grid.
struct RankSlice {
  int32_t rank;
  int32_t member;  // index of this CTA in the slice
  int32_t size;    // CTAs in the slice
};

DETMOE_DEVICE RankSlice rank_slice(int32_t P) {
  const int32_t G = gridDim.x, b = blockIdx.x;
  const int32_t r = static_cast<int32_t>((static_cast<int64_t>(b) * P) / G);
  const int32_t first = static_cast<int32_t>((static_cast<int64_t>(r) * G + P - 1) / P);
  const int32_t next = static_cast<int32_t>((static_cast<int64_t>(r + 1) * G + P - 1) / P);
  return {r, b - first, next - first};
}

struct Task {
  Phase phase;
  int32_t index;  // within the phase
  uint64_t id;    // make_task_id
};

// Phase sizes of one rank, read from the plan (after the plan's last grid barrier).
class TaskList {
 public:
  DETMOE_DEVICE TaskList(const LayerParams& p, int32_t rank) : rank_(rank) {
    const int32_t e0 = rank * p.experts_per_rank;
    mblock_first_ = __ldcg(p.ws.mblock_offset + e0);
    mblocks_ = __ldcg(p.ws.mblock_offset + e0 + p.experts_per_rank) - mblock_first_;
    const int32_t shared_tiles = p.Fs > 0 ? p.token_mblocks : 0;
    count_[0] = p.chunks_per_rank;
    count_[1] = mblocks_ * div_up(p.F, kGemm1Cols);
    count_[2] = shared_tiles * div_up(p.Fs, kGemm1Cols);
    count_[3] = mblocks_ * div_up(p.H, kGemm2Cols);
    count_[4] = shared_tiles * div_up(p.H, kGemm2Cols);
    count_[5] = p.sum_chunks;
    total_ = 0;
    for (int i = 0; i < kListPhases; ++i) total_ += count_[i];
  }

  DETMOE_DEVICE int32_t total() const { return total_; }
  DETMOE_DEVICE int32_t mblocks() const { return mblocks_; }
  DETMOE_DEVICE int32_t mblock_first() const { return mblock_first_; }

  // Task number i of the list (0 ≤ i < total()).
  DETMOE_DEVICE Task at(int32_t i) const {
    int32_t ph = 0;
    while (ph < kListPhases - 1 && i >= count_[ph]) i -= count_[ph++];
    static constexpr TaskKind kKinds[kListPhases] = {TaskKind::kPlaceDispatch, TaskKind::kGemm1,
                                                     TaskKind::kSharedGemm1,   TaskKind::kGemm2,
                                                     TaskKind::kSharedGemm2,   TaskKind::kWeightedSum};
    return {static_cast<Phase>(ph), i, make_task_id(kKinds[ph], rank_, static_cast<uint32_t>(i))};
  }

 private:
  int32_t rank_;
  int32_t mblock_first_ = 0;
  int32_t mblocks_ = 0;
  int32_t count_[kListPhases];
  int32_t total_ = 0;
};

// Maps the rank's m-blocks to experts by walking the m-block offsets from the last answer, back
// or forward: tiles come in bands of a few m-blocks (gemm::band_coords) and phases restart at
// the rank's first m-block, so each step moves over a few experts at most (loads, not a search).
class ExpertWalker {
 public:
  DETMOE_DEVICE ExpertWalker(const LayerParams& p, int32_t rank)
      : offsets_(p.ws.mblock_offset), first_(rank * p.experts_per_rank), last_(first_ + p.experts_per_rank - 1),
        e_(first_) {}

  // Expert of global m-block `mb` (which must belong to the rank).
  DETMOE_DEVICE int32_t expert_of(int32_t mb) {
    // Back a few experts (inside a band), else a binary search for the last expert starting at
    // or before mb (a phase restarting at the rank's first m-block).
    for (int step = 0; step < 4 && e_ > first_ && __ldcg(offsets_ + e_) > mb; ++step) --e_;
    if (__ldcg(offsets_ + e_) > mb) {
      int32_t lo = first_, hi = e_ - 1;
      while (lo < hi) {
        const int32_t mid = (lo + hi + 1) / 2;
        if (__ldcg(offsets_ + mid) <= mb) lo = mid;
        else hi = mid - 1;
      }
      e_ = lo;
    }
    while (e_ < last_ && __ldcg(offsets_ + e_ + 1) <= mb) ++e_;
    return e_;
  }

 private:
  const int32_t* offsets_;
  int32_t first_;
  int32_t last_;
  int32_t e_;
};

// The counters of rank r.
DETMOE_DEVICE unsigned long long* rank_counters(const LayerParams& p, int32_t r) {
  return p.ws.counters + static_cast<int64_t>(r) * p.counters.per_rank;
}

// Where the y rows of source rank s land: the caller's y [T, k, H] when it asked for y (the
// weighted sum then reads them there, so y costs no extra pass), else the workspace's slots.
DETMOE_DEVICE uint16_t* y_slots(const LayerParams& p, int32_t s) {
  return p.rank[s].y != nullptr ? p.rank[s].y : p.ws.slots + static_cast<int64_t>(s) * p.T * p.k * p.H;
}

}  // namespace detmoe::mk
