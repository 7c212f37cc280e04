// NVFP4 activation quantizer, CPU reference (comfy-kitchen's recipe; docs/numerics.md "NVFP4 modes").
// Why: the GPU producers (src/cuda/ops/nvfp4_quantize_kernels.cu) must emit comfy-kitchen's exact bytes, which
// depend on the approximate instructions rcp.approx.ftz.f32 / div.approx.ftz.f32; this file models them
// from a table measured on the GPU (data/approx/rcp_approx_sm90.bin, tools/approx_probe.cu) and is the E0 oracle.
// Tested in tests/ref/nvfp4_quantize_test.cpp, tests/core/nvfp4_oracle.py (ml_dtypes) and
// tests/cuda/nvfp4_quantize_test.cu (GPU producers and the exhaustive instruction checks).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vortex/status.h"

#if defined(__CUDACC__)
#define VORTEX_NVFP4_HD __host__ __device__
#else
#define VORTEX_NVFP4_HD
#endif

namespace vortex::ref {

// ---- layout (§1.6-1.8) ------------------------------------------------------------------------
// Data: uint8 [data_rows, data_row_bytes], E2M1 pairs, EVEN element in the HIGH nibble (comfy order).
// Scales: uint8 E4M3 [scale_rows, scale_cols] in cuBLAS 128x4 tiles (nvfp4_scale_offset), padding = 0.
struct Nvfp4Layout {
  int64_t rows = 0, cols = 0;  // logical M, K
  int64_t data_rows = 0;       // roundup(M, 16)
  int64_t data_row_bytes = 0;  // roundup(K, 16) / 2
  int64_t blocks = 0;          // roundup(K, 16) / 16 (16-element blocks per row)
  int64_t scale_rows = 0;      // roundup(data_rows, 128)
  int64_t scale_cols = 0;      // roundup(blocks, 4)
  size_t data_bytes() const { return static_cast<size_t>(data_rows * data_row_bytes); }
  size_t scale_bytes() const { return static_cast<size_t>(scale_rows * scale_cols); }
};
Nvfp4Layout nvfp4_layout(int64_t rows, int64_t cols);

// Byte offset of scale S[r][c] (r = row, c = 16-block index) in the tiled scale buffer (§1.7).
VORTEX_NVFP4_HD inline int64_t nvfp4_scale_offset(int64_t r, int64_t c, int64_t scale_cols) {
  const int64_t tr = r / 128, rr = r % 128, tc = c / 4, cc = c % 4;
  return (tr * (scale_cols / 4) + tc) * 512 + (rr % 32) * 16 + (rr / 32) * 4 + cc;
}

// ---- the approximate instructions -------------------------------------------------------------
constexpr uint32_t kRcpBinadeSize = 1u << 23;

// rcp.approx.ftz.f32 modelled from its values on the binade [1, 2): binade[m] = bits of rcp(1 + m * 2^-23).
// Model (proved on the GPU for all 2^32 inputs by tests/cuda/nvfp4_quantize_test.cu / tools/approx_probe.cu):
// NaN -> NaN; +-inf -> +-0; +-0 and subnormals (flushed) -> +-inf; otherwise the binade result rescaled by
// 2^(127 - exponent), and a result below FLT_MIN flushes to +-0 (ftz).
VORTEX_NVFP4_HD inline uint32_t rcp_approx_ftz_model_bits(uint32_t x, const uint32_t* binade) {
  const uint32_t sign = x & 0x80000000u, mag = x & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0x7FFFFFFFu;
  if (mag == 0x7F800000u) return sign;
  const int exponent = static_cast<int>(mag >> 23);
  if (exponent == 0) return sign | 0x7F800000u;
  const uint32_t t = binade[mag & 0x7FFFFFu];
  const int result_exponent = static_cast<int>((t >> 23) & 0xFFu) - (exponent - 127);
  if (result_exponent <= 0) return sign;
  return sign | (static_cast<uint32_t>(result_exponent) << 23) | (t & 0x7FFFFFu);
}

// Bits of RN_f32(1 / (1 + m * 2^-23)) (correctly rounded; double rounding is innocuous: 53 >= 2 * 24 + 2).
uint32_t rcp_correctly_rounded_binade_bits(uint32_t m);

// The measured binade of rcp.approx.ftz.f32 of one GPU generation (32 MB in memory).
class RcpApproxTable {
 public:
  explicit RcpApproxTable(std::vector<uint32_t> binade_bits);
  // Loads the compact file written by encode_rcp_approx_table (checksummed).
  static Result<std::shared_ptr<const RcpApproxTable>> load(const std::string& path);
  // data/approx/rcp_approx_sm90.bin: $VORTEX_DATA_DIR/approx/... when set, else the source tree's data/.
  static std::string default_path();
  // Loaded once per process from default_path().
  static Result<std::shared_ptr<const RcpApproxTable>> default_table();

