// Options that pick a problem, shared by oracle / verify / bench / run:
//   --shape NAME | --T .. --H .. --F .. --E .. --k .. [--P ..] [--Fs ..], --routing, --seed.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "detmoe/problem.h"
#include "detmoe/routing.h"
#include "detmoe/status.h"

namespace detmoe::cli {

struct ProblemOptions {
  std::string shape_name;
  Shape custom;  // fields set by --T/--H/…
  int64_t P = 0;
  int64_t Fs = 0;
  std::string routing = "balanced";
  uint64_t seed = 1;

  void add_to(CLI::App& cmd);
  // The shape (named, possibly overridden by --P/--Fs, or custom), validated. Whether an option
  // was given is read from the command line, never from its value: `--P 0` is an error, not
  // "no --P".
  StatusOr<Shape> shape() const;
  StatusOr<RoutingSpec> routing_spec() const { return parse_routing(routing); }
  // The options of this group given on the command line ("--shape", "--seed", …), in order.
  std::vector<std::string> given() const;

 private:
  std::vector<CLI::Option*> options_;
  bool was_given(const char* name) const;
};

// Accepts a decimal integer in [0, 2^64) and nothing else: CLI11 (strtoull) reads "-1" as
// 2^64 - 1 and clamps values past 2^64, both silently.
CLI::Validator seed_validator();

}  // namespace detmoe::cli
