#include "loader/npy.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace dprun {

namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct Descr {
  DType dtype;
  const char* text;  // little-endian numpy descr
};
constexpr Descr kDescrs[] = {
    {DType::Float32, "<f4"}, {DType::Float64, "<f8"}, {DType::Float16, "<f2"},
    {DType::Int8, "|i1"},    {DType::Int16, "<i2"},   {DType::Int32, "<i4"},
    {DType::Int64, "<i8"},   {DType::UInt8, "|u1"},   {DType::UInt16, "<u2"},
    {DType::UInt32, "<u4"},  {DType::UInt64, "<u8"},  {DType::Bool, "|b1"},
};

DType dtype_from_descr(std::string descr, const std::string& what) {
  // numpy writes '|' for single-byte types and may write '<' too; '=' means native (little).
  if (descr.size() == 3 && (descr[0] == '=' || descr[0] == '<' || descr[0] == '|')) {
    for (const auto& d : kDescrs)
      if (descr.substr(1) == std::string(d.text + 1)) return d.dtype;
  }
  if (!descr.empty() && descr[0] == '>')
    fail(what, ": big-endian .npy data ('", descr, "') is not supported");
  fail(what, ": unsupported .npy dtype '", descr, "'");
}

// Returns the value text of `key` in the header dict, e.g. "'<f4'" or "(2, 3)".
std::string dict_value(const std::string& header, const std::string& key, const std::string& what) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) fail(what, ": .npy header has no '", key, "' entry");
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) fail(what, ": malformed .npy header");
  size_t start = colon + 1;
  while (start < header.size() && header[start] == ' ') ++start;
  if (start >= header.size()) fail(what, ": malformed .npy header");
  size_t end;
  if (header[start] == '\'') {
    end = header.find('\'', start + 1);
    if (end == std::string::npos) fail(what, ": malformed .npy header");
    return header.substr(start + 1, end - start - 1);
  }
  if (header[start] == '(') {
    end = header.find(')', start);
    if (end == std::string::npos) fail(what, ": malformed .npy header");
    return header.substr(start, end - start + 1);
  }
  end = header.find_first_of(",}", start);
  if (end == std::string::npos) fail(what, ": malformed .npy header");
  return header.substr(start, end - start);
}

Shape parse_shape(const std::string& tuple, const std::string& what) {
  Shape shape;
  std::string number;
  for (char c : tuple.substr(1)) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      number += c;
    } else if (c == ',' || c == ')') {
      if (!number.empty()) shape.push_back(std::stoll(number));
      number.clear();
    } else if (c != ' ' && c != 'L') {
      fail(what, ": malformed shape ", tuple, " in .npy header");
    }
  }
  return shape;
}

}  // namespace

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0)
    fail(what, ": not a .npy file (bad magic)");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(what, ": truncated .npy header");
    header_len = 0;
    for (int i = 3; i >= 0; --i)
      header_len = header_len << 8 | static_cast<unsigned char>(bytes[8 + i]);
    header_start = 12;
  } else {
    fail(what, ": unsupported .npy format version ", major);
  }
  if (bytes.size() < header_start + header_len) fail(what, ": truncated .npy header");
  std::string header = bytes.substr(header_start, header_len);
  DType dtype = dtype_from_descr(dict_value(header, "descr", what), what);
  std::string fortran = dict_value(header, "fortran_order", what);
  if (fortran.find("True") != std::string::npos)
    fail(what, ": Fortran-order .npy arrays are not supported; save with C order");
  if (fortran.find("False") == std::string::npos)
    fail(what, ": malformed fortran_order in .npy header");
  std::string shape_text = dict_value(header, "shape", what);
  if (shape_text.empty() || shape_text[0] != '(') fail(what, ": malformed shape in .npy header");
  Shape shape = parse_shape(shape_text, what);
  Tensor t = Tensor::empty(shape, dtype);
  size_t payload = bytes.size() - header_start - header_len;
  if (payload < t.nbytes())
    fail(what, ": truncated .npy data: ", payload, " bytes for shape ", shape_to_string(shape),
         " of ", dtype_name(dtype), " (", t.nbytes(), " needed)");
  std::memcpy(t.raw_data(), bytes.data() + header_start + header_len, t.nbytes());
  return t;
}

Tensor read_npy(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, ": file not found");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot be opened");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_npy(bytes, path);
}

std::string serialize_npy(const Tensor& input) {
  Tensor t = input.to(Device::cpu());
  if (t.dtype() == DType::BFloat16) {
    Tensor f = Tensor::empty(t.shape(), DType::Float32);
    for (int64_t i = 0; i < t.numel(); ++i)
      f.data<float>()[i] = static_cast<float>(t.data<BFloat16>()[i]);
    t = f;
  }
  const char* descr = nullptr;
  for (const auto& d : kDescrs)
    if (d.dtype == t.dtype()) descr = d.text;
  DPRUN_CHECK(descr != nullptr, "cannot write dtype ", dtype_name(t.dtype()), " to .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i)
    shape += std::to_string(t.shape()[i]) +
             (t.shape().size() == 1 ? "," : (i + 1 < t.shape().size() ? ", " : ""));
  shape += ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so magic + length + header + '\n' is a multiple of 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return out;
}

void write_npy(const Tensor& tensor, const std::string& path) {
  std::string bytes = serialize_npy(tensor);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, ": cannot be written");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      out.close();
      std::remove(tmp.c_str());
      fail(path, ": writing failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail(path, ": cannot be written (", ec.message(), ")");
  }
}

}  // namespace dprun
