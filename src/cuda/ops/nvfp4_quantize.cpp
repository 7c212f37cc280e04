// NVFP4 producers' entry points: validation of shapes, strides, pointers and alignment (once, here), then the
// per-source launchers of nvfp4_quantize_kernels.cu. The backend validates its tensors through the
// *_input_shape functions before it reserves an activation slot. Tested in tests/cuda/nvfp4_quantize_test.cu
// (bad arguments on the host, bytes E0 vs src/ref/nvfp4_quantize.cpp on the GPU).
#include "cuda/ops/nvfp4_quantize.h"

#include <string>

#include "cuda/ops/nvfp4_quantize_kernels.h"

namespace vortex::cuda_ops {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Status check_common(int64_t rows, int64_t cols, int64_t ld, const Nvfp4GlobalScale& g, const Nvfp4Buffers& out,
                    const char* op) {
  const std::string o(op);
  if (rows < 0 || cols < 0 || ld < cols)
    return invalid_argument(o + ": bad shape [" + std::to_string(rows) + ", " + std::to_string(cols) +
                            "] with row stride " + std::to_string(ld));
  if (g.g == nullptr) return invalid_argument(o + ": missing the device global scale g");
  if (g.dynamic && g.amax_workspace == nullptr)
    return invalid_argument(o + ": dynamic global scale needs a device u32 amax workspace");
  if (out.data == nullptr || out.scales == nullptr || !aligned16(out.data) || !aligned16(out.scales))
    return invalid_argument(o +
                            ": data and scale buffers must be non-null and 16-byte aligned (size them with "
                            "ref::nvfp4_layout)");
  if (rows > (int64_t{1} << 31) || cols > (int64_t{1} << 30)) return invalid_argument(o + ": tensor too large");
  return Status::Ok();
}

// A device bf16 [rows, cols] with unit column stride (the producers' inputs).
bool device_bf16_matrix(const Tensor& t) {
  return t.defined() && t.device() == Device::kCuda && t.dtype() == DType::kBF16 && t.ndim() == 2 && t.stride(1) == 1;
}
std::string describe_or_undefined(const Tensor& t) { return t.defined() ? t.describe() : std::string("undefined"); }

}  // namespace

Result<Nvfp4ProducerShape> nvfp4_quantize_input_shape(const Tensor& x) {
  if (!device_bf16_matrix(x))
    return invalid_argument("nvfp4 linear: x must be a device bf16 [M, K] with unit column stride, got " +
                            describe_or_undefined(x));
  return Nvfp4ProducerShape{x.dim(0), x.dim(1)};
}

Result<Nvfp4ProducerShape> nvfp4_modulated_input_shape(const Tensor& n, const Tensor& table, int shift_chunk,
                                                       int scale_chunk) {
  if (!device_bf16_matrix(n))
    return invalid_argument("modulate_quantize: n must be a device bf16 [S, D] with unit column stride, got " +
                            describe_or_undefined(n));
  if (!device_bf16_matrix(table))
    return invalid_argument("modulate_quantize: table must be a device bf16 [rows, C * D], got " +
                            describe_or_undefined(table));
  const int64_t rows = n.dim(0), d = n.dim(1);
  if (d == 0 || table.dim(1) % d != 0 || table.stride(0) != table.dim(1) || shift_chunk < 0 || scale_chunk < 0 ||
      shift_chunk >= table.dim(1) / d || scale_chunk >= table.dim(1) / d)
    return invalid_argument("modulate_quantize: table " + table.describe() +
                            " must hold whole rows of chunks of D=" + std::to_string(d) + " covering chunks " +
                            std::to_string(shift_chunk) + "/" + std::to_string(scale_chunk));
  return Nvfp4ProducerShape{rows, d};
}

Result<Nvfp4ProducerShape> nvfp4_swiglu_input_shape(const Tensor& u) {
  if (!device_bf16_matrix(u) || u.dim(1) % 2 != 0)
    return invalid_argument("swiglu_quantize: u must be a device bf16 [S, 2F] with unit column stride, got " +
                            describe_or_undefined(u));
  return Nvfp4ProducerShape{u.dim(0), u.dim(1) / 2};
}

Status nvfp4_quantize(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, const Nvfp4GlobalScale& g,
                      const Nvfp4Buffers& out, cudaStream_t stream, const Nvfp4RunOptions& opt) {
  VORTEX_RETURN_IF_ERROR(check_common(rows, cols, ld, g, out, "nvfp4_quantize"));
  if (x == nullptr && rows > 0 && cols > 0) return invalid_argument("nvfp4_quantize: x is null");
  return launch_nvfp4_plain(x, rows, cols, ld, g, out, opt, stream);
}

Status nvfp4_quantize_modulated(const uint16_t* n, int64_t rows, int64_t cols, int64_t ld, const uint16_t* table,
                                int64_t table_ld, int shift_chunk, int scale_chunk, const DeviceRowMap& map,
                                const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, cudaStream_t stream,
                                const Nvfp4RunOptions& opt) {
  VORTEX_RETURN_IF_ERROR(check_common(rows, cols, ld, g, out, "nvfp4_quantize_modulated"));
  if (n == nullptr || table == nullptr) return invalid_argument("nvfp4_quantize_modulated: n or table is null");
  const int64_t chunks = cols > 0 ? table_ld / cols : 0;
  if (shift_chunk < 0 || scale_chunk < 0 || shift_chunk >= chunks || scale_chunk >= chunks)
    return invalid_argument("nvfp4_quantize_modulated: chunks " + std::to_string(shift_chunk) + "/" +
                            std::to_string(scale_chunk) + " outside a table row of " + std::to_string(table_ld) +
                            " elements (" + std::to_string(chunks) + " chunks of " + std::to_string(cols) + ")");
  if (map.table_row == nullptr || map.rows != rows)
    return invalid_argument("nvfp4_quantize_modulated: segment map covers " + std::to_string(map.rows) +
                            " rows, tensor has " + std::to_string(rows));
  return launch_nvfp4_modulated(n, rows, cols, ld, table, table_ld, shift_chunk, scale_chunk, map.table_row, g, out,
                                opt, stream);
}

Status nvfp4_quantize_swiglu(const uint16_t* u, int64_t rows, int64_t f, int64_t ld, const uint16_t* silu_table,
                             const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, cudaStream_t stream,
                             const Nvfp4RunOptions& opt) {
  if (ld < 2 * f)
    return invalid_argument("nvfp4_quantize_swiglu: row stride " + std::to_string(ld) +
                            " smaller than the FC1 width 2F = " + std::to_string(2 * f));
  VORTEX_RETURN_IF_ERROR(check_common(rows, f, ld, g, out, "nvfp4_quantize_swiglu"));
  if (u == nullptr || silu_table == nullptr)
    return invalid_argument("nvfp4_quantize_swiglu: u or the SiLU table is null");
  return launch_nvfp4_swiglu(u, rows, f, ld, silu_table, g, out, opt, stream);
}

}  // namespace vortex::cuda_ops
