// rapidcheck generators shared by the routing and plan properties: small shapes and every
// routing distribution with parameters valid for the shape.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>

#include "detmoe/problem.h"
#include "detmoe/routing.h"

namespace detmoe::testing {

// rapidcheck scales inRange / element / arbitrary by its size parameter, which crowds early cases at
// the low end of each range; `full` draws from the whole range at every size (shrinking still works).
template <class T>
rc::Gen<T> full(rc::Gen<T> gen) {
  return rc::gen::resize(rc::kNominalSize, std::move(gen));
}

inline Shape small_shape(int64_t T, int64_t E, int64_t k, int64_t P = 1) { return Shape{T, 64, 64, E, k, P, 0}; }

// T 1..64, P ∈ {1, 2, 4, 8}, E a multiple of P up to 64, k ≤ min(E, 8).
inline rc::Gen<Shape> gen_small_shape() {
  return rc::gen::exec([] {
    const int64_t P = *full(rc::gen::element<int64_t>(1, 2, 4, 8));
    const int64_t E = P * *full(rc::gen::inRange<int64_t>(1, 64 / P + 1));
    const int64_t k = *full(rc::gen::inRange<int64_t>(1, std::min<int64_t>(E, 8) + 1));
    const int64_t T = *full(rc::gen::inRange<int64_t>(1, 65));
    return small_shape(T, E, k, P);
  });
}

// Every generated kind (balanced, zipf s ∈ [0, 3], hot, all-to-one, empty experts), including
// the degenerate ones that stress capacity and empty segments.
inline rc::Gen<RoutingSpec> gen_routing_spec(const Shape& s) {
  return rc::gen::exec([s] {
    RoutingSpec spec;
    switch (*full(rc::gen::inRange(0, 5))) {
      case 0: spec.kind = RoutingKind::kBalanced; break;
      case 1:
        spec.kind = RoutingKind::kZipf;
        spec.zipf_s = *full(rc::gen::inRange(0, 301)) / 100.0;
        break;
      case 2:
        spec.kind = RoutingKind::kHotExpert;
        spec.hot_fraction = *full(rc::gen::inRange(0, 101)) / 100.0;
        spec.hot_expert = *full(rc::gen::inRange<int64_t>(0, s.E));
        break;
      case 3:
        spec.kind = RoutingKind::kAllToOne;
        spec.hot_expert = *full(rc::gen::inRange<int64_t>(0, s.E));
        break;
      default:
        spec.kind = RoutingKind::kEmptyExperts;
        spec.empty_experts = *full(rc::gen::inRange<int64_t>(0, s.E - s.k + 1));
        break;
    }
    return spec;
  });
}

}  // namespace detmoe::testing
