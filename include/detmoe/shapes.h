// Named problem shapes: tiny and small for tests, and the four of DESIGN.md §7 (+ a fifth with
// a shared expert).
#pragma once

#include <string>
#include <vector>

#include "detmoe/problem.h"
#include "detmoe/status.h"

namespace detmoe {

struct NamedShape {
  std::string name;
  Shape shape;
};

const std::vector<NamedShape>& named_shapes();
StatusOr<Shape> find_named_shape(const std::string& name);  // error lists the known names

}  // namespace detmoe
