// Loader tests. Models are built here with the ONNX protobuf classes, independently of the
// loader's own writer, then loaded through the public API.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "loader/tensor_proto.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dprun_loader_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static void write(const std::string& file, const std::string& bytes) {
    std::ofstream out(file, std::ios::binary);
    out << bytes;
  }

  // y = Identity(x) with x float32[N, 2]; initializer W given by the caller.
  static onnx::ModelProto identity_model() {
    onnx::ModelProto m;
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_version(13);
    auto* g = m.mutable_graph();
    g->set_name("g");
    auto* in = g->add_input();
    in->set_name("x");
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("batch");
    tt->mutable_shape()->add_dim()->set_dim_value(2);
    auto* out = g->add_output();
    out->set_name("y");
    auto* out_type = out->mutable_type()->mutable_tensor_type();
    out_type->set_elem_type(onnx::TensorProto::FLOAT);
    out_type->mutable_shape()->add_dim()->set_dim_param("batch");
    out_type->mutable_shape()->add_dim()->set_dim_value(2);
    auto* n = g->add_node();
    n->set_name("id");
    n->set_op_type("Identity");
    n->add_input("x");
    n->add_output("y");
    return m;
  }

  fs::path dir_;
};

TEST_F(LoaderTest, MissingFileNamesThePath) {
  try {
    load_graph(path("nope.onnx"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.onnx: file not found"), std::string::npos)
        << e.what();
  }
}

TEST_F(LoaderTest, GarbageIsNotAnOnnxModel) {
  write(path("bad.onnx"), "this is not a protobuf at all \xff\xff\xff");
  EXPECT_THROW(load_graph(path("bad.onnx")), Error);
}

TEST_F(LoaderTest, TruncatedModelIsAnError) {
  std::string bytes = identity_model().SerializeAsString();
  write(path("cut.onnx"), bytes.substr(0, bytes.size() / 2));
  try {
    load_graph(path("cut.onnx"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cut.onnx"), std::string::npos) << e.what();
  }
}

TEST_F(LoaderTest, SymbolicDimsAndTypesSurvive) {
  write(path("m.onnx"), identity_model().SerializeAsString());
  auto graph = load_graph(path("m.onnx"));
  ASSERT_EQ(graph->inputs.size(), 1u);
  const auto& shape = *graph->inputs[0].type.shape;
  EXPECT_EQ(shape[0].symbol, "batch");
  EXPECT_EQ(shape[1].value, 2);
  EXPECT_EQ(graph->inputs[0].type.dtype, DType::Float32);
  EXPECT_EQ(graph->opset(""), 13);
}

// Shape inference runs with data propagation: a Reshape to a shape computed from Shape,
// Gather and Concat gets an output shape (ONNX 1.12 gives it none otherwise, not even a rank),
// and so does the LayerNormalization after it.
TEST_F(LoaderTest, ShapeInferencePropagatesComputedShapes) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_value(6);
  // The graph output is the element count, so y's shape can only come from inference.
  g->add_output()->set_name("count");
  auto* out_type = g->mutable_output(0)->mutable_type()->mutable_tensor_type();
  out_type->set_elem_type(onnx::TensorProto::INT64);
  out_type->mutable_shape();
  auto add_node = [&](const std::string& op, std::vector<std::string> inputs,
                      const std::string& output) {
    auto* n = g->add_node();
    n->set_name(output);
    n->set_op_type(op);
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(output);
    return n;
  };
  auto add_ints = [&](const std::string& name, std::vector<int64_t> dims,
                      std::vector<int64_t> values) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
  };
  auto add_floats = [&](const std::string& name, float value) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(3);
    for (int i = 0; i < 3; ++i) t->add_float_data(value);
  };
  add_ints("zero", {}, {0});
  add_ints("axes", {1}, {0});
  add_ints("tail", {2}, {2, 3});
  add_floats("scale", 1.0f);
  add_floats("bias", 0.0f);
  add_node("Shape", {"x"}, "dims");
  add_node("Gather", {"dims", "zero"}, "n");
  add_node("Unsqueeze", {"n", "axes"}, "n1");
  auto* concat = add_node("Concat", {"n1", "tail"}, "shape");
  auto* axis = concat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  add_node("Reshape", {"x", "shape"}, "r");
  add_node("LayerNormalization", {"r", "scale", "bias"}, "y");
  add_node("Size", {"y"}, "count");
  write(path("m.onnx"), m.SerializeAsString());

  auto graph = load_graph(path("m.onnx"));
  for (const std::string value : {"r", "y"}) {
    auto type = graph->type_of(value);
    ASSERT_TRUE(type && type->shape) << value;
    const SymbolicShape& shape = *type->shape;
    ASSERT_EQ(shape.size(), 3u) << value;
    EXPECT_EQ(shape[0].symbol, "batch") << value;
    EXPECT_EQ(shape[1].value, 2) << value;
    EXPECT_EQ(shape[2].value, 3) << value;
  }
}

TEST_F(LoaderTest, CheckerRejectsUndefinedValue) {
  auto m = identity_model();
  m.mutable_graph()->mutable_node(0)->set_input(0, "undefined_value");
  write(path("m.onnx"), m.SerializeAsString());
  try {
    load_graph(path("m.onnx"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checker"), std::string::npos) << e.what();
  }
}

TEST_F(LoaderTest, UnsupportedOpsetIsAnError) {
  auto m = identity_model();
  m.mutable_opset_import(0)->set_version(999);
  write(path("m.onnx"), m.SerializeAsString());
  try {
    load_graph(path("m.onnx"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported opset 999"), std::string::npos) << e.what();
  }
}

TEST_F(LoaderTest, CycleIsReportedWithANodeName) {
  Graph g;
  g.inputs.push_back({"x", {DType::Float32, {}}});
  Node a;
  a.name = "a";
  a.op_type = "Add";
  a.inputs = {"x", "b_out"};
  a.outputs = {"a_out"};
  Node b = a;
  b.name = "b";
  b.inputs = {"a_out", "x"};
  b.outputs = {"b_out"};
  g.nodes = {a, b};
  try {
    g.sort_topologically();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
}

TEST_F(LoaderTest, UnknownCustomOpsAreAllReportedAtLoad) {
  auto m = identity_model();
  for (const char* name : {"first", "second"}) {
    auto* n = m.mutable_graph()->add_node();
    n->set_name(name);
    n->set_op_type("Frobnicate");
    n->set_domain("com.example");
    n->add_input("y");
    n->add_output(std::string(name) + "_out");
  }
  auto* op = m.add_opset_import();
  op->set_domain("com.example");
  op->set_version(1);
  write(path("m.onnx"), m.SerializeAsString());
  try {
    load_model(path("m.onnx"));
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("'first'"), std::string::npos) << what;
    EXPECT_NE(what.find("'second'"), std::string::npos) << what;
    EXPECT_NE(what.find("2 nodes have no cpu kernel"), std::string::npos) << what;
  }
}

// Every storage form of an initializer decodes to the same values.
TEST_F(LoaderTest, InitializerStorageForms) {
  auto m = identity_model();
  auto* g = m.mutable_graph();
  auto add = [&](const std::string& name, int type) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    t->add_dims(3);
    return t;
  };
  auto* f32 = add("typed_f", onnx::TensorProto::FLOAT);
  for (float v : {1.5f, -2.0f, 3.25f}) f32->add_float_data(v);
  auto* i8 = add("typed_i8", onnx::TensorProto::INT8);
  for (int v : {-7, 0, 100}) i8->add_int32_data(v);
  auto* f16 = add("typed_f16", onnx::TensorProto::FLOAT16);
  for (int bits : {0x3c00, 0xc000, 0x3800}) f16->add_int32_data(bits);  // 1, -2, 0.5
  auto* raw = add("raw_i64", onnx::TensorProto::INT64);
  int64_t raw_values[3] = {10, -20, 30};
  raw->set_raw_data(std::string(reinterpret_cast<char*>(raw_values), sizeof(raw_values)));
  auto* u64 = add("typed_u32", onnx::TensorProto::UINT32);
  for (uint64_t v : {1u, 4000000000u, 3u}) u64->add_uint64_data(v);
  // External data: 3 doubles at offset 8 of weights.bin.
  double ext_values[4] = {0, 0.5, 1.5, 2.5};
  write(path("weights.bin"), std::string(reinterpret_cast<char*>(ext_values), sizeof(ext_values)));
  auto* ext = add("external_f64", onnx::TensorProto::DOUBLE);
  ext->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = ext->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  kv = ext->add_external_data();
  kv->set_key("offset");
  kv->set_value("8");
  kv = ext->add_external_data();
  kv->set_key("length");
  kv->set_value("24");
  write(path("m.onnx"), m.SerializeAsString());

  auto graph = load_graph(path("m.onnx"));
  auto values = [&](const std::string& name) {
    const Tensor& t = graph->initializers.at(name);
    std::vector<double> out;
    for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.item_as_double(i));
    return out;
  };
  EXPECT_EQ(values("typed_f"), (std::vector<double>{1.5, -2.0, 3.25}));
  EXPECT_EQ(values("typed_i8"), (std::vector<double>{-7, 0, 100}));
  EXPECT_EQ(values("typed_f16"), (std::vector<double>{1, -2, 0.5}));
  EXPECT_EQ(values("raw_i64"), (std::vector<double>{10, -20, 30}));
  EXPECT_EQ(values("typed_u32"), (std::vector<double>{1, 4000000000.0, 3}));
  EXPECT_EQ(values("external_f64"), (std::vector<double>{0.5, 1.5, 2.5}));
}

TEST_F(LoaderTest, MissingExternalDataNamesTheFile) {
  auto m = identity_model();
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(2);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = t->add_external_data();
  kv->set_key("location");
  kv->set_value("absent.bin");
  write(path("m.onnx"), m.SerializeAsString());
  try {
    load_graph(path("m.onnx"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.bin"), std::string::npos) << e.what();
  }
}

TEST_F(LoaderTest, AHugeShapeWithoutItsDataIsRefusedBeforeAnyAllocation) {
  // 2^50 floats (4 PiB) declared; a few bytes held. Refused from what the file holds, not by
  // the allocator.
  auto message = [this](const onnx::TensorProto& t) {
    try {
      tensor_from_proto(t, ExternalDataFolders::of_folder(dir_.string()));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(int64_t{1} << 30);
  t.add_dims(int64_t{1} << 20);
  t.set_raw_data(std::string(8, '\0'));
  EXPECT_EQ(message(t),
            "tensor 'w' has 8 bytes of raw data but shape [1073741824, 1048576] of float32 needs "
            "4503599627370496");
  t.clear_raw_data();
  t.add_float_data(1.f);
  EXPECT_EQ(message(t), "initializer 'w' has 1 values for shape [1073741824, 1048576]");
  t.add_dims(int64_t{1} << 20);
  EXPECT_EQ(message(t),
            "tensor 'w' of shape [1073741824, 1048576, 1048576] has more elements than fit in 64 "
            "bits");
  // External data: the file's size is checked before memory is taken.
  onnx::TensorProto e;
  e.set_name("e");
  e.set_data_type(onnx::TensorProto::FLOAT);
  e.add_dims(int64_t{1} << 40);
  e.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = e.add_external_data();
  kv->set_key("location");
  kv->set_value("small.bin");
  write(path("small.bin"), std::string(16, '\0'));
  EXPECT_EQ(message(e), "tensor 'e': external data file '" + path("small.bin") +
                            "' is shorter than offset 0 + 4398046511104 bytes");
}

TEST_F(LoaderTest, GraphInputWithInitializerIsAnOptionalOverride) {
  auto m = identity_model();
  auto* g = m.mutable_graph();
  g->mutable_node(0)->set_input(0, "w");
  auto* in = g->add_input();
  in->set_name("w");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  auto* t = g->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(2);
  t->add_float_data(4);
  t->add_float_data(5);
  write(path("m.onnx"), m.SerializeAsString());
  Model model = load_model(path("m.onnx"));
  // "x" is still required; "w" defaults to the initializer and may be overridden.
  EXPECT_EQ(model.input_names(), (std::vector<std::string>{"x"}));
  Tensor x = Tensor::zeros({1, 2}, DType::Float32);
  auto by_default = model.run(std::map<std::string, Tensor>{{"x", x}});
  EXPECT_EQ(by_default[0].data<float>()[1], 5.0f);
  auto overridden = model.run(
      std::map<std::string, Tensor>{{"x", x}, {"w", Tensor::from_vector<float>({2}, {7, 8})}});
  EXPECT_EQ(overridden[0].data<float>()[1], 8.0f);
}

TEST_F(LoaderTest, SaveRoundTripKeepsCurrentParameters) {
  auto m = identity_model();
  auto* g = m.mutable_graph();
  g->mutable_node(0)->set_input(0, "w");
  auto* t = g->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(2);
  t->add_float_data(1);
  t->add_float_data(2);
  g->mutable_input()->Clear();
  write(path("m.onnx"), m.SerializeAsString());
  Model model = load_model(path("m.onnx"));
  model.set_parameter("w", Tensor::from_vector<float>({2}, {9, 10}));
  save_model(model, path("saved.onnx"));
  EXPECT_FALSE(fs::exists(path("saved.onnx.tmp")));
  Model again = load_model(path("saved.onnx"));
  auto out = again.run(std::vector<Tensor>{});
  EXPECT_EQ(out[0].data<float>()[0], 9.0f);
  EXPECT_EQ(out[0].data<float>()[1], 10.0f);
}

TEST_F(LoaderTest, TensorProtoFiles) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT32);
  t.add_dims(2);
  t.add_int32_data(3);
  t.add_int32_data(-4);
  write(path("t.pb"), t.SerializeAsString());
  Tensor loaded = read_tensor_proto_file(path("t.pb"));
  EXPECT_EQ(loaded.shape(), (Shape{2}));
  EXPECT_EQ(loaded.data<int32_t>()[1], -4);
  EXPECT_THROW(read_tensor_proto_file(path("missing.pb")), Error);
}

}  // namespace
}  // namespace dprun
