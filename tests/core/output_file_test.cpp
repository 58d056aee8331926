// The one output writer: atomic replace, checked writes, the old file intact on failure.
// A full disk is simulated with RLIMIT_FSIZE (writes past the limit fail with EFBIG once
// SIGXFSZ is ignored), so the test needs no root and no special file system.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "detmoe/output_file.h"

namespace detmoe {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

fs::path fresh_dir(const char* name) {
  const fs::path d = fs::path(::testing::TempDir()) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

size_t files_in(const fs::path& d) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(d)) ++n;
  return n;
}

TEST(OutputFile, WritesAndReplaces) {
  const fs::path d = fresh_dir("of_replace");
  const std::string p = (d / "a.json").string();
  ASSERT_TRUE(write_output_file(p, "first").ok());
  EXPECT_EQ(read_all(p), "first");
  ASSERT_TRUE(write_output_file(p, std::vector<std::string_view>{"sec", "ond"}).ok());
  EXPECT_EQ(read_all(p), "second");
  EXPECT_EQ(files_in(d), 1u) << "no temporary file left behind";
}

TEST(OutputFile, MissingFolderIsAnErrorNamingIt) {
  const fs::path d = fresh_dir("of_folders");
  const std::string p = (d / "x" / "z.bin").string();
  const Status s = write_output_file(p, "z");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(d / "x"));
}

TEST(OutputFile, FullDiskKeepsTheOldFileAndSaysWhy) {
  const fs::path d = fresh_dir("of_full");
  const std::string p = (d / "hashes.json").string();
  ASSERT_TRUE(write_output_file(p, "good old contents").ok());
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status s = write_output_file(p, std::string(100000, 'x'));
  setrlimit(RLIMIT_FSIZE, &old);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kIoError);
  EXPECT_NE(s.message().find(p), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
  EXPECT_EQ(read_all(p), "good old contents");
  EXPECT_EQ(files_in(d), 1u) << "the temporary file was removed";
}

TEST(OutputFile, DeviceFullIsAnError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  const Status s = write_output_file("/dev/full", "anything");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/dev/full"), std::string::npos) << s.message();
  EXPECT_TRUE(fs::is_character_file("/dev/full")) << "the device node must not be replaced";
}

TEST(OutputFile, DirectoryIsAnError) {
  const fs::path d = fresh_dir("of_dir");
  const Status s = write_output_file(d.string(), "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("directory"), std::string::npos) << s.message();
}

TEST(OutputFile, UnwritableFolderIsAnError) {
  if (::geteuid() == 0) {
    // root ignores permission bits: use a path under a regular file instead.
    const fs::path d = fresh_dir("of_unwritable");
    ASSERT_TRUE(write_output_file((d / "file").string(), "x").ok());
    EXPECT_FALSE(write_output_file((d / "file" / "out.html").string(), "x").ok());
    return;
  }
  EXPECT_FALSE(write_output_file("/proc/detmoe-no-such/out.html", "x").ok());
}

TEST(OutputFile, SameFile) {
  const fs::path d = fresh_dir("of_same");
  const std::string a = (d / "a").string();
  ASSERT_TRUE(write_output_file(a, "x").ok());
  EXPECT_TRUE(same_file(a, a));
  EXPECT_TRUE(same_file(a, (d / "." / "a").string()));
  fs::create_symlink(a, d / "link");
  EXPECT_TRUE(same_file(a, (d / "link").string()));
  EXPECT_FALSE(same_file(a, (d / "b").string()));
  EXPECT_TRUE(same_file((d / "new").string(), (d / "sub" / ".." / "new").string()));
}

}  // namespace
}  // namespace detmoe
