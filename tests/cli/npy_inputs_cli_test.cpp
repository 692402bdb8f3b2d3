// .npy inputs of every tensor type the engine runs: numpy strings and bfloat16 bits.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("dprun_npy_cli_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string fixture(const std::string& name) {
  return source_path("tests/data/npy/" + name + ".npy");
}

// y = Identity(x), with x and y declared as `dtype` of shape `shape`, saved as DIR/NAME.onnx.
std::string write_identity_model(const fs::path& dir, DType dtype, SymbolicShape shape,
                                 const std::string& name = "identity") {
  Graph g;
  g.name = "identity";
  g.opset_imports[""] = 13;
  g.inputs.push_back({"x", {dtype, shape}});
  Node node;
  node.name = "identity";
  node.op_type = "Identity";
  node.inputs = {"x"};
  node.outputs = {"y"};
  g.nodes = {node};
  g.outputs.push_back({"y", {dtype, shape}});
  std::string path = (dir / (name + ".onnx")).string();
  save_graph(g, {}, path);
  return path;
}

TEST(NpyInputsCli, BFloat16InputTakesTwoByteFilesBitForBit) {
  fs::path dir = fresh_dir("bfloat16");
  std::string model = write_identity_model(dir, DType::BFloat16, SymbolicShape{Dim::known(6)});
  const std::vector<uint16_t> bits = {0x3FC0, 0xC000, 0x7F80, 0x0001, 0x7FC1, 0x3F81};
  // '<u2' and '|V2' as numpy writes them, and '<V2' as ml_dtypes' bfloat16 arrays are saved.
  std::string v2 = file_bytes(fixture("bfloat16_v2"));
  v2.replace(v2.find("|V2"), 3, "<V2");
  std::ofstream(dir / "little_v2.npy", std::ios::binary) << v2;
  for (std::string file :
       {fixture("bfloat16_u2"), fixture("bfloat16_v2"), (dir / "little_v2.npy").string()}) {
    fs::path out = dir / "out";
    fs::remove_all(out);
    auto r =
        run_dprun(model + " --devices cpu:0 --input x=" + file + " --output-dir " + out.string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("input  x                        bfloat16[6] on cpu:0"),
              std::string::npos)
        << r.output;
    Tensor y = read_npy((out / "y.npy").string());  // bfloat16 is written as float32
    ASSERT_EQ(y.dtype(), DType::Float32) << file;
    ASSERT_EQ(y.numel(), 6);
    for (size_t i = 0; i < bits.size(); ++i) {
      uint32_t got;
      std::memcpy(&got, y.data<float>() + i, 4);
      EXPECT_EQ(got, uint32_t{bits[i]} << 16) << file << " element " << i;
    }
  }
  fs::remove_all(dir);
}

TEST(NpyInputsCli, WrongDtypeIsOneLineNamingInputExpectedAndReceived) {
  fs::path dir = fresh_dir("wrong_dtype");
  std::string model = write_identity_model(dir, DType::BFloat16, SymbolicShape{Dim::known(2)});
  write_npy(Tensor::from_vector<float>({2}, {1, 2}), (dir / "f.npy").string());
  auto r = run_dprun(model + " --devices cpu:0 --input x=" + (dir / "f.npy").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "dprun: error: input 'x' expects dtype bfloat16 but got float32\n");

  model = write_identity_model(dir, DType::Float32, SymbolicShape{Dim::known(2)});
  r = run_dprun(model + " --devices cpu:0 --input x=" + fixture("str_1d"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "dprun: error: input 'x' expects dtype float32 but got string\n");
  r = run_dprun(model + " --devices cpu:0 --input x=" + fixture("bfloat16_u2"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "dprun: error: input 'x' expects dtype float32 but got uint16\n");
  fs::remove_all(dir);
}

TEST(NpyInputsCli, StringTensorsGoInAndOutAsNumpyStrArrays) {
  fs::path dir = fresh_dir("strings");
  std::string model =
      write_identity_model(dir, DType::String, SymbolicShape{Dim::named("n"), Dim::named("m")});
  // numpy's '<U2' in, the same bytes out: numpy reads what dprun writes.
  auto r = run_dprun(model + " --devices cpu:0 --input x=" + fixture("str_2d") + " --output-dir " +
                     (dir / "u").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("string[2, 2] on cpu:0 [\"a\", \"bb\", \"\xE2\x82\xAC\", "
                          "\"\xF0\x9F\x98\x80x\"]"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(file_bytes(dir / "u" / "y.npy"), file_bytes(fixture("str_2d")));
  // numpy's '|S' bytes in, numpy's '<U' out, inner NULs kept.
  model = write_identity_model(dir, DType::String, SymbolicShape{Dim::named("n")}, "vector");
  r = run_dprun(model + " --devices cpu:0 --input x=" + fixture("bytes_1d") + " --output-dir " +
                (dir / "s").string());
  ASSERT_EQ(r.status, 0) << r.output;
  Tensor y = read_npy((dir / "s" / "y.npy").string());
  ASSERT_EQ(y.dtype(), DType::String);
  EXPECT_EQ(y.shape(), (Shape{3}));
  EXPECT_EQ(std::vector<std::string>(y.data<std::string>(), y.data<std::string>() + 3),
            (std::vector<std::string>{"ab", std::string("c\0d", 3), ""}));
  EXPECT_NE(file_bytes(dir / "s" / "y.npy").find("'descr': '<U3'"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun::testing
