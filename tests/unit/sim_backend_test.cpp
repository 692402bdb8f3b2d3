// The simulated devices (engine/backends/sim): their memory is closed to the host outside the
// device's kernels and copies, copies and collectives move and sum every byte, their kernels
// follow the CUDA backend's definitions and refuse inputs outside device memory, and their
// plans place every node where a CUDA plan does.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "accelerator_test_util.h"
#include "bundled_model_util.h"
#include "engine/backend.h"
#include "engine/backends/sim/sim_memory.h"
#include "engine/kernel.h"
#include "engine/parallel/comm.h"
#include "engine/plan.h"
#include "error_test_util.h"
#include "graph_test_util.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

using testing::error_of;

constexpr char kTouchedMessage[] =
    "dprun: host code touched simulated device memory outside the device's kernels and copies";

template <class T>
std::vector<T> host_values(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  return std::vector<T>(h.data<T>(), h.data<T>() + h.numel());
}

TEST(SimDevice, IsParsedNamedAndServedByItsBackend) {
  EXPECT_EQ(Device::parse("sim:3"), Device::sim(3));
  EXPECT_EQ(Device::parse("sim"), Device::sim(0));
  EXPECT_EQ(Device::sim(2).to_string(), "sim:2");
  Backend& sim = backend_for(Device::sim(0));
  EXPECT_EQ(sim.type(), DeviceType::Sim);
  EXPECT_TRUE(backend_available(DeviceType::Sim));
  EXPECT_EQ(sim.device_count(), backend_for(DeviceType::CPU).device_count());
  EXPECT_EQ(sim.properties(Device::sim(1), 2).name, "sim:1");
  EXPECT_EQ(sim.properties(Device::sim(1), 2).compute_units,
            backend_for(DeviceType::CPU).properties(Device::cpu(1), 2).compute_units);
  EXPECT_EQ(error_of([&] { sim.check_device(Device::sim(-1)); }), "not a simulated device: sim:-1");
  EXPECT_EQ(error_of([] { Device::parse("tpu:0"); }),
            "invalid device 'tpu:0': expected cpu[:N], cuda[:N] or sim[:N]");
}

TEST(SimMemoryDeathTest, HostCodeThatReadsDeviceMemoryStopsTheProcessSayingWhy) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Tensor on_device = Tensor::from_vector<float>({2}, {1, 2}).to(Device::sim(0));
  EXPECT_DEATH(
      {
        volatile float first = *static_cast<const float*>(on_device.raw_data());
        (void)first;
      },
      kTouchedMessage);
}

TEST(SimMemoryDeathTest, AScopeOpensWhatItNamesAndWhatIsAllocatedWhileItLasts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Tensor t = Tensor::empty({4}, DType::Float32, Device::sim(0));
  Tensor other = Tensor::empty({1}, DType::Float32, Device::sim(0));
  auto* data = static_cast<float*>(t.raw_data());
  {
    SimAccess outer(Device::sim(0), {data + 1});  // any address inside the tensor's memory
    data[0] = 5;
    Tensor made_inside = Tensor::empty({2}, DType::Float32, Device::sim(0));
    static_cast<float*>(made_inside.raw_data())[1] = 6;
    made_inside.copy_from(Tensor::from_vector<float>({2}, {1, 2}));  // a copy's scope ends...
    static_cast<float*>(made_inside.raw_data())[0] = 3;              // ...leaving it open
    { SimAccess inner(Device::sim(0), {data}); }
    data[1] = data[0] + 1;  // the inner scope's end does not close the outer one's
    // Memory of the device that no scope names stays closed.
    EXPECT_DEATH(static_cast<float*>(other.raw_data())[0] = 1, kTouchedMessage);
  }
  EXPECT_EQ(host_values<float>(t)[1], 6.0f);  // copies open the memory themselves
  EXPECT_DEATH(data[2] = 1, kTouchedMessage);
}

TEST(SimMemory, CopiesBetweenHostAndDevicesKeepEveryByte) {
  const std::vector<int64_t> values = {1, -2, int64_t(1) << 40, 7};
  const Tensor host = Tensor::from_vector<int64_t>({4}, values);
  const Tensor on0 = host.to(Device::sim(0));
  const Tensor on1 = on0.to(Device::sim(1));
  EXPECT_EQ(on0.device(), Device::sim(0));
  EXPECT_EQ(on1.device(), Device::sim(1));
  EXPECT_EQ(host_values<int64_t>(on1), values);
  const AllocatorStats stats = backend_for(DeviceType::Sim).allocator(Device::sim(1))->stats();
  EXPECT_GE(stats.in_use, 32u);
  EXPECT_GE(stats.peak_in_use, stats.in_use);
}

