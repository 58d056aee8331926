#include "detmoe/host_problem.h"

namespace detmoe {

StatusOr<HostProblem> make_seeded_problem(const Shape& shape, const RoutingSpec& spec, uint64_t seed, bool backward,
                                          GradPrecision grad_precision) {
  DETMOE_RETURN_IF_ERROR(validate(shape));
  auto routing = generate_routing(shape, spec, seed);
  if (!routing.ok()) return routing.status();
  HostProblem p{shape, generate_layer_data(shape, seed), std::move(*routing), grad_precision};
  p.seed = seed;
  if (!backward) p.data.dout.clear();
  return p;
}

}  // namespace detmoe
