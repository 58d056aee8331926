// Memory-ordering PTX of the fused kernel's cross-CTA protocol (megakernel/layer/sync.cuh says
// how it is used): GPU-scope acquire/relaxed loads, the release CAS and add that signal
// counters, the acq_rel and proxy fences, and the global nanosecond timer the bounded waits use.
#pragma once

#include "megakernel/ptx/common.cuh"

namespace detmoe::ptx {

DETMOE_DEVICE unsigned long long ld_acquire_u64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

DETMOE_DEVICE unsigned long long ld_relaxed_u64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

DETMOE_DEVICE unsigned int ld_relaxed_u32(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

DETMOE_DEVICE unsigned long long atom_cas_release_u64(unsigned long long* p, unsigned long long expected,
                                                      unsigned long long desired) {
  unsigned long long old;
  asm volatile("atom.release.gpu.global.cas.b64 %0, [%1], %2, %3;"
               : "=l"(old)
               : "l"(p), "l"(expected), "l"(desired)
               : "memory");
  return old;
}

DETMOE_DEVICE unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Orders generic-proxy accesses against later async-proxy (TMA) accesses to global memory.
DETMOE_DEVICE void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }

// Makes this thread's earlier writes visible at GPU scope before its later ones (and, through a
// CTA barrier, before another thread's release signal). acq_rel, not __threadfence()'s
// fence.sc: the signalling patterns here need release cumulativity only. (The SC fence,
// MEMBAR.SC.GPU, showed in ncu's stall samples of the GEMM2 signal; replacing it changed no
// measured time on the H200.)
DETMOE_DEVICE void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

DETMOE_DEVICE void red_add_release_u64(unsigned long long* p, unsigned long long n) {
  asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(n) : "memory");
}

}  // namespace detmoe::ptx
