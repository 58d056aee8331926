// Shared helpers of the oracle tests: seeded problems, checked runs, bitwise comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "detmoe/oracle.h"

namespace detmoe {

// How rapidcheck prints these in a counterexample (found by argument-dependent lookup).
inline void showValue(const Shape& s, std::ostream& os) { os << s.to_string(); }
inline void showValue(const RoutingSpec& r, std::ostream& os) { os << r.to_string(); }
inline void showValue(OracleMode m, std::ostream& os) { os << (m == OracleMode::kExact ? "kExact" : "kContract"); }
inline void showValue(GradPrecision g, std::ostream& os) { os << to_string(g); }

}  // namespace detmoe

namespace detmoe::testing {

// A valid problem from the project's seeded generators (bf16 values, routing per `routing`).
OracleInputs make_problem(const Shape& shape, uint64_t seed, const RoutingSpec& routing = {});

// run_oracle that fails the calling test (and returns empty outputs) on a non-ok Status.
OracleOutputs run_checked(const OracleInputs& in, OracleMode mode = OracleMode::kContract, int threads = 1,
                          GradPrecision grad = GradPrecision::kFP32);

// Every output vector of `o` with its name, in oracle_output_tensors order.
std::vector<std::pair<std::string, const std::vector<double>*>> output_fields(const OracleOutputs& o);

// Success when both vectors hold the same bits; otherwise names the first differing element.
::testing::AssertionResult same_bits(const std::string& name, const std::vector<double>& a,
                                     const std::vector<double>& b);
// same_bits over every output field.
::testing::AssertionResult same_bits(const OracleOutputs& a, const OracleOutputs& b);

// The rows `rows` (each of `width` values) of v, in the order given.
std::vector<double> take_rows(const std::vector<double>& v, int64_t width, const std::vector<int64_t>& rows);
std::vector<int32_t> take_rows(const std::vector<int32_t>& v, int64_t width, const std::vector<int64_t>& rows);

// The inputs restricted to tokens `tokens` (in that order), as a P = 1 problem.
OracleInputs take_tokens(const OracleInputs& in, const std::vector<int64_t>& tokens);

}  // namespace detmoe::testing
