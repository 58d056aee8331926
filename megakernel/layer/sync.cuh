// Cross-CTA synchronisation of the fused kernel: epoch-tagged dependency counters, bounded
// spin-waits, the plan's grid barriers, and the fault record.
//
// Counters are 64-bit: (epoch << 32) | count. A signal adds to the count if the counter already
// carries this launch's epoch, else it starts the count afresh (a CAS loop), so nothing is reset
// between launches and a CUDA graph can replay the kernel as is. A waiter is satisfied only by
// its own epoch with count ≥ target, so a stale value from an earlier launch never passes.
//
// Memory ordering (docs/MEGAKERNEL.md "Dependency protocol"):
//   writer: plain stores → fence.acq_rel.gpu → CTA barrier → one thread's signal (red.release.gpu.add
//           on a counter the plan stamped with the epoch; the plan's own barrier words start
//           with atom.cas.release.gpu)
//           TMA stores   → cp.async.bulk.wait_group 0 → fence.proxy.async.global → signal
//   reader: one thread spins with ld.acquire.gpu → fence.proxy.async.global if TMA reads next →
//           CTA (named) barrier → the others read (ld.global.cg: L2, never a stale L1 line)
// Every wait is bounded by LayerConfig::spin_timeout_ms measured on %globaltimer; on expiry it
// records the task, counter, target and the value seen, and every CTA of the launch aborts.
#pragma once

#include <cstdint>

#include "megakernel/layer/device_error.h"
#include "megakernel/layer/layer_params.h"
#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/memory_order.cuh"

namespace detmoe::mk {

using ptx::atom_cas_release_u64;
using ptx::fence_acq_rel_gpu;
using ptx::fence_proxy_async_global;
using ptx::globaltimer_ns;
using ptx::ld_acquire_u64;
using ptx::ld_relaxed_u32;
using ptx::ld_relaxed_u64;
using ptx::red_add_release_u64;

// What every waiting thread needs to know about its launch.
struct LaunchContext {
  uint32_t epoch;
  DeviceErrorRecord* error;
  long long timeout_ns;
  unsigned long long force_timeout_task;
};

// True once any CTA recorded a fault in this launch.
DETMOE_DEVICE bool launch_aborted(const LaunchContext& ctx) {
  const unsigned long long s = ld_relaxed_u64(&ctx.error->state);
  return (s & 0xffffffffull) != 0 && (s >> 32) == ctx.epoch;
}

// Records a fault if none is recorded yet (first fault of any launch wins until the host clears
// it). The fields are read by the host after the launch, so plain stores suffice.
DETMOE_DEVICE void record_fault(const LaunchContext& ctx, FaultCode code, unsigned long long task, CounterKind counter,
                                uint32_t rank, long long index, long long expected, long long seen) {
  const unsigned long long state = (static_cast<unsigned long long>(ctx.epoch) << 32) | static_cast<uint32_t>(code);
  if (atomicCAS(&ctx.error->state, 0ull, state) != 0ull) return;
  DeviceErrorRecord* r = ctx.error;
  r->task = task;
  r->counter_kind = static_cast<uint32_t>(counter);
  r->rank = rank;
  r->counter_index = index;
  r->expected = expected;
  r->seen = seen;
  r->block = blockIdx.x;
  r->thread = threadIdx.x;
  __threadfence();
}

// Adds n to an epoch-tagged counter with release semantics. Once the counter carries this
// launch's epoch (which cannot change before the launch ends) a plain atomic add of n touches
// only the count; only the first signal of a launch needs a CAS, and a losing CAS falls through
// to the add. A CAS loop for every signal took O(contenders) round trips per signal: the plan's
// grid barriers (132 CTAs on one word) cost ≈ 250 µs on the H200 that way.
DETMOE_DEVICE void signal_add(unsigned long long* counter, uint32_t epoch, uint32_t n) {
  unsigned long long old = ld_relaxed_u64(counter);
  while ((old >> 32) != epoch) {
    const unsigned long long seen = atom_cas_release_u64(counter, old, (static_cast<unsigned long long>(epoch) << 32) | n);
    if (seen == old) return;
    old = seen;
  }
  red_add_release_u64(counter, n);
}

// Adds n to a dependency counter that already carries this launch's epoch: run_plan stamps
// every rank's counters with (epoch << 32) | 0 before its first grid barrier, so a task's
// signal is one fire-and-forget red.release and no L2 round trip. Reading the counter first
// (signal_add) held the consumers ≈ 0.4 µs longer per GEMM1 tile and ≈ 0.9 µs per GEMM2 tile
// between mainloop and epilogue on the H200 (docs/perf-journal/megakernel-forward.md step 7).
DETMOE_DEVICE void signal_stamped(unsigned long long* counter, uint32_t n) { red_add_release_u64(counter, n); }

// Where a wait is, for the fault record.
struct WaitSite {
  unsigned long long task;
  CounterKind counter;
  uint32_t rank;
  int32_t index;
};

// One thread spins until the counter carries this epoch and count ≥ target. False on timeout
// (recorded) or when another CTA aborted the launch. The test hook makes `site.task`'s target
// unreachable and gives it half the timeout, so it expires before the waits downstream of it
// (which started earlier and would otherwise be reported first: seen on the H200).
// kFromLastProgress: the timeout counts from the last time the counter moved, for a wait that
// spans whole phases from the launch's start (the backward's d_x sums): it still reports a stall,
// not a long phase.
template <bool kFromLastProgress = false>
DETMOE_DEVICE bool wait_counter(const LaunchContext& ctx, const unsigned long long* counter, uint32_t target,
                                const WaitSite& site) {
  const bool forced = site.task == ctx.force_timeout_task;
  const unsigned long long goal = forced ? (uint64_t{1} << 31) + target : target;
  const long long timeout_ns = forced ? ctx.timeout_ns / 2 : ctx.timeout_ns;
  unsigned long long start = globaltimer_ns();
  unsigned long long seen_last = 0;
  for (uint32_t spin = 1;; ++spin) {
    const unsigned long long v = ld_acquire_u64(counter);
    if ((v >> 32) == ctx.epoch && (v & 0xffffffffull) >= goal) return true;
    if constexpr (kFromLastProgress) {
      if (v != seen_last) {
        seen_last = v;
        start = globaltimer_ns();
      }
    }
    if ((spin & 31u) == 0) {
      if (launch_aborted(ctx)) return false;
      if (static_cast<long long>(globaltimer_ns() - start) > timeout_ns) {
        const long long seen = (v >> 32) == ctx.epoch ? static_cast<long long>(v & 0xffffffffull) : -1;
        record_fault(ctx, FaultCode::kTimeout, site.task, site.counter, site.rank, site.index,
                     static_cast<long long>(goal), seen);
        return false;
      }
      __nanosleep(64);
    }
  }
}

// One thread waits until counters[c] reaches target_of(c) for every c in [0, count) (site_of(c)
// names each for the fault record). A weight-gradient tile waits on every m-block of its expert
// (16 on deepseek-v3), nearly always long satisfied: one acquire load per counter, each an L2
// round trip with an L1 invalidation (LDG.STRONG + CCTL.IVALL), put ≈ 5,500 dependent round trips
// per CTA in front of the backward's tile loads (ncu, docs/PERF.md session 22). Here the counters
// are read kBatch at a time with relaxed loads issued together (one round trip per batch), a
// counter not yet reached falls back to wait_counter's bounded acquire spin, and one acq_rel
// fence after the last batch makes the relaxed reads that saw the signallers' release adds
// acquire them (PTX fence-based synchronisation). A site with the forced-timeout test hook always
// takes wait_counter's path, so the hook still fires.
template <class TargetOf, class SiteOf>
DETMOE_DEVICE bool wait_counters(const LaunchContext& ctx, const unsigned long long* counters, int32_t count,
                                 TargetOf&& target_of, SiteOf&& site_of) {
  constexpr int kBatch = 8;
  for (int32_t c0 = 0; c0 < count; c0 += kBatch) {
    unsigned long long v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) v[j] = c0 + j < count ? ld_relaxed_u64(counters + c0 + j) : 0ull;
    uint32_t pending = 0;  // bit j: counter c0 + j still to wait for (a mask: v stays in registers)
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const bool reached = (v[j] >> 32) == ctx.epoch && (v[j] & 0xffffffffull) >= target_of(c0 + j);
      if (c0 + j < count && (!reached || site_of(c0 + j).task == ctx.force_timeout_task)) pending |= 1u << j;
    }
    while (pending != 0) {
      const int32_t c = c0 + __ffs(pending) - 1;
      pending &= pending - 1;
      if (!wait_counter(ctx, counters + c, target_of(c), site_of(c))) return false;
    }
  }
  fence_acq_rel_gpu();
  return true;
}

