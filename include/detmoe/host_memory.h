// Host memory checked before a big allocation, so a valid problem too large for the machine
// fails at once with the amount it needs instead of a bare std::bad_alloc (or the kernel's OOM
// killer) after minutes of work.
#pragma once

#include <cstdint>
#include <string>

#include "detmoe/problem.h"
#include "detmoe/status.h"

namespace detmoe {

// MemAvailable of /proc/meminfo (bytes), or physical pages × page size where that is missing;
// DETMOE_HOST_MEMORY_LIMIT (bytes) overrides it, for tests and for sharing a machine.
int64_t available_host_bytes();

// kOutOfMemory naming `what`, both amounts in GiB and the override, when `need` exceeds
// available_host_bytes(); Ok otherwise.
Status require_host_bytes(int64_t need, const std::string& what);

// Bytes of one problem's seeded host data (LayerData, bf16) and routing.
int64_t problem_host_bytes(const Shape& shape, bool backward);

}  // namespace detmoe
