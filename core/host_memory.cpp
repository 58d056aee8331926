#include "detmoe/host_memory.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace detmoe {

int64_t available_host_bytes() {
  if (const char* env = std::getenv("DETMOE_HOST_MEMORY_LIMIT"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return v;
  }
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : INT64_MAX;
}

namespace {

std::string human_bytes(int64_t b) {
  constexpr double kMiB = 1024.0 * 1024.0, kGiB = 1024.0 * kMiB;
  return b >= int64_t{1} << 30 ? fmt::format("{:.1f} GiB", b / kGiB) : fmt::format("{:.1f} MiB", b / kMiB);
}

}  // namespace

Status require_host_bytes(int64_t need, const std::string& what) {
  const int64_t have = available_host_bytes();
  if (need <= have) return Status::Ok();
  return Status(ErrorCode::kOutOfMemory,
                fmt::format("{} needs about {} of host memory, but only {} is available (/proc/meminfo MemAvailable, "
                            "or DETMOE_HOST_MEMORY_LIMIT): use a smaller shape or --T",
                            what, human_bytes(need), human_bytes(have)));
}

int64_t problem_host_bytes(const Shape& s, bool backward) {
  const int64_t N = s.tokens_global();
  const int64_t dense = N * s.H * (backward ? 2 : 1) + 3 * s.E * s.F * s.H + 3 * s.Fs * s.H;
  return 2 * dense + 8 * N * s.k;
}

}  // namespace detmoe
