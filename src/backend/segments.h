// Row segments of the packed sequence and the per-request tables every block reuses.
// A Segment says: rows [start, stop) read AdaLN table row `table_row` (= timestep_index * 3 + modality
// for block tables, = timestep_index for the final-layer table). Built once per step from the
// request layout (src/model/packing.h) and reused by all blocks (seeds' segment-index cache).
#pragma once

#include <cstdint>
#include <vector>

#include "vortex/tensor.h"

namespace vortex {

struct Segment {
  int64_t start = 0;
  int64_t stop = 0;
  int32_t table_row = 0;
};

struct SegmentTable {
  std::vector<Segment> segments;  // sorted by start, contiguous, covering [0, rows)
  int64_t rows = 0;
  // Checks sortedness, coverage, non-empty segments and table_row < table_rows.
  Status validate(int64_t table_rows) const;
  // Table row of one packed row (linear scan; for tests and references); -1 when r is not covered.
  int32_t row_of(int64_t r) const;
  // The table of rows [begin, end) renumbered from 0: one rank's rows under sequence parallelism
  // (each rank modulates its own rows with the segments that overlap them).
  SegmentTable slice(int64_t begin, int64_t end) const;
};

// RoPE cos/sin tables for a request, computed once on the host (docs/numerics.md) and uploaded.
// Column j < rope_dims/2 holds the angle shared by rotated dims j and j + rope_dims/2.
struct RopeTables {
  Tensor cos;  // [S, rope_dims/2] bf16
  Tensor sin;  // [S, rope_dims/2] bf16
  int rope_dims = 0;
};

}  // namespace vortex
