// The megakernel's forward against the GPU reference on every golden case, live: out and y are
// bitwise equal (both sum the k slots in slot order with the contract's fp32 steps and round
// the same GEMM results; golden/hashes records the same for both on the H200). The cancel
// cases make the slot-sum order decide most of out's bits, so an order change in either path
// fails here, not only in the golden hashes of one of them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "detmoe/problem_session.h"
#include "detmoe/row_exchange.h"
#include "golden/golden.h"
#include "gpu_problem.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

// Forward outputs of `impl` on the golden case, through the seam.
std::vector<NamedTensor> forward_outputs(const char* impl, const HostProblem& p) {
  auto sess = ProblemSession::create(impl, p, testing::loopback(static_cast<int>(p.shape.P)));
  EXPECT_TRUE(sess.ok()) << impl << ": " << sess.status().to_string();
  if (!sess.ok()) return {};
  auto out = (*sess)->run(false);
  EXPECT_TRUE(out.ok()) << impl << ": " << out.status().to_string();
  return out.ok() ? *out : std::vector<NamedTensor>{};
}

// The golden cases of the checkout under test: DETMOE_SOURCE_DIR from the environment when set
// (a binary built in another checkout and run here, as ci/device-ab-prebuilt.sh does), else the
// source tree this binary was built from.
std::string golden_cases_path() {
  const char* dir = std::getenv("DETMOE_SOURCE_DIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : DETMOE_SOURCE_DIR) + "/golden/cases.json";
}

TEST(MegakernelGolden, OutAndYEqualTheReferenceBitwiseOnEveryGoldenCase) {
  DETMOE_REQUIRE_GPU();
  const auto cases = golden::load_cases(golden_cases_path()).value();
  int checked = 0;
  for (const golden::GoldenCase& c : cases) {
    SCOPED_TRACE(c.name);
    HostProblem p = golden::make_case_problem(c).value();
    p.data.dout.clear();  // the megakernel's forward
    const auto ref = forward_outputs("reference", p), mk = forward_outputs("megakernel", p);
    ASSERT_FALSE(ref.empty());
    EXPECT_TRUE(testing::bitwise_equal(mk, ref));
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

}  // namespace
}  // namespace detmoe
