#include "detmoe/shapes.h"

#include <fmt/format.h>

namespace detmoe {

const std::vector<NamedShape>& named_shapes() {
  // T, H, F, E, k, P, Fs. The four production shapes are per GPU (DESIGN.md §7).
  static const std::vector<NamedShape> kShapes = {
      {"tiny", {16, 64, 64, 4, 2, 1, 0}},
      {"small", {256, 256, 128, 16, 4, 1, 0}},
      {"small-shared", {256, 256, 128, 16, 4, 1, 128}},
      {"qwen3-30b-a3b", {16384, 2048, 768, 128, 8, 1, 0}},
      {"deepseek-v3", {8192, 7168, 2048, 32, 8, 1, 0}},
      {"mixtral-8x7b", {8192, 4096, 14336, 8, 2, 1, 0}},
      {"gpt-oss-120b", {16384, 2880, 2880, 128, 4, 1, 0}},
      // The fifth case: deepseek-v3's slice with its one shared expert of the same width.
      {"deepseek-v3-shared", {8192, 7168, 2048, 32, 8, 1, 2048}},
  };
  return kShapes;
}

StatusOr<Shape> find_named_shape(const std::string& name) {
  std::string known;
  for (const auto& s : named_shapes()) {
    if (s.name == name) return s.shape;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  return invalid_argument(fmt::format("shape name '{}' is unknown (known: {})", name, known));
}

}  // namespace detmoe
