// The phase marks (detmoe/phase_marks.h, the benchmark's --phases): each implementation names its
// phases in the order it runs them, every phase has a time, and marking changes no bits.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "detmoe/phase_marks.h"
#include "detmoe/problem_session.h"
#include "detmoe/shapes.h"
#include "gpu_problem.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

// Installs `marks` for its lifetime, so a failed assertion cannot leave them installed.
struct Installed {
  explicit Installed(PhaseMarks& marks) { installed_phase_marks() = &marks; }
  ~Installed() { installed_phase_marks() = nullptr; }
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, float>>& phases) {
  std::vector<std::string> names;
  for (const auto& p : phases) names.push_back(p.first);
  return names;
}

void expect_marked_run(const char* impl, const std::vector<std::string>& expected) {
  SCOPED_TRACE(impl);
  const Shape s = find_named_shape("small-shared").value();
  const Routing r = testing::make_routing(s, "zipf1", 3);
  auto sess = ProblemSession::create(impl, s, r, 3, testing::loopback(1));
  ASSERT_TRUE(sess.ok()) << sess.status().to_string();
  const auto unmarked = (*sess)->run(true);
  ASSERT_TRUE(unmarked.ok()) << unmarked.status().to_string();

  PhaseMarks marks;
  std::vector<std::pair<std::string, float>> phases;
  std::optional<StatusOr<std::vector<NamedTensor>>> marked;
  {
    Installed on(marks);
    marks.begin_step((*sess)->exchange().stream(0));
    marked.emplace((*sess)->run(true));  // synchronises the stream before it downloads
    phases = marks.phases();
  }
  ASSERT_TRUE(marked->ok()) << marked->status().to_string();
  EXPECT_EQ(marks.error(), cudaSuccess) << cudaGetErrorString(marks.error());
  EXPECT_EQ(names_of(phases), expected);
  for (const auto& [name, ms] : phases) EXPECT_GE(ms, 0.0f) << name;
  EXPECT_TRUE(testing::bitwise_equal(*unmarked, **marked));

  // Uninstalled, nothing is recorded: a further run leaves the marks of the last one.
  (*sess)->run(true);
  EXPECT_EQ(names_of(marks.phases()), expected);
}

TEST(PhaseMarks, TheReferenceNamesItsPhasesInOrder) {
  DETMOE_REQUIRE_GPU();
  expect_marked_run("reference", {"plan + gather", "dispatch exchange", "gate_up GEMMs", "SwiGLU", "down GEMMs",
                                  "combine exchange", "shared expert forward", "combine", "dy build + d_topk_w",
                                  "dy exchange", "da GEMMs", "dSwiGLU", "dx GEMMs", "dW_down", "dW_gate_up",
                                  "dx exchange", "shared expert backward", "d_x sum"});
}

TEST(PhaseMarks, TheMegakernelNamesItsLaunchesInOrder) {
  DETMOE_REQUIRE_GPU();
  expect_marked_run("megakernel", {"fused forward launch", "fused backward launch", "dW_down", "dW_gate_up"});
}

}  // namespace
}  // namespace detmoe
