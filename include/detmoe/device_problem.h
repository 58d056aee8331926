// A seeded problem on the device, laid out per rank as DeviceLayerInputs/Outputs: the same bits
// as generate_layer_data (data filled on the device from the seed with generated_bf16_bits) and
// the given global routing. Tests, fuzzers, `detmoe verify` and `detmoe bench` use it to run a
// GPU layer and fetch its outputs in the oracle's layout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "detmoe/config.h"
#include "detmoe/data.h"
#include "detmoe/device_tensors.h"
#include "detmoe/host_problem.h"
#include "detmoe/routing.h"
#include "detmoe/row_exchange.h"
#include "detmoe/status.h"
#include "detmoe/tensor.h"

namespace detmoe {

struct DeviceProblemOptions {
  GradPrecision grad_precision = GradPrecision::kFP32;
  bool write_y = true;  // allocate y [T, k, H] (an optional output)
};

class DeviceProblem {
 public:
  // One rank's tensors for every local slot of `exchange`, on that slot's device.
  static StatusOr<std::unique_ptr<DeviceProblem>> create(const Shape& shape, const Routing& routing, uint64_t seed,
                                                         const RowExchange& exchange,
                                                         const DeviceProblemOptions& options = {});
  // The same, with the dense inputs copied from host tensors in the global layout of LayerData
  // (a replayed capture, a golden case with designed data); data.dout empty = forward only.
  static StatusOr<std::unique_ptr<DeviceProblem>> create(const Shape& shape, const Routing& routing, const LayerData& data,
                                                         const RowExchange& exchange,
                                                         const DeviceProblemOptions& options = {});
  // A host problem as it is: seeded data filled on the device (no host copy), any other data
  // uploaded; the gradient precision is the problem's.
  static StatusOr<std::unique_ptr<DeviceProblem>> create(const HostProblem& problem, const RowExchange& exchange,
                                                         DeviceProblemOptions options = {});
  ~DeviceProblem();
  DeviceProblem(const DeviceProblem&) = delete;
  DeviceProblem& operator=(const DeviceProblem&) = delete;

  std::span<const DeviceLayerInputs> inputs() const;
  std::span<const DeviceLayerOutputs> outputs() const;
  std::span<const DeviceGradInputs> grad_inputs() const;
  std::span<const DeviceGradOutputs> grad_outputs() const;

  // Mutable routing of a slot, for bad-input tests (device pointers [T, k]).
  int32_t* topk_idx(int slot) const;
  float* topk_w(int slot) const;

  // Fills every output with NaN bits (0xFF bytes), so an element nobody writes is caught.
  Status poison_outputs() const;
  // The outputs as global tensors named and shaped like oracle_output_tensors (out, y if
  // written, and with backward: d_x, d_topk_w, dw_gate, dw_up, dw_down, dws_*). Needs every rank
  // local. With P > 1, dws_* are the fp64 sums over ranks of the per-rank gradients.
  StatusOr<std::vector<NamedTensor>> download(bool backward) const;

  struct Impl;

 private:
  using RankFiller = std::function<Status(int rank, const DeviceLayerInputs&, const DeviceGradInputs&, cudaStream_t)>;
  static StatusOr<std::unique_ptr<DeviceProblem>> create_filled(const Shape& shape, const Routing& routing,
                                                                const RowExchange& exchange,
                                                                const DeviceProblemOptions& options, const RankFiller& fill);
  explicit DeviceProblem(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace detmoe
