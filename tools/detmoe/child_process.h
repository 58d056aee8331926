// Runs a helper program (a benchmark binary) with a deadline, for `detmoe gate`: a suite that
// never exits must be reported, never hang the gate (and with it `git bisect run`).
#pragma once

#include <csignal>
#include <string>
#include <vector>

namespace detmoe::cli {

struct ChildResult {
  enum class End { kExited, kSignalled, kTimedOut, kStopped, kCouldNotStart };
  End end = End::kCouldNotStart;
  int exit_code = -1;   // kExited
  int signal = 0;       // kSignalled
  std::string out;      // everything it wrote to standard output
  std::string err_tail; // the last 2 KiB of its standard error
  std::string error;    // kCouldNotStart: why (names the program and the system's reason)
  bool ok() const { return end == End::kExited && exit_code == 0; }
  // "exit 2", "killed by signal 11", "timed out after 900 s (process group killed)", ...
  std::string describe(double timeout_s) const;
};

// Runs argv[0] (a path, no shell, no PATH search) with argv, standard input /dev/null. The child
// leads a process group of its own, so at the deadline, or as soon as *stop is non-zero (the
// gate's SIGINT/SIGTERM flag; polled every 100 ms), the whole group — the child and anything it
// started — is killed with SIGKILL. Stragglers of the group are killed after a normal exit too.
ChildResult run_child(const std::vector<std::string>& argv, double timeout_s, const volatile std::sig_atomic_t* stop = nullptr);

}  // namespace detmoe::cli
