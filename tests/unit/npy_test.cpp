#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

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

using Strings = std::vector<std::string>;

// A fixture written by numpy (tests/data/npy/make_fixtures.py).
std::string fixture(const std::string& name) {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  return std::string(root ? root : DPRUN_SOURCE_DIR_DEFAULT) + "/tests/data/npy/" + name + ".npy";
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Strings strings_of(const Tensor& t) {
  return Strings(t.data<std::string>(), t.data<std::string>() + t.numel());
}

Tensor strings(Shape shape, Strings values) {
  return Tensor::from_vector<std::string>(std::move(shape), values);
}

std::string error_of(const std::string& bytes) {
  try {
    parse_npy(bytes, "x.npy");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(NpyStrings, ReadsNumpyStrArraysAsUtf8) {
  Tensor t = read_npy(fixture("str_1d"));
  EXPECT_EQ(t.dtype(), DType::String);
  EXPECT_EQ(t.shape(), (Shape{2}));
  EXPECT_EQ(strings_of(t), (Strings{"ab", "c\xC3\xA9"}));
  t = read_npy(fixture("str_2d"));
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  EXPECT_EQ(strings_of(t), (Strings{"a", "bb", "\xE2\x82\xAC", "\xF0\x9F\x98\x80x"}));
  t = read_npy(fixture("str_0d"));
  EXPECT_EQ(t.shape(), (Shape{}));
  EXPECT_EQ(strings_of(t), (Strings{"h\xC3\xA9llo"}));
  t = read_npy(fixture("str_empty"));
  EXPECT_EQ(strings_of(t), (Strings{"", std::string("a\0b", 3), ""}));
  t = read_npy(fixture("str_none"));
  EXPECT_EQ(t.dtype(), DType::String);
  EXPECT_EQ(t.shape(), (Shape{2, 0}));
  EXPECT_EQ(strings_of(read_npy(fixture("str_big_endian"))), (Strings{"ab", "c\xC3\xA9"}));
}

TEST(NpyStrings, ReadsNumpyBytesArraysAsTheyAre) {
  Tensor t = read_npy(fixture("bytes_1d"));
  EXPECT_EQ(t.dtype(), DType::String);
  EXPECT_EQ(strings_of(t), (Strings{"ab", std::string("c\0d", 3), ""}));
  EXPECT_EQ(strings_of(read_npy(fixture("bytes_not_utf8"))), (Strings{"\xFF", "ab"}));
}

TEST(NpyStrings, WritesTheBytesNumpyWrites) {
  EXPECT_EQ(serialize_npy(strings({2}, {"ab", "c\xC3\xA9"})), file_bytes(fixture("str_1d")));
  EXPECT_EQ(serialize_npy(strings({2, 2}, {"a", "bb", "\xE2\x82\xAC", "\xF0\x9F\x98\x80x"})),
            file_bytes(fixture("str_2d")));
  EXPECT_EQ(serialize_npy(strings({}, {"h\xC3\xA9llo"})), file_bytes(fixture("str_0d")));
  EXPECT_EQ(serialize_npy(strings({3}, {"", std::string("a\0b", 3), ""})),
            file_bytes(fixture("str_empty")));
  EXPECT_EQ(serialize_npy(strings({2, 0}, {})), file_bytes(fixture("str_none")));
  EXPECT_EQ(serialize_npy(strings({2}, {"\xFF", "ab"})), file_bytes(fixture("bytes_not_utf8")));
}

TEST(NpyStrings, RoundTripsStrings) {
  std::vector<Tensor> cases = {
      strings({2, 3}, {"", "a", "caf\xC3\xA9", "\xE2\x82\xAC\xF0\x9F\x98\x80", "", "longer one"}),
      strings({}, {""}), strings({1}, {std::string("in\0side", 7)}),
      strings({2}, {"\xC3", "not UTF-8 above"}), strings({0, 4}, {})};
  for (const Tensor& t : cases) {
    Tensor back = parse_npy(serialize_npy(t), "mem");
    EXPECT_EQ(back.dtype(), DType::String);
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(strings_of(back), strings_of(t));
  }
  EXPECT_NE(serialize_npy(cases[0]).find("'descr': '<U10'"), std::string::npos);
  EXPECT_NE(serialize_npy(cases[1]).find("'descr': '<U1', 'fortran_order': False, 'shape': ()"),
            std::string::npos);
  EXPECT_NE(serialize_npy(cases[3]).find("'descr': '|S15'"), std::string::npos);
}

TEST(NpyStrings, RejectsWhatIsNotText) {
  EXPECT_EQ(error_of(header_bytes("{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }", 0) +
                     std::string("\x00\x00\x11\x00", 4)),
            "x.npy: element 0 of the .npy string array holds U+110000, which is not a Unicode "
            "character");
  EXPECT_EQ(error_of(header_bytes("{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }", 0) +
                     std::string("a\0\0\0\x00\xD8\0\0", 8)),
            "x.npy: element 0 of the .npy string array holds U+D800, which is not a Unicode "
            "character");
  EXPECT_EQ(error_of(header_bytes("{'descr': '|U2', 'fortran_order': False, 'shape': (1,), }", 8)),
            "x.npy: unsupported .npy dtype '|U2'");
  EXPECT_EQ(error_of(header_bytes("{'descr': '|Sx', 'fortran_order': False, 'shape': (1,), }", 8)),
            "x.npy: unsupported .npy dtype '|Sx'");
  EXPECT_EQ(error_of(header_bytes("{'descr': '<U2', 'fortran_order': False, 'shape': (2,), }", 8)),
            "x.npy: truncated .npy data: 8 bytes for shape [2] of string (16 needed)");
}

// Sizes a header declares are checked before anything is allocated (inputs found by
// tests/fuzz/fuzz_npy.cpp): a shape of more elements than int64 holds, a dimension of more
// digits than int64 holds, and many elements of a zero-width string (no payload to check
// them against).
TEST(Npy, RefusesSizesBeyondWhatTheFileCanHold) {
  EXPECT_EQ(
      error_of(header_bytes(
          "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0)),
      "x.npy: .npy shape [4294967296, 4294967296] is too large");
  EXPECT_EQ(error_of(header_bytes(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0)),
            "x.npy: dimension 9999999999999999999... in .npy header is too large");
  EXPECT_EQ(error_of(header_bytes(
                "{'descr': '<U0', 'fortran_order': False, 'shape': (23333, 33, 16333), }", 0)),
            "x.npy: .npy elements of 0 bytes (a string dtype of width 0) cannot hold [23333, "
            "33, 16333]");
  EXPECT_EQ(
      strings_of(parse_npy(
          header_bytes("{'descr': '<U0', 'fortran_order': False, 'shape': (0,), }", 0), "x.npy")),
      Strings{});
}

TEST(Npy, ReadsTwoByteVoidAndUInt16AsBits) {
  const std::vector<uint16_t> bits = {0x3FC0, 0xC000, 0x7F80, 0x0001, 0x7FC1, 0x3F81};
  for (const char* name : {"bfloat16_u2", "bfloat16_v2"}) {
    Tensor t = read_npy(fixture(name));
    EXPECT_EQ(t.dtype(), DType::UInt16) << name;
    EXPECT_EQ(std::vector<uint16_t>(t.data<uint16_t>(), t.data<uint16_t>() + t.numel()), bits)
        << name;
  }
  // ml_dtypes' bfloat16 arrays are saved as '<V2'.
  Tensor t = parse_npy(
      header_bytes("{'descr': '<V2', 'fortran_order': False, 'shape': (1,), }", 0) + "\xC0\x3F",
      "mem");
  EXPECT_EQ(t.dtype(), DType::UInt16);
  EXPECT_EQ(t.data<uint16_t>()[0], 0x3FC0);
  EXPECT_EQ(error_of(header_bytes("{'descr': '|V4', 'fortran_order': False, 'shape': (1,), }", 4)),
            "x.npy: unsupported .npy dtype '|V4'");
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
