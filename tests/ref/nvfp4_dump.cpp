// nvfp4_dump: writes NVFP4 reference-quantizer blocks with their FP32 intermediates for the ml_dtypes oracle
// (tests/core/nvfp4_oracle.py). Per block: x[16] bf16, g, and the three rcp.approx values the recipe used
// (rcp(6), rcp(g), rcp(g*s)) as inputs the oracle takes as given (the instruction itself is checked on the GPU),
// then d, v[16], the scale byte and the 8 packed bytes as outputs the oracle recomputes independently.
// Usage: nvfp4_dump --out FILE [--seed N] [--rows N]. Uses the shipped rcp table when present, else a
// correctly rounded one (the oracle checks the conversions and the mul/min steps, not rcp).
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ref/nvfp4_quantize.h"
#include "ref/nvfp4_test_inputs.h"
#include "vortex/dtype.h"

using namespace vortex;

namespace {
#pragma pack(push, 1)
struct Record {
  uint16_t x[16];
  float g, rcp6, rcp_g, rcp_gs;
  float d;
  float v[16];
  uint8_t scale;
  uint8_t packed[8];
};
#pragma pack(pop)
static_assert(sizeof(Record) == 125, "record layout is shared with nvfp4_oracle.py");
}  // namespace

int main(int argc, char** argv) {
  std::string out;
  uint64_t seed = std::random_device{}();
  int64_t rows = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--out") out = argv[i + 1];
    else if (a == "--seed") seed = std::stoull(argv[i + 1]);
    else if (a == "--rows") rows = std::stoll(argv[i + 1]);
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: nvfp4_dump --out FILE [--seed N] [--rows N]\n");
    return 2;
  }
  std::shared_ptr<const ref::RcpApproxTable> table;
  if (auto t = ref::RcpApproxTable::default_table(); t.ok()) {
    table = t.value();
  } else {
    std::vector<uint32_t> b(ref::kRcpBinadeSize);
    for (uint32_t m = 0; m < ref::kRcpBinadeSize; ++m) b[m] = ref::rcp_correctly_rounded_binade_bits(m);
    table = std::make_shared<const ref::RcpApproxTable>(std::move(b));
  }
  std::mt19937_64 rng(seed);
  const int64_t cols = 256;
  const std::vector<uint16_t> x = test::nvfp4_adversarial_bf16(rows, cols, cols, rng, true);
  const ref::Nvfp4Options opt{ref::Nvfp4Encode::kApproxInstructions, table.get()};
  std::vector<Record> recs;
  for (int64_t r = 0; r < rows; ++r) {
    // g per row: the dynamic scale of the row, a power of two, a random positive value, or 0.
    const int pick = static_cast<int>(r % 5);
    float g = ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(&x[r * cols], 1, cols, cols));
    if (pick == 3) g = std::ldexp(1.0f + static_cast<float>(rng() % 4096) / 4096.0f, static_cast<int>(rng() % 60) - 40);
    if (pick == 2) g = std::ldexp(1.0f, static_cast<int>(rng() % 21) - 10);  // exact scales: E2M1 ties land exactly
    if (pick == 4 && r % 25 == 4) g = 0.0f;
    for (int64_t j = 0; j < cols / 16; ++j) {
      Record rec{};
      std::memcpy(rec.x, &x[r * cols + 16 * j], 32);
      ref::Nvfp4BlockTrace trace;
      rec.scale = ref::nvfp4_quantize_block(rec.x, g, opt, rec.packed, &trace);
      rec.g = g;
      rec.rcp6 = table->rcp(6.0f);
      rec.rcp_g = table->rcp(g);
      rec.rcp_gs = table->rcp(ref::mul_ftz(g, f32_from_e4m3(rec.scale)));
      rec.d = trace.d;
      std::memcpy(rec.v, trace.v, sizeof(rec.v));
      recs.push_back(rec);
    }
  }
  FILE* f = std::fopen(out.c_str(), "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "nvfp4_dump: cannot write %s\n", out.c_str());
    return 1;
  }
  const uint32_t header[2] = {0x3151564Eu, static_cast<uint32_t>(recs.size())};  // "NVQ1"
  const bool ok = std::fwrite(header, sizeof(header), 1, f) == 1 &&
                  std::fwrite(recs.data(), sizeof(Record), recs.size(), f) == recs.size();
  std::fclose(f);
  std::printf("nvfp4_dump: %zu blocks, seed %llu\n", recs.size(), static_cast<unsigned long long>(seed));
  return ok ? 0 : 1;
}
