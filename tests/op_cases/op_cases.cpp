#include "op_cases/op_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>

#include "engine/rewrites/rewrite_domain.h"
#include "op_test_util.h"

namespace dprun::testing {

Node node_with(const std::string& op, std::vector<std::string> inputs,
               std::map<std::string, Attribute> attributes) {
  Node n = make_node(op, std::move(inputs), {"y"});
  n.attributes = std::move(attributes);
  return n;
}

InputSpec floats(Shape shape, double lo, double hi) {
  return {.shape = std::move(shape), .lo = lo, .hi = hi};
}

InputSpec of(InputSpec spec, DType dtype) {
  spec.dtype = dtype;
  return spec;
}

InputSpec int64s(std::vector<int64_t> values) {
  const auto n = static_cast<int64_t>(values.size());
  return {.shape = {n}, .dtype = DType::Int64, .values = std::move(values)};
}

InputSpec constant_int64s(std::vector<int64_t> values) {
  InputSpec spec = int64s(std::move(values));
  spec.constant = true;
  return spec;
}

InputSpec scalar(DType dtype, double value, bool constant) {
  return {.shape = {}, .dtype = dtype, .lo = value, .hi = value, .constant = constant};
}

std::string dims_name(const Shape& shape) {
  std::string s;
  for (int64_t d : shape) {
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return s.empty() ? "scalar" : s;
}

std::vector<DType> cuda_definition_dtypes(const std::string& op, const std::string& domain) {
  for (const KernelDef& def : KernelRegistry::instance().definitions())
    if (def.device == DeviceType::CUDA && def.domain == domain && def.op_type == op)
      return def.dtypes;
  ADD_FAILURE() << op << " has no CUDA definition";
  return {};
}

std::vector<Tensor> make_inputs(const OpCase& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (const InputSpec& spec : c.inputs) {
    if (!spec.values.empty()) {
      Tensor t = Tensor::empty(spec.shape, spec.dtype);
      if (t.numel() != static_cast<int64_t>(spec.values.size()))
        ADD_FAILURE() << spec.values.size() << " values for shape " << dims_name(spec.shape);
      visit_dtype(spec.dtype, [&](auto zero) {
        using T = decltype(zero);
        for (int64_t i = 0; i < t.numel() && i < static_cast<int64_t>(spec.values.size()); ++i)
          if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
            t.data<T>()[i] = T(static_cast<float>(spec.values[static_cast<size_t>(i)]));
          else
            t.data<T>()[i] = static_cast<T>(spec.values[static_cast<size_t>(i)]);
      });
      inputs.push_back(std::move(t));
      continue;
    }
    Tensor t = Tensor::empty(spec.shape, spec.dtype);
    visit_dtype(spec.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* p = t.data<T>();
      if constexpr (std::is_same_v<T, bool>) {
        for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::bernoulli_distribution(0.5)(rng);
      } else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Float16> ||
                           std::is_same_v<T, BFloat16>) {
        std::uniform_real_distribution<double> dist(spec.lo, spec.hi);
        const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                                   std::numeric_limits<double>::infinity(),
                                   -std::numeric_limits<double>::infinity()};
        for (int64_t i = 0; i < t.numel(); ++i) {
          double v = spec.whole ? std::round(dist(rng)) : dist(rng);
          if (spec.special && i % 4 == 0) v = specials[(i / 4) % 3];
          if constexpr (std::is_floating_point_v<T>)
            p[i] = static_cast<T>(v);
          else
            p[i] = T(static_cast<float>(v));
        }
      } else if constexpr (std::is_integral_v<T>) {
        std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(std::ceil(spec.lo)),
                                                    static_cast<int64_t>(std::floor(spec.hi)));
        for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(dist(rng));
      } else {
        ADD_FAILURE() << "no random values for " << dtype_name(spec.dtype);
      }
    });
    inputs.push_back(std::move(t));
  }
  return inputs;
}

