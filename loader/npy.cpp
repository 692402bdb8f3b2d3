#include "loader/npy.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/atomic_file.h"
#include "engine/mapped_file.h"

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

// How the elements of a .npy payload are laid out.
enum class Encoding {
  Raw,      // fixed-size numbers, copied as bytes
  Bytes,    // 'S<n>': n bytes per element, trailing NULs dropped
  Utf32LE,  // '<U<n>': n little-endian UTF-32 code units per element, trailing NULs dropped
  Utf32BE,  // '>U<n>'
};

struct Layout {
  DType dtype = DType::Undefined;
  Encoding encoding = Encoding::Raw;
  size_t item_size = 0;  // bytes per element in the file
};

// The element count <n> of a string descr such as "|S12"; fails unless it is all digits.
size_t string_width(const std::string& digits, const std::string& descr, const std::string& what) {
  bool ok = !digits.empty() && digits.size() <= 9;
  for (char c : digits) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  if (!ok) fail(what, ": unsupported .npy dtype '", descr, "'");
  return static_cast<size_t>(std::stoul(digits));
}

// numpy's string and raw-bytes types: '|S<n>' bytes, '<U<n>' / '>U<n>' UTF-32 and 'V2' raw
// 2-byte data (how bfloat16 arrays of ml_dtypes are saved), read as its uint16 bits.
bool string_or_void_layout(const std::string& descr, const std::string& what, Layout& out) {
  if (descr.size() < 2 || std::string("<>=|").find(descr[0]) == std::string::npos) return false;
  char kind = descr[1];
  std::string digits = descr.substr(2);
  if (kind == 'S' || kind == 'a') {
    out = {DType::String, Encoding::Bytes, string_width(digits, descr, what)};
    return true;
  }
  if (kind == 'U' && descr[0] != '|') {
    Encoding e = descr[0] == '>' ? Encoding::Utf32BE : Encoding::Utf32LE;
    out = {DType::String, e, 4 * string_width(digits, descr, what)};
    return true;
  }
  if (kind == 'V' && digits == "2") {
    out = {DType::UInt16, Encoding::Raw, 2};
    return true;
  }
  return false;
}

Layout layout_from_descr(const std::string& descr, const std::string& what) {
  // numpy writes '|' for single-byte types and may write '<' too; '=' means native (little).
  if (descr.size() == 3 && (descr[0] == '=' || descr[0] == '<' || descr[0] == '|')) {
    for (const auto& d : kDescrs)
      if (descr.substr(1) == std::string(d.text + 1))
        return {d.dtype, Encoding::Raw, dtype_size(d.dtype)};
  }
  Layout layout;
  if (string_or_void_layout(descr, what, layout)) return layout;
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
      // 18 digits stay below 2^63; no real dimension comes near.
      if (number.size() > 18) fail(what, ": dimension ", number, "... in .npy header is too large");
    } else if (c == ',' || c == ')') {
      if (!number.empty()) shape.push_back(std::stoll(number));
      number.clear();
    } else if (c != ' ' && c != 'L') {
      fail(what, ": malformed shape ", tuple, " in .npy header");
    }
  }
  return shape;
}

// Bytes the payload of `shape` needs; fails when its element count or size does not fit in
// int64, or when elements of no bytes (a '<U0' string) are declared: a few header bytes could
// then ask for any number of them.
size_t payload_bytes(const Shape& shape, size_t item_size, const std::string& what) {
  constexpr auto kLimit = static_cast<size_t>(std::numeric_limits<int64_t>::max());
  size_t elements = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    auto n = static_cast<size_t>(d);
    if (n != 0 && elements > kLimit / n) overflow = true;
    elements *= n;
  }
  if (!overflow && item_size != 0 && elements > kLimit / item_size) overflow = true;
  if (overflow) fail(what, ": .npy shape ", shape_to_string(shape), " is too large");
  if (item_size == 0 && elements != 0)
    fail(what, ": .npy elements of 0 bytes (a string dtype of width 0) cannot hold ",
         shape_to_string(shape));
  return elements * item_size;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_scalar_value(uint32_t cp) {
  return cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
}

uint32_t load_utf32(const unsigned char* p, bool big_endian) {
  if (big_endian)
    return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
  return uint32_t{p[3]} << 24 | uint32_t{p[2]} << 16 | uint32_t{p[1]} << 8 | uint32_t{p[0]};
}

// One 'U' element as UTF-8, trailing NULs dropped (as numpy does).
std::string decode_utf32(const unsigned char* p, size_t units, bool big_endian, int64_t index,
                         const std::string& what) {
  while (units > 0 && load_utf32(p + 4 * (units - 1), big_endian) == 0) --units;
  std::string out;
  for (size_t u = 0; u < units; ++u) {
    uint32_t cp = load_utf32(p + 4 * u, big_endian);
    if (!is_scalar_value(cp)) {
      char hex[16];
      std::snprintf(hex, sizeof(hex), "U+%04X", cp);
      fail(what, ": element ", index, " of the .npy string array holds ", hex,
           ", which is not a Unicode character");
    }
    append_utf8(out, cp);
  }
  return out;
}

