// detmoe: the one command users run (DESIGN.md §1). Subcommands live in cmd_*.cpp.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "detmoe/status.h"

int main(int argc, char** argv) {
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
    return e.status().code() == detmoe::ErrorCode::kInvalidArgument ? detmoe::cli::kExitUsage
                                                                      : detmoe::cli::kExitCouldNotRun;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "detmoe: %s\n", e.what());
    return detmoe::cli::kExitCouldNotRun;
  }
}