KernelInfo cuda_kernel_info(const OpCase& c) {
  KernelInfo info{c.node, c.opset, DeviceType::CUDA, {}, {}};
  // Values are made only for constant inputs: a case may name a dtype that has no random
  // values (a String target of CastLike) to check that the registry declines it.
  const bool any_constant = std::any_of(c.inputs.begin(), c.inputs.end(),
                                        [](const InputSpec& spec) { return spec.constant; });
  const std::vector<Tensor> values = any_constant ? make_inputs(c, 1234) : std::vector<Tensor>{};
  // Specs follow the node's named inputs; an empty name is an omitted input without a spec.
  for (size_t i = 0, k = 0; i < c.node.inputs.size(); ++i) {
    if (c.node.inputs[i].empty() || k >= c.inputs.size()) {
      info.input_types.push_back(std::nullopt);
      continue;
    }
    const InputSpec& spec = c.inputs[k];
    if (spec.constant) info.constant_inputs.emplace(i, values[k]);
    SymbolicShape shape;
    for (int64_t d : spec.shape) shape.push_back(Dim::known(d));
    info.input_types.push_back(TensorType{spec.dtype, shape});
    ++k;
  }
  return info;
}

void expect_cases_cover_definitions(const std::vector<OpCase>& cases,
                                    const std::set<std::string>& covered) {
  std::set<std::string> registered;
  for (const KernelDef& def : KernelRegistry::instance().definitions()) {
    const bool tested_domain = def.domain.empty() || def.domain == kRewriteDomain;
    if (def.device != DeviceType::CUDA || !tested_domain || !covered.count(def.op_type)) continue;
    registered.insert(def.op_type);
    const bool runs = std::any_of(cases.begin(), cases.end(), [&](const OpCase& c) {
      const auto input = static_cast<size_t>(def.dtype_input);
      if (c.node.op_type != def.op_type || c.node.domain != def.domain || c.opset < def.since ||
          c.opset > def.until)
        return false;
      // A definition without dtypes runs for any case (Constant's cases have no inputs).
      if (def.dtypes.empty()) return true;
      if (input >= c.inputs.size()) return false;
      const DType dtype = c.inputs[input].dtype;
      return std::find(def.dtypes.begin(), def.dtypes.end(), dtype) != def.dtypes.end();
    });
    EXPECT_TRUE(runs) << "no case runs the CUDA " << def.domain << (def.domain.empty() ? "" : ".")
                      << def.op_type << " kernel (" << def.impl << ") for opsets " << def.since
                      << ".." << def.until;
  }
  for (const std::string& op : covered)
    EXPECT_TRUE(registered.count(op)) << op << " has no CUDA kernel";
}

void expect_every_case_finds_a_cuda_kernel(const std::vector<OpCase>& cases,
                                           const std::set<std::string>& covered) {
  for (const OpCase& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(covered.count(c.node.op_type)) << c.node.op_type << " is not a covered op";
    std::string why;
    EXPECT_NE(KernelRegistry::instance().create(cuda_kernel_info(c), &why), nullptr) << why;
  }
}

void expect_host_only_ops_have_no_cuda_kernel(const std::vector<OpCase>& cases,
                                              const std::set<std::string>& host_only) {
  for (const KernelDef& def : KernelRegistry::instance().definitions()) {
    const bool tested_domain = def.domain.empty() || def.domain == kRewriteDomain;
    EXPECT_FALSE(def.device == DeviceType::CUDA && tested_domain && host_only.count(def.op_type))
        << def.op_type << " has a CUDA kernel (" << def.impl
        << "): list it among the table's covered ops";
  }
  for (const OpCase& c : cases) {
    if (!host_only.count(c.node.op_type)) continue;
    SCOPED_TRACE(c.name);
    EXPECT_EQ(KernelRegistry::instance().create(cuda_kernel_info(c)), nullptr)
        << c.node.op_type << " found a CUDA kernel";
  }
}

