// Implementations the CLI can run on a host problem, by name.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "detmoe/config.h"
#include "detmoe/host_problem.h"
#include "detmoe/status.h"

namespace detmoe::cli {

struct ImplEntry {
  std::string name;
  // Where its bits are defined: "cpu-x86_64" for the oracle, e.g. "sm90-cuda13.0" for GPU paths.
  std::string (*platform)();
  ImplRunner run;
  // False while the implementation has no backward pass (the megakernel today): golden and the
  // gate then run and record its cases forward-only, and say so.
  bool has_backward = true;
  // The same run with the speed knobs of LayerConfig set (num_sms, comm_sms, overlap_rows,
  // save_h; the precision fields stay the problem's): D1 says they never change bits. Null for
  // an implementation without knobs (the oracle).
  std::function<StatusOr<std::vector<NamedTensor>>(const HostProblem&, const LayerConfig&)> run_with_knobs;
};

// The problem an implementation can run: `p` itself, or its forward-only part (dout dropped)
// when the implementation has no backward. Golden hashes and gate checks use this, so a
// forward-only implementation is checked on what it computes, never silently skipped.
HostProblem runnable_problem(const ImplEntry& impl, HostProblem p);

// Names the known implementations in the error when `name` is unknown or not built.
StatusOr<ImplEntry> find_impl(const std::string& name);
std::vector<std::string> impl_names();

}  // namespace detmoe::cli
