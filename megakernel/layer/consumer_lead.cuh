// The consumer lead of the fused kernels (LayerParams::consumer_lead; the GEMM core's is
// gemm/kernel.cuh's): at the CTA's first GEMM tile, consumer warpgroup 1 waits until warpgroup 0
// has issued that tile's first `lead` k-blocks. From then on warpgroup 0 reaches each epilogue
// first; warpgroup 1's mainloop tail runs alone on the tensor cores while 0 stores, and 0's next
// mainloop runs while 1 stores — at most the ring's three stages ahead, since a stage is freed
// only once both warpgroups have read it. Timing only: each warpgroup issues the same wgmmas on
// the same stages. The lead is set once per launch: a later set could let warpgroup 0 arrive twice
// on the barrier before warpgroup 1 synced once, which would complete it without 1. Tasks that
// synchronise all 256 consumer threads (copy tasks) end it; the GEMM tiles come after them in a
// CTA's list (by level), so it spans all of a launch's tiles.
#pragma once

#include <cstdint>

#include "megakernel/ptx/common.cuh"

namespace detmoe::mk {

inline constexpr uint32_t kLeadBarrier = 4;  // 1, 2: the warpgroups' slab stores; 3: copy tasks
inline constexpr int32_t kMaxLayerConsumerLead = 3;  // the fused kernels' stages

class ConsumerLead {
 public:
  DETMOE_DEVICE ConsumerLead(int32_t lead, int wg) : lead_(lead), wg_(wg), armed_(lead > 0) {}

  // Before a GEMM tile's mainloop, every thread of both consumer warpgroups: warpgroup 1 waits
  // for the signal; warpgroup 0 gets the k-block after whose issue it signals (−1: no signal in
  // this tile; a tile with no k-block signals here).
  DETMOE_DEVICE int32_t begin_tile(int32_t k_blocks) {
    if (!armed_) return -1;
    armed_ = false;
    if (wg_ != 0) {
      ptx::named_barrier_sync(kLeadBarrier, 256);
      return -1;
    }
    const int32_t signal_kb = min(lead_, k_blocks) - 1;
    if (signal_kb < 0) ptx::named_barrier_arrive(kLeadBarrier, 256);
    return signal_kb;
  }

  // The mainloop's after-stage hook for begin_tile's answer.
  static DETMOE_DEVICE void after_stage(int32_t kb, int32_t signal_kb) {
    if (kb == signal_kb) ptx::named_barrier_arrive(kLeadBarrier, 256);
  }

 private:
  int32_t lead_;
  int wg_;
  bool armed_;
};

}  // namespace detmoe::mk
