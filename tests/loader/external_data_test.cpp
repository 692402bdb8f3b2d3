// External data: read only from inside the model's folder (or the folder of the model file's
// real path), refused everywhere else with one line naming the tensor and the location, and
// written beside a saved model past a size. Models are built with the ONNX protobuf classes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "error_test_util.h"
#include "loader/external_data.h"
#include "loader/onnx_loader.h"
#include "loader/open_beneath.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

const std::vector<float> kWeights = {0.25f, -1.5f};

std::string weight_bytes() {
  return std::string(reinterpret_cast<const char*>(kWeights.data()), kWeights.size() * 4);
}

void set_external(onnx::TensorProto& tensor, const std::string& location,
                  const std::vector<std::pair<std::string, std::string>>& more = {}) {
  tensor.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = tensor.add_external_data();
  entry->set_key("location");
  entry->set_value(location);
  for (const auto& [key, value] : more) {
    entry = tensor.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  }
}

onnx::TensorProto weight_tensor(const std::string& name) {
  onnx::TensorProto w;
  w.set_name(name);
  w.set_data_type(onnx::TensorProto::FLOAT);
  w.add_dims(2);
  return w;
}

// y = x + w, x and w float32[2]; w's data at `location` (with `more` entries).
onnx::ModelProto add_model(const std::string& location,
                           const std::vector<std::pair<std::string, std::string>>& more = {}) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("g");
  for (const char* name : {"x", "y"}) {
    auto* value = std::string(name) == "x" ? g->add_input() : g->add_output();
    value->set_name(name);
    auto* type = value->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::FLOAT);
    type->mutable_shape()->add_dim()->set_dim_value(2);
  }
  auto* w = g->add_initializer();
  *w = weight_tensor("w");
  set_external(*w, location, more);
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  return m;
}

class ExternalDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("dprun_external_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "model" / "weights");
    write(root_ / "secret.bin", weight_bytes());  // outside the model's folder
    write(root_ / "model" / "w.bin", weight_bytes());
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write(const fs::path& file, const std::string& bytes) {
    std::ofstream out(file, std::ios::binary);
    out << bytes;
  }
  fs::path model_path() const { return root_ / "model" / "m.onnx"; }
  std::string save(const onnx::ModelProto& m) const {
    write(model_path(), m.SerializeAsString());
    return model_path().string();
  }
  // The message loading `m` from the model folder gives, without the file's name in front.
  std::string refusal(const onnx::ModelProto& m, const LoadOptions& options = {}) const {
    const std::string path = save(m);
    const std::string message = error_of([&] { load_graph(path, options); });
    return message.rfind(path + ": ", 0) == 0 ? message.substr(path.size() + 2) : message;
  }
  static std::vector<float> weights_of(const Graph& graph) {
    const Tensor& w = graph.initializers.at("w");
    return std::vector<float>(w.data<float>(), w.data<float>() + w.numel());
  }

  fs::path root_;
};

TEST_F(ExternalDataTest, FilesInTheModelsFolderAndItsSubfoldersLoad) {
  write(root_ / "model" / "weights" / "w.bin", "pad." + weight_bytes());
  EXPECT_EQ(weights_of(*load_graph(save(add_model("w.bin")))), kWeights);
  EXPECT_EQ(weights_of(*load_graph(save(add_model("weights/w.bin", {{"offset", "4"}})))), kWeights);
  // ".." that stays inside, a link that stays inside, and keys ONNX defines but dprun does not
  // need.
  fs::create_symlink("weights/w.bin", root_ / "model" / "inside_link.bin");
  EXPECT_EQ(weights_of(*load_graph(
                save(add_model("weights/../w.bin", {{"checksum", "0"}, {"length", "8"}})))),
            kWeights);
  EXPECT_EQ(weights_of(*load_graph(save(add_model("inside_link.bin", {{"offset", "4"}})))),
            kWeights);
}

TEST_F(ExternalDataTest, AModelHubCacheLayoutLoads) {
  // huggingface_hub's cache: snapshots/REV/FILE are links into blobs/HASH.
  const fs::path blobs = root_ / "hub" / "blobs", snapshot = root_ / "hub" / "snapshots" / "rev";
  fs::create_directories(blobs);
  fs::create_directories(snapshot);
  write(blobs / "1f0c", add_model("model.onnx_data").SerializeAsString());
  write(blobs / "9ab2", weight_bytes());
  fs::create_symlink("../../blobs/1f0c", snapshot / "model.onnx");
  fs::create_symlink("../../blobs/9ab2", snapshot / "model.onnx_data");
  EXPECT_EQ(weights_of(*load_graph((snapshot / "model.onnx").string())), kWeights);
}

