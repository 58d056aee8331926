// One problem (seeded, or uploaded from host tensors) wired to a ReferenceLayer: what `detmoe verify`, the GPU tests and the
// fuzzers run. Each run poisons every output with NaN first, runs forward (and backward),
// synchronises and downloads the outputs in the oracle's layout.
#pragma once

#include <memory>
#include <vector>

#include "detmoe/device_problem.h"
#include "detmoe/reference_layer.h"
#include "detmoe/tensor.h"

namespace detmoe {

class ReferenceSession {
 public:
  static StatusOr<std::unique_ptr<ReferenceSession>> create(const Shape& shape, const Routing& routing, uint64_t seed,
                                                            std::shared_ptr<RowExchange> exchange,
                                                            const LayerConfig& config = {},
                                                            const ReferenceOptions& options = {}, bool write_y = true);
  // A host problem (DeviceProblem::create: seeded data filled on the device, other data uploaded);
  // the gradient precision is the problem's, whatever `config` says.
  static StatusOr<std::unique_ptr<ReferenceSession>> create(const HostProblem& problem,
                                                            std::shared_ptr<RowExchange> exchange,
                                                            const LayerConfig& config = {},
                                                            const ReferenceOptions& options = {}, bool write_y = true);
  StatusOr<std::vector<NamedTensor>> run(bool backward);

  ReferenceLayer& layer() { return *layer_; }
  DeviceProblem& problem() { return *problem_; }

 private:
  static StatusOr<std::unique_ptr<ReferenceSession>> wire(StatusOr<std::unique_ptr<DeviceProblem>> problem, const Shape& shape,
                                                          std::shared_ptr<RowExchange> exchange, const LayerConfig& config,
                                                          const ReferenceOptions& options);
  std::unique_ptr<DeviceProblem> problem_;
  std::unique_ptr<ReferenceLayer> layer_;
};

}  // namespace detmoe
