#include "detmoe/problem_session.h"

namespace detmoe {

namespace {

DeviceProblemOptions problem_options(const LayerConfig& config, bool write_y) {
  DeviceProblemOptions po;
  po.grad_precision = config.grad_precision;
  po.write_y = write_y;
  return po;
}

}  // namespace

StatusOr<std::unique_ptr<ProblemSession>> ProblemSession::create(std::string_view impl, const Shape& shape,
                                                                 const Routing& routing, uint64_t seed,
                                                                 std::shared_ptr<RowExchange> exchange,
                                                                 const LayerConfig& config,
                                                                 const LayerSessionOptions& options, bool write_y) {
  if (!exchange) return invalid_argument("exchange is null");
  // The problem is made before `exchange` is moved into wire (argument order is unspecified).
  auto problem = DeviceProblem::create(shape, routing, seed, *exchange, problem_options(config, write_y));
  return wire(impl, std::move(problem), shape, std::move(exchange), config, options);
}

StatusOr<std::unique_ptr<ProblemSession>> ProblemSession::create(std::string_view impl, const HostProblem& problem,
                                                                 std::shared_ptr<RowExchange> exchange,
                                                                 const LayerConfig& config,
                                                                 const LayerSessionOptions& options, bool write_y) {
  if (!exchange) return invalid_argument("exchange is null");
  LayerConfig layer_config = config;
  layer_config.grad_precision = problem.grad_precision;  // the problem's, for its tensors and the layer alike
  auto device_problem = DeviceProblem::create(problem, *exchange, problem_options(layer_config, write_y));
  return wire(impl, std::move(device_problem), problem.shape, std::move(exchange), layer_config, options);
}

StatusOr<std::unique_ptr<ProblemSession>> ProblemSession::wire(std::string_view impl,
                                                               StatusOr<std::unique_ptr<DeviceProblem>> problem,
                                                               const Shape& shape, std::shared_ptr<RowExchange> exchange,
                                                               const LayerConfig& config,
                                                               const LayerSessionOptions& options) {
  if (!problem.ok()) return problem.status();
  auto session = make_layer_session(impl, shape, config, exchange, options);
  if (!session.ok()) return session.status();
  auto s = std::unique_ptr<ProblemSession>(new ProblemSession());
  s->shape_ = shape;
  s->exchange_ = std::move(exchange);
  s->problem_ = std::move(*problem);
  s->session_ = std::move(*session);
  return s;
}

StatusOr<std::vector<NamedTensor>> ProblemSession::run(bool backward) { return run_step(*session_, *problem_, backward); }

}  // namespace detmoe