TEST_F(ExternalDataTest, EachRefusalNamesTheTensorAndTheLocation) {
  fs::create_symlink(root_ / "secret.bin", root_ / "model" / "link.bin");
  fs::create_symlink(root_, root_ / "model" / "up");
  ASSERT_EQ(::mkfifo((root_ / "model" / "fifo").c_str(), 0600), 0);
  const std::string model_dir = (root_ / "model").string();
  const std::vector<std::pair<onnx::ModelProto, std::string>> cases = {
      {add_model("../secret.bin"),
       "tensor 'w': external data location '../secret.bin' leads outside the model's folder"},
      {add_model("weights/../../secret.bin"),
       "tensor 'w': external data location 'weights/../../secret.bin' leads outside the model's "
       "folder"},
      {add_model("link.bin"),
       "tensor 'w': external data location 'link.bin' leads outside the model's folder through "
       "a symbolic link"},
      {add_model("up/secret.bin"),
       "tensor 'w': external data location 'up/secret.bin' leads outside the model's folder "
       "through a symbolic link"},
      {add_model((root_ / "secret.bin").string()),
       "tensor 'w': external data location '" + (root_ / "secret.bin").string() +
           "' is an absolute path; it must be relative to the model's folder"},
      {add_model(""), "tensor 'w': external data has no location"},
      {add_model(std::string("w.bin\0.txt", 10)),
       "tensor 'w': external data location contains a NUL character"},
      {add_model("absent.bin"),
       "tensor 'w': external data file '" + model_dir + "/absent.bin' not found"},
      {add_model("weights"), "tensor 'w': external data location 'weights' is not a regular file"},
      {add_model("fifo"), "tensor 'w': external data location 'fifo' is not a regular file"},
      {add_model("w.bin", {{"offset", "abc"}}),
       "tensor 'w': external data offset 'abc' is not a non-negative integer"},
      {add_model("w.bin", {{"offset", "-8"}}),
       "tensor 'w': external data offset '-8' is not a non-negative integer"},
      {add_model("w.bin", {{"length", "99999999999999999999"}}),
       "tensor 'w': external data length '99999999999999999999' is not a non-negative integer"},
      {add_model("w.bin", {{"length", "4"}}),
       "tensor 'w': external data length 4 does not match the 8 bytes its shape needs"},
      {add_model("w.bin", {{"offset", "4"}}), "tensor 'w': external data file '" + model_dir +
                                                  "/w.bin' is shorter than offset 4 + 8 bytes"},
  };
  for (const auto& [model, expected] : cases) {
    EXPECT_EQ(refusal(model), expected);
    // The checks are the loader's own, not the ONNX checker's.
    EXPECT_EQ(refusal(model, {.run_checker = false}), expected);
  }
}

TEST_F(ExternalDataTest, TensorsInAttributesAndSubgraphsAreCheckedAlike) {
  const std::string expected =
      "tensor 'c': external data location '../secret.bin' leads outside the model's folder";
  // A Constant's value.
  onnx::ModelProto constant = add_model("w.bin");
  auto* node = constant.mutable_graph()->add_node();
  node->set_op_type("Constant");
  node->add_output("c");
  auto* value = node->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  *value->mutable_t() = weight_tensor("c");
  set_external(*value->mutable_t(), "../secret.bin");
  EXPECT_EQ(refusal(constant), expected);
  // An initializer of an If's branch.
  onnx::ModelProto branch = add_model("w.bin");
  node = branch.mutable_graph()->add_node();
  node->set_op_type("If");
  node->add_input("cond");
  node->add_output("z");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* body = node->add_attribute();
    body->set_name(name);
    body->set_type(onnx::AttributeProto::GRAPH);
    auto* g = body->mutable_g();
    g->set_name(name);
    *g->add_initializer() = weight_tensor("c");
    set_external(*g->mutable_initializer(0), "../secret.bin");
    g->add_output()->set_name("c");
  }
  EXPECT_EQ(refusal(branch), expected);
}

TEST_F(ExternalDataTest, AModelFromMemoryHasNoFolderForExternalData) {
  const std::string bytes = add_model("w.bin").SerializeAsString();
  EXPECT_EQ(error_of([&] { load_graph_from_buffer(bytes.data(), bytes.size()); }),
            "tensor 'w': external data location 'w.bin' cannot be read: the model was loaded "
            "from memory without a folder");
  // With a base folder, the same rules as a file in it.
  const std::string base = (root_ / "model").string();
  EXPECT_EQ(
      weights_of(*load_graph_from_buffer(bytes.data(), bytes.size(), base, {.run_checker = false})),
      kWeights);
  const std::string outside = add_model("../secret.bin").SerializeAsString();
  EXPECT_EQ(error_of([&] { load_graph_from_buffer(outside.data(), outside.size(), base); }),
            "tensor 'w': external data location '../secret.bin' leads outside the model's folder");
}