// One 'S' element, trailing NULs dropped (as numpy does).
std::string decode_bytes(const char* p, size_t size) {
  while (size > 0 && p[size - 1] == '\0') --size;
  return std::string(p, size);
}

void decode_strings(Tensor& t, const Layout& layout, const char* payload, const std::string& what) {
  std::string* out = t.data<std::string>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const char* item = payload + static_cast<size_t>(i) * layout.item_size;
    if (layout.encoding == Encoding::Bytes)
      out[i] = decode_bytes(item, layout.item_size);
    else
      out[i] = decode_utf32(reinterpret_cast<const unsigned char*>(item), layout.item_size / 4,
                            layout.encoding == Encoding::Utf32BE, i, what);
  }
}

// Decodes the UTF-8 sequence of `s` at `pos` and advances past it; false when it is not valid
// UTF-8 (truncated, overlong, a surrogate or past U+10FFFF).
bool next_code_point(const std::string& s, size_t& pos, uint32_t& cp) {
  auto lead = static_cast<unsigned char>(s[pos]);
  size_t extra;
  uint32_t min;
  if (lead < 0x80) {
    extra = 0, min = 0, cp = lead;
  } else if ((lead & 0xE0) == 0xC0) {
    extra = 1, min = 0x80, cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    extra = 2, min = 0x800, cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    extra = 3, min = 0x10000, cp = lead & 0x07;
  } else {
    return false;
  }
  if (s.size() - pos <= extra) return false;
  for (size_t k = 1; k <= extra; ++k) {
    auto c = static_cast<unsigned char>(s[pos + k]);
    if ((c & 0xC0) != 0x80) return false;
    cp = cp << 6 | (c & 0x3F);
  }
  pos += extra + 1;
  return cp >= min && is_scalar_value(cp);
}

// The code points of `s`, or nothing when `s` is not valid UTF-8.
std::optional<std::u32string> utf8_to_utf32(const std::string& s) {
  std::u32string out;
  uint32_t cp = 0;
  for (size_t pos = 0; pos < s.size();) {
    if (!next_code_point(s, pos, cp)) return std::nullopt;
    out += static_cast<char32_t>(cp);
  }
  return out;
}

void append_le32(std::string& out, uint32_t v) {
  for (int b = 0; b < 4; ++b) out += static_cast<char>((v >> (8 * b)) & 0xFF);
}

// Every element of a String tensor as code points, or nothing when one is not valid UTF-8.
std::optional<std::vector<std::u32string>> code_points(const Tensor& t) {
  std::vector<std::u32string> out;
  for (int64_t i = 0; i < t.numel(); ++i) {
    auto w = utf8_to_utf32(t.data<std::string>()[i]);
    if (!w) return std::nullopt;
    out.push_back(std::move(*w));
  }
  return out;
}

// '<U<n>' (numpy's default for str arrays): n is the longest element, at least 1.
std::pair<std::string, std::string> encode_utf32(const std::vector<std::u32string>& elements) {
  size_t width = 1;
  for (const auto& w : elements) width = std::max(width, w.size());
  std::string payload;
  payload.reserve(elements.size() * width * 4);
  for (const auto& w : elements) {
    for (char32_t cp : w) append_le32(payload, static_cast<uint32_t>(cp));
    for (size_t pad = w.size(); pad < width; ++pad) append_le32(payload, 0);
  }
  return {"<U" + std::to_string(width), payload};
}

// '|S<n>' (numpy's bytes arrays): n is the longest element in bytes, at least 1.
std::pair<std::string, std::string> encode_bytes(const Tensor& t) {
  const std::string* in = t.data<std::string>();
  size_t width = 1;
  for (int64_t i = 0; i < t.numel(); ++i) width = std::max(width, in[i].size());
  std::string payload;
  for (int64_t i = 0; i < t.numel(); ++i)
    payload += in[i] + std::string(width - in[i].size(), '\0');
  return {"|S" + std::to_string(width), payload};
}

// Strings are written as numpy writes str arrays, '<U<n>'; when one is not valid UTF-8 they
// are written as bytes, '|S<n>'.
std::pair<std::string, std::string> encode_strings(const Tensor& t) {
  auto elements = code_points(t);
  return elements ? encode_utf32(*elements) : encode_bytes(t);
}

// The descr and payload bytes of a CPU tensor.
std::pair<std::string, std::string> encode_payload(const Tensor& t) {
  if (t.dtype() == DType::String) return encode_strings(t);
  const char* descr = nullptr;
  for (const auto& d : kDescrs)
    if (d.dtype == t.dtype()) descr = d.text;
  DPRUN_CHECK(descr != nullptr, "cannot write dtype ", dtype_name(t.dtype()), " to .npy");
  return {descr, std::string(static_cast<const char*>(t.raw_data()), t.nbytes())};
}

