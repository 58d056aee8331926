// One complete layer problem held on the host: shape, dense data (bf16 bits), routing, and
// what to compute. Every implementation (oracle, reference, megakernel) can be run on it and
// returns its outputs as named tensors in the oracle's order, so any two can be compared.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "detmoe/data.h"
#include "detmoe/problem.h"
#include "detmoe/routing.h"
#include "detmoe/status.h"
#include "detmoe/tensor.h"

namespace detmoe {

struct HostProblem {
  Shape shape;
  LayerData data;   // dout empty = forward only
  Routing routing;
  GradPrecision grad_precision = GradPrecision::kFP32;
  // Set when data and routing are the seeded ones of (shape, spec, seed): a GPU path may then
  // fill its inputs on the device instead of uploading them.
  std::optional<uint64_t> seed = std::nullopt;
  bool backward() const { return !data.dout.empty(); }
};

// The seeded problem of (shape, routing spec, seed).
StatusOr<HostProblem> make_seeded_problem(const Shape& shape, const RoutingSpec& spec, uint64_t seed, bool backward,
                                          GradPrecision grad_precision);

// Outputs in the fixed order out, y, [d_x, d_topk_w, dw_gate, dw_up, dw_down, [dws_gate, dws_up, dws_down]].
using ImplRunner = std::function<StatusOr<std::vector<NamedTensor>>(const HostProblem&)>;

}  // namespace detmoe
