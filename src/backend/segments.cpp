// SegmentTable checks and lookup (src/backend/segments.h): the (start, stop, table_row) runs that map
// packed rows to AdaLN table rows. validate() guards every backend against malformed tables; row_of()
// is the linear reference lookup used by tests and CPU references. Tested in tests/model/packing_test.cpp.
#include <algorithm>
#include <string>

#include "backend/segments.h"

namespace vortex {

Status SegmentTable::validate(int64_t table_rows) const {
  int64_t expect = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    const std::string where = "segment " + std::to_string(i) + " [" + std::to_string(s.start) + ", " +
                              std::to_string(s.stop) + ") row " + std::to_string(s.table_row);
    if (s.start != expect) {
      return internal_error(where + ": segments must be sorted and contiguous, expected start " +
                            std::to_string(expect));
    }
    if (s.stop <= s.start) return internal_error(where + ": segment is empty");
    if (s.table_row < 0 || s.table_row >= table_rows) {
      return internal_error(where + ": table row out of range [0, " + std::to_string(table_rows) + ")");
    }
    expect = s.stop;
  }
  if (expect != rows) {
    return internal_error("segments cover [0, " + std::to_string(expect) + ") but the sequence has " +
                          std::to_string(rows) + " rows");
  }
  return Status::Ok();
}

int32_t SegmentTable::row_of(int64_t r) const {
  for (const Segment& s : segments) {
    if (r >= s.start && r < s.stop) return s.table_row;
  }
  return -1;
}

SegmentTable SegmentTable::slice(int64_t begin, int64_t end) const {
  SegmentTable out;
  out.rows = end - begin;
  for (const Segment& s : segments) {
    const int64_t lo = std::max(s.start, begin), hi = std::min(s.stop, end);
    if (lo < hi) out.segments.push_back({lo - begin, hi - begin, s.table_row});
  }
  return out;
}

}  // namespace vortex