Tensor bfloat16_as_float32(const Tensor& t) {
  Tensor f = Tensor::empty(t.shape(), DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i)
    f.data<float>()[i] = static_cast<float>(t.data<BFloat16>()[i]);
  return f;
}

std::string shape_tuple(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    out +=
        std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  return out + ")";
}

}  // namespace

namespace {

// What a .npy header says, and where the data starts.
struct NpyHeader {
  Layout layout;
  Shape shape;
  size_t data_start = 0;
};

// Parses the header at the start of `bytes` (which may stop after it). Throws Error naming
// `what` for a bad magic, an unsupported version, a truncated or malformed header, or Fortran
// order.
NpyHeader parse_header(std::string_view bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, std::string_view(kMagic, 6)) != 0)
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
  const std::string header(bytes.substr(header_start, header_len));
  NpyHeader out;
  out.layout = layout_from_descr(dict_value(header, "descr", what), what);
  std::string fortran = dict_value(header, "fortran_order", what);
  if (fortran.find("True") != std::string::npos)
    fail(what, ": Fortran-order .npy arrays are not supported; save with C order");
  if (fortran.find("False") == std::string::npos)
    fail(what, ": malformed fortran_order in .npy header");
  std::string shape_text = dict_value(header, "shape", what);
  if (shape_text.empty() || shape_text[0] != '(') fail(what, ": malformed shape in .npy header");
  out.shape = parse_shape(shape_text, what);
  out.data_start = header_start + header_len;
  return out;
}

}  // namespace

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  const NpyHeader header = parse_header(bytes, what);
  const Layout& layout = header.layout;
  const Shape& shape = header.shape;
  size_t needed = payload_bytes(shape, layout.item_size, what);
  size_t payload = bytes.size() - header.data_start;
  if (payload < needed)
    fail(what, ": truncated .npy data: ", payload, " bytes for shape ", shape_to_string(shape),
         " of ", dtype_name(layout.dtype), " (", needed, " needed)");
  Tensor t = Tensor::empty(shape, layout.dtype);
  const char* data = bytes.data() + header.data_start;
  if (layout.dtype == DType::String)
    decode_strings(t, layout, data, what);
  else
    std::memcpy(t.raw_data(), data, needed);
  return t;
}

namespace {

// The header of the .npy file at `path`, read alone (a header of more than 1 MiB is no numpy
// header); nullopt when the file cannot be read.
std::optional<std::string> header_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(12, '\0');
  if (!in.read(bytes.data(), 12)) return std::nullopt;
  const auto at = [&](size_t i) {
    return static_cast<size_t>(static_cast<unsigned char>(bytes[i]));
  };
  const size_t length =
      bytes[6] == 1 ? (at(8) | at(9) << 8) : (at(8) | at(9) << 8 | at(10) << 16 | at(11) << 24);
  if (length > (size_t(1) << 20)) return std::nullopt;
  bytes.resize(12 + length);
  in.read(bytes.data() + 12, static_cast<std::streamsize>(length));
  bytes.resize(12 + static_cast<size_t>(in.gcount()));
  return bytes;
}

}  // namespace

std::optional<Shape> read_npy_shape(const std::string& path) {
  const std::optional<std::string> bytes = header_bytes(path);
  if (!bytes) return std::nullopt;
  try {
    return parse_header(*bytes, path).shape;
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::optional<Tensor> map_npy(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, ": file not found");
  const std::optional<std::string> bytes = header_bytes(path);
  if (!bytes) return std::nullopt;  // read_npy says what is wrong
  const NpyHeader header = parse_header(*bytes, path);
  const Layout& layout = header.layout;
  const size_t needed = payload_bytes(header.shape, layout.item_size, path);
  // Strings are decoded, and misaligned numbers cannot be viewed in place: those are read.
  if (layout.encoding != Encoding::Raw || needed == 0 || header.data_start % layout.item_size)
    return std::nullopt;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  const size_t payload = ec || size < header.data_start ? 0 : size - header.data_start;
  if (payload < needed)
    fail(path, ": truncated .npy data: ", payload, " bytes for shape ",
         shape_to_string(header.shape), " of ", dtype_name(layout.dtype), " (", needed, " needed)");
  return Tensor::from_storage(map_file(path, header.data_start, needed), header.shape,
                              layout.dtype);
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
  if (t.dtype() == DType::BFloat16) t = bfloat16_as_float32(t);
  auto [descr, payload] = encode_payload(t);
  std::string header = "{'descr': '" + descr +
                       "', 'fortran_order': False, 'shape': " + shape_tuple(t.shape()) + ", }";
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
  out += payload;
  return out;
}

void write_npy(const Tensor& tensor, const std::string& path) {
  write_file_atomically(path, serialize_npy(tensor));
}

}  // namespace dprun
