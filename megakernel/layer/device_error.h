// The device error record of the fused layer kernel and the ids it names tasks and counters by.
// Plain data shared by device code (megakernel/layer/*.cuh) and the host decoder
// (megakernel/host/layer_errors.cpp), which turns a record into a detmoe::Status.
//
// One record per Layer. The first fault of any launch wins (a CAS from `state` = 0) and stays
// until Layer::synchronize() reads and clears it; a later launch still runs normally, because
// CTAs abort only on a record whose epoch is their own launch's.
#pragma once

#include <cstdint>

namespace detmoe::mk {

enum class FaultCode : uint32_t {
  kNone = 0,
  kTimeout = 1,           // a spin-wait ran past LayerConfig::spin_timeout_ms
  kInvalidExpert = 2,     // topk_idx[token, slot] outside [0, E)
  kRepeatedExpert = 3,    // topk_idx[token, slot] equals an earlier slot of the same token
  kNonFiniteWeight = 4,   // topk_w[token, slot] is NaN or infinite
  kCapacityExceeded = 5,  // a rank would receive more rows than its receive buffer holds
};

// What a task is. A task id packs kind, rank and index: (kind << 40) | (rank << 32) | index.
enum class TaskKind : uint32_t {
  kPlan = 1,            // index: plan phase (0 validate+count, 1 scan, 2 offsets)
  kPlaceDispatch = 2,   // index: the rank's token chunk
  kGemm1 = 3,           // index: tile of the rank's GEMM1 phase
  kSharedGemm1 = 4,
  kGemm2 = 5,
  kSharedGemm2 = 6,
  kWeightedSum = 7,     // index: the rank's token chunk of the sum
  // The backward launch (backward_tasks.cuh); index: the task's number within its phase.
  kBackwardStart = 8,       // the launch's counter stamp and grid barrier
  kDyDispatch = 9,          // index: the rank's token chunk (dy rows + d_topk_w)
  kSharedDgrad1 = 10,       // shared da = dout·Ws_down + dSwiGLU → dhs
  kDgrad1 = 11,             // da = dy·W_down + dSwiGLU → dh
  kSharedDgrad2 = 12,       // shared dx = dhs·Ws_gate_up
  kDgrad2 = 13,             // dx = dh·W_gate_up, rows pushed to the source rank's dx slots
  kDxSum = 14,              // index: the rank's token chunk of d_x
  kWgradDown = 15,          // dW_down tile
  kSharedWgradDown = 16,    // dWs_down tile
  kWgradGateUp = 17,        // dW_gate_up tile
  kSharedWgradGateUp = 18,  // dWs_gate_up tile
};

// Which counter a wait was on.
enum class CounterKind : uint32_t {
  kGridBarrier = 1,    // index: barrier number of the plan
  kDispatchReady = 2,  // index: m-block of the waiting rank (rows landed)
  kGemm1Done = 3,      // index: m-block (GEMM1 tiles × 2 warpgroups finished)
  kShared1Done = 4,    // index: token m-block of the shared expert's GEMM1
  kShared2Done = 5,    // index: token m-block of the shared expert's GEMM2
  kSlotsReady = 6,     // index: token chunk of the weighted sum (y rows landed in their slots)
  // The backward launch's (the same words as the forward's, stamped anew each launch):
  kDyReady = 7,           // index: m-block of the waiting rank (dy rows landed)
  kDgrad1Done = 8,        // index: m-block (da/dSwiGLU tiles × 2 warpgroups finished)
  kSharedDgrad1Done = 9,  // index: token m-block
  kSharedDgrad2Done = 10, // index: token m-block
  kDxReady = 11,          // index: token chunk of the d_x sum (dx rows landed in their slots)
};

inline constexpr uint64_t make_task_id(TaskKind kind, uint32_t rank, uint32_t index) {
  return (static_cast<uint64_t>(kind) << 40) | (static_cast<uint64_t>(rank & 0xffu) << 32) | index;
}
// The record every CTA writes first in a launch (the forward's plan, the backward's start): its
// aux word is the CTA's SM cycles over the launch (trace.cuh TaskTracer::finish).
inline constexpr bool starts_launch(TaskKind kind) { return kind == TaskKind::kPlan || kind == TaskKind::kBackwardStart; }
inline constexpr TaskKind task_kind(uint64_t id) { return static_cast<TaskKind>(id >> 40); }
inline constexpr uint32_t task_rank(uint64_t id) { return static_cast<uint32_t>(id >> 32) & 0xffu; }
inline constexpr uint32_t task_index(uint64_t id) { return static_cast<uint32_t>(id); }

struct DeviceErrorRecord {
  unsigned long long state;  // (epoch << 32) | FaultCode; 0 = no fault recorded
  unsigned long long task;   // task id of the faulting task (make_task_id)
  uint32_t counter_kind;     // CounterKind of a timeout
  uint32_t rank;             // the rank whose counter (timeout) or receive buffer (capacity)
  long long counter_index;   // timeout: counter index; bad input: global token id
  long long expected;        // timeout: target count; capacity: capacity rows; bad input: slot
  long long seen;            // timeout: count seen (−1: a stale epoch); capacity: rows needed;
                             // bad input: the id (or the weight's bits)
  uint32_t block;            // CTA that recorded it (for debugging)
  uint32_t thread;
};

}  // namespace detmoe::mk
