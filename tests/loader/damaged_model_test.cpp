// Damaged models never crash the engine: every bundled model cut short at many points, with
// bytes overwritten at random, and with fields of its protobuf set to hostile values (huge or
// negative dims, wrong element types, initializers whose data does not fit their shape), is
// loaded, compiled, run (on the CPU and on a simulated GPU) and trained one step, and each
// attempt either works or throws dprun::Error. Any other exception (std::bad_alloc,
// std::length_error, a protobuf one) or a crash fails the test.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>

#include "bundled_model_util.h"
#include "engine/error.h"
#include "engine/training/trainer.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

/// Loads the serialized model, then compiles and runs it on one row on the CPU and on a
/// simulated GPU (a GPU's plan: device kernels, host fallbacks), and trains it one step on two
/// rows (the mean of its first output as the loss, SGD); returns "ran", "error: " and the
/// message of the dprun::Error it threw, or what else went wrong.
std::string outcome(const std::string& bytes) {
  try {
    auto graph = load_graph_from_buffer(bytes.data(), bytes.size());
    for (Device device : {Device::cpu(), Device::sim(0)}) {
      Model model(graph, device);
      std::vector<Tensor> inputs;
      for (const Tensor& t : testing::deterministic_inputs(model, 1))
        inputs.push_back(t.to(device));
      model.run(inputs);
    }
    auto model = std::make_shared<Model>(graph, Device::cpu());
    TrainerOptions options;
    options.training.loss.kind = LossKind::None;
    Trainer trainer(model, options);
    Sgd sgd(trainer.parameters(), {.lr = 0.01});
    trainer.step(testing::deterministic_inputs(*model, 2), Tensor(), sgd);
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("a foreign exception: ") + e.what();
  } catch (...) {
    return "an exception of unknown type";
  }
  return "ran";
}

bool is_error(const std::string& result) {
  return result.rfind("error: ", 0) == 0;
}

TEST(DamagedModels, TheUndamagedModelsRunAndTrain) {
  for (const auto& [name, path] : testing::bundled_model_paths())
    EXPECT_EQ(outcome(file_bytes(path)), "ran") << name;
}

TEST(DamagedModels, CutShortAnywhereTheyFailWithAnError) {
  for (const auto& [name, path] : testing::bundled_model_paths()) {
    const std::string bytes = file_bytes(path);
    ASSERT_FALSE(bytes.empty()) << path;
    constexpr size_t kCuts = 48;
    for (size_t k = 1; k < kCuts; ++k) {
      const size_t cut = bytes.size() * k / kCuts;
      const std::string result = outcome(bytes.substr(0, cut));
      EXPECT_TRUE(is_error(result)) << name << " cut at byte " << cut << ": " << result;
    }
  }
}

TEST(DamagedModels, OverwrittenBytesFailWithAnErrorOrStillRun) {
  std::mt19937 rng(20261128);
  for (const auto& [name, path] : testing::bundled_model_paths()) {
    const std::string bytes = file_bytes(path);
    // The graph structure sits after the initializers' data in exported files, but anywhere
    // may be hit: positions spread over the whole file, 1 to 4 bytes each.
    for (int trial = 0; trial < 96; ++trial) {
      std::string damaged = bytes;
      const int count = 1 + static_cast<int>(rng() % 4);
      for (int b = 0; b < count; ++b)
        damaged[rng() % damaged.size()] = static_cast<char>(rng() & 0xff);
      const std::string result = outcome(damaged);
      EXPECT_TRUE(result == "ran" || is_error(result))
          << name << " trial " << trial << ": " << result;
    }
  }
}

/// The bundled model `name` with `damage` applied to its protobuf, serialized.
std::string damaged_model(const std::string& path,
                          const std::function<void(onnx::ModelProto&)>& damage) {
  onnx::ModelProto m;
  const std::string bytes = file_bytes(path);
  EXPECT_TRUE(m.ParseFromString(bytes)) << path;
  damage(m);
  return m.SerializeAsString();
}

/// The type of the model's first input.
onnx::TypeProto_Tensor& first_input_type(onnx::ModelProto& m) {
  return *m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type();
}

