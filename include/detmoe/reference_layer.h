// The reference MoE layer on the GPU: unfused, simple, trusted — cuBLAS GEMMs per expert, small
// CUDA glue kernels, rows moved by a RowExchange (loopback or NCCL). DESIGN.md §2 exactly: the
// rounding points of the contract, slot-order sums, rows of each expert in global token order.
// Every fast kernel is compared against it; every benchmark shows it as the unfused baseline.
//
// Bits: every run gives the same bits (D0). y, out, d_x, d_topk_w and the routed experts' weight
// gradients are bitwise the same for every EP size P (D2): expert e's GEMMs see the same rows in
// the same order whatever P is, and the shared expert runs in fixed 1024-row chunks. The
// shared-expert weight gradients cover a rank's own tokens, so their sum over ranks is not.
//
// Host synchronisation: plan() waits once, for the per-expert row counts cuBLAS needs as host
// integers; forward_planned() and backward() never wait and can be captured in a CUDA graph.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "detmoe/config.h"
#include "detmoe/device_tensors.h"
#include "detmoe/plan.h"
#include "detmoe/problem.h"
#include "detmoe/row_exchange.h"
#include "detmoe/status.h"

namespace detmoe {

enum class ReferenceGemm {
  kPerExpert,       // one cublasGemmEx per expert and GEMM (default: see docs/PERF.md)
  kGroupedBatched,  // one cublasGemmGroupedBatchedEx per bf16-output GEMM kind, one group per expert
};
const char* to_string(ReferenceGemm g);

struct ReferenceOptions {
  ReferenceGemm gemm = ReferenceGemm::kPerExpert;
  // Fixed cuBLAS workspace per rank (cublasSetWorkspace): the algorithm and its reduction order
  // then never depend on what memory happens to be free.
  int64_t cublas_workspace_bytes = int64_t{32} << 20;
};

class ReferenceLayer {
 public:
  // Allocates every buffer for the worst case (or LayerConfig::recv_capacity_rows), so no step
  // allocates. `exchange` decides the ranks this process drives and their devices and streams.
  static StatusOr<std::unique_ptr<ReferenceLayer>> create(const Shape& shape, const LayerConfig& config,
                                                          std::shared_ptr<RowExchange> exchange,
                                                          const ReferenceOptions& options = {});
  ~ReferenceLayer();
  ReferenceLayer(const ReferenceLayer&) = delete;
  ReferenceLayer& operator=(const ReferenceLayer&) = delete;

  const Shape& shape() const;
  const LayerConfig& config() const;
  RowExchange& exchange() const;

  // The spans below hold one entry per local slot of the exchange (loopback: P).
  // Gathers every rank's routing, validates it on the device, builds the plan with counting sorts
  // and brings the row counts to the host (the one host synchronisation of a step).
  Status plan(std::span<const DeviceLayerInputs> inputs);
  // Forward with the current plan. Asynchronous on the exchange's streams.
  Status forward_planned(std::span<const DeviceLayerInputs> inputs, std::span<const DeviceLayerOutputs> outputs);
  // plan() then forward_planned().
  Status forward(std::span<const DeviceLayerInputs> inputs, std::span<const DeviceLayerOutputs> outputs);
  // Backward of the last forward (same inputs). Asynchronous on the exchange's streams.
  Status backward(std::span<const DeviceLayerInputs> inputs, std::span<const DeviceGradInputs> grads,
                  std::span<const DeviceGradOutputs> outputs);
  Status synchronize();

  // The device plan of local slot `slot`, downloaded (for tests: it must equal the host plan).
  StatusOr<RoutingPlan> downloaded_plan(int slot = 0) const;

  struct Impl;

 private:
  explicit ReferenceLayer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace detmoe
