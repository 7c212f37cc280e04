// sm_90a building blocks of the wgmma attention kernels (sage2_sm90.cu, bf16_attention_sm90.cu): warpgroup MMA
// fences, commits and waits, register operand fences, shared-memory addresses and mbarriers. Included only by
// _sm90.cu files, which the sm90-only object library compiles (src/cuda/CMakeLists.txt).
#pragma once

#include <cstdint>

namespace vortex::hopper {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {  // at most N committed groups still in flight
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Pins register arrays that wgmma reads or writes asynchronously: the compiler cannot see the asynchrony, so
// without these it could read an accumulator before wgmma.wait_group or reuse the A-fragment registers while the
// tensor core still reads them (CUTLASS's warpgroup_fence_operand).
template <int N, int M>
__device__ __forceinline__ void fence_operands(int (&x)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < M; ++e) asm volatile("" : "+r"(x[i][e])::"memory");
}
template <int N, int M>
__device__ __forceinline__ void fence_operands(float (&x)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < M; ++e) asm volatile("" : "+f"(x[i][e])::"memory");
}
template <int N, int M>
__device__ __forceinline__ void fence_operands(uint32_t (&x)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < M; ++e) asm volatile("" : "+r"(x[i][e])::"memory");
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}

}  // namespace vortex::hopper