/// A change to a model, and whether the model may still run after it (a change that leaves a
/// valid model: a negative declared dim reads as unknown, as some exporters write -1 for a
/// dynamic dim; Gemm's transA and transB take any nonzero value as true).
struct Damage {
  std::function<void(onnx::ModelProto&)> change;
  bool may_run = false;
};

TEST(DamagedModels, HostileFieldValuesFailWithAnError) {
  const std::vector<std::pair<std::string, Damage>> damages = {
      {"a huge input dim", Damage{[](onnx::ModelProto& m) {
                                    auto* shape = first_input_type(m).mutable_shape();
                                    for (auto& d : *shape->mutable_dim())
                                      d.set_dim_value(int64_t(1) << 40);
                                  },
                                  false}},
      {"a negative input dim", Damage{[](onnx::ModelProto& m) {
                                        auto* shape = first_input_type(m).mutable_shape();
                                        for (auto& d : *shape->mutable_dim()) d.set_dim_value(-3);
                                      },
                                      true}},
      {"an initializer with a huge dim",
       Damage{[](onnx::ModelProto& m) {
                m.mutable_graph()->mutable_initializer(0)->set_dims(0, int64_t(1) << 50);
              },
              false}},
      {"an initializer with a negative dim",
       Damage{
           [](onnx::ModelProto& m) { m.mutable_graph()->mutable_initializer(0)->set_dims(0, -1); },
           false}},
      {"an initializer whose data is half its shape",
       Damage{[](onnx::ModelProto& m) {
                auto* t = m.mutable_graph()->mutable_initializer(0);
                if (t->has_raw_data())
                  t->set_raw_data(t->raw_data().substr(0, t->raw_data().size() / 2));
                if (t->float_data_size() > 1)
                  t->mutable_float_data()->Truncate(t->float_data_size() / 2);
              },
              false}},
      {"an initializer of another element type",
       Damage{[](onnx::ModelProto& m) {
                m.mutable_graph()->mutable_initializer(0)->set_data_type(onnx::TensorProto::INT64);
              },
              false}},
      {"an initializer of an unknown element type",
       Damage{[](onnx::ModelProto& m) {
                m.mutable_graph()->mutable_initializer(0)->set_data_type(99);
              },
              false}},
      {"an input of an unknown element type",
       Damage{[](onnx::ModelProto& m) { first_input_type(m).set_elem_type(77); }, false}},
      {"every attribute int set to a huge value",
       Damage{[](onnx::ModelProto& m) {
                for (auto& n : *m.mutable_graph()->mutable_node())
                  for (auto& a : *n.mutable_attribute()) {
                    if (a.has_i()) a.set_i(int64_t(1) << 45);
                    for (auto& v : *a.mutable_ints()) v = int64_t(1) << 45;
                  }
              },
              true}},
      {"every attribute int set to a negative value",
       Damage{[](onnx::ModelProto& m) {
                for (auto& n : *m.mutable_graph()->mutable_node())
                  for (auto& a : *n.mutable_attribute()) {
                    if (a.has_i()) a.set_i(-7);
                    for (auto& v : *a.mutable_ints()) v = -7;
                  }
              },
              true}},
      {"every node's first input renamed to its output",
       Damage{[](onnx::ModelProto& m) {
                for (auto& n : *m.mutable_graph()->mutable_node())
                  if (n.input_size() > 0 && n.output_size() > 0) n.set_input(0, n.output(0));
              },
              false}},
      {"an opset from the future",
       Damage{[](onnx::ModelProto& m) { m.mutable_opset_import(0)->set_version(1000); }, false}},
  };
  for (const auto& [name, path] : testing::bundled_model_paths())
    for (const auto& [what, damage] : damages) {
      const std::string result = outcome(damaged_model(path, damage.change));
      if (damage.may_run)
        EXPECT_TRUE(result == "ran" || is_error(result)) << name << ": " << what << ": " << result;
      else
        EXPECT_TRUE(is_error(result)) << name << ": " << what << ": " << result;
    }
}

}  // namespace
}  // namespace dprun
