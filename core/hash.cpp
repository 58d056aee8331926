#include "detmoe/hash.h"

#include <fmt/format.h>
#include <xxhash.h>

namespace detmoe {

std::string Hash128::hex() const { return fmt::format("{:016x}{:016x}", high, low); }

Hash128 hash_bytes(const void* data, size_t size) {
  const XXH128_hash_t h = XXH3_128bits(data, size);
  return Hash128{h.high64, h.low64};
}

}  // namespace detmoe
