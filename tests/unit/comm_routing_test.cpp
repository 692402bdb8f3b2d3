// The routing of engine/parallel/comm.h: CPU destinations keep the host code path (sums in list
// order, split over the workers, bitwise as before), and copies and sums between GPUs are one
// collective of the GPUs' backend. A recording stand-in for the CUDA backend, whose "GPUs" are
// host memory, shows which path each call takes on any machine.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>

#include "engine/backend.h"
#include "engine/model.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/device_list.h"
#include "engine/parallel/replicate.h"
#include "engine/stream_order.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::random_floats;

/// A CUDA backend stand-in: host memory labelled cuda:N, host copies, and collectives that
/// record their calls and then do the work with host loops (sums in list order).
class RecordingGpuBackend final : public Backend {
 public:
  struct Call {
    size_t lists = 0;    // destination lists (broadcast) or input lists (reduce)
    size_t tensors = 0;  // tensors per list
  };

  DeviceType type() const override { return DeviceType::CUDA; }
  int device_count() const override { return 4; }
  void check_device(Device) const override {}
  std::shared_ptr<Allocator> allocator(Device device) override {
    std::lock_guard lock(mutex_);
    auto& slot = allocators_[device.index];
    if (!slot) slot = std::make_shared<CachingHostAllocator>(device);
    return slot;
  }
  void copy(void* dst, Device, const void* src, Device, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void synchronize(Device) override {}
  DeviceProperties properties(Device device, int) const override {
    return {device.to_string(), 0, 1};
  }
  std::unique_ptr<ExecutionContext> create_execution_context(Device device,
                                                             const ExecutionConfig&) override {
    fail("no execution on ", device.to_string(), " in this test");
  }
  void broadcast_coalesced(const std::vector<Tensor>& sources,
                           const std::vector<std::vector<Tensor>>& destinations) override {
    broadcasts.push_back({destinations.size(), sources.size()});
    for (const auto& list : destinations)
      for (size_t k = 0; k < sources.size(); ++k)
        std::memcpy(const_cast<void*>(list[k].raw_data()), sources[k].raw_data(),
                    sources[k].nbytes());
  }
  void reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                            const std::vector<Tensor>& outputs) override {
    reduces.push_back({inputs.size(), outputs.size()});
    output_devices.push_back(outputs[0].device());
    for (size_t k = 0; k < outputs.size(); ++k) {
      auto* out = static_cast<float*>(const_cast<void*>(outputs[k].raw_data()));
      for (int64_t i = 0; i < outputs[k].numel(); ++i) {
        float s = 0;
        for (const auto& list : inputs) s += list[k].data<float>()[i];
        out[i] = s;
      }
    }
  }

  std::vector<Call> broadcasts, reduces;
  std::vector<Device> output_devices;

 private:
  std::mutex mutex_;
  std::map<int, std::shared_ptr<Allocator>> allocators_;
};

/// Installs a RecordingGpuBackend as the CUDA backend for the fixture's lifetime, without the
/// real backend's stream operations (it has no streams), then puts back whatever was there (the
/// real CUDA backend and its stream operations in a CUDA build).
class CommRouting : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      previous_ = &backend_for(DeviceType::CUDA);
    } catch (const Error&) {
      previous_ = nullptr;
    }
    previous_streams_ = stream_order_for(DeviceType::CUDA);
    register_backend(DeviceType::CUDA, &gpus_);
    register_stream_order(DeviceType::CUDA, nullptr);
  }
  void TearDown() override {
    register_backend(DeviceType::CUDA, previous_);
    register_stream_order(DeviceType::CUDA, previous_streams_);
  }

  RecordingGpuBackend gpus_;

 private:
  Backend* previous_ = nullptr;
  StreamOrder* previous_streams_ = nullptr;
};

