#include "data_paths.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace detmoe::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMarker = "golden/cases.json";

bool holds_data(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kMarker, ec);
}

fs::path search_upwards(fs::path dir) {
  std::error_code ec;
  dir = fs::weakly_canonical(dir, ec);
  if (ec) return {};
  for (;;) {
    if (holds_data(dir)) return dir;
    if (!dir.has_parent_path() || dir.parent_path() == dir) return {};
    dir = dir.parent_path();
  }
}

struct Root {
  std::string dir, how;
};

Root find_root() {
  if (const char* env = std::getenv("DETMOE_DATA_DIR"); env != nullptr && *env != '\0') {
    // An explicit choice is honoured even when it holds no data: the messages then say so.
    return {fs::absolute(env).lexically_normal().string(), "from $DETMOE_DATA_DIR"};
  }
  const fs::path exe(executable_dir());
  if (fs::path p = search_upwards(exe); !p.empty()) return {p.string(), "the checkout holding the executable"};
  if (const fs::path share = exe / ".." / "share" / "detmoe"; holds_data(share))
    return {fs::weakly_canonical(share).string(), "the install beside the executable"};
  std::error_code ec;
  if (fs::path p = search_upwards(fs::current_path(ec)); !ec && !p.empty()) return {p.string(), "the checkout holding the working directory"};
  return {};
}

}  // namespace

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path(ec).string() : exe.parent_path().string();
}

const std::string& data_root() {
  static const Root root = find_root();
  return root.dir;
}

std::string data_root_description() {
  static const Root root = find_root();
  if (root.dir.empty())
    return fmt::format("no data folder found (none of the executable's folders, its ../share/detmoe or the working "
                       "directory's folders holds {}; set DETMOE_DATA_DIR to a DetMoE checkout)",
                       kMarker);
  return fmt::format("{} ({})", root.dir, root.how);
}

std::string data_path(const std::string& relative) {
  if (!data_root().empty()) return (fs::path(data_root()) / relative).string();
  // Said once, on the first default that is needed, so a "cannot open golden/cases.json" that
  // follows is explained: where DetMoE looked and how to point it at its data.
  static const bool warned = [] {
    std::fprintf(stderr, "detmoe: %s\n", data_root_description().c_str());
    return true;
  }();
  (void)warned;
  return relative;
}

std::string helper_program(const std::string& relative) {
  const fs::path exe(executable_dir());
  std::error_code ec;
  for (const fs::path& p : {exe / relative, exe / fs::path(relative).filename(), exe / ".." / "libexec" / "detmoe" / relative})
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
  return (exe / relative).lexically_normal().string();
}

}  // namespace detmoe::cli
