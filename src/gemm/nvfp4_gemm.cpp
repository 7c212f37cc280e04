// NVFP4 GEMM runner: path selection (Blackwell FP4 vs the Hopper exact emulation), operand validation and
// the two programs over GemmEngine::gemm. Emulation: x' = bf16(e2m1 * e4m3) [M, K16] and w' [N, K16] into
// owned scratch, alpha = g_x * g_w on the device, then the kNvfp4Emulated plan (BF16 GEMM, FP32 accumulation,
// alpha in the epilogue before the bias add and the single rounding: D = R(alpha * acc + bias)).
// Tested in tests/gemm/nvfp4_gemm_test.cpp.
#include "gemm/nvfp4_gemm.h"

#include <cuda.h>

#include <string>

#include "core/arch.h"
#include "ref/nvfp4_quantize.h"

namespace vortex {
namespace {

Status cuda_fail(cudaError_t err, const char* what) {
  return Status(ErrorCode::kCuda, std::string(what) + " failed: " + cudaGetErrorString(err));
}

// The architecture facts (core/arch.h, no CUDA headers) say which GPUs have block-scaled E2M1 MMA; sm_103 (B300)
// is not in that table yet but runs cuBLASLt's VEC16_UE4M3 kernels like sm_100.
bool has_fp4_tensor_cores(int major, int minor) {
  return arch_facts(major, minor).has_nvfp4_mma || (major == 10 && minor == 3);
}

Status check_operand(const Nvfp4Operand& a, const char* what) {
  if (a.rows <= 0 || a.cols <= 0)
    return invalid_argument(std::string("NVFP4 GEMM ") + what + ": rows and cols must be positive, got " +
                            std::to_string(a.rows) + " x " + std::to_string(a.cols));
  if (!a.data || !a.scales || !a.global_scale)
    return invalid_argument(std::string("NVFP4 GEMM ") + what +
                            ": data, block scales and global scale must all be set");
  if ((reinterpret_cast<uintptr_t>(a.data) & 15u) || (reinterpret_cast<uintptr_t>(a.scales) & 15u))
    return invalid_argument(std::string("NVFP4 GEMM ") + what + ": data and block scales must be 16-byte aligned");
  return Status::Ok();
}

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

const char* nvfp4_gemm_path_name(Nvfp4GemmPath path) {
  return path == Nvfp4GemmPath::kNativeFp4 ? "native_fp4" : "emulated_bf16";
}

bool nvfp4_native_compiled() {
#if CUDA_VERSION >= 12080
  return true;
#else
  return false;
#endif
}

Nvfp4GemmPath select_nvfp4_gemm_path(int cc_major, int cc_minor) {
  return nvfp4_native_compiled() && has_fp4_tensor_cores(cc_major, cc_minor) ? Nvfp4GemmPath::kNativeFp4
                                                                             : Nvfp4GemmPath::kEmulatedBf16;
}

namespace {
// The current device's properties (compute capability for the path choice).
Result<cudaDeviceProp> current_device_properties() {
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return cuda_fail(err, "cudaGetDevice");
  cudaDeviceProp prop{};
  err = cudaGetDeviceProperties(&prop, dev);
  if (err != cudaSuccess) return cuda_fail(err, "cudaGetDeviceProperties");
  return prop;
}
}  // namespace

Result<std::unique_ptr<Nvfp4Gemm>> Nvfp4Gemm::create(GemmEngine& engine) {
  VORTEX_ASSIGN_OR_RETURN(cudaDeviceProp prop, current_device_properties());
  return create(engine, select_nvfp4_gemm_path(prop.major, prop.minor));
}

Result<std::unique_ptr<Nvfp4Gemm>> Nvfp4Gemm::create(GemmEngine& engine, Nvfp4GemmPath path,
                                                     std::shared_ptr<DeviceMemoryResource> memory) {
  if (path == Nvfp4GemmPath::kNativeFp4) {
    if (!nvfp4_native_compiled())
      return unsupported(
          "NVFP4 native FP4 GEMM: this build's CUDA headers predate FP4 (need CUDA >= 12.8); "
          "use the BF16 emulation (Nvfp4GemmPath::kEmulatedBf16)");
    VORTEX_ASSIGN_OR_RETURN(cudaDeviceProp prop, current_device_properties());
    if (!has_fp4_tensor_cores(prop.major, prop.minor))
      return unsupported("NVFP4 native FP4 GEMM needs FP4 tensor cores (sm_100/103/120/121); this device is sm_" +
                         std::to_string(prop.major) + std::to_string(prop.minor) +
                         " — use the exact BF16 emulation (the default selection on this GPU)");
  }
  std::unique_ptr<Nvfp4Gemm> g(new Nvfp4Gemm(engine, path));
  g->memory_ = memory ? std::move(memory) : cuda_malloc_resource();
  VORTEX_RETURN_IF_ERROR(g->alpha_.reserve(g->memory_, 256).with_context("NVFP4 alpha"));
  return g;
}

Nvfp4Gemm::~Nvfp4Gemm() = default;

Result<char*> Nvfp4Gemm::scratch(size_t bytes) {
  // A replaced block goes back to the resource; only later work on the same stream reuses it.
  VORTEX_RETURN_IF_ERROR(scratch_.reserve(memory_, bytes).with_context("NVFP4 GEMM scratch (dequantized operands)"));
  return scratch_.as<char>();
}

Status Nvfp4Gemm::run(const Nvfp4Operand& x, const Nvfp4Operand& w, const void* bias, void* out, int64_t ldd,
                      cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(check_operand(x, "activation"));
  VORTEX_RETURN_IF_ERROR(check_operand(w, "weight"));
  if (x.cols != w.cols)
    return invalid_argument("NVFP4 GEMM: activation K=" + std::to_string(x.cols) +
                            " != weight K=" + std::to_string(w.cols));
  if (!out || ldd < w.rows) return invalid_argument("NVFP4 GEMM: null output or ldd < N");
  const int64_t m = x.rows, n = w.rows;
  const int64_t k16 = (x.cols + 15) / 16 * 16;  // padding columns hold zero codes in both operands
  VORTEX_RETURN_IF_ERROR(nvfp4_alpha(x.global_scale, w.global_scale, alpha_.as<float>(), stream));
  GemmCall call;
  call.m = m;
  call.n = n;
  call.d = out;
  call.ldd = ldd;
  call.bias = bias;
  call.alpha = alpha_.as<float>();
  // cuBLASLt FP4 needs K % 32 (16 bytes of packed E2M1 per row) and a 16-byte aligned BF16 output row; a
  // shape outside that (never an H3 GEMM) takes the emulation, which computes the same operands.
  const bool native_ok = k16 % 32 == 0 && ldd % 8 == 0 && (reinterpret_cast<uintptr_t>(out) & 15u) == 0;
  if (path_ == Nvfp4GemmPath::kNativeFp4 && native_ok) {
    call.precision = GemmPrecision::kNvfp4;
    call.k = k16;
    call.x = x.data;
    call.ldx = k16;
    call.w = w.data;
    call.ldw = k16;
    call.x_block_scale = x.scales;
    call.w_block_scale = w.scales;
    return engine_.gemm(call, stream);
  }
  // Emulation: both operands dequantized exactly (no global scale) into scratch [x' | w'].
  const size_t x_bytes = align_up(static_cast<size_t>(m * k16) * 2, 256);
  const size_t w_bytes = align_up(static_cast<size_t>(n * k16) * 2, 256);
  VORTEX_ASSIGN_OR_RETURN(char* base, scratch(x_bytes + w_bytes));
  uint16_t* xd = reinterpret_cast<uint16_t*>(base);            // [M, K16] bf16
  uint16_t* wd = reinterpret_cast<uint16_t*>(base + x_bytes);  // [N, K16] bf16
  VORTEX_RETURN_IF_ERROR(nvfp4_dequantize_unscaled_bf16(x, xd, k16, stream));
  VORTEX_RETURN_IF_ERROR(nvfp4_dequantize_unscaled_bf16(w, wd, k16, stream));
  call.precision = GemmPrecision::kNvfp4Emulated;
  call.k = k16;
  call.x = xd;
  call.ldx = k16;
  call.w = wd;
  call.ldw = k16;
  return engine_.gemm(call, stream);
}

Result<Nvfp4Operand> nvfp4_weight_operand(const LinearWeight& w) {
  if (w.format != QuantFormat::kNvfp4)
    return invalid_argument(std::string("NVFP4 linear: weight format is ") + quant_format_name(w.format) +
                            ", not nvfp4");
  const int64_t n = w.out_features, k = w.in_features;
  if (n <= 0 || k <= 0) return invalid_argument("NVFP4 linear: weight has no logical out/in features set");
  const ref::Nvfp4Layout layout = ref::nvfp4_layout(n, k);
  auto on_device = [](const Tensor& t) { return t.defined() && t.device() == Device::kCuda && t.is_contiguous(); };
  if (!on_device(w.weight) || w.weight.nbytes() != layout.data_bytes() || dtype_size(w.weight.dtype()) != 1)
    return invalid_argument("NVFP4 linear: weight must be contiguous device bytes [" +
                            std::to_string(layout.data_rows) + ", " + std::to_string(layout.data_row_bytes) +
                            "], got " + (w.weight.defined() ? w.weight.describe() : std::string("undefined")));
  if (!on_device(w.weight_scale) || w.weight_scale.nbytes() != layout.scale_bytes() ||
      dtype_size(w.weight_scale.dtype()) != 1)
    return invalid_argument("NVFP4 linear: weight_scale must be contiguous device E4M3 bytes [" +
                            std::to_string(layout.scale_rows) + ", " + std::to_string(layout.scale_cols) + "], got " +
                            (w.weight_scale.defined() ? w.weight_scale.describe() : std::string("undefined")));
  if (!on_device(w.weight_scale_2) || w.weight_scale_2.dtype() != DType::kF32 || w.weight_scale_2.numel() != 1)
    return invalid_argument("NVFP4 linear: weight_scale_2 must be one f32 on the device");
  Nvfp4Operand op;
  op.data = static_cast<const uint8_t*>(w.weight.raw_data());
  op.scales = static_cast<const uint8_t*>(w.weight_scale.raw_data());
  op.global_scale = static_cast<const float*>(w.weight_scale_2.raw_data());
  op.rows = n;
  op.cols = k;
  return op;
}

Status Nvfp4Gemm::linear(const Nvfp4Operand& x, const LinearWeight& w, const Tensor* bias, Tensor& out,
                         cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(Nvfp4Operand wo, nvfp4_weight_operand(w));
  if (!out.defined() || out.device() != Device::kCuda || out.dtype() != DType::kBF16 || out.ndim() != 2 ||
      out.stride(1) != 1 || out.dim(0) != x.rows || out.dim(1) != wo.rows)
    return invalid_argument("NVFP4 linear: out must be a device bf16 [" + std::to_string(x.rows) + ", " +
                            std::to_string(wo.rows) + "] with unit column stride, got " +
                            (out.defined() ? out.describe() : std::string("undefined")));
  if (bias && (!bias->defined() || bias->device() != Device::kCuda || bias->dtype() != DType::kBF16 ||
               bias->numel() != wo.rows || !bias->is_contiguous()))
    return invalid_argument("NVFP4 linear: bias must be a contiguous device bf16 vector of N elements");
  return run(x, wo, bias ? bias->raw_data() : nullptr, out.raw_data(), out.stride(0), stream);
}

}  // namespace vortex
