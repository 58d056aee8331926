// The megakernel's forward against the GPU reference on every golden case, live: out and y are
// bitwise equal (both sum the k slots in slot order with the contract's fp32 steps and round
// the same GEMM results; golden/hashes records the same for both on the H200). The cancel
// cases make the slot-sum order decide most of out's bits, so an order change in either path
// fails here, not only in the golden hashes of one of them.
#include <gtest/gtest.h>

#include "detmoe/reference_session.h"
#include "detmoe/row_exchange.h"
#include "golden/golden.h"
#include "gpu_problem.h"
#include "layer_test_util.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

std::vector<NamedTensor> reference_outputs(const HostProblem& p) {
  auto ex = make_loopback_exchange(static_cast<int>(p.shape.P));
  EXPECT_TRUE(ex.ok()) << ex.status().to_string();
  auto sess = ReferenceSession::create(p, std::shared_ptr<RowExchange>(std::move(*ex)));
  EXPECT_TRUE(sess.ok()) << sess.status().to_string();
  auto out = (*sess)->run(false);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<NamedTensor>{};
}

std::vector<NamedTensor> megakernel_outputs(const HostProblem& p) {
  auto c = testing::MegakernelCase::create(p);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  if (!c.ok()) return {};
  auto out = (*c)->run();
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<NamedTensor>{};
}

TEST(MegakernelGolden, OutAndYEqualTheReferenceBitwiseOnEveryGoldenCase) {
  DETMOE_REQUIRE_GPU();
  const auto cases = golden::load_cases(DETMOE_SOURCE_DIR "/golden/cases.json").value();
  int checked = 0;
  for (const golden::GoldenCase& c : cases) {
    SCOPED_TRACE(c.name);
    HostProblem p = golden::make_case_problem(c).value();
    p.data.dout.clear();  // the megakernel's forward
    const auto ref = reference_outputs(p), mk = megakernel_outputs(p);
    ASSERT_FALSE(ref.empty());
    EXPECT_TRUE(testing::bitwise_equal(mk, ref));
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

}  // namespace
}  // namespace detmoe
