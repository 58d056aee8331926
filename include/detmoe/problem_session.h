// One problem (seeded, or uploaded from host tensors) on the device, wired to one implementation's
// LayerSession made by name: what the registry's GPU rows, the GPU tests, the rapidcheck fuzzers
// and perf/layer_bench run. Each run poisons every output with NaN first, runs forward (and
// backward), synchronises and downloads the outputs in the oracle's layout (run_step).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "detmoe/device_problem.h"
#include "detmoe/layer_session.h"
#include "detmoe/tensor.h"

namespace detmoe {

class ProblemSession {
 public:
  // `impl` is a layer_session_impls() name. The problem's gradients take config.grad_precision.
  static StatusOr<std::unique_ptr<ProblemSession>> create(std::string_view impl, const Shape& shape, const Routing& routing,
                                                          uint64_t seed, std::shared_ptr<RowExchange> exchange,
                                                          const LayerConfig& config = {},
                                                          const LayerSessionOptions& options = {}, bool write_y = true);
  // A host problem (DeviceProblem::create: seeded data filled on the device, other data uploaded);
  // the gradient precision is the problem's, whatever `config` says.
  static StatusOr<std::unique_ptr<ProblemSession>> create(std::string_view impl, const HostProblem& problem,
                                                          std::shared_ptr<RowExchange> exchange,
                                                          const LayerConfig& config = {},
                                                          const LayerSessionOptions& options = {}, bool write_y = true);
  // Poison, forward [+ backward], synchronise, download. A backward the implementation does not
  // have yet is kNotImplemented.
  StatusOr<std::vector<NamedTensor>> run(bool backward);

  LayerSession& session() { return *session_; }
  DeviceProblem& problem() { return *problem_; }
  RowExchange& exchange() { return *exchange_; }
  const Shape& shape() const { return shape_; }

 private:
  static StatusOr<std::unique_ptr<ProblemSession>> wire(std::string_view impl, StatusOr<std::unique_ptr<DeviceProblem>> problem,
                                                        const Shape& shape, std::shared_ptr<RowExchange> exchange,
                                                        const LayerConfig& config, const LayerSessionOptions& options);
  Shape shape_;
  std::shared_ptr<RowExchange> exchange_;
  std::unique_ptr<DeviceProblem> problem_;
  std::unique_ptr<LayerSession> session_;
};

}  // namespace detmoe