std::vector<float> host_values(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

TEST_F(CommRouting, CpuDestinationSumsOnTheHostInListOrderAsBefore) {
  std::vector<Device> cpus = parse_device_list("cpu:0,cpu:1,cpu:2");
  // 40000 elements per tensor, enough for the workers to split the sum.
  const std::vector<float> firsts = {1e8f, 1, -1e8f};
  std::vector<std::vector<Tensor>> inputs;
  for (size_t d = 0; d < cpus.size(); ++d)
    inputs.push_back({random_floats({200, 200}, static_cast<uint32_t>(d + 1)).to(cpus[d]),
                      Tensor::from_vector<float>({2}, {firsts[d], 1}).to(cpus[d])});
  std::vector<Tensor> split = reduce_add_coalesced(inputs, cpus[0], cpus);
  std::vector<Tensor> single = reduce_add_coalesced(inputs, cpus[0]);
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(split[k].device(), cpus[0]);
    for (int64_t i = 0; i < split[k].numel(); ++i) {
      // The host order: ((a + b) + c), element by element.
      float expected = inputs[0][k].data<float>()[i] + inputs[1][k].data<float>()[i];
      expected += inputs[2][k].data<float>()[i];
      ASSERT_EQ(split[k].data<float>()[i], expected) << "tensor " << k << " element " << i;
      ASSERT_EQ(single[k].data<float>()[i], expected) << "tensor " << k << " element " << i;
    }
  }
  // (1e8 + 1) + -1e8 = 0 in float32 (any other order keeps the 1): list order, and never a
  // backend collective.
  EXPECT_EQ(split[1].data<float>()[0], 0.0f);
  EXPECT_EQ(split[1].data<float>()[1], 3.0f);
  EXPECT_TRUE(gpus_.reduces.empty());
  EXPECT_TRUE(gpus_.broadcasts.empty());
}

TEST_F(CommRouting, GpuListsSumInOneBackendCollective) {
  std::vector<Device> gpus = parse_device_list("cuda:0,cuda:1,cuda:2");
  std::vector<std::vector<Tensor>> inputs;
  for (size_t d = 0; d < gpus.size(); ++d)
    inputs.push_back({random_floats({4, 5}, static_cast<uint32_t>(10 + d)).to(gpus[d]),
                      random_floats({7}, static_cast<uint32_t>(20 + d)).to(gpus[d])});
  for (Device destination : {gpus[0], gpus[2]}) {
    SCOPED_TRACE(destination.to_string());
    gpus_.reduces.clear();
    gpus_.output_devices.clear();
    std::vector<Tensor> sums = reduce_add_coalesced(inputs, destination, gpus);
    ASSERT_EQ(gpus_.reduces.size(), 1u);  // one call for both tensors
    EXPECT_EQ(gpus_.reduces[0].lists, 3u);
    EXPECT_EQ(gpus_.reduces[0].tensors, 2u);
    EXPECT_EQ(gpus_.output_devices, std::vector<Device>{destination});
    ASSERT_EQ(sums.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(sums[k].device(), destination);
      EXPECT_EQ(sums[k].shape(), inputs[0][k].shape());
      std::vector<float> got = host_values(sums[k]);
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i], host_values(inputs[0][k])[i] + host_values(inputs[1][k])[i] +
                              host_values(inputs[2][k])[i]);
    }
  }
  // reduce_add of single tensors takes the same route.
  Tensor s = reduce_add({inputs[0][1], inputs[1][1]}, gpus[1]);
  EXPECT_EQ(gpus_.reduces.size(), 2u);
  EXPECT_EQ(s.device(), gpus[1]);
}

TEST_F(CommRouting, MixedDevicesOrAForeignDestinationSumOnTheHostThenCopy) {
  Tensor a = Tensor::from_vector<float>({3}, {1e8f, 1, 2});
  Tensor b = Tensor::from_vector<float>({3}, {-1e8f, 3, 4}).to(Device::cuda(1));
  Tensor c = Tensor::from_vector<float>({3}, {1, 5, 6}).to(Device::cuda(2));
  // cpu:0 and cuda:1 lists onto cuda:1, and GPU lists onto a GPU that holds none of them.
  Tensor mixed = reduce_add({a, b, c}, Device::cuda(1));
  Tensor foreign = reduce_add({b, c}, Device::cuda(3));
  EXPECT_TRUE(gpus_.reduces.empty());
  EXPECT_EQ(mixed.device(), Device::cuda(1));
  EXPECT_EQ(foreign.device(), Device::cuda(3));
  EXPECT_EQ(host_values(mixed), (std::vector<float>{1, 9, 12}));  // list order keeps the 1
  EXPECT_EQ(host_values(foreign), (std::vector<float>{-1e8f + 1, 8, 10}));
}

