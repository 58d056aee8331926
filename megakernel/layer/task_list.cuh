// The task list of one rank, built from the plan on the device (no host round trip).
//
// Tasks come in levels; a task depends only on tasks of lower levels (of any rank), and every
// CTA runs its tasks in list order, so the lowest unfinished task can always run: no deadlock
// while all CTAs are resident (the launch is cooperative).
//
//   level 0  place+dispatch   one per chunk of plan_chunk_tokens of the rank's tokens
//   level 1  GEMM1            per (m-block of the rank's experts, 128 columns of F)
//            shared GEMM1     per (128 of the rank's tokens, 128 columns of Fs)
//   level 2  GEMM2            per (m-block, 256 columns of H); its epilogue is the combine: the
//                             rows go straight to their source ranks' y slots
//            shared GEMM2     per (128 tokens, 256 columns of H)
//   level 3  weighted sum     per kSumChunkTokens of the rank's tokens
//
// The rank's CTA slice (loopback: CTAs [⌈r·G/P⌉, ⌈(r+1)·G/P⌉)) takes the tasks in list order,
// one ticket at a time (task_ring.cuh); with LayerConfig::comm_sms the slice is split into a
// data-movement group and a GEMM group, each taking its own phases of the list from its own
// ticket counter (cta_role). Who runs a task changes only speed: each task's result depends on
// the plan and inputs alone.
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

// Sets of phases, bit ph = 1 << ph.
constexpr uint32_t phase_bit(Phase ph) { return 1u << static_cast<int>(ph); }
inline constexpr uint32_t kCommPhases = phase_bit(Phase::kDispatch) | phase_bit(Phase::kSum);
inline constexpr uint32_t kGemmPhases = phase_bit(Phase::kGemm1) | phase_bit(Phase::kSharedGemm1) |
                                        phase_bit(Phase::kGemm2) | phase_bit(Phase::kSharedGemm2);
inline constexpr uint32_t kAllPhases = kCommPhases | kGemmPhases;

// Which tasks of its rank's list this CTA may run: those of `phases`, numbered in list order;
// the CTAs of a (rank, role) take them one at a time, in that order, from the role's ticket
// counter (task_ring.cuh).
struct CtaRole {
  int32_t rank;
  uint32_t phases;  // phase set of the role
};

// With c = comm_ctas_in_slice(LayerParams::comm_ctas_per_rank, slice size) > 0, slice members
// [0, c) run dispatch and weighted sum only and members [c, size) the GEMMs only; c = 0 keeps
// one group that runs everything.
//
// Progress (no deadlock) survives the split, by the levels argument of the list:
//   (1) each task has exactly one owner: the two groups' phase sets partition the list and each
//       group's CTAs take its sub-list by tickets, in list order, so a task below any taken one
//       is taken too;
//   (2) every CTA runs its tasks in list order, i.e. by level (its producer may run ahead of its
//       consumers, never behind);
//   (3) a task waits only on tasks of lower levels: dispatch never waits; GEMM1 waits on
//       dispatch, shared GEMM1 on nothing, GEMM2 on GEMM1, shared GEMM2 on shared GEMM1; the sum
//       on GEMM2 and shared GEMM2;
//   (4) all CTAs are resident (cooperative launch).
// Take the CTA whose current (lowest unfinished) task has the lowest level L. A task it waits on
// has a level < L (3); were it unfinished, its owner's current task would have a level ≤ that
// (1, 2), below L: impossible. So its inputs are done, it finishes and the argument repeats.
// Taking tasks out of a CTA's sequence keeps (1)–(4), so the split cannot deadlock. What it buys
// is speed: a data-movement CTA's dispatches never queue behind a GEMM tile, and all of them
// precede its sums, the only tasks in which it waits.
DETMOE_DEVICE CtaRole cta_role(const LayerParams& p) {
  const RankSlice slice = rank_slice(p.P);
  const int32_t comm = comm_ctas_in_slice(p.comm_ctas_per_rank, slice.size);
  if (slice.member < comm) return {slice.rank, kCommPhases};
  return {slice.rank, comm > 0 ? kGemmPhases : kAllPhases};
}

