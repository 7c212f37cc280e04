// Tests of Tensor views (include/vortex/tensor.h): narrow / reshape / as_strided offsets and their
// bounds errors, contiguity, describe() strings, and that views share the owning storage.
#include <gtest/gtest.h>

#include <cstdint>

#include "vortex/tensor.h"

namespace vortex {
namespace {

TEST(Tensor, EmptyZerosAndDescribe) {
  Tensor t = Tensor::zeros({37, 5}, DType::kBF16);  // [37, 5] bf16
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.numel(), 185);
  EXPECT_EQ(t.nbytes(), 370u);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (Shape{5, 1}));
  EXPECT_EQ(t.describe(), "[37, 5] bf16");
  EXPECT_EQ(t.device(), Device::kCpu);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  const uint16_t* p = t.data<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(p[i], 0) << i;
  EXPECT_EQ(Tensor::empty({2, 3, 4}, DType::kF8E4M3).describe(), "[2, 3, 4] f8e4m3");
  EXPECT_EQ(shape_to_string({}), "[]");
  EXPECT_EQ(t.dim(-1), 5);
  EXPECT_EQ(t.stride(-2), 5);
}

TEST(Tensor, NarrowOffsetsAndBounds) {
  Tensor t = Tensor::empty({6, 8}, DType::kF32);  // [6, 8] f32
  float* base = t.data<float>();
  for (int i = 0; i < 48; ++i) base[i] = static_cast<float>(i);
  auto rows = t.narrow(0, 2, 3);
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  EXPECT_EQ(rows->shape(), (Shape{3, 8}));
  EXPECT_EQ(rows->data<float>()[0], 16.0f);
  EXPECT_TRUE(rows->is_contiguous());
  auto cols = t.narrow(-1, 5, 3);  // [6, 3] view with row stride 8
  ASSERT_TRUE(cols.ok());
  EXPECT_FALSE(cols->is_contiguous());
  EXPECT_EQ(cols->data<float>()[0], 5.0f);
  EXPECT_EQ(cols->data<float>()[cols->stride(0)], 13.0f);
  EXPECT_EQ(cols->storage().get(), t.storage().get());  // a view, not a copy

  auto past_end = t.narrow(0, 4, 3);
  ASSERT_FALSE(past_end.ok());
  EXPECT_EQ(past_end.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(past_end.status().message().find("[6, 8] f32"), std::string::npos) << past_end.status().message();
  EXPECT_FALSE(t.narrow(2, 0, 1).ok());
  EXPECT_FALSE(t.narrow(-3, 0, 1).ok());
  EXPECT_FALSE(t.narrow(0, -1, 2).ok());
  EXPECT_FALSE(t.narrow(0, 1, -1).ok());
  EXPECT_TRUE(t.narrow(0, 6, 0).ok());  // empty slice at the end is valid
}

TEST(Tensor, Reshape) {
  Tensor t = Tensor::empty({4, 6}, DType::kBF16);
  auto r = t.reshape({2, 3, 4});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(r->raw_data(), t.raw_data());
  auto wrong_count = t.reshape({5, 5});
  ASSERT_FALSE(wrong_count.ok());
  EXPECT_EQ(wrong_count.status().code(), ErrorCode::kInvalidArgument);
  auto strided = t.narrow(1, 0, 3);
  ASSERT_TRUE(strided.ok());
  auto not_contig = strided->reshape({12});
  ASSERT_FALSE(not_contig.ok());
  EXPECT_NE(not_contig.status().message().find("not contiguous"), std::string::npos);
}

TEST(Tensor, AsStridedBounds) {
  Tensor qkv = Tensor::empty({5, 12}, DType::kBF16);  // [5, 3*4] bf16: q | k | v per row
  auto k = qkv.as_strided({5, 4}, {12, 1}, 4);        // [5, 4] strided K view
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_EQ(static_cast<char*>(k->raw_data()) - static_cast<char*>(qkv.raw_data()), 8);
  EXPECT_TRUE(qkv.as_strided({5, 4}, {12, 1}, 8).ok());  // V ends exactly at the buffer end
  auto past = qkv.as_strided({5, 4}, {12, 1}, 9);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("runs past the buffer"), std::string::npos);
  EXPECT_FALSE(qkv.as_strided({5, 4}, {12}, 0).ok());      // rank mismatch
  EXPECT_FALSE(qkv.as_strided({5, 0}, {12, 1}, 0).ok());   // non-positive dim
  EXPECT_FALSE(qkv.as_strided({5, 4}, {12, -1}, 4).ok());  // negative stride
  EXPECT_FALSE(Tensor().as_strided({1}, {1}, 0).ok());     // undefined tensor
}

TEST(Tensor, ViewsKeepStorageAlive) {
  Tensor view;
  {
    Tensor t = Tensor::empty({8}, DType::kI32);
    for (int i = 0; i < 8; ++i) t.data<int32_t>()[i] = 100 + i;
    view = *t.narrow(0, 6, 2);
  }
  EXPECT_EQ(view.data<int32_t>()[1], 107);
  EXPECT_EQ(view.storage().use_count(), 1);
}

}  // namespace
}  // namespace vortex
