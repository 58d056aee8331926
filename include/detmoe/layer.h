// detmoe::Layer: the MoE layer run by the fused megakernel (sm_90a), one persistent cooperative
// launch per forward and one per backward: routing plan, dispatch, GEMM1 + SwiGLU, GEMM2, combine, weighted sum
// (+ shared expert). docs/MEGAKERNEL.md describes the task graph; DESIGN.md §2–3 the contract.
//
// Ranks: this process drives every rank of the expert-parallel group on one GPU (loopback: P
// virtual ranks are slices of the one cooperative grid, peers reached as base + rank·stride).
// The NCCL symmetric-memory backend (one GPU per rank) is the next step and runs the same
// device code with P = 1 slice per GPU; see docs/MEGAKERNEL.md "Multi-GPU".
//
// Asynchrony: forward() validates on the host, enqueues ONE kernel on `stream` and returns; it
// never synchronises, so it can be captured in a CUDA graph and replayed. Faults the device
// discovers (an invalid expert id, a receive capacity below what the routing needs, a spin-wait
// timeout) are recorded on the device and reported by the next synchronize(): the first such
// fault since the previous synchronize() is returned as its Status (kInvalidArgument,
// kCapacityExceeded, kDeviceTimeout, naming the task, rank, counter and values).
//
// Bits (DESIGN.md §3): identical for any LayerConfig::num_sms / comm_sms / overlap_rows (D1)
// and any P (D2). Every output tile has one owner that reduces its full K range in one order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "detmoe/config.h"
#include "detmoe/device_tensors.h"
#include "detmoe/plan.h"
#include "detmoe/problem.h"
#include "detmoe/status.h"

namespace detmoe {

// Loopback virtual ranks one launch can hold (each rank's weight maps are kernel parameters).
inline constexpr int kMegakernelMaxLoopbackRanks = 8;

// Test hooks. Never set in production; they change no bits when left at their defaults.
struct LayerTestHooks {
  // A task id as in DeviceErrorRecord (docs/MEGAKERNEL.md "Task ids"): that task's dependency
  // wait is given an unreachable target and half the spin timeout (so it expires before the
  // waits downstream of it), so the launch must end with kDeviceTimeout naming it.
  // -1 = none.
  int64_t force_timeout_task = -1;
};

struct LayerOptions {
  int device = 0;  // the CUDA device every loopback rank lives on
  LayerTestHooks hooks;
  // Task timeline for profiling: when > 0, every CTA records the %globaltimer start and end of
  // up to this many of its tasks (and of its plan) per launch; Layer::downloaded_trace() reads
  // the last launch's. Changes no bits; costs two timer reads per task.
  int32_t trace_tasks_per_cta = 0;
};

// One task of the last launch's timeline (Layer::downloaded_trace).
struct LayerTaskTrace {
  int32_t cta;
  uint64_t task;     // task id (docs/MEGAKERNEL.md "Task ids"); kind 1 = the plan
  int64_t start_ns;  // %globaltimer
  int64_t end_ns;
  // GEMM tasks: when the mainloop ended and when the epilogue started after the previous tile's
  // signal was sent (end_ns − epilogue_start_ns is the epilogue); 0 otherwise.
  int64_t mainloop_end_ns = 0;
  int64_t epilogue_start_ns = 0;
  // The plan's record: the CTA's SM cycles from the launch's start to its last task (the SM
  // clock is cycles over that time); 0 otherwise.
  int64_t sm_cycles = 0;
  // GEMM tasks: the wgmma form (megakernel TileShape: 0 full, 1 split columns, 2 narrow, 3 half
  // rows).
  int32_t tile_shape = 0;
  // SM cycles (clock64) from the task's start to its end, so each phase's own SM clock can be
  // told (under a power cap the clock moves between phases); 0 = not recorded.
  int64_t task_cycles = 0;
  // The backward start's record: the long-K tiles the CTA's wave gate checked against their
  // wave's tickets, waiting or not (megakernel/layer/wave_gate.cuh), so a test can tell that it
  // engaged; 0 otherwise.
  // Last, as tests build these records by position.
  int32_t gated_tiles = 0;
};

// Forward arguments: one entry per rank (P entries in loopback), as for the reference layer.
struct LayerForwardArgs {
  std::span<const DeviceLayerInputs> inputs;
  std::span<const DeviceLayerOutputs> outputs;
};

// Backward arguments. The layer keeps from the last forward, in its workspace: the plan, the
// dispatched x rows (the dW_gate_up operand), h = [g | u] (LayerConfig::save_h), a (the dW_down
// operand) and y (for d_topk_w) — in the caller's y when the forward was given one, which must
// then still hold it. docs/MEGAKERNEL.md "Backward".
struct LayerBackwardArgs {
  std::span<const DeviceLayerInputs> inputs;    // the forward's inputs, unchanged
  std::span<const DeviceGradInputs> grads;      // dout per rank
  std::span<const DeviceGradOutputs> outputs;   // d_x, d_topk_w, weight gradients per rank
};

class Layer {
 public:
  // Validates shape and config, allocates the workspace for the worst case (or
  // LayerConfig::recv_capacity_rows), checks the device is sm_90 and the grid fits.
  static StatusOr<std::unique_ptr<Layer>> create(const Shape& shape, const LayerConfig& config,
                                                 const LayerOptions& options = {});
  ~Layer();
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const Shape& shape() const;
  const LayerConfig& config() const;
  int grid_ctas() const;  // CTAs of the persistent grid (LayerConfig::num_sms or the SM count)

  // One launch; asynchronous on `stream`. Host-side argument errors are returned here; device
  // faults by the next synchronize().
  Status forward(const LayerForwardArgs& args, cudaStream_t stream);
  // One launch: the backward of the last forward (same inputs, checked by pointer), asynchronous
  // like forward(). Needs LayerConfig::save_h (else kNotImplemented: recomputing h is not built);
  // refused before any forward, and after synchronize() reported a fault until a forward runs again.
  // The first backward allocates the backward's buffers (LayerSizes::backward_bytes), so it cannot
  // be captured in a CUDA graph; later ones can.
  Status backward(const LayerBackwardArgs& args, cudaStream_t stream);

  // Waits for `stream`, then reports (and clears) the first device fault since the last call.
  Status synchronize(cudaStream_t stream);

  // The plan of the last forward, downloaded (for tests: it must equal build_routing_plan).
  // Filled: rows, expert_count, expert_offset, rank_row_begin, row_token, row_slot, slot_row;
  // the send/receive pair tables are not kept by the megakernel and stay empty.
  StatusOr<RoutingPlan> downloaded_plan() const;

  // The last launch's task timeline (LayerOptions::trace_tasks_per_cta > 0, else empty), in
  // CTA order and each CTA's task order. Synchronises the device.
  StatusOr<std::vector<LayerTaskTrace>> downloaded_trace() const;

  struct Impl;

 private:
  explicit Layer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace detmoe
