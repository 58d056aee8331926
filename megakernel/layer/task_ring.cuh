// Dynamic task assignment inside a rank's slice: the CTAs of a (rank, role) take the next task
// number of their list from one global ticket counter (atomicAdd), so tasks start in list order
// whatever each task took to run. A static deal (task j to CTA j mod members) let CTAs drift
// apart when tiles differ in length, and the CTAs sharing an expert's weight panel — consecutive
// tasks — then read it from HBM at different times (ncu, docs/perf-journal/megakernel-forward.md step 5). With tickets
// the tasks running at once are always a window of consecutive tasks.
//
// Who runs a task still changes only speed: a task's result depends on its number alone. The
// no-deadlock argument of the static deal (cta_role in task_list.cuh) holds unchanged: every
// task has one owner, each CTA runs its tasks in increasing number (so by level), and a task
// waits only on tasks of lower levels, which have lower numbers and were taken earlier by CTAs
// that run them without waiting on anything higher.
//
// Inside the CTA the producer thread takes the tickets and hands each task number to the two
// consumer warpgroups through the ring of megakernel/gemm/task_ring.cuh. The producer pushes a task
// number only once the previous GEMM task's loads are issued, so it runs at most kTaskRing tasks
// ahead. (The backward's producer takes that ticket earlier, before the previous task's loads,
// so the atomic's round trip overlaps them: backward 1 % faster on deepseek-v3; the same in the
// forward slowed qwen3-30b-a3b by 2.5 %, docs/PERF.md session 22.)
// With descriptions the consumers release a slot when their task is done (epilogue included),
// so the producer pushes task i + 2 only after task i is finished — it could not load i + 2 earlier anyway: the
// stages free up only as the consumers run i + 1.
//
// In the forward a slot also carries the task's description (Payload = GemmTask), which the
// producer computes anyway to load the tile. The consumers used to describe the task again after
// popping it — integer divisions and dependent L2 loads of the plan's offsets between two
// mainloops, ≈ 3 % of their warp samples on deepseek-v3 (ncu source counters, docs/PERF.md
// session 16) — and now read it from the slot, which they release when the task is done. The
// backward's ring carries numbers only (NoDescription; backward_kernel.cuh says why).
#pragma once

#include <cstdint>

#include "megakernel/gemm/task_ring.cuh"
#include "megakernel/layer/layer_params.h"

namespace detmoe::mk {

using gemm::kTaskRing;
using gemm::kTaskRingConsumerThreads;
using gemm::NoDescription;
using gemm::take_ticket;
using gemm::TaskRing;
using gemm::TaskRingStorage;

// The ticket counter of (rank, role): tasks of the rank's list taken so far in this launch.
// Reset to 0 by the plan (run_plan) before its first grid barrier.
DETMOE_DEVICE unsigned int* ticket_counter(const LayerParams& p, int32_t rank, bool comm_role) {
  return p.ws.tickets + 2 * rank + (comm_role ? 1 : 0);
}

}  // namespace detmoe::mk
