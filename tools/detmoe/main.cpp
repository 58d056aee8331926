// detmoe: the one command users run (DESIGN.md §1). Subcommands live in cmd_*.cpp.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "detmoe/status.h"
#include "interrupt.h"

namespace {

// The exit code of an error that ended a command (commands.h, README.md "Exit codes"): what the
// user can fix in the command line is 2, what kept the run from being done is 3. Capacity
// exceeded means the routing asked of a shape does not fit its buffers: a bad input (2).
int exit_code_for(detmoe::ErrorCode code) {
  switch (code) {
    case detmoe::ErrorCode::kInvalidArgument:
    case detmoe::ErrorCode::kNotImplemented:
    case detmoe::ErrorCode::kCapacityExceeded:
      return detmoe::cli::kExitUsage;
    default:
      return detmoe::cli::kExitCouldNotRun;
  }
}

}  // namespace

int main(int argc, char** argv) {
  detmoe::cli::install_signal_handlers();
  CLI::App app{"detmoe — deterministic MoE megakernel for Hopper: verify, bench, accept, gate, golden, report"};
  app.require_subcommand(1);
  detmoe::cli::Action run;
  detmoe::cli::add_oracle_command(app, run);
  detmoe::cli::add_verify_command(app, run);
  detmoe::cli::add_bench_command(app, run);
  detmoe::cli::add_run_command(app, run);
  detmoe::cli::add_accept_command(app, run);
  detmoe::cli::add_gate_command(app, run);
  detmoe::cli::add_golden_command(app, run);
  detmoe::cli::add_report_command(app, run);
  detmoe::cli::add_fuzz_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : detmoe::cli::kExitUsage;
  }
  try {
    return run ? run() : detmoe::cli::kExitUsage;
  } catch (const detmoe::Error& e) {
    std::fprintf(stderr, "detmoe: %s\n", e.what());
    return exit_code_for(e.status().code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "detmoe: %s\n", e.what());
    return detmoe::cli::kExitCouldNotRun;
  }
}
