// dtype_dump SEED OUT_PATH: writes Vortex's conversions of a fixed input set as binary for
// tests/core/dtype_oracle.py, which recomputes them independently (ml_dtypes, numpy) and compares
// byte for byte. Inputs: every BF16-representable f32, specials (zeros, infs, NaN payloads, denormals,
// F16/FP8/FP4 limits and every grid midpoint with its neighbours), 2M random f32 patterns from SEED,
// and a set of f64 values for bf16_bits_from_f64. Layout is documented in dtype_oracle.py.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "vortex/dtype.h"

namespace {

template <typename T>
bool write_array(std::FILE* f, const std::vector<T>& v) {
  return std::fwrite(v.data(), sizeof(T), v.size(), f) == v.size();
}

void add_with_neighbours(std::vector<uint32_t>& out, float x) {
  for (float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, HUGE_VALF)}) {
    out.push_back(std::bit_cast<uint32_t>(y));
    out.push_back(std::bit_cast<uint32_t>(-y));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: dtype_dump SEED OUT_PATH\n");
    return 2;
  }
  uint64_t seed = std::strtoull(argv[1], nullptr, 10);
  std::mt19937_64 rng(seed);

  std::vector<uint32_t> in32;  // f32 bit patterns
  for (uint32_t b = 0; b < 65536; ++b) in32.push_back(b << 16);
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u,
                     0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA00000u, 0x00000001u, 0x80000001u, 0x007FFFFFu,
                     0x807FFFFFu, 0x00400000u, 0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu})
    in32.push_back(u);
  for (float x : {65504.0f, 65520.0f, 65536.0f, 0x1p-14f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 448.0f, 464.0f, 480.0f,
                  57344.0f, 61440.0f, 6.0f, 0x1p-9f, 0x1p-10f, 0x1p-16f, 0x1p-17f, 0x1p-6f, 0x1p-14f})
    add_with_neighbours(in32, x);
  // Every midpoint between adjacent non-negative finite grid values of E4M3, E5M2, E2M1.
  struct Grid {
    int codes;
    float (*decode)(uint8_t);
  };
  for (const Grid& g :
       {Grid{0x7F, vortex::f32_from_e4m3}, Grid{0x7C, vortex::f32_from_e5m2}, Grid{0x8, vortex::f32_from_e2m1}}) {
    for (int c = 0; c + 1 < g.codes; ++c) {
      double mid = (static_cast<double>(g.decode(static_cast<uint8_t>(c))) + g.decode(static_cast<uint8_t>(c + 1))) / 2;
      add_with_neighbours(in32, static_cast<float>(mid));  // exact: midpoints have one more bit
    }
  }
  for (int i = 0; i < 2'000'000; ++i) {
    uint32_t u = static_cast<uint32_t>(rng());
    if (i % 4 == 1) u &= 0x807FFFFFu;                                                            // denormals
    if (i % 4 == 2) u = (u & 0x807FFFFFu) | ((100u + static_cast<uint32_t>(rng() % 50)) << 23);  // FP8 range
    in32.push_back(u);
  }

  size_t n = in32.size();
  std::vector<uint16_t> bf16(n);
  std::vector<uint8_t> e4m3(n), e5m2(n), e2m1(n), ue8m0(n);
  for (size_t i = 0; i < n; ++i) {
    float x = std::bit_cast<float>(in32[i]);
    bf16[i] = vortex::bf16_bits_from_f32(x);
    e4m3[i] = vortex::e4m3_from_f32(x);
    e5m2[i] = vortex::e5m2_from_f32(x);
    e2m1[i] = vortex::e2m1_from_f32(x);
    ue8m0[i] = vortex::ue8m0_from_f32(x);
  }

  std::vector<double> in64;
  for (uint32_t code = 0; code < 0x7F80; ++code) {  // every BF16 midpoint and the doubles next to it
    double lo = vortex::f32_from_bf16_bits(static_cast<uint16_t>(code));
    double hi = code + 1 == 0x7F80 ? 0x1p128 : vortex::f32_from_bf16_bits(static_cast<uint16_t>(code + 1));
    double mid = (lo + hi) / 2;
    for (double y : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, HUGE_VAL)}) {
      in64.push_back(y);
      in64.push_back(-y);
    }
  }
  for (double y : {0.0, -0.0, HUGE_VAL, -HUGE_VAL, std::numeric_limits<double>::quiet_NaN(), 1e300, -1e300, 1e-300,
                   0x1p-134, 0x1p-133, std::numeric_limits<double>::denorm_min()})
    in64.push_back(y);
  for (int i = 0; i < 500'000; ++i) {
    in64.push_back(std::bit_cast<double>(rng()));
    int e = static_cast<int>(rng() % 270) - 140;
    double x = std::ldexp(1.0 + static_cast<double>(rng() >> 12) * 0x1p-52, e);
    in64.push_back((rng() & 1) ? -x : x);
  }
  size_t m = in64.size();
  std::vector<uint16_t> bf16_from_64(m);
  for (size_t i = 0; i < m; ++i) bf16_from_64[i] = vortex::bf16_bits_from_f64(in64[i]);

  std::vector<float> dec_e4m3(256), dec_e5m2(256), dec_e2m1(16), dec_ue8m0(256);
  for (int c = 0; c < 256; ++c) {
    dec_e4m3[c] = vortex::f32_from_e4m3(static_cast<uint8_t>(c));
    dec_e5m2[c] = vortex::f32_from_e5m2(static_cast<uint8_t>(c));
    dec_ue8m0[c] = vortex::f32_from_ue8m0(static_cast<uint8_t>(c));
  }
  for (int c = 0; c < 16; ++c) dec_e2m1[c] = vortex::f32_from_e2m1(static_cast<uint8_t>(c));

  std::FILE* f = std::fopen(argv[2], "wb");
  if (!f) {
    std::fprintf(stderr, "dtype_dump: cannot open %s for writing\n", argv[2]);
    return 1;
  }
  uint64_t header[3] = {0x31544458564ull /* "VXDT1" */, n, m};
  bool ok = std::fwrite(header, sizeof header, 1, f) == 1 && write_array(f, in32) && write_array(f, bf16) &&
            write_array(f, e4m3) && write_array(f, e5m2) && write_array(f, e2m1) && write_array(f, ue8m0) &&
            write_array(f, in64) && write_array(f, bf16_from_64) && write_array(f, dec_e4m3) &&
            write_array(f, dec_e5m2) && write_array(f, dec_e2m1) && write_array(f, dec_ue8m0);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::fprintf(stderr, "dtype_dump: write to %s failed\n", argv[2]);
    return 1;
  }
  std::printf("dtype_dump: %zu f32 inputs, %zu f64 inputs, seed %llu -> %s\n", n, m,
              static_cast<unsigned long long>(seed), argv[2]);
  return 0;
}
