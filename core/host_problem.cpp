#include "detmoe/host_problem.h"

#include "detmoe/host_memory.h"

namespace detmoe {

StatusOr<HostProblem> make_seeded_problem(const Shape& shape, const RoutingSpec& spec, uint64_t seed, bool backward,
                                          GradPrecision grad_precision) {
  DETMOE_RETURN_IF_ERROR(validate(shape));
  DETMOE_RETURN_IF_ERROR(require_host_bytes(problem_host_bytes(shape, backward), "the seeded problem " + shape.to_string()));
  auto routing = generate_routing(shape, spec, seed);
  if (!routing.ok()) return routing.status();
  HostProblem p{shape, generate_layer_data(shape, seed), std::move(*routing), grad_precision};
  p.seed = seed;
  if (!backward) p.data.dout.clear();
  return p;
}

}  // namespace detmoe
