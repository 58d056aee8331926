#include "problem_options.h"

#include <fmt/format.h>

#include "detmoe/shapes.h"

namespace detmoe::cli {

void ProblemOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--shape", shape_name, "named shape: tiny, small, small-shared, qwen3-30b-a3b, deepseek-v3, mixtral-8x7b, gpt-oss-120b, deepseek-v3-shared");
  cmd.add_option("--T", custom.T, "tokens per rank (custom shape)");
  cmd.add_option("--H", custom.H, "hidden size (multiple of 64)");
  cmd.add_option("--F", custom.F, "expert intermediate size (multiple of 64)");
  cmd.add_option("--E", custom.E, "number of experts");
  cmd.add_option("--k", custom.k, "top-k");
  cmd.add_option("--P", P, "expert-parallel size (overrides the named shape's)");
  cmd.add_option("--Fs", Fs, "shared-expert intermediate size, 0 = none (overrides the named shape's)");
  cmd.add_option("--routing", routing, "balanced | zipf1 | zipf:S | hot:F[:E] | all-to-one[:E] | empty:N")->capture_default_str();
  cmd.add_option("--seed", seed, "data and routing seed")->capture_default_str();
}

StatusOr<Shape> ProblemOptions::shape() const {
  Shape s;
  const bool any_custom = custom.T || custom.H || custom.F || custom.E || custom.k;
  if (!shape_name.empty()) {
    if (any_custom) return invalid_argument("give either --shape or --T/--H/--F/--E/--k, not both");
    auto named = find_named_shape(shape_name);
    if (!named.ok()) return named.status();
    s = *named;
  } else if (any_custom) {
    s = custom;
    s.P = 1;
    s.Fs = 0;
  } else {
    return invalid_argument("no problem given: use --shape NAME or --T/--H/--F/--E/--k");
  }
  if (P > 0) s.P = P;
  if (Fs >= 0) s.Fs = Fs;
  DETMOE_RETURN_IF_ERROR(validate(s));
  return s;
}

}  // namespace detmoe::cli
