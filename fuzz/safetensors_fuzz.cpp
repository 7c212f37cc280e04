// libFuzzer target for the safetensors parser (parse_safetensors_buffer: header length, JSON,
// entries, offsets, metadata). Invariants checked on every accepted input: every entry lies inside
// the data section, byte ranges match shape x dtype, and non-empty ranges do not overlap.
// Build: fuzz/CMakeLists.txt. Run: safetensors_fuzz -max_total_time=60 CORPUS_DIR.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vortex::Result<vortex::SafetensorsHeader> h = vortex::parse_safetensors_buffer(data, size, "fuzz");
  if (!h.ok()) {
    if (h.status().message().empty()) std::abort();  // every rejection must say why
    return 0;
  }
  uint64_t cursor = 0;
  for (const vortex::SafetensorsEntry& e : h->entries) {
    if (e.end < e.begin || e.end > h->data_bytes) std::abort();
    if (static_cast<uint64_t>(vortex::shape_numel(e.shape)) * vortex::dtype_size(e.dtype) != e.bytes()) std::abort();
    if (e.bytes() == 0) continue;
    if (e.begin < cursor) std::abort();
    cursor = e.end;
  }
  if (h->data_offset + h->data_bytes != size) std::abort();
  return 0;
}
