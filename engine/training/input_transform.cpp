#include "engine/training/input_transform.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "engine/error.h"

namespace dprun {

namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, separator);) items.push_back(item);
  if (!text.empty() && text.back() == separator) items.push_back("");
  return items;
}

// "--OPTION NAME=TEXT"
std::string given(const char* option, const std::string& name, const std::string& text) {
  return std::string("--") + option + " " + name + "=" + text;
}

std::vector<float> numbers(const std::string& list, const std::string& context) {
  std::vector<float> values;
  for (const std::string& item : split(list, ',')) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
      fail(context, ": '", item, "' is not a number");
    values.push_back(static_cast<float>(v));
  }
  return values;
}

// The integer after "kind:" in an --augment item.
int64_t item_number(const std::string& item, size_t colon, int64_t least,
                    const std::string& context) {
  const std::string kind = item.substr(0, colon);
  const char* what = kind == "crop" ? "PAD" : "SIZE";
  if (colon == std::string::npos)
    fail(context, ": ", kind, " needs ", what, " (", kind, ":", what, ")");
  const std::string text = item.substr(colon + 1);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < least || v > (1 << 20))
    fail(context, ": ", kind, "'s ", what, " must be an integer >= ", least, ", got '", text, "'");
  return v;
}

}  // namespace

void parse_layout(const std::string& name, const std::string& text, InputTransform& into) {
  if (text != "nhwc" && text != "nchw")
    fail(given("layout", name, text), ": the layout is nhwc or nchw");
  into.channels_last = text == "nhwc";
  into.layout_text = into.channels_last ? "nhwc" : "";
}

void parse_normalize(const std::string& name, const std::string& text, InputTransform& into) {
  const std::string context = given("normalize", name, text);
  const size_t slash = text.find('/');
  if (slash == std::string::npos || text.find('/', slash + 1) != std::string::npos)
    fail(context, ": give MEAN[,MEAN...]/STD[,STD...]");
  std::vector<float> mean = numbers(text.substr(0, slash), context);
  std::vector<float> std = numbers(text.substr(slash + 1), context);
  for (float s : std)
    if (!(s > 0)) fail(context, ": std ", s, " is not a positive number");
  if (mean.size() != std.size())
    fail(context, ": ", mean.size(), " mean", mean.size() == 1 ? "" : "s", " but ", std.size(),
         " std", std.size() == 1 ? "" : "s");
  into.mean = std::move(mean);
  into.std = std::move(std);
  into.normalize_text = text;
}

void parse_augment(const std::string& name, const std::string& text, InputTransform& into) {
  const std::string context = given("augment", name, text);
  std::vector<Augmentation> list;
  for (const std::string& item : split(text, ',')) {
    const size_t colon = item.find(':');
    const std::string kind = item.substr(0, colon);
    if (kind == "hflip") {
      if (colon != std::string::npos) fail(context, ": hflip takes no number");
      list.push_back({AugmentKind::HorizontalFlip, 0});
    } else if (kind == "crop") {
      list.push_back({AugmentKind::Crop, item_number(item, colon, 0, context)});
    } else if (kind == "resized-crop") {
      list.push_back({AugmentKind::ResizedCrop, item_number(item, colon, 1, context)});
    } else if (kind == "cutout") {
      list.push_back({AugmentKind::Cutout, item_number(item, colon, 1, context)});
    } else {
      fail(context, ": unknown augmentation '", item,
           "' (hflip, crop:PAD, resized-crop:SIZE, cutout:SIZE)");
    }
  }
  into.augment = std::move(list);
  into.augment_text = text;
}

int64_t evaluation_resize(int64_t size) {
  return size * 256 / 224;
}

Shape transformed_sample_shape(const std::string& name, const InputTransform& t,
                               const Shape& stored, DType dtype) {
  const bool image = stored.size() == 3;
  if (t.channels_last && !image)
    fail(given("layout", name, "nhwc"), ": input '", name, "' holds rows of shape ",
         shape_to_string(stored), "; nhwc is for images (rows of 3 dims, HWC)");
  if (!t.augment.empty() && !image)
    fail(given("augment", name, t.augment_text), ": input '", name, "' holds rows of shape ",
         shape_to_string(stored),
         "; augmentation is for images (rows of 3 dims, CHW or with --layout ", name, "=nhwc HWC)");
  if (!t.empty() && !(is_integral(dtype) || dtype == DType::Float32 || dtype == DType::Float64))
    fail("input '", name, "' holds ", dtype_name(dtype),
         ", which cannot be transformed (numbers "
         "only)");
  Shape shape = stored;
  if (t.channels_last) shape = {stored[2], stored[0], stored[1]};
  const int64_t channels = shape.empty() ? 1 : shape[0];
  if (!t.mean.empty() && static_cast<int64_t>(t.mean.size()) != channels)
    fail(given("normalize", name, t.normalize_text), ": ", t.mean.size(), " mean",
         t.mean.size() == 1 ? "" : "s", " and std", t.std.size() == 1 ? "" : "s", " for the ",
         channels, " channel", channels == 1 ? "" : "s", " of input '", name, "'");
  for (const Augmentation& a : t.augment) {
    if (a.kind == AugmentKind::Cutout && (a.size > shape[1] || a.size > shape[2]))
      fail(given("augment", name, t.augment_text), ": cutout:", a.size, " is larger than the ",
           shape[1], "x", shape[2], " image");
    if (a.kind != AugmentKind::ResizedCrop) continue;
    shape[1] = shape[2] = a.size;
  }
  return shape;
}

}  // namespace dprun
