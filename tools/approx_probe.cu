// approx_probe: measures the approximate instructions the NVFP4 recipe depends on (docs/numerics.md "Rules
// that make E0 possible") on the GPU it runs on and writes the evidence:
//   OUT/rcp_approx_<arch>.bin   rcp.approx.ftz.f32 on all 2^23 mantissas of [1, 2), compact delta encoding
//                               (ref::encode_rcp_approx_table; commit as data/approx/rcp_approx_sm90.bin)
//   OUT/approx_probe.json       device, delta histogram vs the correctly rounded reciprocal, and mismatch counts of
//                               the models: rcp on all 2^32 inputs, div.approx.ftz / mul.rn.ftz on 2^30 pairs,
//                               the device E2M1 converter on all 2^32 inputs.
// Usage: nvfp4_approx_probe --out DIR [--pairs N]. Exit 0 only when every model matches.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "ref/nvfp4_quantize.h"
#include "tools/nvfp4_probes.h"

using namespace vortex;

#define PROBE_CHECK(expr)                                                     \
  do {                                                                        \
    cudaError_t e_ = (expr);                                                  \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorString(e_)); \
      return 1;                                                               \
    }                                                                         \
  } while (0)
#define PROBE_STATUS(expr)                                                  \
  do {                                                                      \
    Status s_ = (expr);                                                     \
    if (!s_.ok()) {                                                         \
      std::fprintf(stderr, "%s failed: %s\n", #expr, s_.message().c_str()); \
      return 1;                                                             \
    }                                                                       \
  } while (0)

int main(int argc, char** argv) {
  std::string out = ".";
  uint64_t pairs = uint64_t{1} << 30;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--out") out = argv[i + 1];
    else if (a == "--pairs") pairs = std::stoull(argv[i + 1]);
  }
  cudaDeviceProp prop{};
  PROBE_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string arch = "sm" + std::to_string(prop.major) + std::to_string(prop.minor);
  const auto t0 = std::chrono::steady_clock::now();

  uint32_t* binade_dev = nullptr;
  unsigned long long* counters = nullptr;
  PROBE_CHECK(cudaMalloc(&binade_dev, ref::kRcpBinadeSize * 4));
  PROBE_CHECK(cudaMalloc(&counters, 8 * sizeof(unsigned long long)));
  PROBE_STATUS(nvfp4_probes::nvfp4_probe_rcp_binade(binade_dev, nullptr));
  std::vector<uint32_t> binade(ref::kRcpBinadeSize);
  PROBE_CHECK(cudaMemcpy(binade.data(), binade_dev, binade.size() * 4, cudaMemcpyDeviceToHost));

  unsigned long long rcp_counts[2], other[6];
  PROBE_STATUS(nvfp4_probes::nvfp4_check_rcp_model(binade_dev, counters, nullptr));
  PROBE_CHECK(cudaMemcpy(rcp_counts, counters, sizeof(rcp_counts), cudaMemcpyDeviceToHost));
  const uint64_t seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  PROBE_STATUS(nvfp4_probes::nvfp4_check_div_mul_e2m1(binade_dev, seed, pairs, counters, nullptr));
  PROBE_CHECK(cudaMemcpy(other, counters, sizeof(other), cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaFree(binade_dev));
  PROBE_CHECK(cudaFree(counters));

  long long hist[4] = {0, 0, 0, 0};
  for (uint32_t m = 0; m < ref::kRcpBinadeSize; ++m) {
    const long long delta = static_cast<long long>(binade[m]) - ref::rcp_correctly_rounded_binade_bits(m);
    ++hist[delta == 0 ? 0 : delta == 1 ? 1 : delta == -1 ? 2 : 3];
  }
  const std::vector<uint8_t> file = ref::encode_rcp_approx_table(binade);
  const std::string bin_path = out + "/rcp_approx_" + arch + ".bin";
  std::ofstream(bin_path, std::ios::binary)
      .write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char json[2048];
  std::snprintf(json, sizeof(json),
                "{\n  \"device\": \"%s\", \"arch\": \"%s\", \"seconds\": %.2f,\n"
                "  \"rcp_binade\": {\"file\": \"%s\", \"bytes\": %zu, \"fnv1a64\": \"%016llx\",\n"
                "    \"correctly_rounded\": %lld, \"plus_one_ulp\": %lld, \"minus_one_ulp\": %lld, \"other\": %lld},\n"
                "  \"rcp_model_all_2pow32\": {\"mismatches\": %llu, \"example_input_plus1\": %llu},\n"
                "  \"div_approx_vs_mul_rcp_model\": {\"pairs\": %llu, \"seed\": %llu, \"mismatches\": %llu, "
                "\"example_pair_plus1\": %llu},\n"
                "  \"mul_rn_ftz_flush_model\": {\"pairs\": %llu, \"mismatches\": %llu, \"example_pair_plus1\": %llu},\n"
                "  \"e2m1_device_vs_cuda_fp4_all_2pow32\": {\"mismatches\": %llu, \"example_input_plus1\": %llu}\n}\n",
                prop.name, arch.c_str(), seconds, bin_path.c_str(), file.size(),
                static_cast<unsigned long long>(ref::fnv1a64_u32(binade)), hist[0], hist[1], hist[2], hist[3],
                rcp_counts[0], rcp_counts[1], static_cast<unsigned long long>(pairs),
                static_cast<unsigned long long>(seed), other[0], other[1], static_cast<unsigned long long>(pairs),
                other[2], other[3], other[4], other[5]);
  std::ofstream(out + "/approx_probe.json") << json;
  std::fputs(json, stdout);
  return rcp_counts[0] == 0 && other[0] == 0 && other[2] == 0 && other[4] == 0 ? 0 : 1;
}
