// GPU test of CudaBackend::linear_lora (src/cuda/lora_linear.cpp), the run-time LoRA branch, against the CPU
// reference ref::linear_lora and against the merged path (ref::lora_merge into W, then CudaBackend::linear). The
// CUDA program keeps the reference's rounding boundaries (t = R(scale * x A^T), one rounding of the output) but sums
// in cuBLASLt's FP32 order, so it is E1 (docs/numerics.md two-reference rule): its rel-L2 error against the exact
// FP64 composition x (W + sum_p s_p B_p A_p)^T + bias must stay within 2x the CPU reference's plus 1e-5, and within
// 2x the merged path's plus 1e-4 (the rule of LoraRuntime.BranchVsMergedTwoReferenceRule), for both programs
// (CudaBackend::LoraProgram: kConcatK, kFp32Accumulator). Fresh random inputs per run; the output is a poisoned strided
// buffer with a sentinel tail; shapes cover full-width, q/k/v-third and unaligned partial row ranges, several parts,
// with and without bias. Bad parts get kInvalidArgument before any work. Label gpu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "cuda_test_util.h"
#include "ref/ref_ops.h"

namespace vortex {
namespace {

using cuda_test::Fill;

Tensor random_bf16_sd(Shape shape, std::mt19937_64& rng, float sd) {
  Tensor t = Tensor::empty(shape, DType::kBF16);
  std::normal_distribution<float> n(0.0f, sd);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = bf16_bits_from_f32(n(rng));
  return t;
}

Tensor to_f32(const Tensor& bf16) {
  Tensor t = Tensor::empty(bf16.shape(), DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = f32_from_bf16_bits(bf16.data<uint16_t>()[i]);
  return t;
}

double bf(const Tensor& t, int64_t i) { return f32_from_bf16_bits(t.data<uint16_t>()[i]); }

struct PartSpec {
  int64_t r, row_offset, rows;
  double scale;
};
struct Case {
  int64_t m, k, n;
  std::vector<PartSpec> parts;
  bool bias;
  int64_t ld_pad;  // output row stride n + ld_pad
};

// Exact FP64 x (W + sum_p s_p B_p A_p)^T + bias, evaluated as x W^T + sum_p s_p (x A_p^T) B_p^T (t unrounded).
std::vector<double> exact_output(const Tensor& x, const Tensor& w, const Tensor* bias, const std::vector<Tensor>& a,
                                 const std::vector<Tensor>& b, const std::vector<PartSpec>& parts) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  std::vector<double> y(static_cast<size_t>(m * n));
  std::vector<double> xr(static_cast<size_t>(k)), t;
  for (int64_t row = 0; row < m; ++row) {
    for (int64_t i = 0; i < k; ++i) xr[static_cast<size_t>(i)] = bf(x, row * k + i);
    double* yr = y.data() + row * n;
    for (int64_t j = 0; j < n; ++j) {
      double s = bias ? bf(*bias, j) : 0.0;
      for (int64_t i = 0; i < k; ++i) s += xr[static_cast<size_t>(i)] * bf(w, j * k + i);
      yr[j] = s;
    }
    for (size_t p = 0; p < parts.size(); ++p) {
      const int64_t r = parts[p].r;
      t.assign(static_cast<size_t>(r), 0.0);
      for (int64_t q = 0; q < r; ++q) {
        double s = 0;
        for (int64_t i = 0; i < k; ++i) s += xr[static_cast<size_t>(i)] * bf(a[p], q * k + i);
        t[static_cast<size_t>(q)] = parts[p].scale * s;
      }
      for (int64_t j = 0; j < parts[p].rows; ++j) {
        double s = 0;
        for (int64_t q = 0; q < r; ++q) s += t[static_cast<size_t>(q)] * bf(b[p], j * r + q);
        yr[parts[p].row_offset + j] += s;
      }
    }
  }
  return y;
}

double rel_l2(const Tensor& got, const std::vector<double>& exact, int64_t* nonfinite) {
  double e = 0, r = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = bf(got, i);
    if (!std::isfinite(g)) ++*nonfinite;
    e += (g - exact[static_cast<size_t>(i)]) * (g - exact[static_cast<size_t>(i)]);
    r += exact[static_cast<size_t>(i)] * exact[static_cast<size_t>(i)];
  }
  return std::sqrt(e / r);
}

TEST(CudaLoraLinear, E1AgainstTheCpuReferenceAndTheMergedPath) {
  std::unique_ptr<CudaBackend> gpu;
  VORTEX_REQUIRE_CUDA(gpu);
  const uint64_t seed = cuda_test::fresh_seed();
  std::mt19937_64 rng(seed);
  CpuBackend cpu(0);
  const std::vector<Case> cases = {
      {37, 64, 96, {{8, 0, 96, 0.5}}, true, 8},
      {50, 128, 192, {{4, 0, 64, 1.0}, {8, 64, 64, 0.75}, {16, 128, 64, -0.5}}, false, 0},  // q/k/v thirds
      {33, 72, 100, {{3, 5, 20, 2.0}, {5, 41, 59, -0.25}}, true, 3},  // unaligned row ranges: the add fallback
      {257, 512, 640, {{128, 0, 640, 1.0 / 16}}, true, 0},
      {1, 16, 8, {{1, 0, 8, 1.0}}, false, 1},
      {300, 1024, 3072, {{128, 0, 1024, 1.0}, {128, 1024, 1024, 1.0}, {128, 2048, 1024, 1.0}}, true, 0},
      {129, 256, 512, {{32, 256, 256, 3.0}}, false, 16},  // the second half only (fc1's value rows)
  };
  for (const Case& c : cases) {
    std::string desc = "x [" + std::to_string(c.m) + ", " + std::to_string(c.k) + "] W [" + std::to_string(c.n) + ", " +
                       std::to_string(c.k) + "]" + (c.bias ? " +bias" : "") + " parts";
    for (const PartSpec& p : c.parts)
      desc += " (r " + std::to_string(p.r) + " rows [" + std::to_string(p.row_offset) + ", +" + std::to_string(p.rows) +
              ") s " + std::to_string(p.scale) + ")";
    SCOPED_TRACE(desc + "; seed " + std::to_string(seed));
    Tensor x = cuda_test::random_host_bf16({c.m, c.k}, rng, Fill::kNormal);
    Tensor w = random_bf16_sd({c.n, c.k}, rng, 0.05f);
    Tensor bias = random_bf16_sd({c.n}, rng, 0.1f);
    std::vector<Tensor> a, b;
    LoraBranch host_branch, dev_branch;
    for (const PartSpec& p : c.parts) {
      a.push_back(random_bf16_sd({p.r, c.k}, rng, 0.05f));
      b.push_back(random_bf16_sd({p.rows, p.r}, rng, 0.05f));
      host_branch.parts.push_back({a.back(), b.back(), p.row_offset, p.scale});
      Result<Tensor> da = gpu->upload(a.back()), db = gpu->upload(b.back());
      ASSERT_TRUE(da.ok() && db.ok());
      dev_branch.parts.push_back({*da, *db, p.row_offset, p.scale});
    }
    LinearWeight hw;
    hw.weight = w;
    Tensor y_cpu = Tensor::empty({c.m, c.n}, DType::kBF16);
    ASSERT_OK(cpu.linear_lora(x, hw, c.bias ? &bias : nullptr, host_branch, y_cpu));

    LinearWeight dw;
    dw.weight = gpu->upload(w).value();
    Tensor dx = gpu->upload(x).value(), dbias = gpu->upload(bias).value();

    // The merged path: W' = R(W + s B A) per part (ref::lora_merge, FP64, one rounding), then the plain GPU linear.
    Tensor wm = Tensor::empty(w.shape(), DType::kBF16);
    std::memcpy(wm.raw_data(), w.raw_data(), w.nbytes());
    for (size_t p = 0; p < c.parts.size(); ++p)
      ASSERT_OK(ref::lora_merge(wm, to_f32(a[p]), to_f32(b[p]), c.parts[p].row_offset, c.parts[p].scale,
                                LoraMergeProgram::kSingleRounding));
    LinearWeight dwm;
    dwm.weight = gpu->upload(wm).value();
    Tensor y_m_dev = gpu->alloc({c.m, c.n}, DType::kBF16).value();
    ASSERT_OK(gpu->linear(dx, dwm, c.bias ? &dbias : nullptr, y_m_dev));
    Tensor y_m = Tensor::empty({c.m, c.n}, DType::kBF16);
    ASSERT_OK(gpu->download(y_m_dev, y_m));

    const std::vector<double> exact = exact_output(x, w, c.bias ? &bias : nullptr, a, b, c.parts);
    int64_t nonfinite = 0;
    const double e_cpu = rel_l2(y_cpu, exact, &nonfinite);
    const double e_m = rel_l2(y_m, exact, &nonfinite);
    std::printf("%s\n  rel-L2 vs FP64: cpu reference %.3e, merged (cuda linear) %.3e\n", desc.c_str(), e_cpu, e_m);
    for (CudaBackend::LoraProgram program :
         {CudaBackend::LoraProgram::kConcatK, CudaBackend::LoraProgram::kFp32Accumulator}) {
      const char* pname = program == CudaBackend::LoraProgram::kConcatK ? "concat_k" : "fp32_accumulator";
      SCOPED_TRACE(pname);
      gpu->set_lora_program(program);
      Result<cuda_test::Guarded> g = cuda_test::make_guarded(*gpu, c.m, c.n, c.n + c.ld_pad, DType::kBF16, nullptr);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      ASSERT_OK(gpu->linear_lora(dx, dw, c.bias ? &dbias : nullptr, dev_branch, g->view));
      std::string oob;
      Result<Tensor> y_gpu = cuda_test::read_guarded(*gpu, *g, &oob);
      ASSERT_TRUE(y_gpu.ok()) << y_gpu.status().to_string();
      EXPECT_TRUE(oob.empty()) << oob;
      const double e_gpu = rel_l2(*y_gpu, exact, &nonfinite);
      EXPECT_EQ(nonfinite, 0);
      EXPECT_LE(e_gpu, 2.0 * e_cpu + 1e-5) << "CUDA vs the CPU reference (two-reference rule)";
      EXPECT_LE(e_gpu, 2.0 * e_m + 1e-4) << "run-time vs merged (two-reference rule)";
      int64_t same = 0;
      for (int64_t i = 0; i < y_cpu.numel(); ++i) same += y_cpu.data<uint16_t>()[i] == y_gpu->data<uint16_t>()[i];
      const double same_frac = static_cast<double>(same) / static_cast<double>(y_cpu.numel());
      // Same operands and rounding points: only outputs within FP32 noise of a BF16 rounding boundary may differ.
      EXPECT_GE(same_frac, 0.9) << "too few outputs bit-identical to the CPU reference";
      std::printf("  %-16s cuda rel-L2 vs FP64 %.3e; %.2f%% bytes equal to the cpu reference\n", pname, e_gpu,
                  100.0 * same_frac);
    }
    gpu->set_lora_program(CudaBackend::LoraProgram::kConcatK);
  }
}

TEST(CudaLoraLinear, RejectsBadPartsBeforeAnyWork) {
  std::unique_ptr<CudaBackend> gpu;
  VORTEX_REQUIRE_CUDA(gpu);
  std::mt19937_64 rng(cuda_test::fresh_seed());
  const int64_t m = 8, k = 32, n = 48, r = 4;
  Tensor x = gpu->upload(random_bf16_sd({m, k}, rng, 1.0f)).value();
  LinearWeight w;
  w.weight = gpu->upload(random_bf16_sd({n, k}, rng, 0.05f)).value();
  Tensor a = gpu->upload(random_bf16_sd({r, k}, rng, 0.05f)).value();
  Tensor b = gpu->upload(random_bf16_sd({n, r}, rng, 0.05f)).value();
  Tensor b_wrong_rank = gpu->upload(random_bf16_sd({n, r + 1}, rng, 0.05f)).value();
  Tensor a_wrong_k = gpu->upload(random_bf16_sd({r, k - 1}, rng, 0.05f)).value();
  Tensor b_host = random_bf16_sd({n, r}, rng, 0.05f);
  Result<cuda_test::Guarded> g = cuda_test::make_guarded(*gpu, m, n, n, DType::kBF16, nullptr);
  ASSERT_TRUE(g.ok());
  struct Bad {
    const char* what;
    LoraBranch branch;
    const char* message;
  };
  const std::vector<Bad> bad = {
      {"B's rank differs from A's", {{{a, b_wrong_rank, 0, 1.0}}}, "B [rows, r]"},
      {"A's width is not K", {{{a_wrong_k, b, 0, 1.0}}}, "A [r, K]"},
      {"rows past the layer", {{{a, b, 8, 1.0}}}, "fall outside"},
      {"a host B", {{{a, b_host, 0, 1.0}}}, "device"},
      {"a non-finite scale", {{{a, b, 0, INFINITY}}}, "non-finite"},
  };
  for (const Bad& c : bad) {
    Status st = gpu->linear_lora(x, w, nullptr, c.branch, g->view);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << c.what << ": " << st.to_string();
    EXPECT_NE(st.message().find(c.message), std::string::npos) << c.what << ": " << st.to_string();
  }
  LinearWeight fp8 = w;
  fp8.format = QuantFormat::kFp8Scaled;
  EXPECT_EQ(gpu->linear_lora(x, fp8, nullptr, {{{a, b, 0, 1.0}}}, g->view).code(), ErrorCode::kUnsupported);
  // Nothing ran: the output buffer still holds only poison.
  std::string oob;
  Result<Tensor> got = cuda_test::read_guarded(*gpu, *g, &oob);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(oob.empty()) << oob;
  for (int64_t i = 0; i < got->numel(); ++i)
    ASSERT_EQ(got->data<uint16_t>()[i], cuda_test::kPoisonBf16) << "output written at " << i << " by a refused call";
}

}  // namespace
}  // namespace vortex
