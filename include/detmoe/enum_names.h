// An enum value from its name: the inverse of the enum's to_string over the values it lists, with
// an error that names the bad text and the allowed names. For .cpp files (fmt).
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "detmoe/status.h"

namespace detmoe {

template <class E, std::size_t N>
StatusOr<E> parse_name(std::string_view s, const std::array<E, N>& values, const char* what) {
  std::string allowed;
  for (E v : values) {
    if (s == to_string(v)) return v;
    allowed += (allowed.empty() ? "" : ", ") + std::string(to_string(v));
  }
  return invalid_argument(fmt::format("{} \"{}\" is not one of {}", what, s, allowed));
}

}  // namespace detmoe