// CTAs that take GEMM tickets from a GEMM CTA's (rank, role) counter: the slice less its
// data-movement CTAs (the forward's and the backward's roles split the slice alike).
DETMOE_DEVICE int32_t gemm_role_ctas(const LayerParams& p) {
  const RankSlice slice = rank_slice(p.P);
  return slice.size - comm_ctas_in_slice(p.comm_ctas_per_rank, slice.size);
}

struct Task {
  Phase phase;
  int32_t index;  // within the phase
  uint64_t id;    // make_task_id
};

// The task list of one rank restricted to a phase set, sized from the plan (read after the
// plan's last grid barrier). A phase outside the set counts 0 tasks, so the list holds the kept
// phases in the same order, with the same task indices and ids as the full list.
class TaskList {
 public:
  DETMOE_DEVICE TaskList(const LayerParams& p, int32_t rank, uint32_t phases)
      : p_(p), rank_(rank), phases_(phases) {
    const int32_t e0 = rank * p.experts_per_rank;
    mblock_first_ = __ldcg(p.ws.mblock_offset + e0);
    mblocks_ = __ldcg(p.ws.mblock_offset + e0 + p.experts_per_rank) - mblock_first_;
  }

  DETMOE_DEVICE int32_t total() const {
    int32_t n = 0;
    for (int i = 0; i < kListPhases; ++i) n += count(i);
    return n;
  }
  DETMOE_DEVICE int32_t mblock_first() const { return mblock_first_; }

  // Task number i of the list (0 ≤ i < total()).
  DETMOE_DEVICE Task at(int32_t i) const {
    int32_t ph = 0;
    while (ph < kListPhases - 1 && i >= count(ph)) i -= count(ph++);
    static constexpr TaskKind kKinds[kListPhases] = {TaskKind::kPlaceDispatch, TaskKind::kGemm1,
                                                     TaskKind::kSharedGemm1,   TaskKind::kGemm2,
                                                     TaskKind::kSharedGemm2,   TaskKind::kWeightedSum};
    return {static_cast<Phase>(ph), i, make_task_id(kKinds[ph], rank_, static_cast<uint32_t>(i))};
  }

 private:
  // Tasks of phase ph in this list, 0 outside its phase set. Computed when asked (as is total())
  // from the kernel parameters and the rank's m-block count rather than kept in an array or a
  // total: the consumer loop keeps this state live across the GEMM mainloop, where registers are
  // short (with the phase set, a count array plus total spilled 8 bytes, ptxas -v, nvcc 13.0).
  DETMOE_DEVICE int32_t count(int ph) const {
    if (((phases_ >> ph) & 1u) == 0) return 0;
    const int32_t shared_tiles = p_.Fs > 0 ? p_.token_mblocks : 0;
    switch (static_cast<Phase>(ph)) {
      case Phase::kDispatch: return p_.chunks_per_rank;
      case Phase::kGemm1: return mblocks_ * div_up(p_.F, kGemm1Cols);
      case Phase::kSharedGemm1: return shared_tiles * div_up(p_.Fs, kGemm1Cols);
      case Phase::kGemm2: return mblocks_ * div_up(p_.H, kGemm2Cols);
      case Phase::kSharedGemm2: return shared_tiles * div_up(p_.H, kGemm2Cols);
      default: return p_.sum_chunks;
    }
  }

  const LayerParams& p_;
  int32_t rank_;
  uint32_t phases_;
  int32_t mblock_first_ = 0;
  int32_t mblocks_ = 0;
};

// Maps the rank's m-blocks to experts by walking the m-block offsets from the last answer, back
// or forward: a CTA's tasks only move forward in the list, about one slice's worth of tasks
// (a few experts: routed tasks are numbered expert by expert, describe_gemm_task) per step, and a
// phase restarts at the rank's first m-block; each step is a few loads, and a longer jump back
// falls to a binary search. Any answer path gives the same expert.
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