TEST(SimCollectives, BroadcastToEveryDeviceCopiesEveryByte) {
  const std::vector<Device> devices = {Device::sim(0), Device::sim(1), Device::sim(2)};
  const std::vector<float> floats = {0.5f, -1.25f, 3e-8f};
  const std::vector<int64_t> ints = {1, -2, int64_t(1) << 40};
  const std::vector<Tensor> sources = {Tensor::from_vector<float>({3}, floats).to(devices[0]),
                                       Tensor::from_vector<int64_t>({3}, ints).to(devices[0]),
                                       Tensor::empty({0, 4}, DType::Float32, devices[0])};
  const auto copies = broadcast_coalesced(sources, devices);
  ASSERT_EQ(copies.size(), 3u);
  for (size_t d = 1; d < devices.size(); ++d) {
    SCOPED_TRACE(devices[d].to_string());
    EXPECT_EQ(copies[d][0].device(), devices[d]);
    EXPECT_EQ(host_values<float>(copies[d][0]), floats);
    EXPECT_EQ(host_values<int64_t>(copies[d][1]), ints);
    EXPECT_EQ(copies[d][2].shape(), (Shape{0, 4}));
  }
}

TEST(SimCollectives, ReduceSumsEveryListOntoTheDestination) {
  std::vector<std::vector<Tensor>> inputs;
  for (int d = 0; d < 3; ++d) {
    const float f = static_cast<float>(d + 1);
    inputs.push_back(
        {Tensor::from_vector<float>({2}, {f, 10 * f}).to(Device::sim(d)),
         Tensor::from_vector<int64_t>({1}, {int64_t(1) << (40 + d)}).to(Device::sim(d))});
  }
  for (Device destination : {Device::sim(0), Device::sim(2)}) {
    SCOPED_TRACE(destination.to_string());
    const std::vector<Tensor> sums = reduce_add_coalesced(inputs, destination);
    ASSERT_EQ(sums.size(), 2u);
    EXPECT_EQ(sums[0].device(), destination);
    EXPECT_EQ(host_values<float>(sums[0]), (std::vector<float>{6, 60}));
    EXPECT_EQ(host_values<int64_t>(sums[1]), (std::vector<int64_t>{(int64_t(7) << 40)}));
  }
}

TEST(SimCollectives, RefuseWhatNcclWouldRefuse) {
  Backend& sim = backend_for(DeviceType::Sim);
  const Tensor a0 = Tensor::from_vector<float>({2}, {1, 2}).to(Device::sim(0));
  const Tensor a1 = Tensor::from_vector<float>({2}, {3, 4}).to(Device::sim(1));
  const Tensor b1 = Tensor::from_vector<float>({3}, {3, 4, 5}).to(Device::sim(1));
  EXPECT_EQ(error_of([&] { sim.broadcast_coalesced({a0}, {{a0}}); }),
            "broadcast_coalesced: sim:0 is listed twice; each list needs a device of its own");
  EXPECT_EQ(error_of([&] { sim.broadcast_coalesced({a0}, {{b1}}); }),
            "broadcast_coalesced: destination list 0, tensor 0, is float32[3] on sim:1 but "
            "should be like float32[2] on sim:0");
  EXPECT_EQ(error_of([&] { sim.broadcast_coalesced({a0}, {{a0.to(Device::cpu())}}); }),
            "broadcast_coalesced: destination list 0: tensor 0 is on cpu:0, not on a sim device");
  const Tensor out2 = Tensor::empty({2}, DType::Float32, Device::sim(2));
  EXPECT_EQ(error_of([&] {
              sim.reduce_add_coalesced({{a0}, {a1}}, {out2});
            }),
            "reduce_add_coalesced: the outputs are on sim:2, which holds none of the input "
            "lists");
  const Tensor i0 = Tensor::from_vector<int8_t>({1}, {1}).to(Device::sim(0));
  const Tensor i1 = Tensor::from_vector<int8_t>({1}, {1}).to(Device::sim(1));
  EXPECT_EQ(error_of([&] {
              reduce_add_coalesced({{i0}, {i1}}, Device::sim(0));
            }),
            "reduce_add on sim devices: float32, float64, int32 and int64 tensors can be "
            "summed, not int8");
}

