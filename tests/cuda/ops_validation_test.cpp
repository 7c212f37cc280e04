// The validating entry points of src/cuda/ops reject bad shapes, dtypes, strides, chunks and segment maps
// with kInvalidArgument / kUnsupported BEFORE any CUDA call, so this runs without a GPU: tensors here are
// views over a fake device address that is never dereferenced (every case must fail validation).
#include <gtest/gtest.h>

#include <memory>

#include "cuda/ops/ops.h"

namespace vortex::cuda_ops {
namespace {

// A "device" tensor over a fake, 256-byte aligned address (never touched: validation fails first).
Tensor fake_device(Shape shape, DType dtype, Shape strides = {}) {
  auto storage = std::make_shared<Storage>();
  storage->ptr = reinterpret_cast<void*>(uintptr_t{1} << 40);
  storage->bytes = size_t{1} << 34;
  storage->device = Device::kCuda;
  return Tensor::from_storage(storage, 0, std::move(shape), dtype, std::move(strides));
}

TEST(CudaOpsValidation, RmsNormRejectsBadOperands) {
  Tensor x = fake_device({4, 64}, DType::kBF16);
  Tensor w = fake_device({64}, DType::kBF16);
  Tensor out = fake_device({4, 64}, DType::kBF16);
  EXPECT_EQ(rms_norm(x, fake_device({63}, DType::kBF16), 1e-5f, out, nullptr).code(), ErrorCode::kInvalidArgument);
  Tensor f32 = fake_device({4, 64}, DType::kF32);
  EXPECT_EQ(rms_norm(x, w, 1e-5f, f32, nullptr).code(), ErrorCode::kInvalidArgument);
  Tensor wrong_rows = fake_device({5, 64}, DType::kBF16);
  EXPECT_EQ(rms_norm(x, w, 1e-5f, wrong_rows, nullptr).code(), ErrorCode::kInvalidArgument);
  Tensor host = Tensor::empty({4, 64}, DType::kBF16);
  Status st = rms_norm(host, w, 1e-5f, out, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("CUDA tensor"), std::string::npos) << st.message();
  Tensor col_strided = fake_device({4, 64}, DType::kBF16, {1, 4});
  EXPECT_EQ(rms_norm(col_strided, w, 1e-5f, out, nullptr).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(rms_norm(x, w, -1.0f, out, nullptr).code(), ErrorCode::kInvalidArgument);
}

TEST(CudaOpsValidation, TablesChunksAndSegmentMaps) {
  Tensor x = fake_device({4, 64}, DType::kBF16);
  Tensor table = fake_device({3, 6 * 64}, DType::kBF16);
  int32_t fake_map = 0;
  DeviceRowMap map{&fake_map, 4, 3};
  EXPECT_EQ(modulate(x, table, 0, 6, map, nullptr).code(), ErrorCode::kInvalidArgument);   // chunk out of range
  EXPECT_EQ(modulate(x, table, -1, 1, map, nullptr).code(), ErrorCode::kInvalidArgument);  // negative chunk
  Tensor odd_table = fake_device({3, 6 * 64 + 1}, DType::kBF16);
  EXPECT_EQ(modulate(x, odd_table, 0, 1, map, nullptr).code(), ErrorCode::kInvalidArgument);
  DeviceRowMap short_map{&fake_map, 3, 3};
  EXPECT_EQ(modulate(x, table, 0, 1, short_map, nullptr).code(), ErrorCode::kInvalidArgument);
  DeviceRowMap other_table{&fake_map, 4, 5};
  Status st = modulate(x, table, 0, 1, other_table, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("table rows"), std::string::npos) << st.message();
  Tensor a = fake_device({4, 64}, DType::kBF16);
  EXPECT_EQ(gate_add(x, a, &table, 2, nullptr, nullptr).code(), ErrorCode::kInvalidArgument);  // table without map
  Tensor a_wide = fake_device({4, 72}, DType::kBF16);
  EXPECT_EQ(gate_add(x, a_wide, nullptr, 0, nullptr, nullptr).code(), ErrorCode::kInvalidArgument);
  Tensor out = fake_device({4, 64}, DType::kBF16);
  Tensor w = fake_device({64}, DType::kBF16);
  EXPECT_EQ(rms_norm_modulate(x, w, 1e-5f, table, 0, 9, map, out, nullptr).code(), ErrorCode::kInvalidArgument);
}

TEST(CudaOpsValidation, QkNormRopeAndSwigluShapes) {
  Tensor qkv = fake_device({4, 3 * 512}, DType::kBF16);
  Tensor q = qkv.as_strided({4, 512}, {3 * 512, 1}, 0).value();
  Tensor k = qkv.as_strided({4, 512}, {3 * 512, 1}, 512).value();
  Tensor w = fake_device({128}, DType::kBF16);
  EXPECT_EQ(qk_norm_rope(q, k, w, w, 1e-6f, nullptr, nullptr, 0, 2, 256, nullptr).code(), ErrorCode::kInvalidArgument);
  Tensor w512 = fake_device({512}, DType::kBF16);
  EXPECT_EQ(qk_norm_rope(q, k, w512, w512, 1e-6f, nullptr, nullptr, 0, 1, 512, nullptr).code(),
            ErrorCode::kUnsupported);
  Tensor cos = fake_device({4, 48}, DType::kBF16);
  EXPECT_EQ(qk_norm_rope(q, k, w, w, 1e-6f, &cos, nullptr, 96, 4, 128, nullptr).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(qk_norm_rope(q, k, w, w, 1e-6f, &cos, &cos, 97, 4, 128, nullptr).code(), ErrorCode::kInvalidArgument);
  Tensor cos_short = fake_device({3, 48}, DType::kBF16);
  EXPECT_EQ(qk_norm_rope(q, k, w, w, 1e-6f, &cos_short, &cos_short, 96, 4, 128, nullptr).code(),
            ErrorCode::kInvalidArgument);
  Tensor u = fake_device({4, 81}, DType::kBF16);
  Tensor m = fake_device({4, 40}, DType::kBF16);
  uint16_t fake_table = 0;
  EXPECT_EQ(swiglu(u, m, &fake_table, nullptr).code(), ErrorCode::kInvalidArgument);  // odd width
  Tensor u80 = fake_device({4, 80}, DType::kBF16);
  EXPECT_EQ(swiglu(u80, m, nullptr, nullptr).code(), ErrorCode::kInvalidArgument);  // no table
  Tensor m41 = fake_device({4, 41}, DType::kBF16);
  EXPECT_EQ(swiglu(u80, m41, &fake_table, nullptr).code(), ErrorCode::kInvalidArgument);
}

TEST(CudaOpsValidation, CastAndFillSyntheticDtypes) {
  Tensor i32 = fake_device({4, 8}, DType::kI32);
  Tensor f32 = fake_device({4, 8}, DType::kF32);
  EXPECT_EQ(cast(i32, f32, nullptr).code(), ErrorCode::kUnsupported);
  Tensor other_shape = fake_device({8, 4}, DType::kBF16);
  EXPECT_EQ(cast(f32, other_shape, nullptr).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(fill_synthetic(i32, 1, 1.0f, 0.0f, nullptr).code(), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace vortex::cuda_ops
