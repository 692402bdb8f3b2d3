#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

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

// The compiler's own float16 type (GCC's _Float16, converted by libgcc or F16C) is the
// reference: every float16 value widens to its value, and floats round to nearest even, ties
// to even, subnormals and overflow included. NaNs are compared as NaNs: engine/half.h narrows
// each to the quiet NaN 0x7e00 with its sign.
TEST(Half, ConvertsAsTheCompilersFloat16) {
  for (uint32_t h = 0; h < 65536; ++h) {
    Float16 ours;
    ours.bits = static_cast<uint16_t>(h);
    const float want = static_cast<float>(std::bit_cast<_Float16>(static_cast<uint16_t>(h)));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(static_cast<float>(ours))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(static_cast<float>(ours)), std::bit_cast<uint32_t>(want))
        << std::hex << h;
    ASSERT_EQ(std::bit_cast<uint32_t>(static_cast<float>(ours)),
              std::bit_cast<uint32_t>(Float16::to_float(static_cast<uint16_t>(h))))
        << "the table and the bit-by-bit widening differ at " << std::hex << h;
  }
  // Every 61st float bit pattern (61 is odd, so every mantissa remainder class is reached),
  // and the rounding boundaries of every float16 step: halfway points and their neighbours.
  auto check = [](uint32_t bits) {
    const float f = std::bit_cast<float>(bits);
    const uint16_t want = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    if (std::isnan(f)) {
      ASSERT_EQ(Float16(f).bits, static_cast<uint16_t>((bits >> 16 & 0x8000u) | 0x7e00u));
      return;
    }
    ASSERT_EQ(Float16(f).bits, want) << std::hex << bits << " (" << f << ")";
  };
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 61)
    check(static_cast<uint32_t>(bits));
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = Float16::to_float(static_cast<uint16_t>(h));
    const float hi = h + 1 == 0x7c00 ? 65536.f : Float16::to_float(static_cast<uint16_t>(h + 1));
    const uint32_t mid = std::bit_cast<uint32_t>((lo + hi) / 2);
    for (uint32_t b : {mid - 1, mid, mid + 1}) {
      check(b);
      check(b | 0x80000000u);
    }
  }
}

// The block conversions (engine/half.h widen/narrow, vectorised) against the scalar ones tested
// above, bit for bit, NaNs included: every 16-bit value; runs of 4096 consecutive float bit
// patterns, one in every 31 (odd lengths reach the loops' tails); every float16 rounding
// boundary.
TEST(Half, BlockConversionsAreTheScalarOnesBitForBit) {
  std::vector<Float16> halves(65536);
  std::vector<BFloat16> brains(65536);
  for (uint32_t h = 0; h < 65536; ++h) halves[h].bits = brains[h].bits = static_cast<uint16_t>(h);
  std::vector<float> wide(65536);
  widen(halves.data(), wide.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(std::bit_cast<uint32_t>(wide[h]),
              std::bit_cast<uint32_t>(static_cast<float>(halves[h])))
        << "float16 " << std::hex << h;
  widen(brains.data(), wide.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(std::bit_cast<uint32_t>(wide[h]),
              std::bit_cast<uint32_t>(static_cast<float>(brains[h])))
        << "bfloat16 " << std::hex << h;

  constexpr int64_t kBlock = 4096;
  std::vector<float> floats(kBlock);
  std::vector<Float16> narrow16(kBlock);
  std::vector<BFloat16> narrow_b(kBlock);
  for (uint64_t start = 0; start < (uint64_t{1} << 32); start += 31 * kBlock + 3) {
    for (int64_t i = 0; i < kBlock; ++i)
      floats[i] = std::bit_cast<float>(static_cast<uint32_t>(start + static_cast<uint64_t>(i)));
    const int64_t n = kBlock - static_cast<int64_t>(start % 5);
    narrow(floats.data(), narrow16.data(), n);
    narrow(floats.data(), narrow_b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(narrow16[i].bits, Float16(floats[i]).bits)
          << "float16 of " << std::hex << std::bit_cast<uint32_t>(floats[i]);
      ASSERT_EQ(narrow_b[i].bits, BFloat16(floats[i]).bits)
          << "bfloat16 of " << std::hex << std::bit_cast<uint32_t>(floats[i]);
    }
  }
  // Float16's rounding boundaries: each halfway point between neighbours, and its neighbours.
  std::vector<float> boundaries;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = Float16::to_float(static_cast<uint16_t>(h));
    const float hi = h + 1 == 0x7c00 ? 65536.f : Float16::to_float(static_cast<uint16_t>(h + 1));
    const uint32_t mid = std::bit_cast<uint32_t>((lo + hi) / 2);
    for (uint32_t b : {mid - 1, mid, mid + 1, (mid - 1) | 0x80000000u, mid | 0x80000000u,
                       (mid + 1) | 0x80000000u})
      boundaries.push_back(std::bit_cast<float>(b));
  }
  std::vector<Float16> out(boundaries.size());
  narrow(boundaries.data(), out.data(), static_cast<int64_t>(boundaries.size()));
  for (size_t i = 0; i < boundaries.size(); ++i)
    ASSERT_EQ(out[i].bits, Float16(boundaries[i]).bits)
        << "float16 of " << std::hex << std::bit_cast<uint32_t>(boundaries[i]);
}

}  // namespace
}  // namespace dprun
