// Properties of the GPU paths over random shapes, EP sizes and routing distributions
// (data filled on the device from a drawn seed; a failure shrinks to a small problem and
// reproduces from RC_PARAMS="reproduce=…"):
// - every implementation of the seam (LayerFuzz/<impl>, forward + backward where it has one)
//   matches the oracle within tolerance, writes every output element, and a rerun gives
//   identical bits (D0); with P > 1 ranks it also gives P = 1's bits (D2);
// - the GPU plan equals the host plan, table for table;
// - a corrupted routing gets the host validator's exact message.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cmath>

#include "detmoe/device_plan.h"
#include "detmoe/plan.h"
#include "detmoe/layer_session.h"
#include "detmoe/problem_session.h"
#include "reference/gpu_problem.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

struct Problem {
  Shape shape;  // per rank
  std::string routing;
  uint64_t seed = 0;
};

// Shapes small enough for the oracle; P divides E; routing specs valid for (E, k).
Problem draw_problem() {
  Problem p;
  Shape& s = p.shape;
  s.E = *rc::gen::element<int64_t>(1, 2, 3, 4, 8, 16);
  s.k = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(s.E, 4) + 1);
  std::vector<int64_t> ps;
  for (int64_t P : {1, 2, 4, 8})
    if (s.E % P == 0) ps.push_back(P);
  s.P = *rc::gen::elementOf(ps);
  s.T = *rc::gen::inRange<int64_t>(1, 41);
  s.H = 64 * *rc::gen::inRange<int64_t>(1, 4);
  s.F = 64 * *rc::gen::inRange<int64_t>(1, 3);
  s.Fs = *rc::gen::element<int64_t>(0, 0, 64);
  std::vector<std::string> specs = {"balanced", "zipf1", "zipf:2.5", "hot:0.8", "all-to-one"};
  if (s.E - s.k >= 1) specs.push_back("empty:" + std::to_string(*rc::gen::inRange<int64_t>(1, s.E - s.k + 1)));
  p.routing = *rc::gen::elementOf(specs);
  p.seed = *rc::gen::inRange<uint64_t>(0, uint64_t{1} << 40);
  RC_TAG(p.shape.P);
  return p;
}

std::string describe(const Problem& p) { return p.shape.to_string() + " routing=" + p.routing + " seed=" + std::to_string(p.seed); }

// Every implementation of the seam, by name: forward + backward where it has a backward.
class LayerFuzz : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerFuzz, MatchesOracleWritesEverythingAndIsDeterministic) {
  DETMOE_REQUIRE_GPU();
  const std::string impl = GetParam();
  const bool backward = layer_session_has_backward(impl);
  const bool ok = rc::check(impl + " layer vs oracle, D0, D2", [&] {
    const Problem p = draw_problem();
    RC_LOG() << impl << " " << describe(p) << (backward ? " fwd+bwd" : " fwd") << "\n";
    const Routing r = testing::make_routing(p.shape, p.routing, p.seed);
    LayerConfig config;
    config.grad_precision = *rc::gen::element(GradPrecision::kFP32, GradPrecision::kBF16);
    // h saved or not (both backwards recompute it when it is not).
    config.save_h = *rc::gen::arbitrary<bool>();
    auto sess = ProblemSession::create(impl, p.shape, r, p.seed, testing::loopback(static_cast<int>(p.shape.P)), config);
    RC_ASSERT(sess.ok());
    auto first = (*sess)->run(backward);
    RC_ASSERT(first.ok());
    for (const NamedTensor& t : *first) RC_ASSERT(count_nan(t) == 0);
    const auto oracle = testing::oracle_reference(p.shape, r, p.seed, config.grad_precision, backward);
    const auto results = compare_all_with_tolerance(*first, oracle.outputs, {}, oracle.magnitudes);
    for (const CompareResult& c : results) {
      if (!c.ok()) RC_LOG() << format_tolerance_table(results);
      RC_ASSERT(c.ok());
    }
    auto second = (*sess)->run(backward);
    RC_ASSERT(second.ok());
    for (const BitwiseResult& b : compare_all_bitwise(*first, *second)) RC_ASSERT(b.equal);
    if (p.shape.P > 1) {
      const Shape one = testing::shape_with(p.shape, 1);
      auto base = ProblemSession::create(impl, one, testing::make_routing(one, p.routing, p.seed), p.seed, testing::loopback(1),
                                         config);
      RC_ASSERT(base.ok());
      auto base_out = (*base)->run(backward);
      RC_ASSERT(base_out.ok());
      for (const BitwiseResult& b : compare_all_bitwise(*first, *base_out, {"dws_gate", "dws_up", "dws_down"})) {
        if (!b.equal) RC_LOG() << format_bitwise_table({b});
        RC_ASSERT(b.equal);
      }
    }
  });
  EXPECT_TRUE(ok);
}

