#include "child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace detmoe::cli {
namespace {

constexpr size_t kErrTail = 2048;

struct Pipe {
  int fd[2] = {-1, -1};
  bool open() { return ::pipe2(fd, O_CLOEXEC) == 0; }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
  ~Pipe() {
    close_end(0);
    close_end(1);
  }
};

// In the child between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(const std::vector<char*>& argv, int out_fd, int err_fd, int status_fd) {
  ::setpgid(0, 0);
  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  // The parent ignores nothing the child should: restore the defaults it may have changed.
  ::signal(SIGPIPE, SIG_DFL);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::execv(argv[0], argv.data());
  const int err = errno;
  ssize_t ignored = ::write(status_fd, &err, sizeof err);
  (void)ignored;
  ::_exit(127);
}

}  // namespace

std::string ChildResult::describe(double timeout_s) const {
  switch (end) {
    case End::kExited: return fmt::format("exit {}", exit_code);
    case End::kSignalled: return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
    case End::kTimedOut: return fmt::format("timed out after {:g} s (its process group was killed)", timeout_s);
    case End::kStopped: return "stopped: the gate was interrupted (its process group was killed)";
    case End::kCouldNotStart: return error;
  }
  return "?";
}

ChildResult run_child(const std::vector<std::string>& args, double timeout_s, const volatile std::sig_atomic_t* stop) {
  ChildResult r;
  if (args.empty()) {
    r.error = "no program to run";
    return r;
  }
  Pipe out, err, status;
  if (!out.open() || !err.open() || !status.open()) {
    r.error = fmt::format("cannot create pipes to run {}: {}", args[0], std::strerror(errno));
    return r;
  }
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    r.error = fmt::format("cannot fork to run {}: {}", args[0], std::strerror(errno));
    return r;
  }
  if (pid == 0) exec_child(argv, out.fd[1], err.fd[1], status.fd[1]);
  ::setpgid(pid, pid);  // also here: no window in which a kill of the group misses the child
  out.close_end(1);
  err.close_end(1);
  status.close_end(1);

  int exec_errno = 0;
  if (::read(status.fd[0], &exec_errno, sizeof exec_errno) == static_cast<ssize_t>(sizeof exec_errno)) {
    ::waitpid(pid, nullptr, 0);
    r.error = fmt::format("cannot run {}: {}", args[0], std::strerror(exec_errno));
    return r;
  }

  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  bool killed = false;
  char buf[65536];
  for (;;) {
    if (stop != nullptr && *stop != 0) {
      r.end = ChildResult::End::kStopped;
      killed = true;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      r.end = ChildResult::End::kTimedOut;
      killed = true;
      break;
    }
    const int wait_ms = static_cast<int>(std::min<long long>(left, 100));
    if (out.fd[0] < 0 && err.fd[0] < 0) {
      // Both pipes closed: wait for the leader without reaping it (its zombie keeps the group id
      // reserved, so the kill below reaches only stragglers of this group, never a reused id).
      siginfo_t info{};
      info.si_pid = 0;
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) break;
      ::poll(nullptr, 0, wait_ms);
      continue;
    }
    pollfd fds[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
    const int n = ::poll(fds, 2, wait_ms);
    for (int i = 0; i < 2 && n > 0; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        if (i == 0) {
          r.out.append(buf, static_cast<size_t>(got));
        } else {
          r.err_tail.append(buf, static_cast<size_t>(got));
          if (r.err_tail.size() > kErrTail) r.err_tail.erase(0, r.err_tail.size() - kErrTail);
        }
      } else if (got == 0 || errno != EINTR) {
        (i == 0 ? out : err).close_end(0);
      }
    }
  }
  ::kill(-pid, SIGKILL);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!killed) {
    if (WIFEXITED(wstatus)) {
      r.end = ChildResult::End::kExited;
      r.exit_code = WEXITSTATUS(wstatus);
    } else {
      r.end = ChildResult::End::kSignalled;
      r.signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
    }
  }
  return r;
}

}  // namespace detmoe::cli
