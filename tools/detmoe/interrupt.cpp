#include "interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "detmoe/output_file.h"

namespace detmoe::cli {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

volatile sig_atomic_t g_graceful = 0;
volatile sig_atomic_t g_signal = 0;

void set_action(int signo, void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (int s : kSignals) sigaddset(&sa.sa_mask, s);  // one handler at a time
  // Restart interrupted system calls: a signal that is only recorded must not turn a write in
  // progress into an EINTR failure.
  sa.sa_flags = SA_RESTART;
  sigaction(signo, &sa, nullptr);
}

void on_signal(int signo) {
  if (g_graceful && g_signal == 0) {
    g_signal = signo;
    static const char kNote[] =
        "\ndetmoe: interrupted; finishing the current check, then writing the report as aborted (signal again to stop now)\n";
    (void)!::write(STDERR_FILENO, kNote, sizeof kNote - 1);
    return;
  }
  remove_inflight_output_files();
  // The signal is blocked while its handler runs: raised here, it is delivered with the default
  // action as soon as the handler returns.
  set_action(signo, SIG_DFL);
  raise(signo);
}

}  // namespace

void install_signal_handlers() {
  signal(SIGXFSZ, SIG_IGN);
  for (int s : kSignals) {
    struct sigaction old {};
    sigaction(s, nullptr, &old);
    // A signal ignored on entry (SIGINT of a background job in a script, nohup's SIGHUP) stays
    // ignored, as the caller asked.
    if (old.sa_handler == SIG_IGN) continue;
    set_action(s, on_signal);
  }
}

void request_graceful_interrupt() { g_graceful = 1; }

int interrupt_signal() { return g_signal; }

const volatile std::sig_atomic_t* interrupt_flag() { return &g_signal; }

void die_of_signal(int signo) {
  std::fflush(nullptr);  // what was printed before the signal is not lost with stdio's buffers
  set_action(signo, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(signo);
  _exit(128 + signo);  // not reached: the default action of SIGINT/SIGTERM/SIGHUP ends the process
}

}  // namespace detmoe::cli