TEST_F(ExternalDataTest, OpenBeneathRefusesLinksAndDotDotByEitherMethod) {
  const std::string folder = (root_ / "model").string();
  fs::create_symlink(root_ / "secret.bin", root_ / "model" / "link.bin");
  fs::create_symlink("w.bin", root_ / "model" / "inside_link.bin");
  fs::create_symlink(root_, root_ / "model" / "up");
  for (BeneathMethod method : {BeneathMethod::openat2, BeneathMethod::component_walk}) {
    SCOPED_TRACE(method == BeneathMethod::openat2 ? "openat2" : "component walk");
    if (method == BeneathMethod::openat2 && !open_beneath(folder, "w.bin", method).valid() &&
        errno == ENOSYS) {
      std::printf("openat2 is not available on this kernel: only the walk is checked\n");
      continue;
    }
    EXPECT_TRUE(open_beneath(folder, "w.bin", method).valid());
    EXPECT_TRUE(open_beneath(folder, "weights", method).valid());  // the caller checks the type
    for (const char* refused : {"link.bin", "inside_link.bin", "up/secret.bin", "../secret.bin"}) {
      errno = 0;
      EXPECT_FALSE(open_beneath(folder, refused, method).valid()) << refused;
      EXPECT_TRUE(errno == ELOOP || errno == EXDEV) << refused << ": " << std::strerror(errno);
    }
    errno = 0;
    EXPECT_FALSE(open_beneath(folder, "absent.bin", method).valid());
    EXPECT_EQ(errno, ENOENT);
  }
}

// A graph of three initializers: 300 floats, 4 floats (16 bytes: below ONNX's 1 KiB
// threshold) and 500 int64.
Graph three_initializers() {
  Graph g;
  g.name = "g";
  g.ir_version = 8;
  g.opset_imports[""] = 13;
  auto counting = []<class T>(int64_t n, T start) {
    std::vector<T> values(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = start + static_cast<T>(i);
    return Tensor::from_vector<T>({n}, values);
  };
  g.initializers["big"] = counting(300, 0.5f);
  g.initializers["small"] = counting(4, -3.f);
  g.initializers["ints"] = counting(500, int64_t{7});
  for (const auto& [name, tensor] : g.initializers)
    g.outputs.push_back({name, TensorType{.dtype = tensor.dtype(),
                                          .shape = SymbolicShape{Dim::known(tensor.numel())}}});
  return g;
}

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.item_as_double(i));
  return out;
}

TEST_F(ExternalDataTest, ASaveOverTheThresholdWritesTheDataBesideTheModel) {
  const Graph g = three_initializers();
  const std::string path = (root_ / "model" / "saved.onnx").string();
  save_graph(g, {}, path);  // 4016 bytes: far below the default threshold
  EXPECT_FALSE(fs::exists(path + ".data"));
  save_graph(g, {}, path, {.external_data_threshold = 4015});
  ASSERT_TRUE(fs::exists(path + ".data"));
  // big at 0 (1200 bytes), ints at 1216 (the next multiple of 64; 4000 bytes); small inside.
  EXPECT_EQ(fs::file_size(path + ".data"), 1216u + 4000u);
  onnx::ModelProto proto;
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(proto.ParseFromIstream(&in));
  std::map<std::string, std::string> references;
  for (const auto& t : proto.graph().initializer()) {
    std::string text = t.data_location() == onnx::TensorProto::EXTERNAL ? "" : "inside";
    for (const auto& entry : t.external_data()) text += entry.key() + "=" + entry.value() + " ";
    references[t.name()] = text;
  }
  EXPECT_EQ(references["big"], "location=saved.onnx.data offset=0 length=1200 ");
  EXPECT_EQ(references["ints"], "location=saved.onnx.data offset=1216 length=4000 ");
  EXPECT_EQ(references["small"], "inside");
  const auto loaded = load_graph(path);
  for (const char* name : {"big", "small", "ints"})
    EXPECT_EQ(values_of(loaded->initializers.at(name)), values_of(g.initializers.at(name))) << name;
  // No temporary file is left beside them.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(root_ / "model"))
    files += entry.path().filename().string().rfind(".saved", 0) == 0;
  EXPECT_EQ(files, 0);
}

TEST_F(ExternalDataTest, OnnxLoadReadsASavedModelWithExternalData) {
  if (std::system("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3-onnx is not installed (tools/install-deps.sh installs it)";
  const Graph g = three_initializers();
  const std::string path = (root_ / "model" / "saved.onnx").string();
  save_graph(g, {}, path, {.external_data_threshold = 0});
  const std::string check =
      "/usr/bin/python3 -c \"import onnx, onnx.numpy_helper as h, numpy as n; "
      "m = onnx.load('" +
      path + "'); onnx.checker.check_model('" + path +
      "'); "
      "v = {t.name: h.to_array(t) for t in m.graph.initializer}; "
      "assert (v['big'] == n.arange(300, dtype=n.float32) + 0.5).all(); "
      "assert (v['small'] == n.arange(4, dtype=n.float32) - 3).all(); "
      "assert (v['ints'] == n.arange(500) + 7).all(); print('read', len(v))\" > " +
      (root_ / "python.out").string() + " 2>&1";
  const int status = std::system(check.c_str());
  std::ifstream out(root_ / "python.out");
  const std::string output((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "read 3\n");
}

}  // namespace
}  // namespace dprun
