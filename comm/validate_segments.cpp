#include <fmt/format.h>

#include "detmoe/row_exchange.h"

namespace detmoe {

Status validate_segments(std::span<const RowSegment> segments, int world_size, std::span<const int64_t> src_rows,
                         std::span<const int64_t> dst_rows) {
  for (size_t i = 0; i < segments.size(); ++i) {
    const RowSegment& s = segments[i];
    if (s.src_rank < 0 || s.src_rank >= world_size || s.dst_rank < 0 || s.dst_rank >= world_size)
      return invalid_argument(fmt::format("segment {}: ranks {} -> {} outside [0, {})", i, s.src_rank, s.dst_rank, world_size));
    if (s.rows < 0 || s.src_row < 0 || s.dst_row < 0)
      return invalid_argument(fmt::format("segment {}: negative rows {} / src_row {} / dst_row {}", i, s.rows, s.src_row, s.dst_row));
    if (static_cast<size_t>(s.src_rank) < src_rows.size() && s.src_row + s.rows > src_rows[s.src_rank])
      return Status(ErrorCode::kCapacityExceeded,
                    fmt::format("segment {}: rows [{}, {}) of rank {}'s send buffer, which holds {} rows", i, s.src_row,
                                s.src_row + s.rows, s.src_rank, src_rows[s.src_rank]));
    if (static_cast<size_t>(s.dst_rank) < dst_rows.size() && s.dst_row + s.rows > dst_rows[s.dst_rank])
      return Status(ErrorCode::kCapacityExceeded,
                    fmt::format("segment {}: rows [{}, {}) of rank {}'s receive buffer, which holds {} rows", i,
                                s.dst_row, s.dst_row + s.rows, s.dst_rank, dst_rows[s.dst_rank]));
  }
  return Status::Ok();
}

}  // namespace detmoe