TEST_F(CommRouting, BroadcastBetweenGpusIsOneBackendCollective) {
  std::vector<Device> gpus = parse_device_list("cuda:0,cuda:1,cuda:2");
  std::vector<Tensor> tensors = {random_floats({2, 3}, 1).to(gpus[0]),
                                 Tensor::from_vector<int64_t>({2}, {7, -9}).to(gpus[0])};
  std::vector<std::vector<Tensor>> copies = broadcast_coalesced(tensors, gpus);
  ASSERT_EQ(gpus_.broadcasts.size(), 1u);
  EXPECT_EQ(gpus_.broadcasts[0].lists, 2u);  // cuda:1 and cuda:2; cuda:0 keeps its own
  EXPECT_EQ(gpus_.broadcasts[0].tensors, 2u);
  ASSERT_EQ(copies.size(), 3u);
  for (size_t k = 0; k < 2; ++k) EXPECT_TRUE(copies[0][k].shares_storage_with(tensors[k]));
  for (size_t d = 1; d < 3; ++d) {
    EXPECT_EQ(copies[d][0].device(), gpus[d]);
    EXPECT_FALSE(copies[d][0].shares_storage_with(tensors[0]));
    EXPECT_EQ(host_values(copies[d][0]), host_values(tensors[0]));
    Tensor ints = copies[d][1].to(Device::cpu());
    EXPECT_EQ(ints.data<int64_t>()[1], -9);
  }
  // Into existing tensors: a list that shares the sources' storage is left out.
  Tensor fresh = random_floats({2, 3}, 2).to(gpus[1]);
  Tensor fresh_ints = Tensor::from_vector<int64_t>({2}, {0, 0}).to(gpus[1]);
  broadcast_coalesced_into(tensors, {tensors, {fresh, fresh_ints}});
  ASSERT_EQ(gpus_.broadcasts.size(), 2u);
  EXPECT_EQ(gpus_.broadcasts[1].lists, 1u);
  EXPECT_EQ(host_values(fresh), host_values(tensors[0]));
}

TEST_F(CommRouting, BroadcastBetweenCpuDevicesCopiesOnTheHost) {
  std::vector<Device> cpus = parse_device_list("cpu:0,cpu:1,cpu:2");
  std::vector<Tensor> tensors = {random_floats({2, 3}, 3)};
  std::vector<std::vector<Tensor>> copies = broadcast_coalesced(tensors, cpus);
  EXPECT_TRUE(gpus_.broadcasts.empty());
  EXPECT_TRUE(copies[0][0].shares_storage_with(tensors[0]));
  for (size_t d = 1; d < 3; ++d) {
    EXPECT_EQ(copies[d][0].device(), cpus[d]);
    EXPECT_FALSE(copies[d][0].shares_storage_with(tensors[0]));
    EXPECT_EQ(host_values(copies[d][0]), host_values(tensors[0]));
  }
}

TEST_F(CommRouting, ReplicateAndRefreshBroadcastGpuParametersInOneCall) {
  auto g = std::make_shared<Graph>();
  g->name = "scale";
  g->opset_imports[""] = 17;
  g->inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(3)}}});
  g->initializers["w"] = random_floats({3}, 4);
  g->initializers["b"] = random_floats({3}, 5);
  g->nodes.push_back(make_node("Mul", {"x", "w"}, {"xw"}));
  g->nodes.push_back(make_node("Add", {"xw", "b"}, {"y"}));
  g->outputs.push_back({"y", {DType::Float32, std::nullopt}});
  std::vector<Device> gpus = parse_device_list("cuda:0,cuda:1,cuda:2");
  Model base(g, gpus[0]);
  std::vector<std::shared_ptr<Model>> replicas = replicate(base, gpus);
  ASSERT_EQ(gpus_.broadcasts.size(), 1u);
  EXPECT_EQ(gpus_.broadcasts[0].lists, 2u);
  EXPECT_EQ(gpus_.broadcasts[0].tensors, 2u);
  for (size_t r = 1; r < 3; ++r)
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(replicas[r]->parameters()[i].device(), gpus[r]);
      EXPECT_EQ(host_values(replicas[r]->parameters()[i]), host_values(base.parameters()[i]));
    }
  // New values in the base reach the replicas through one more broadcast.
  Tensor w = base.parameters()[0];
  w.copy_from(random_floats({3}, 6).to(gpus[0]));
  refresh_replicas(base, {replicas[1].get(), replicas[2].get()}, gpus);
  ASSERT_EQ(gpus_.broadcasts.size(), 2u);
  EXPECT_EQ(gpus_.broadcasts[1].lists, 2u);
  for (size_t r = 1; r < 3; ++r)
    EXPECT_EQ(host_values(replicas[r]->parameters()[0]), host_values(base.parameters()[0]));
}

TEST(BackendCollectives, ABackendWithoutCollectivesSaysSo) {
  Backend& cpu = backend_for(DeviceType::CPU);
  Tensor t = Tensor::from_vector<float>({1}, {1});
  try {
    cpu.broadcast_coalesced({t}, {{t}});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "broadcast between cpu devices: this backend has no device collectives");
  }
  try {
    cpu.reduce_add_coalesced({{t}, {t}}, {t});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "reduce_add between cpu devices: this backend has no device collectives");
  }
}

}  // namespace
}  // namespace dprun
