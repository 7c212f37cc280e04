// NVFP4 activation quantizer, CPU reference: comfy-kitchen's recipe with the
// approximate instructions modelled from the measured rcp.approx.ftz.f32 binade table, plus the
// comfy-kitchen eager variant (exact IEEE divisions) as a named option. Every byte of the outputs is
// written (padding included). Tested in tests/ref/nvfp4_quantize_test.cpp, tests/core/nvfp4_oracle.py
// and against the GPU in tests/cuda/nvfp4_quantize_test.cu.
#include "ref/nvfp4_quantize.h"

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>

#include "vortex/dtype.h"

#ifndef VORTEX_SOURCE_DATA_DIR
#define VORTEX_SOURCE_DATA_DIR "data"
#endif

namespace vortex::ref {
namespace {

constexpr char kRcpMagic[8] = {'V', 'X', 'R', 'C', 'P', '0', '0', '1'};
constexpr uint32_t kInvSixBits = 0x3E2AAAABu;   // RN_f32(1/6): torch's `x / 6.0` on CUDA multiplies by it
constexpr uint32_t kInv2688Bits = 0x39C30C31u;  // RN_f32(1/2688) (§1.2)

float f32_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float flush(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }
int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t pos = out.size();
  out.resize(pos + sizeof(T));
  std::memcpy(out.data() + pos, &v, sizeof(T));
}
template <typename T>
bool get(const std::vector<uint8_t>& in, size_t& pos, T& v) {
  if (pos + sizeof(T) > in.size()) return false;
  std::memcpy(&v, in.data() + pos, sizeof(T));
  pos += sizeof(T);
  return true;
}

// E2M1 codes of 16 values packed hi-first: byte k = code[2k] << 4 | code[2k+1].
void pack_hi_first(const uint8_t codes[16], uint8_t packed[8]) {
  for (int k = 0; k < 8; ++k) packed[k] = static_cast<uint8_t>((codes[2 * k] << 4) | codes[2 * k + 1]);
}

}  // namespace

Nvfp4Layout nvfp4_layout(int64_t rows, int64_t cols) {
  Nvfp4Layout l;
  l.rows = rows;
  l.cols = cols;
  l.data_rows = round_up(rows, 16);
  l.data_row_bytes = round_up(cols, 16) / 2;
  l.blocks = round_up(cols, 16) / 16;
  l.scale_rows = round_up(l.data_rows, 128);
  l.scale_cols = round_up(l.blocks, 4);
  return l;
}

uint32_t rcp_correctly_rounded_binade_bits(uint32_t m) {
  const double x = 1.0 + static_cast<double>(m) * 0x1p-23;
  return bits_of(static_cast<float>(1.0 / x));
}

uint64_t fnv1a64_u32(const std::vector<uint32_t>& words) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint32_t w : words)
    for (int i = 0; i < 4; ++i) {
      h ^= (w >> (8 * i)) & 0xFFu;
      h *= 0x100000001B3ull;
    }
  return h;
}

std::vector<uint8_t> encode_rcp_approx_table(const std::vector<uint32_t>& binade_bits) {
  std::vector<uint8_t> out(8);
  std::memcpy(out.data(), kRcpMagic, 8);
  const auto n = static_cast<uint32_t>(binade_bits.size());
  put(out, n);
  put(out, fnv1a64_u32(binade_bits));
  std::vector<uint8_t> deltas((n + 3) / 4, 0);
  std::vector<std::pair<uint32_t, uint32_t>> exceptions;
  for (uint32_t m = 0; m < n; ++m) {
    const int64_t delta =
        static_cast<int64_t>(binade_bits[m]) - static_cast<int64_t>(rcp_correctly_rounded_binade_bits(m));
    uint8_t code = 3;
    if (delta == 0) code = 0;
    else if (delta == 1) code = 1;
    else if (delta == -1) code = 2;
    if (code == 3) exceptions.emplace_back(m, binade_bits[m]);
    deltas[m / 4] = static_cast<uint8_t>(deltas[m / 4] | (code << (2 * (m % 4))));
  }
  const size_t delta_pos = out.size();
  out.resize(delta_pos + deltas.size());
  std::memcpy(out.data() + delta_pos, deltas.data(), deltas.size());
  put(out, static_cast<uint32_t>(exceptions.size()));
  for (const auto& [index, bits] : exceptions) {
    put(out, index);
    put(out, bits);
  }
  return out;
}

