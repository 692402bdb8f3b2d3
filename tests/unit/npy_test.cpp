#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "loader/npy.h"

namespace dprun {
namespace {

TEST(Npy, RoundTripsEveryNumpyDtype) {
  for (DType t :
       {DType::Float32, DType::Float64, DType::Float16, DType::Int8, DType::Int16, DType::Int32,
        DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64, DType::Bool}) {
    Tensor src = Tensor::zeros({2, 3}, t);
    auto* bytes = static_cast<unsigned char*>(src.raw_data());
    for (size_t i = 0; i < src.nbytes(); ++i)
      bytes[i] = static_cast<unsigned char>(t == DType::Bool ? i % 2 : i * 7);
    Tensor back = parse_npy(serialize_npy(src), "mem");
    EXPECT_EQ(back.dtype(), t);
    EXPECT_EQ(back.shape(), (Shape{2, 3}));
    EXPECT_EQ(std::memcmp(back.raw_data(), src.raw_data(), src.nbytes()), 0) << dtype_name(t);
  }
}

TEST(Npy, HeaderIsAlignedAndScalarShapesWork) {
  std::string bytes = serialize_npy(Tensor::scalar<double>(2.5));
  size_t header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9])
                                                                 << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_NE(bytes.find("'shape': ()"), std::string::npos);
  EXPECT_EQ(parse_npy(bytes, "mem").item_as_double(), 2.5);
  EXPECT_NE(serialize_npy(Tensor::zeros({4}, DType::Int32)).find("'shape': (4,)"),
            std::string::npos);
}

TEST(Npy, BFloat16IsWrittenAsFloat32) {
  Tensor t = Tensor::empty({1}, DType::BFloat16);
  t.data<BFloat16>()[0] = BFloat16(1.5f);
  Tensor back = parse_npy(serialize_npy(t), "mem");
  EXPECT_EQ(back.dtype(), DType::Float32);
  EXPECT_EQ(back.data<float>()[0], 1.5f);
}

std::string header_bytes(const std::string& dict, size_t payload) {
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size());
  out += '\0';
  out += dict;
  out.append(payload, '\0');
  return out;
}

TEST(Npy, RejectsBadFilesWithClearErrors) {
  auto expect_error = [](const std::string& bytes, const std::string& needle) {
    try {
      parse_npy(bytes, "x.npy");
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("not numpy", "bad magic");
  expect_error(header_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16),
               "Fortran");
  expect_error(header_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8),
               "big-endian");
  expect_error(header_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16),
               "unsupported .npy dtype");
  expect_error(header_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8),
               "truncated");
  expect_error(header_bytes("{'fortran_order': False, 'shape': (3,), }", 12), "descr");
  EXPECT_THROW(read_npy("/nonexistent/file.npy"), Error);
}

TEST(Npy, WriteLeavesNoTemporaryBehind) {
  auto dir = std::filesystem::temp_directory_path() / "dprun_npy_test";
  std::filesystem::create_directories(dir);
  std::string path = (dir / "a.npy").string();
  write_npy(Tensor::from_vector<int64_t>({3}, {1, 2, 3}), path);
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(read_npy(path).data<int64_t>()[2], 3);
  EXPECT_THROW(write_npy(Tensor::zeros({1}, DType::Int8), (dir / "no/such/dir/b.npy").string()),
               Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dprun