namespace {
// The same dtype, shape and bytes.
void expect_same_bits(const Tensor& got_device, const Tensor& want) {
  const Tensor got = got_device.to(Device::cpu());
  ASSERT_EQ(dtype_name(got.dtype()), dtype_name(want.dtype()));
  ASSERT_EQ(shape_to_string(got.shape()), shape_to_string(want.shape()));
  const size_t size = dtype_size(want.dtype());
  const auto* g = static_cast<const unsigned char*>(got.raw_data());
  const auto* w = static_cast<const unsigned char*>(want.raw_data());
  for (int64_t i = 0; i < want.numel(); ++i)
    if (std::memcmp(g + i * size, w + i * size, size) != 0) {
      ADD_FAILURE() << "element " << i << ": device " << got.item_as_double(i) << ", cpu "
                    << want.item_as_double(i) << " (first difference)";
      return;
    }
}
}  // namespace

void expect_device_output_matches(const Tensor& got_device, const Tensor& want, double floor) {
  const Tensor got = got_device.to(Device::cpu());
  ASSERT_EQ(dtype_name(got.dtype()), dtype_name(want.dtype()));
  ASSERT_EQ(shape_to_string(got.shape()), shape_to_string(want.shape()));
  if (!is_floating(want.dtype())) {
    expect_same_bits(got, want);
    return;
  }
  // 16-bit results are rounded from float on both sides: a float result one step apart on the
  // GPU (its own expf, say) may round to the neighbouring 16-bit value, one step of 2^-10
  // (float16) or 2^-7 (bfloat16) relative.
  const double tolerance = want.dtype() == DType::Float16    ? 1.0 / 1024
                           : want.dtype() == DType::BFloat16 ? 1.0 / 128
                                                             : 1e-5;
  int reported = 0;
  for (int64_t i = 0; i < want.numel() && reported < 10; ++i) {
    const double g = got.item_as_double(i), w = want.item_as_double(i);
    const bool ok = std::isnan(w)   ? std::isnan(g)
                    : std::isinf(w) ? g == w
                                    : std::fabs(g - w) <= tolerance * std::max(std::fabs(w), floor);
    if (!ok) {
      ADD_FAILURE() << "element " << i << ": device " << g << ", cpu " << w;
      ++reported;
    }
  }
}

void expect_device_matches_cpu(const OpCase& c, Device device, unsigned seed) {
  const std::vector<Tensor> values = make_inputs(c, seed);
  std::vector<Tensor> inputs;
  std::map<std::string, Tensor> initializers;
  for (size_t i = 0, k = 0; i < c.node.inputs.size() && k < values.size(); ++i) {
    if (c.node.inputs[i].empty()) continue;
    if (c.inputs[k].constant)
      initializers[c.node.inputs[i]] = values[k];
    else
      inputs.push_back(values[k]);
    ++k;
  }
  const std::vector<Tensor> cpu =
      run_node(c.node, inputs, c.opset, c.node.domain, Device::cpu(), initializers);
  const std::vector<Tensor> got =
      run_node(c.node, inputs, c.opset, c.node.domain, device, initializers);
  ASSERT_EQ(got.size(), cpu.size());
  for (size_t o = 0; o < cpu.size(); ++o) {
    SCOPED_TRACE("output " + std::to_string(o));
    EXPECT_EQ(got[o].device(), device);
    if (device.type == DeviceType::Sim)
      expect_same_bits(got[o], cpu[o]);
    else
      expect_device_output_matches(got[o], cpu[o], c.floor);
  }
}

namespace {
std::vector<OpCaseTable>& tables() {
  static std::vector<OpCaseTable> registered;
  return registered;
}
}  // namespace

const std::vector<OpCase>& OpCaseTable::cases() const {
  if (!made) {
    made.emplace();
    for (AddCases add : adders) add(*made);
  }
  return *made;
}

bool register_op_case_table(OpCaseTable table, const char* source) {
  table.source = source;
  tables().push_back(std::move(table));
  return true;
}

const std::vector<OpCaseTable>& op_case_tables() {
  return tables();
}

const std::vector<OpCase>& op_cases_of(const std::string& family) {
  for (const OpCaseTable& table : tables())
    if (table.family == family) return table.cases();
  ADD_FAILURE() << "no op case table '" << family << "'";
  static const std::vector<OpCase> none;
  return none;
}

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> all;
  for (const OpCaseTable& table : tables())
    for (OpCase c : table.cases()) {
      c.name = table.family + "_" + c.name;
      all.push_back(std::move(c));
    }
  return all;
}

}  // namespace dprun::testing
