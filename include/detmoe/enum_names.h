// An enum value from its name: the inverse of the enum's to_string over the values it lists, with
// an error that names the bad text and the allowed names. For .cpp files (fmt).
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "detmoe/status.h"

namespace detmoe {

// "a, b, c" — or with `with_values`, "a (0), b (1), c (2)" (the enum's integers, for a value that
// came in as an integer) — the allowed names of an error message.
template <class E, std::size_t N>
std::string name_list(const std::array<E, N>& values, bool with_values = false) {
  std::string names;
  for (E v : values) {
    names += names.empty() ? "" : ", ";
    names += with_values ? fmt::format("{} ({})", to_string(v), static_cast<int64_t>(v)) : std::string(to_string(v));
  }
  return names;
}

template <class E, std::size_t N>
StatusOr<E> parse_name(std::string_view s, const std::array<E, N>& values, const char* what) {
  for (E v : values)
    if (s == to_string(v)) return v;
  return invalid_argument(fmt::format("{} \"{}\" is not one of {}", what, s, name_list(values)));
}

}  // namespace detmoe