class DoesNothing : public OpKernel {
 public:
  explicit DoesNothing(const KernelInfo&) {}
  void compute(KernelContext&) const override {}
};
DPRUN_REGISTER_KERNEL({.domain = "dprun.test.listeners",
                       .op_type = "AddedBefore",
                       .factory = make_kernel<DoesNothing>});

TEST(KernelRegistryListeners, SeeEveryDefinitionOnceWhetherAddedBeforeOrAfter) {
  // The listener stays registered for the process: what it writes must outlive the test.
  auto seen = std::make_shared<std::vector<std::string>>();
  KernelRegistry::instance().on_add([seen](const KernelDef& d) {
    if (d.domain == "dprun.test.listeners") seen->push_back(d.op_type);
  });
  KernelRegistry::instance().add({.domain = "dprun.test.listeners",
                                  .op_type = "AddedAfter",
                                  .factory = make_kernel<DoesNothing>});
  EXPECT_EQ(*seen, (std::vector<std::string>{"AddedBefore", "AddedAfter"}));
}

// A definition's fields other than its device and factory, for comparing definitions.
using DefKey = std::tuple<std::string, std::string, int64_t, int64_t, std::vector<DType>, int, int,
                          std::string, std::vector<int>, std::vector<int>>;
DefKey key_of(const KernelDef& d) {
  return {d.domain,      d.op_type,  d.since, d.until,       d.dtypes,
          d.dtype_input, d.priority, d.impl,  d.host_inputs, d.metadata_inputs};
}

TEST(SimKernels, FollowEveryCudaDefinition) {
  std::map<DefKey, int> cuda, sim;
  for (const KernelDef& d : KernelRegistry::instance().definitions()) {
    if (d.device == DeviceType::CUDA) ++cuda[key_of(d)];
    if (d.device == DeviceType::Sim) ++sim[key_of(d)];
  }
  EXPECT_EQ(sim, cuda);  // CudaKernelDefs.EveryBuildDefinesEveryCudaKernel counts them
}

TEST(SimKernels, RefuseAnInputOutsideDeviceMemoryAndLeaveOutputsOnTheDevice) {
  Node relu = testing::make_node("Relu", {"x"}, {"y"});
  KernelInfo info{.node = relu,
                  .opset = 17,
                  .device_type = DeviceType::Sim,
                  .input_types = {TensorType{DType::Float32, std::nullopt}}};
  std::unique_ptr<OpKernel> kernel = KernelRegistry::instance().create(info);
  ASSERT_NE(kernel, nullptr);
  auto context = backend_for(DeviceType::Sim).create_execution_context(Device::sim(0), {});
  const Tensor host = Tensor::from_vector<float>({3}, {-1, 0, 2});
  const Tensor on_device = host.to(Device::sim(0));
  std::vector<Tensor> outputs(1);
  const Tensor* inputs[] = {&host};
  KernelContext wrong(relu, *context, inputs, outputs);
  EXPECT_EQ(error_of([&] { kernel->compute(wrong); }),
            "input 0 ('x') is on cpu:0, not on sim:0: a device kernel reads its inputs from its "
            "device's memory");
  inputs[0] = &on_device;
  KernelContext right(relu, *context, inputs, outputs);
  kernel->compute(right);
  EXPECT_EQ(outputs[0].device(), Device::sim(0));
  EXPECT_EQ(host_values<float>(outputs[0]), (std::vector<float>{0, 0, 2}));
}

TEST(SimPlans, PlaceEveryNodeWhereACudaPlanDoes) {
  for (const char* name : {"cnn", "transformer"}) {
    SCOPED_TRACE(name);
    const auto graph = load_graph(testing::bundled_model_path(name));
    const auto on_sim = place_nodes(*graph, DeviceType::Sim);
    const auto on_cuda = place_nodes(*graph, DeviceType::CUDA);
    ASSERT_EQ(on_sim.size(), on_cuda.size());
    for (size_t n = 0; n < on_sim.size(); ++n) {
      SCOPED_TRACE(on_sim[n].node->describe());
      ASSERT_TRUE(on_sim[n].device && on_cuda[n].device);
      EXPECT_EQ(*on_sim[n].device == DeviceType::Sim, *on_cuda[n].device == DeviceType::CUDA);
      EXPECT_EQ(on_sim[n].shape_arithmetic, on_cuda[n].shape_arithmetic);
    }
  }
}

}  // namespace
}  // namespace dprun
