#include "output_paths.h"

#include <fmt/format.h>

#include <filesystem>

#include "detmoe/output_file.h"
#include "detmoe/status.h"

namespace detmoe::cli {
namespace {
namespace fs = std::filesystem;
}  // namespace

void refuse_same_file(std::string_view out_option, const std::string& out, std::string_view in_option,
                      const std::string& in, std::string_view why) {
  if (out.empty() || in.empty() || !same_file(out, in)) return;
  throw Error(invalid_argument(fmt::format("{} {} is the same file as {} {}: {}", out_option, out, in_option, in, why)));
}

void refuse_directory_input(std::string_view option, const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw Error({ErrorCode::kIoError, fmt::format("{} {} is a directory, not a file", option, path)});
}

void check_output_path(std::string_view option, const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw Error({ErrorCode::kIoError, fmt::format("cannot write {} {}: it is a directory", option, path)});
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw Error({ErrorCode::kIoError, fmt::format("cannot write {} {}: the folder {} does not exist", option, path, dir.string())});
}

}  // namespace detmoe::cli
