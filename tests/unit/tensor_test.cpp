#include <gtest/gtest.h>

#include "engine/backend.h"
#include "engine/error.h"
#include "engine/tensor.h"

namespace dprun {
namespace {

TEST(Tensor, NarrowOnLeadingDimIsAView) {
  Tensor t = Tensor::from_vector<float>({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor rows = t.narrow(0, 1, 2);
  EXPECT_TRUE(rows.shares_storage_with(t));
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.data<float>()[0], 2.0f);
  EXPECT_EQ(rows.data<float>()[3], 5.0f);
}

TEST(Tensor, NarrowOnInnerDimCopies) {
  Tensor t = Tensor::from_vector<int32_t>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor cols = t.narrow(1, 1, 2);
  EXPECT_FALSE(cols.shares_storage_with(t));
  EXPECT_EQ((std::vector<int32_t>(cols.data<int32_t>(), cols.data<int32_t>() + 4)),
            (std::vector<int32_t>{1, 2, 4, 5}));
}

TEST(Tensor, PinMemoryForACpuDeviceIsTheTensorItself) {
  Tensor t = Tensor::from_vector<float>({3}, {1, 2, 3});
  EXPECT_EQ(backend_for(DeviceType::CPU).pinned_host_allocator(), nullptr);
  EXPECT_EQ(t.pin_memory(Device::cpu(1)).raw_data(), t.raw_data());
  Tensor words = Tensor::empty({1}, DType::String);
  EXPECT_EQ(words.pin_memory(Device::cpu(0)).raw_data(), words.raw_data());
}

TEST(Tensor, AliasOnAnotherCpuDeviceSharesTheMemoryAndKeepsItAlive) {
  Tensor t = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  Tensor rows = t.narrow(0, 1, 1);
  Tensor alias = rows.alias_on(Device::cpu(3));
  EXPECT_EQ(alias.device(), Device::cpu(3));
  EXPECT_EQ(alias.shape(), (Shape{1, 2}));
  EXPECT_EQ(alias.raw_data(), rows.raw_data());
  EXPECT_FALSE(alias.is_sole_owner());  // never reused in place for a kernel's output
  t.data<float>()[2] = 30;
  EXPECT_EQ(alias.data<float>()[0], 30.0f);  // one memory
  const void* memory = alias.raw_data();
  t = Tensor();
  rows = Tensor();
  EXPECT_EQ(alias.raw_data(), memory);  // still owned, through the alias
  EXPECT_EQ(alias.data<float>()[1], 4.0f);
  // The same device: the tensor itself; a device of another type: refused.
  EXPECT_TRUE(alias.alias_on(Device::cpu(3)).shares_storage_with(alias));
  try {
    alias.alias_on(Device{DeviceType::CUDA, 0});
    FAIL() << "aliased onto a GPU";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "alias_on: float32[1, 2] on cpu:3 cannot be seen from cuda:0 without a copy; "
                 "only CPU devices share memory");
  }
}

TEST(Tensor, ConcatInverseOfNarrow) {
  Tensor t = Tensor::from_vector<int64_t>({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor joined = concat({t.narrow(1, 0, 2), t.narrow(1, 2, 3)}, 1, Device::cpu());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(joined.data<int64_t>()[i], i);
}

TEST(Tensor, ConcatRejectsMismatchedShapes) {
  Tensor a = Tensor::zeros({2, 3}, DType::Float32);
  Tensor b = Tensor::zeros({2, 4}, DType::Float32);
  EXPECT_THROW(concat({a, b}, 0, Device::cpu()), Error);
}

TEST(Tensor, TypedAccessChecksDtype) {
  Tensor t = Tensor::zeros({3}, DType::Int32);
  EXPECT_THROW(t.data<float>(), Error);
}

TEST(Tensor, ReshapeInfersMinusOne) {
  Tensor t = Tensor::zeros({2, 3, 4}, DType::Float32);
  EXPECT_EQ(t.reshape({-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_THROW(t.reshape({5, -1}), Error);
}

TEST(Half, RoundTripsRepresentableValues) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(static_cast<float>(Float16(f)), f) << f;
  EXPECT_EQ(static_cast<float>(BFloat16(1.5f)), 1.5f);
}

}  // namespace
}  // namespace dprun
