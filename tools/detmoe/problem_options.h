// Options that pick a problem, shared by oracle / verify / bench / run:
//   --shape NAME | --T .. --H .. --F .. --E .. --k .. [--P ..] [--Fs ..], --routing, --seed.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "detmoe/problem.h"
#include "detmoe/routing.h"
#include "detmoe/status.h"

namespace detmoe::cli {

struct ProblemOptions {
  std::string shape_name;
  Shape custom;  // fields set by --T/--H/…; 0 = not given
  int64_t P = 0;
  int64_t Fs = -1;
  std::string routing = "balanced";
  uint64_t seed = 1;

  void add_to(CLI::App& cmd);
  // The shape (named, possibly overridden by --P/--Fs, or custom), validated.
  StatusOr<Shape> shape() const;
  StatusOr<RoutingSpec> routing_spec() const { return parse_routing(routing); }
};

}  // namespace detmoe::cli
