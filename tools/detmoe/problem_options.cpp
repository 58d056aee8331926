#include "problem_options.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

#include "detmoe/shapes.h"

namespace detmoe::cli {

CLI::Validator seed_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        if (digits) (void)std::strtoull(text.c_str(), nullptr, 10);
        if (!digits || errno == ERANGE)
          return fmt::format("seed {} is not an integer in [0, 2^64)", text);
        return {};
      },
      "UINT64");
}

void ProblemOptions::add_to(CLI::App& cmd) {
  options_ = {
      cmd.add_option("--shape", shape_name, "named shape: tiny, small, small-shared, qwen3-30b-a3b, deepseek-v3, mixtral-8x7b, gpt-oss-120b, deepseek-v3-shared"),
      cmd.add_option("--T", custom.T, "tokens per rank (custom shape)"),
      cmd.add_option("--H", custom.H, "hidden size (multiple of 64)"),
      cmd.add_option("--F", custom.F, "expert intermediate size (multiple of 64)"),
      cmd.add_option("--E", custom.E, "number of experts"),
      cmd.add_option("--k", custom.k, "top-k"),
      cmd.add_option("--P", P, "expert-parallel size, >= 1 (overrides the named shape's; custom shapes: 1)"),
      cmd.add_option("--Fs", Fs, "shared-expert intermediate size, 0 = none (overrides the named shape's; custom shapes: 0)"),
      cmd.add_option("--routing", routing, "balanced | zipf1 | zipf:S | hot:F[:E] | all-to-one[:E] | empty:N")->capture_default_str(),
      cmd.add_option("--seed", seed, "data and routing seed")->check(seed_validator())->capture_default_str(),
  };
}

bool ProblemOptions::was_given(const char* name) const {
  for (const CLI::Option* o : options_)
    if (o->check_lname(std::string(name).substr(2))) return o->count() > 0;
  return false;
}

std::vector<std::string> ProblemOptions::given() const {
  std::vector<std::string> names;
  for (const CLI::Option* o : options_)
    if (o->count() > 0) names.push_back("--" + o->get_lnames().front());
  return names;
}

StatusOr<Shape> ProblemOptions::shape() const {
  Shape s;
  std::vector<std::string> custom_given, custom_missing;
  for (const char* name : {"--T", "--H", "--F", "--E", "--k"})
    (was_given(name) ? custom_given : custom_missing).push_back(name);
  if (!shape_name.empty() || was_given("--shape")) {
    if (!custom_given.empty())
      return invalid_argument(fmt::format("give either --shape or --T/--H/--F/--E/--k, not both (--shape {} with {})",
                                          shape_name, fmt::join(custom_given, " ")));
    auto named = find_named_shape(shape_name);
    if (!named.ok()) return named.status();
    s = *named;
  } else if (!custom_given.empty()) {
    if (!custom_missing.empty())
      return invalid_argument(fmt::format("a custom shape needs all of --T --H --F --E --k; missing: {} (given: {})",
                                          fmt::join(custom_missing, " "), fmt::join(custom_given, " ")));
    s = custom;
    s.P = 1;
    s.Fs = 0;
  } else {
    return invalid_argument("no problem given: use --shape NAME or --T/--H/--F/--E/--k");
  }
  // validate() below names a bad value (P = 0, Fs = -5).
  if (was_given("--P")) s.P = P;
  if (was_given("--Fs")) s.Fs = Fs;
  DETMOE_RETURN_IF_ERROR(validate(s));
  return s;
}

}  // namespace detmoe::cli
