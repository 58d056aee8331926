// Helpers of the GPU tests and fuzzers: the oracle's outputs for a seeded problem, routing from a
// spec string, loopback exchanges, one step of any implementation through the seam (run_impl),
// and compact assertions on output lists.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "detmoe/compare.h"
#include "detmoe/data.h"
#include "detmoe/oracle.h"
#include "detmoe/problem_session.h"
#include "detmoe/routing.h"
#include "detmoe/row_exchange.h"
#include "detmoe/shapes.h"

namespace detmoe::testing {

inline Routing make_routing(const Shape& shape, const std::string& spec, uint64_t seed) {
  return generate_routing(shape, parse_routing(spec).value(), seed).value();
}

inline std::vector<NamedTensor> oracle_tensors(const Shape& shape, const Routing& routing, uint64_t seed,
                                               GradPrecision grad, bool backward) {
  OracleInputs in = make_oracle_inputs(generate_layer_data(shape, seed), routing);
  if (!backward) in.dout.clear();
  OracleOptions opt;
  opt.grad_precision = grad;
  return oracle_output_tensors(run_oracle(in, opt).value(), shape, opt);
}

// The oracle's outputs and, with a backward, the magnitudes of its weight gradients (the
// Σ|terms| clause of docs/NUMERICS.md §4): what the GPU paths' backward is compared against.
struct OracleReference {
  std::vector<NamedTensor> outputs, magnitudes;
};

inline OracleReference oracle_reference(const Shape& shape, const Routing& routing, uint64_t seed, GradPrecision grad,
                                        bool backward) {
  OracleInputs in = make_oracle_inputs(generate_layer_data(shape, seed), routing);
  if (!backward) in.dout.clear();
  OracleOptions opt;
  opt.grad_precision = grad;
  opt.weight_grad_magnitudes = backward;
  const OracleOutputs out = run_oracle(in, opt).value();
  return {oracle_output_tensors(out, shape, opt), oracle_magnitude_tensors(out, shape)};
}

// Long, ragged weight-gradient sums, seed 0: one expert of 4226 rows (cuBLAS 13.1's one-call dW
// lost two rows' terms there, session 15) and the backward property's counterexample, whose
// expert 9 has 4226 rows. The GPU tests compare them with the oracle without the Σ|terms| clause.
struct RaggedCase {
  Shape shape;
  const char* routing;
};

inline std::vector<RaggedCase> ragged_row_count_cases() {
  return {{{4226, 64, 64, 1, 1, 1, 0}, "balanced"}, {{16384, 64, 64, 361, 10, 1, 0}, "zipf:1.570"}};
}

inline std::shared_ptr<RowExchange> loopback(int ranks) {
  return std::shared_ptr<RowExchange>(make_loopback_exchange(ranks).value());
}

// One step of implementation `impl` (a layer_session_impls() name) on the seeded problem, through
// the seam (ProblemSession) on a fresh loopback exchange of shape.P ranks.
inline StatusOr<std::vector<NamedTensor>> run_impl(std::string_view impl, const Shape& shape, const Routing& routing,
                                                   uint64_t seed, const LayerConfig& config = {}, bool backward = false) {
  auto session = ProblemSession::create(impl, shape, routing, seed, loopback(static_cast<int>(shape.P)), config);
  if (!session.ok()) return session.status();
  return (*session)->run(backward);
}

inline Shape shape_with(Shape s, int64_t P) {
  s.T = s.T * s.P / P;
  s.P = P;
  return s;
}

// Every tensor of `ref` within tolerance of the one of the same name in `got` (with the Σ|terms|
// clause for those that have a tensor in `magnitudes`).
inline ::testing::AssertionResult within_tolerance(const std::vector<NamedTensor>& got,
                                                   const std::vector<NamedTensor>& ref,
                                                   const std::vector<NamedTensor>& magnitudes = {}) {
  const auto results = compare_all_with_tolerance(got, ref, {}, magnitudes);
  for (const CompareResult& r : results)
    if (!r.ok()) return ::testing::AssertionFailure() << "\n" << format_tolerance_table(results);
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult within_tolerance(const std::vector<NamedTensor>& got, const OracleReference& ref) {
  return within_tolerance(got, ref.outputs, ref.magnitudes);
}

inline ::testing::AssertionResult bitwise_equal(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b,
                                                const std::vector<std::string>& skip = {}) {
  const auto results = compare_all_bitwise(a, b, skip);
  for (const BitwiseResult& r : results)
    if (!r.equal) return ::testing::AssertionFailure() << "\n" << format_bitwise_table(results);
  if (results.empty()) return ::testing::AssertionFailure() << "nothing compared";
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult all_written(const std::vector<NamedTensor>& got) {
  for (const NamedTensor& t : got)
    if (const int64_t n = count_nan(t); n > 0)
      return ::testing::AssertionFailure() << t.name << " has " << n << " of " << t.numel()
                                           << " elements unwritten (still NaN from the poison) or NaN";
  return ::testing::AssertionSuccess();
}

}  // namespace detmoe::testing