INSTANTIATE_TEST_SUITE_P(EveryImplementation, LayerFuzz, ::testing::ValuesIn(layer_session_impls()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

StatusOr<RoutingPlan> device_plan(const Shape& s, const Routing& r, bool with_weights) {
  int32_t* idx = nullptr;
  float* w = nullptr;
  const size_t n = r.topk_idx.size();
  if (cudaMalloc(&idx, n * 4) != cudaSuccess || cudaMalloc(&w, n * 4) != cudaSuccess)
    return Status(ErrorCode::kCudaError, "cudaMalloc");
  cudaMemcpy(idx, r.topk_idx.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(w, r.topk_w.data(), n * 4, cudaMemcpyHostToDevice);
  auto plan = build_routing_plan_on_device(s, idx, with_weights ? w : nullptr, 0, nullptr);
  cudaFree(idx);
  cudaFree(w);
  return plan;
}

TEST(ReferenceFuzz, DevicePlanEqualsHostPlan) {
  DETMOE_REQUIRE_GPU();
  const bool ok = rc::check("GPU plan == host plan", [] {
    Problem p = draw_problem();
    p.shape.T = *rc::gen::inRange<int64_t>(1, 700);  // crosses the 256-token chunks
    const Routing r = testing::make_routing(p.shape, p.routing, p.seed);
    const RoutingPlan host = build_routing_plan(p.shape, r.topk_idx.data()).value();
    auto gpu = device_plan(p.shape, r, false);
    RC_ASSERT(gpu.ok());
    RC_ASSERT(gpu->expert_count == host.expert_count);
    RC_ASSERT(gpu->expert_offset == host.expert_offset);
    RC_ASSERT(gpu->expert_src_count == host.expert_src_count);
    RC_ASSERT(gpu->expert_src_offset == host.expert_src_offset);
    RC_ASSERT(gpu->rank_row_begin == host.rank_row_begin);
    RC_ASSERT(gpu->row_token == host.row_token);
    RC_ASSERT(gpu->row_slot == host.row_slot);
    RC_ASSERT(gpu->slot_row == host.slot_row);
    RC_ASSERT(gpu->pair_rows == host.pair_rows);
    RC_ASSERT(gpu->send_offset == host.send_offset);
    RC_ASSERT(gpu->recv_offset == host.recv_offset);
    RC_ASSERT(gpu->max_recv_rows == host.max_recv_rows);
  });
  EXPECT_TRUE(ok);
}

TEST(ReferenceFuzz, CorruptedRoutingGetsTheHostMessage) {
  DETMOE_REQUIRE_GPU();
  const bool ok = rc::check("bad routing: device message == host message", [] {
    const Problem p = draw_problem();
    Routing r = testing::make_routing(p.shape, p.routing, p.seed);
    const int64_t n = static_cast<int64_t>(r.topk_idx.size());
    const int64_t at = *rc::gen::inRange<int64_t>(0, n);
    const int kind = *rc::gen::inRange(0, 4);
    const int64_t E = p.shape.E;
    switch (kind) {
      case 0: r.topk_idx[at] = static_cast<int32_t>(*rc::gen::inRange<int64_t>(E, E + 1000)); break;
      case 1: r.topk_idx[at] = -*rc::gen::inRange<int32_t>(1, 1000); break;
      case 2:
        RC_PRE(p.shape.k >= 2);
        r.topk_idx[at] = r.topk_idx[(at / p.shape.k) * p.shape.k + (at % p.shape.k + 1) % p.shape.k];
        break;
      default: r.topk_w[at] = *rc::gen::element(NAN, INFINITY, -INFINITY); break;
    }
    const Status host = validate_routing(p.shape, r.topk_idx.data(), r.topk_w.data(), p.shape.tokens_global());
    RC_ASSERT(!host.ok());
    auto gpu = device_plan(p.shape, r, true);
    RC_ASSERT(!gpu.ok());
    RC_ASSERT(gpu.status().code() == host.code());
    RC_ASSERT(gpu.status().message() == host.message());
  });
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace detmoe