Result<std::vector<uint32_t>> decode_rcp_approx_table(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 20 || std::memcmp(bytes.data(), kRcpMagic, 8) != 0)
    return format_error("rcp approx table: bad header (expected VXRCP001); regenerate it with scripts/nvfp4-probe.sh");
  size_t pos = 8;
  uint32_t n = 0;
  uint64_t checksum = 0;
  get(bytes, pos, n);
  get(bytes, pos, checksum);
  if (n != kRcpBinadeSize) return format_error("rcp approx table: " + std::to_string(n) + " entries, expected 2^23");
  const size_t delta_bytes = (n + 3) / 4;
  if (pos + delta_bytes + 4 > bytes.size()) return format_error("rcp approx table: truncated delta section");
  std::vector<uint32_t> binade(n);
  for (uint32_t m = 0; m < n; ++m) {
    const uint8_t code = (bytes[pos + m / 4] >> (2 * (m % 4))) & 3u;
    const uint32_t cr = rcp_correctly_rounded_binade_bits(m);
    binade[m] = code == 0 ? cr : code == 1 ? cr + 1 : code == 2 ? cr - 1 : 0u;
  }
  pos += delta_bytes;
  uint32_t exceptions = 0;
  get(bytes, pos, exceptions);
  for (uint32_t i = 0; i < exceptions; ++i) {
    uint32_t index = 0, bits = 0;
    if (!get(bytes, pos, index) || !get(bytes, pos, bits) || index >= n)
      return format_error("rcp approx table: bad exception entry " + std::to_string(i));
    binade[index] = bits;
  }
  if (pos != bytes.size()) return format_error("rcp approx table: trailing bytes");
  if (fnv1a64_u32(binade) != checksum) return format_error("rcp approx table: checksum mismatch (corrupt file)");
  return binade;
}

RcpApproxTable::RcpApproxTable(std::vector<uint32_t> binade_bits) : binade_(std::move(binade_bits)) {}

Result<std::shared_ptr<const RcpApproxTable>> RcpApproxTable::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return not_found(
        "rcp approx table " + path +
        " not found: run scripts/nvfp4-probe.sh on an sm_90 GPU and commit data/approx/rcp_approx_sm90.bin "
        "(or set VORTEX_DATA_DIR)");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  VORTEX_ASSIGN_OR_RETURN(std::vector<uint32_t> binade, decode_rcp_approx_table(bytes));
  return std::make_shared<const RcpApproxTable>(std::move(binade));
}

std::string RcpApproxTable::default_path() {
  const char* env = std::getenv("VORTEX_DATA_DIR");
  const std::string dir = env != nullptr && env[0] != '\0' ? env : VORTEX_SOURCE_DATA_DIR;
  return dir + "/approx/rcp_approx_sm90.bin";
}

Result<std::shared_ptr<const RcpApproxTable>> RcpApproxTable::default_table() {
  static std::mutex mu;
  static std::shared_ptr<const RcpApproxTable> table;
  std::lock_guard<std::mutex> lock(mu);
  if (!table) {
    VORTEX_ASSIGN_OR_RETURN(table, load(default_path()));
  }
  return table;
}

float RcpApproxTable::rcp(float x) const { return f32_of(rcp_approx_ftz_model_bits(bits_of(x), binade_.data())); }
float RcpApproxTable::div(float a, float b) const { return mul_ftz(a, rcp(b)); }

// Measured on the H200 (tools/approx_probe.cu, data/approx/rcp_approx_sm90.json): a result is flushed when it is
// tiny AFTER rounding to 24 bits with an unbounded exponent (IEEE 754 "tininess after rounding"), not when the
// denormal-grid IEEE result is below FLT_MIN: an exact product in [FLT_MIN - 2^-150, FLT_MIN - 2^-151) becomes +-0
// although IEEE rounds it up to FLT_MIN. The flush-the-IEEE-result model disagreed with the GPU on exactly the
// 23,265,482 of 2^30 boundary pairs where the two models differ.
float mul_ftz(float a, float b) {
  a = flush(a);
  b = flush(b);
  const double exact = static_cast<double>(a) * static_cast<double>(b);  // exact: 24 + 24 significant bits
  if (!(std::fabs(exact) < static_cast<double>(FLT_MIN))) return static_cast<float>(exact);  // one rounding
  // Below FLT_MIN before rounding: the 24-bit grid there is 2^-150, so it rounds up to FLT_MIN (ties to the even
  // FLT_MIN) iff exact >= FLT_MIN - 2^-151; otherwise the result is tiny and flushes to a signed zero.
  if (std::fabs(exact) >= 0x1p-126 - 0x1p-151) return std::copysign(FLT_MIN, static_cast<float>(exact));
  return std::copysign(0.0f, static_cast<float>(exact));
}

float min_ftz(float a, float b) {
  a = flush(a);
  b = flush(b);
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == 0.0f && b == 0.0f) return std::signbit(a) ? a : b;  // min(-0, +0) = -0
  return a < b ? a : b;
}

