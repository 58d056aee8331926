#include "oracle_test_problem.h"

#include <bit>
#include <cstring>

#include "detmoe/data.h"
#include "detmoe/routing.h"

namespace detmoe::testing {

OracleInputs make_problem(const Shape& shape, uint64_t seed, const RoutingSpec& routing) {
  const LayerData data = generate_layer_data(shape, seed);
  StatusOr<Routing> r = generate_routing(shape, routing, seed);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return {};
  return make_oracle_inputs(data, *r);
}

OracleOutputs run_checked(const OracleInputs& in, OracleMode mode, int threads, GradPrecision grad) {
  StatusOr<OracleOutputs> out = run_oracle(in, OracleOptions{mode, grad, threads});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  return std::move(out).value();
}

std::vector<std::pair<std::string, const std::vector<double>*>> output_fields(const OracleOutputs& o) {
  return {{"out", &o.out},         {"y", &o.y},
          {"d_x", &o.d_x},         {"d_topk_w", &o.d_topk_w},
          {"dw_gate", &o.dw_gate}, {"dw_up", &o.dw_up},
          {"dw_down", &o.dw_down}, {"dws_gate", &o.dws_gate},
          {"dws_up", &o.dws_up},   {"dws_down", &o.dws_down}};
}

::testing::AssertionResult same_bits(const std::string& name, const std::vector<double>& a,
                                     const std::vector<double>& b) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << name << ": sizes " << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint64_t>(a[i]) != std::bit_cast<uint64_t>(b[i]))
      return ::testing::AssertionFailure() << name << "[" << i << "]: " << a[i] << " vs " << b[i] << " (hex "
                                           << std::hexfloat << a[i] << " vs " << b[i] << std::defaultfloat << ")";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_bits(const OracleOutputs& a, const OracleOutputs& b) {
  const auto fa = output_fields(a), fb = output_fields(b);
  for (size_t i = 0; i < fa.size(); ++i) {
    ::testing::AssertionResult r = same_bits(fa[i].first, *fa[i].second, *fb[i].second);
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

template <class T>
static std::vector<T> take_rows_impl(const std::vector<T>& v, int64_t width, const std::vector<int64_t>& rows) {
  std::vector<T> out;
  out.reserve(rows.size() * width);
  for (int64_t r : rows) out.insert(out.end(), v.begin() + r * width, v.begin() + (r + 1) * width);
  return out;
}

std::vector<double> take_rows(const std::vector<double>& v, int64_t width, const std::vector<int64_t>& rows) {
  return take_rows_impl(v, width, rows);
}
std::vector<int32_t> take_rows(const std::vector<int32_t>& v, int64_t width, const std::vector<int64_t>& rows) {
  return take_rows_impl(v, width, rows);
}

OracleInputs take_tokens(const OracleInputs& in, const std::vector<int64_t>& tokens) {
  OracleInputs sub = in;
  sub.shape.P = 1;
  sub.shape.T = static_cast<int64_t>(tokens.size());
  const int64_t H = in.shape.H, k = in.shape.k;
  sub.x = take_rows(in.x, H, tokens);
  sub.topk_idx = take_rows(in.topk_idx, k, tokens);
  sub.topk_w = take_rows(in.topk_w, k, tokens);
  if (!in.dout.empty()) sub.dout = take_rows(in.dout, H, tokens);
  return sub;
}

}  // namespace detmoe::testing
