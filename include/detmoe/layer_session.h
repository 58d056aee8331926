// One seam for every implementation of the layer on the GPU: the harness (the CLI's registry,
// and through it golden, gate, accept and fuzz) runs a LayerSession made by name, so adding an
// implementation is one row in make_layer_session (harness/layer_session.cpp).
//
// A session is one layer of one implementation for one shape, config and row exchange; it runs on
// device tensors the caller owns (DeviceProblem in the harness, torch tensors in the PyTorch op).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "detmoe/config.h"
#include "detmoe/device_tensors.h"
#include "detmoe/layer.h"
#include "detmoe/problem.h"
#include "detmoe/reference_layer.h"
#include "detmoe/row_exchange.h"
#include "detmoe/status.h"
#include "detmoe/tensor.h"

namespace detmoe {

class LayerSession {
 public:
  virtual ~LayerSession() = default;
  virtual const char* impl() const = 0;
  // False for an implementation without a backward pass (none today).
  bool has_backward() const;
  // One entry per local slot of the exchange. Asynchronous on the exchange's streams.
  virtual Status forward(std::span<const DeviceLayerInputs> inputs, std::span<const DeviceLayerOutputs> outputs) = 0;
  // Backward of the last forward (same inputs); kNotImplemented where has_backward() is false.
  virtual Status backward(std::span<const DeviceLayerInputs> inputs, std::span<const DeviceGradInputs> grads,
                          std::span<const DeviceGradOutputs> outputs) = 0;
  // Waits for the session's work; returns the first device fault it recorded, if any.
  virtual Status synchronize() = 0;
  // The last launch's task timeline, where the implementation records one (the megakernel with
  // LayerSessionOptions::trace_tasks_per_cta > 0); kNotImplemented elsewhere.
  virtual StatusOr<std::vector<LayerTaskTrace>> task_trace() const;
};

// Settings one implementation has and the others do not (LayerConfig holds the shared ones).
struct LayerSessionOptions {
  ReferenceGemm reference_gemm = ReferenceGemm::kPerExpert;  // the reference's GEMM calls
  int32_t trace_tasks_per_cta = 0;  // the megakernel's task timeline (LayerOptions), for profiling
};

// "reference" (cuBLAS per expert + glue kernels, any exchange) or "megakernel" (the fused
// forward; loopback exchanges: every rank on one GPU in one launch). Unknown names are an
// InvalidArgument naming the known ones.
StatusOr<std::unique_ptr<LayerSession>> make_layer_session(std::string_view impl, const Shape& shape,
                                                           const LayerConfig& config, std::shared_ptr<RowExchange> exchange,
                                                           const LayerSessionOptions& options = {});
std::vector<std::string> layer_session_impls();
// Whether `impl` has a backward pass (false for unknown names): answerable without a GPU, so a
// command refuses a backward it cannot run before it looks for a device.
bool layer_session_has_backward(std::string_view impl);
// Whether `impl` runs only loopback exchanges (every rank on one GPU): make_layer_session refuses
// any other with kNotImplemented, and a command can say so before it looks for a device.
bool layer_session_loopback_only(std::string_view impl);

class DeviceProblem;
// One step of `session` on `problem` as the harness runs it: every output poisoned with NaN,
// forward [+ backward], synchronize (device faults become the Status), outputs downloaded in the
// oracle's order and layout.
StatusOr<std::vector<NamedTensor>> run_step(LayerSession& session, DeviceProblem& problem, bool backward);

}  // namespace detmoe
