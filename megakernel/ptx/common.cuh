// Shared-memory addressing and thread-role helpers used by every PTX wrapper.
#pragma once

#include <cstdint>

#define DETMOE_DEVICE __device__ __forceinline__

namespace detmoe::ptx {

// 32-bit shared-window address of a generic pointer into shared memory: what every
// shared::cta operand of mbarrier / TMA / wgmma / stmatrix takes.
DETMOE_DEVICE uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

DETMOE_DEVICE uint32_t lane_id() { return threadIdx.x & 31u; }

// Bits of the lanes below this one: with a match mask, a lane's rank among its peers.
DETMOE_DEVICE uint32_t lanemask_lt() {
  uint32_t m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}

// The warp index as a uniform value (the compiler cannot prove threadIdx.x / 32 is uniform).
DETMOE_DEVICE uint32_t warp_id_uniform() { return __shfl_sync(0xffffffffu, threadIdx.x / 32u, 0); }

// Named barrier over `threads` threads (a multiple of 32). Id 0 is __syncthreads.
// bar.sync is .aligned: every thread of a warp must execute the same instance, so the warp
// reconverges first (the copy tasks reach it after one lane's single-thread wait). Reconverging
// alone did not silence racecheck's report of the shared go/no-go flag those tasks used (H200,
// 2026-12-03); named_barrier_and below replaced the flag.
DETMOE_DEVICE void named_barrier_sync(uint32_t id, uint32_t threads) {
  __syncwarp();
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// The producing half of a named barrier: counts this warp's threads toward `threads` and goes
// on without waiting; the barrier completes when the threads that bar.sync it have arrived too.
DETMOE_DEVICE void named_barrier_arrive(uint32_t id, uint32_t threads) {
  __syncwarp();
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Named barrier that also ANDs a predicate over its `threads` threads: every thread gets the
// result, so one thread's decision reaches the others without a shared-memory flag (racecheck
// reported such a flag, written before bar.sync and read after it, as a RAW hazard).
DETMOE_DEVICE bool named_barrier_and(uint32_t id, uint32_t threads, bool pred) {
  __syncwarp();
  uint32_t all;
  asm volatile(
      "{\n"
      ".reg .pred in, out;\n"
      "setp.ne.u32 in, %1, 0;\n"
      "bar.red.and.pred out, %2, %3, in;\n"
      "selp.u32 %0, 1, 0, out;\n"
      "}\n"
      : "=r"(all)
      : "r"(pred ? 1u : 0u), "r"(id), "r"(threads)
      : "memory");
  return all != 0;
}

// Register rebalancing between warpgroups (sm_90a). Needs a register cap at kernel entry
// (__launch_bounds__(threads, 1)), otherwise ptxas ignores it (warning C7508).
template <uint32_t kRegs>
DETMOE_DEVICE void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <uint32_t kRegs>
DETMOE_DEVICE void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

}  // namespace detmoe::ptx
