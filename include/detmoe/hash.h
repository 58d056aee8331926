// XXH3-128 content hashes: how golden files and `detmoe oracle` name output bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace detmoe {

struct Hash128 {
  uint64_t high = 0;
  uint64_t low = 0;
  std::string hex() const;  // 32 lowercase hex digits, high word first
  bool operator==(const Hash128&) const = default;
};

Hash128 hash_bytes(const void* data, size_t size);

}  // namespace detmoe
