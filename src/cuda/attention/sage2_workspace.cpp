// Sage2Workspace: one device allocation carved into the quantized Q/K/V operands, their scales and
// the pre-pass scratch (layouts in sage2_attention.h). Grows on demand; sub-buffers 256-byte aligned
// so every kernel access is 16-byte aligned. Exercised by tests/attention/sage2_sm90_test.cpp.
#include <string>

#include "cuda/attention/sage2_attention.h"
#include "cuda/check.h"
#include "ref/sage2_attention.h"

namespace vortex {
namespace {

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

const char* sage2_mainloop_name(Sage2Mainloop m) { return m == Sage2Mainloop::kWgmma ? "wgmma" : "mma.sync"; }

Sage2Workspace::~Sage2Workspace() { release(); }

void Sage2Workspace::release() {
  if (block_) {
    if (device_free) device_free(block_, capacity_bytes_);
    else (void)cudaFree(block_);
  }
  block_ = nullptr;
  capacity_bytes_ = 0;
}

Status Sage2Workspace::reserve(int num_heads, int64_t num_tokens) {
  if (num_heads <= 0 || num_tokens <= 0)
    return invalid_argument("Sage2Workspace::reserve: heads and tokens must be positive (got " +
                            std::to_string(num_heads) + ", " + std::to_string(num_tokens) + ")");
  const size_t H = static_cast<size_t>(num_heads);
  const size_t P = static_cast<size_t>(sage2_padded_tokens(num_tokens));
  const size_t chunks = static_cast<size_t>((num_tokens + kSage2MeanChunk - 1) / kSage2MeanChunk);
  const size_t D = kSage2HeadDim;
  const size_t sizes[] = {
      H * P * D,                                           // q_int8
      H * (P / kSage2SlabQ) * kSage2QGroupsPerSlab * 4,    // q_scale
      H * P * D,                                           // k_int8
      H * (P / kSage2BlockK) * kSage2KGroupsPerBlock * 4,  // k_scale
      H * D * 2,                                           // k_mean
      H * D * P,                                           // v_fp8
      H * D * 4,                                           // v_scale
      H * D * 4,                                           // v_mult
      H * chunks * D * 8,                                  // k_partial_sum
      H * chunks * D * 4,                                  // v_partial_amax
  };
  size_t total = 0;
  for (size_t s : sizes) total += align256(s);
  if (total > capacity_bytes_) {
    release();
    if (device_alloc) {
      VORTEX_ASSIGN_OR_RETURN(block_, device_alloc(total));
    } else {
      VORTEX_CUDA_CHECK(cudaMalloc(&block_, total));
    }
    capacity_bytes_ = total;
  }
  char* p = static_cast<char*>(block_);
  void* ptrs[10];
  for (int i = 0; i < 10; ++i) {
    ptrs[i] = p;
    p += align256(sizes[i]);
  }
  q_int8 = static_cast<int8_t*>(ptrs[0]);
  q_scale = static_cast<float*>(ptrs[1]);
  k_int8 = static_cast<int8_t*>(ptrs[2]);
  k_scale = static_cast<float*>(ptrs[3]);
  k_mean = static_cast<uint16_t*>(ptrs[4]);
  v_fp8 = static_cast<uint8_t*>(ptrs[5]);
  v_scale = static_cast<float*>(ptrs[6]);
  v_mult = static_cast<float*>(ptrs[7]);
  k_partial_sum = static_cast<double*>(ptrs[8]);
  v_partial_amax = static_cast<float*>(ptrs[9]);
  heads = num_heads;
  seq = num_tokens;
  padded = static_cast<int64_t>(P);
  return Status::Ok();
}

}  // namespace vortex