// Grid-wide barrier of the plan, for every thread of every CTA (all CTAs are co-resident: the
// launch is cooperative). Returns false (uniformly per CTA) when the launch was aborted.
DETMOE_DEVICE bool grid_barrier(const LaunchContext& ctx, unsigned long long* barrier, int32_t number, int* flag) {
  __syncthreads();
  if (threadIdx.x == 0) {
    fence_acq_rel_gpu();
    signal_add(barrier, ctx.epoch, 1);
    const WaitSite site{make_task_id(TaskKind::kPlan, 0, static_cast<uint32_t>(number)), CounterKind::kGridBarrier, 0,
                        number};
    const bool ok = wait_counter(ctx, barrier, gridDim.x, site) && !launch_aborted(ctx);
    *flag = ok ? 1 : 0;
  }
  __syncthreads();
  return *flag != 0;
}

// A launch's first step, every thread of every CTA, before a grid barrier: the task tickets at 0
// and every dependency counter of every rank at (epoch << 32) | 0, so tasks signal with a plain
// red.add (signal_stamped). Nobody signals or waits on them before the barrier, which orders these
// stores before both. The stamp also clears any count an aborted earlier launch left, and a
// waiter still checks the epoch.
DETMOE_DEVICE void stamp_counters(const LayerParams& p, uint32_t epoch) {
  if (blockIdx.x == 0 && threadIdx.x < 3 * p.P) p.ws.tickets[threadIdx.x] = 0;
  const int64_t words = static_cast<int64_t>(p.P) * p.counters.per_rank;
  const unsigned long long stamp = static_cast<unsigned long long>(epoch) << 32;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p.ws.counters[i] = stamp;
}

// The last CTA to finish advances the epoch (every CTA read it at its start) and clears the
// plan's bad-input key for the next launch.
DETMOE_DEVICE void finish_launch(const LayerParams& p, uint32_t epoch) {
  __threadfence();
  const unsigned int finished = atomicAdd(p.ws.launch_state + 1, 1u);
  if (finished + 1 == gridDim.x) {
    p.ws.launch_state[1] = 0;
    *p.ws.bad_key = ~0ull;
    __threadfence();
    atomicExch(p.ws.launch_state + 0, epoch + 1);
  }
}

}  // namespace detmoe::mk
