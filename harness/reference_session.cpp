#include "detmoe/reference_session.h"

namespace detmoe {

namespace {

DeviceProblemOptions problem_options(const LayerConfig& config, bool write_y) {
  DeviceProblemOptions po;
  po.grad_precision = config.grad_precision;
  po.write_y = write_y;
  return po;
}

}  // namespace

StatusOr<std::unique_ptr<ReferenceSession>> ReferenceSession::create(const Shape& shape, const Routing& routing,
                                                                     uint64_t seed, std::shared_ptr<RowExchange> exchange,
                                                                     const LayerConfig& config,
                                                                     const ReferenceOptions& options, bool write_y) {
  if (!exchange) return invalid_argument("exchange is null");
  // The problem is made before `exchange` is moved into wire (argument order is unspecified).
  auto problem = DeviceProblem::create(shape, routing, seed, *exchange, problem_options(config, write_y));
  return wire(std::move(problem), shape, std::move(exchange), config, options);
}

StatusOr<std::unique_ptr<ReferenceSession>> ReferenceSession::create(const HostProblem& problem,
                                                                     std::shared_ptr<RowExchange> exchange,
                                                                     const LayerConfig& config,
                                                                     const ReferenceOptions& options, bool write_y) {
  if (!exchange) return invalid_argument("exchange is null");
  LayerConfig layer_config = config;
  layer_config.grad_precision = problem.grad_precision;  // the problem's, for its tensors and the layer alike
  auto device_problem = DeviceProblem::create(problem, *exchange, problem_options(layer_config, write_y));
  return wire(std::move(device_problem), problem.shape, std::move(exchange), layer_config, options);
}

StatusOr<std::unique_ptr<ReferenceSession>> ReferenceSession::wire(StatusOr<std::unique_ptr<DeviceProblem>> problem,
                                                                   const Shape& shape, std::shared_ptr<RowExchange> exchange,
                                                                   const LayerConfig& config,
                                                                   const ReferenceOptions& options) {
  if (!problem.ok()) return problem.status();
  auto layer = ReferenceLayer::create(shape, config, std::move(exchange), options);
  if (!layer.ok()) return layer.status();
  auto session = std::make_unique<ReferenceSession>();
  session->problem_ = std::move(*problem);
  session->layer_ = std::move(*layer);
  return session;
}

StatusOr<std::vector<NamedTensor>> ReferenceSession::run(bool backward) {
  DETMOE_RETURN_IF_ERROR(problem_->poison_outputs());
  DETMOE_RETURN_IF_ERROR(layer_->forward(problem_->inputs(), problem_->outputs()));
  if (backward) DETMOE_RETURN_IF_ERROR(layer_->backward(problem_->inputs(), problem_->grad_inputs(), problem_->grad_outputs()));
  DETMOE_RETURN_IF_ERROR(layer_->synchronize());
  return problem_->download(backward);
}

}  // namespace detmoe
