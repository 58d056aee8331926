// What the CLI does on SIGINT / SIGTERM / SIGHUP.
//
// Every command: the handler unlinks the temporary files of output writes in progress
// (detmoe::remove_inflight_output_files, async-signal-safe) and re-raises the signal with its
// default action, so the process still dies of it (exit status 128 + signal in a shell) and
// leaves no `.NAME.tmp.PID.N` files; files already in place stay whole (they are only ever
// replaced by rename).
//
// `accept` and `gate` ask for a graceful stop instead: their report must end "aborted", not "running". Writing
// that report allocates and does file I/O, which a signal handler must not do, so the handler
// only records the signal; the main thread checks `interrupt_signal()` between checks, writes the
// aborted report and calls `die_of_signal`. A second signal (the current check may be a GPU run
// of minutes) falls back to the every-command behaviour: the report then says "running", which
// the schema defines as "never finished".
#pragma once

#include <csignal>

namespace detmoe::cli {

// Installs the every-command handler. Also ignores SIGXFSZ, so a file-size limit (ulimit -f)
// makes writes fail with EFBIG, reported with the path, instead of killing the process.
void install_signal_handlers();

// From now on the first SIGINT/SIGTERM/SIGHUP is only recorded (and announced on stderr).
void request_graceful_interrupt();

// The signal recorded since request_graceful_interrupt(), or 0.
int interrupt_signal();
// The same flag, for code that polls it while waiting (the gate's benchmark children).
const volatile std::sig_atomic_t* interrupt_flag();

// Restores the default action of `signo` and raises it: the process ends as killed by it.
[[noreturn]] void die_of_signal(int signo);

}  // namespace detmoe::cli
