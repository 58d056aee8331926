// mbarrier wrappers: the transaction barriers TMA loads complete on, and the empty/full
// handshake between the producer warp and the consumer warpgroups.
#pragma once

#include <cstdint>

#include "megakernel/ptx/common.cuh"

namespace detmoe::ptx {

DETMOE_DEVICE void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}

// Ends an mbarrier's life (no arrival or wait may be pending): required before its shared memory
// is used for anything else.
DETMOE_DEVICE void mbarrier_inval(uint64_t* bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Makes mbarrier.init visible to the async proxy (TMA) and to the other threads; follow it
// with a CTA barrier before any thread uses the barriers.
DETMOE_DEVICE void fence_mbarrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// One arrival plus `bytes` of expected transaction (the TMA loads of one stage).
DETMOE_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}

DETMOE_DEVICE void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

DETMOE_DEVICE bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// Waits until the phase with the given parity has completed. A fresh barrier counts as having
// completed the phase of parity 1, so a producer's first lap (parity 1) passes at once.
// These waits are fed only by this CTA's own TMA loads and consumers, so they cannot stall on
// bad input; a hang here is a pipeline bug (build with DETMOE_GEMM_HANG_CHECK to trap on one).
DETMOE_DEVICE void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
#if defined(DETMOE_GEMM_HANG_CHECK)
  uint64_t spins = 0;
#endif
  while (!mbarrier_try_wait_parity(bar, parity)) {
#if defined(DETMOE_GEMM_HANG_CHECK)
    if (++spins == (uint64_t{1} << 28)) {
      printf("detmoe gemm: mbarrier wait stuck: block %d thread %d parity %u\n", blockIdx.x, threadIdx.x, parity);
      __trap();
    }
#endif
  }
}

}  // namespace detmoe::ptx