uint16_t bf16_abs_max_bits(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld) {
  uint16_t amax = 0;  // |bf16| bits order like the values; a NaN magnitude (> 0x7F80) wins, as torch.amax
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint16_t mag = x[r * ld + c] & 0x7FFFu;
      if (mag > amax) amax = mag;
    }
  return amax > 0x7F80u ? uint16_t{0x7FC0} : amax;
}

float nvfp4_global_scale_from_amax(uint16_t amax_bits) {
  const float amax = f32_from_bf16_bits(amax_bits);
  return round_bf16(amax * f32_of(kInv2688Bits));  // IEEE fp32 multiply, then RNE to bf16 (§1.2)
}

uint8_t nvfp4_quantize_block(const uint16_t x[16], float global_scale, const Nvfp4Options& options, uint8_t packed[8],
                             Nvfp4BlockTrace* trace) {
  // Block amax in bf16: abs + NaN-suppressing max (max.bf16); an all-NaN block gives NaN.
  int amax = -1;
  for (int i = 0; i < 16; ++i) {
    const int mag = x[i] & 0x7FFF;
    if (mag <= 0x7F80 && mag > amax) amax = mag;
  }
  const float a = amax < 0 ? std::nanf("") : f32_from_bf16_bits(static_cast<uint16_t>(amax));
  const float g = global_scale;
  float d = 0.0f, v[16];
  uint8_t s = 0;
  if (options.encode == Nvfp4Encode::kApproxInstructions) {
    const RcpApproxTable& t = *options.rcp;
    d = min_ftz(t.div(t.div(a, 6.0f), g), 448.0f);
    s = e4m3_from_f32(d);
    const float e = min_ftz(t.rcp(mul_ftz(g, f32_from_e4m3(s))), FLT_MAX);
    for (int i = 0; i < 16; ++i) v[i] = mul_ftz(e, f32_from_bf16_bits(x[i]));
  } else {
    d = (a * f32_of(kInvSixBits)) / g;
    if (!std::isnan(d) && d > 448.0f) d = 448.0f;  // torch.clamp(max=448): NaN stays NaN
    s = e4m3_from_f32(d);
    const float total = g * f32_from_e4m3(s);
    for (int i = 0; i < 16; ++i) {
      float q = total == 0.0f ? 0.0f : f32_from_bf16_bits(x[i]) / total;
      if (q > 6.0f) q = 6.0f;
      if (q < -6.0f) q = -6.0f;
      v[i] = q;
    }
  }
  uint8_t codes[16];
  for (int i = 0; i < 16; ++i) codes[i] = e2m1_from_f32(v[i]);
  pack_hi_first(codes, packed);
  if (trace != nullptr) {
    trace->d = d;
    std::memcpy(trace->v, v, sizeof(v));
  }
  return s;
}

Status nvfp4_quantize(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, float global_scale,
                      const Nvfp4Options& options, uint8_t* data, uint8_t* scales) {
  if (rows < 0 || cols < 0 || ld < cols)
    return invalid_argument("nvfp4_quantize: bad shape [" + std::to_string(rows) + ", " + std::to_string(cols) +
                            "] with row stride " + std::to_string(ld));
  if (options.encode == Nvfp4Encode::kApproxInstructions && options.rcp == nullptr)
    return invalid_argument(
        "nvfp4_quantize: the approximate-instruction encode needs an RcpApproxTable "
        "(RcpApproxTable::default_table())");
  const Nvfp4Layout l = nvfp4_layout(rows, cols);
  std::memset(scales, 0, l.scale_bytes());
  for (int64_t r = 0; r < l.data_rows; ++r)
    for (int64_t j = 0; j < l.blocks; ++j) {
      uint16_t block[16];
      for (int i = 0; i < 16; ++i) {
        const int64_t c = 16 * j + i;
        block[i] = r < rows && c < cols ? x[r * ld + c] : uint16_t{0};
      }
      scales[nvfp4_scale_offset(r, j, l.scale_cols)] =
          nvfp4_quantize_block(block, global_scale, options, data + r * l.data_row_bytes + 8 * j);
    }
  return Status::Ok();
}

float nvfp4_dequantized_value(const uint8_t* data, const uint8_t* scales, const Nvfp4Layout& layout, int64_t r,
                              int64_t k) {
  const uint8_t byte = data[r * layout.data_row_bytes + k / 2];
  const uint8_t code = k % 2 == 0 ? byte >> 4 : byte & 0xF;
  return f32_from_e2m1(code) * f32_from_e4m3(scales[nvfp4_scale_offset(r, k / 16, layout.scale_cols)]);
}

}  // namespace vortex::ref
