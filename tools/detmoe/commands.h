// Subcommands of the `detmoe` CLI, one file each. Every command returns its process exit
// code: 0 success, 1 a check failed (wrong bits, out of tolerance, too slow), 2 bad usage or
// not implemented, 3 the run itself could not be done (no GPU where one is required, I/O).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>

namespace detmoe::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitCouldNotRun = 3;

// Each add_* registers a subcommand on `app` and sets `run` to its action when it is chosen.
using Action = std::function<int()>;
void add_oracle_command(CLI::App& app, Action& run);
void add_verify_command(CLI::App& app, Action& run);
void add_bench_command(CLI::App& app, Action& run);
void add_accept_command(CLI::App& app, Action& run);
void add_gate_command(CLI::App& app, Action& run);
void add_golden_command(CLI::App& app, Action& run);
void add_report_command(CLI::App& app, Action& run);
void add_run_command(CLI::App& app, Action& run);
void add_fuzz_command(CLI::App& app, Action& run);

// For subcommands not built yet: exit 2 with a message that says so.
int not_implemented(const char* what);

}  // namespace detmoe::cli