  const std::vector<uint32_t>& binade() const { return binade_; }
  float rcp(float x) const;           // rcp.approx.ftz.f32
  float div(float a, float b) const;  // div.approx.ftz.f32 = mul.ftz(a, rcp.approx.ftz(b))

 private:
  std::vector<uint32_t> binade_;
};

// Compact encoding of a binade table: header "VXRCP001", u32 count (2^23), u64 FNV-1a of the decoded bits,
// then 2 bits per entry = delta from the correctly rounded reciprocal in ulps (0: 0, 1: +1, 2: -1,
// 3: exception), then u32 exception count and (u32 index, u32 bits) pairs. 2 MB for one binade.
std::vector<uint8_t> encode_rcp_approx_table(const std::vector<uint32_t>& binade_bits);
Result<std::vector<uint32_t>> decode_rcp_approx_table(const std::vector<uint8_t>& bytes);
uint64_t fnv1a64_u32(const std::vector<uint32_t>& words);

// mul.rn.ftz.f32: subnormal inputs flush to signed zero; a result that is tiny after rounding to 24 bits with an
// unbounded exponent flushes to signed zero (measured on sm_90, see nvfp4_quantize.cpp). min.ftz.f32: inputs flushed.
float mul_ftz(float a, float b);
float min_ftz(float a, float b);

// ---- the quantizer ------------------------------------------------------------------------------
enum class Nvfp4Encode {
  // comfy-kitchen CUDA kernel as built (--use_fast_math): div.approx / rcp.approx / .ftz (§1.3-1.4). Default.
  kApproxInstructions,
  // comfy-kitchen eager path (§1.10): amax * RN(1/6), IEEE division by g and by g * s, clamp, RNE.
  kExactDivision,
};

struct Nvfp4Options {
  Nvfp4Encode encode = Nvfp4Encode::kApproxInstructions;
  const RcpApproxTable* rcp = nullptr;  // required for kApproxInstructions
};

// Intermediate FP32 values of one block (for the ml_dtypes oracle): d before E4M3, v before E2M1.
struct Nvfp4BlockTrace {
  float d = 0.0f;
  float v[16] = {};
};

// Dynamic global scale (§1.2): amax over all |x| (torch.amax: NaN propagates), then
// g = float(bf16_RNE(fp32(amax) * 0x39C30C31)). A static checkpoint input_scale is used as g directly.
uint16_t bf16_abs_max_bits(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld);  // NaN -> 0x7FC0
float nvfp4_global_scale_from_amax(uint16_t amax_bits);

// One 16-element block (x as BF16 bits): returns the E4M3 scale byte, writes 8 hi-first packed bytes.
uint8_t nvfp4_quantize_block(const uint16_t x[16], float global_scale, const Nvfp4Options& options, uint8_t packed[8],
                             Nvfp4BlockTrace* trace = nullptr);

// x [rows, cols] bf16 (row stride ld elements) -> data [layout.data_bytes()], scales [layout.scale_bytes()]
// (every byte written: padding rows/cols of the data read x as 0 (§1.8), scale padding is 0).
Status nvfp4_quantize(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, float global_scale,
                      const Nvfp4Options& options, uint8_t* data, uint8_t* scales);

// Inverse for tests and the Hopper emulation: value of element (r, k) = e2m1 * e4m3 (exact in BF16).
float nvfp4_dequantized_value(const uint8_t* data, const uint8_t* scales, const Nvfp4Layout& layout, int64_t r,
                              int64_t k);

}  // namespace vortex::ref
