// The megakernel's forward against the GPU reference on every golden case, live: out and y are
// bitwise equal (both sum the k slots in slot order with the contract's fp32 steps and round
// the same GEMM results; golden/hashes records the same for both on the H200). The cancel
// cases make the slot-sum order decide most of out's bits, so an order change in either path
// fails here, not only in the golden hashes of one of them.
#include <gtest/gtest.h>

#include "detmoe/device_problem.h"
#include "detmoe/layer.h"
#include "detmoe/reference_session.h"
#include "detmoe/row_exchange.h"
#include "golden/golden.h"
#include "gpu_problem.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

std::vector<NamedTensor> reference_outputs(const HostProblem& p) {
  auto ex = make_loopback_exchange(static_cast<int>(p.shape.P));
  EXPECT_TRUE(ex.ok()) << ex.status().to_string();
  std::shared_ptr<RowExchange> exchange(std::move(*ex));
  auto sess = p.seed ? ReferenceSession::create(p.shape, p.routing, *p.seed, exchange)
                     : ReferenceSession::create(p.shape, p.routing, p.data, exchange);
  EXPECT_TRUE(sess.ok()) << sess.status().to_string();
  auto out = (*sess)->run(false);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<NamedTensor>{};
}

std::vector<NamedTensor> megakernel_outputs(const HostProblem& p) {
  auto ex = make_loopback_exchange(static_cast<int>(p.shape.P));
  EXPECT_TRUE(ex.ok()) << ex.status().to_string();
  auto problem = p.seed ? DeviceProblem::create(p.shape, p.routing, *p.seed, **ex)
                        : DeviceProblem::create(p.shape, p.routing, p.data, **ex);
  EXPECT_TRUE(problem.ok()) << problem.status().to_string();
  auto layer = Layer::create(p.shape, LayerConfig{});
  EXPECT_TRUE(layer.ok()) << layer.status().to_string();
  if (!problem.ok() || !layer.ok()) return {};
  cudaStream_t stream = (*ex)->stream(0);
  EXPECT_TRUE((*layer)->forward({(*problem)->inputs(), (*problem)->outputs()}, stream).ok());
  EXPECT_TRUE((*layer)->synchronize(stream).ok());
  auto out = (*problem)->download(false);
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
