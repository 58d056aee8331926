#include "detmoe/output_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace detmoe {
namespace {

namespace fs = std::filesystem;

Status io_error(const std::string& what, const std::string& path, int err) {
  return {ErrorCode::kIoError, fmt::format("{} {}: {}", what, path, std::strerror(err))};
}

// Temporary files of writes in progress, for the signal handler: fixed storage, no allocation.
struct InflightSlot {
  std::atomic<bool> claimed{false};
  std::atomic<bool> ready{false};  // path is complete: the handler may unlink it
  char path[4096] = {};
};
std::array<InflightSlot, 16> g_inflight;

int claim_inflight(const std::string& path) {
  if (path.size() >= sizeof(InflightSlot::path)) return -1;
  for (size_t i = 0; i < g_inflight.size(); ++i) {
    bool expected = false;
    if (g_inflight[i].claimed.compare_exchange_strong(expected, true)) {
      std::memcpy(g_inflight[i].path, path.c_str(), path.size() + 1);
      g_inflight[i].ready.store(true);
      return static_cast<int>(i);
    }
  }
  return -1;  // more than 16 writes at once: still written, just not cleaned up on a signal
}

void release_inflight(int slot) {
  if (slot < 0) return;
  g_inflight[slot].ready.store(false);
  g_inflight[slot].claimed.store(false);
}

// Writes everything, retrying short writes and EINTR. Returns 0 or the errno.
int write_all(int fd, const std::vector<std::string_view>& pieces) {
  for (std::string_view piece : pieces) {
    const char* p = piece.data();
    size_t left = piece.size();
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      if (n == 0) return EIO;
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  return 0;
}

// fsync where the target supports it (character devices and pipes answer EINVAL/EROFS).
int sync_fd(int fd) {
  if (::fsync(fd) == 0) return 0;
  return (errno == EINVAL || errno == EROFS || errno == ENOTSUP) ? 0 : errno;
}

Status write_in_place(const std::string& path, const std::vector<std::string_view>& pieces) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open for writing", path, errno);
  int err = write_all(fd, pieces);
  if (err == 0) err = sync_fd(fd);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) return io_error("cannot write", path, err);
  return Status::Ok();
}

}  // namespace

Status write_output_file(const std::string& path, const std::vector<std::string_view>& pieces) {
  if (path.empty()) return Status(ErrorCode::kIoError, "cannot write a file with an empty name");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status(ErrorCode::kIoError, fmt::format("cannot write {}: it is a directory", path));
    if (!S_ISREG(st.st_mode)) return write_in_place(path, pieces);
  }
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Status(ErrorCode::kIoError, fmt::format("cannot write {}: the folder {} does not exist", path, dir.string()));
  static std::atomic<unsigned> counter{0};
  const std::string tmp =
      (dir / fmt::format(".{}.tmp.{}.{}", target.filename().string(), ::getpid(), counter.fetch_add(1))).string();
  const int slot = claim_inflight(tmp);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    release_inflight(slot);
    return io_error(fmt::format("cannot write {}: cannot create the temporary file", path), tmp, err);
  }
  int err = write_all(fd, pieces);
  if (err == 0) err = sync_fd(fd);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    release_inflight(slot);
    return io_error("cannot write", path, err);
  }
  release_inflight(slot);
  // Make the rename itself durable (best effort: some file systems refuse to fsync a folder).
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  std::error_code ea, eb;
  const fs::path pa = fs::weakly_canonical(fs::absolute(a), ea), pb = fs::weakly_canonical(fs::absolute(b), eb);
  return !ea && !eb && pa == pb;
}

void remove_inflight_output_files() {
  for (auto& slot : g_inflight)
    if (slot.ready.load()) ::unlink(slot.path);
}

}  // namespace detmoe
