#include "tools/python/options.h"

#include <cmath>

#include "engine/backend.h"
#include "engine/parallel/device_list.h"
#include "engine/parallel/scatter.h"
#include "tools/python/errors.h"

namespace py = pybind11;

namespace dprun::python {

namespace {

std::string type_name(const py::handle& value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// A non-negative finite number, as the command line's NumberRule::NonNegative.
double non_negative(const std::string& name, double value) {
  if (!(std::isfinite(value) && value >= 0))
    raise(name + ": " + detail::concat(value) + " is not a number >= 0");
  return value;
}

// precision: "float32", "float16" or "bfloat16"; nullopt when absent.
std::optional<DType> take_precision(Keywords& keywords) {
  std::optional<std::string> precision = keywords.take_text("precision");
  if (!precision) return std::nullopt;
  if (*precision != "float32" && *precision != "float16" && *precision != "bfloat16")
    raise("precision: '" + *precision + "' is not float32, float16 or bfloat16");
  return dtype_from_name(*precision);
}

// A number > 0, as the command line's NumberRule::Positive.
std::optional<double> take_positive(Keywords& keywords, const std::string& name) {
  std::optional<double> value = keywords.take_number(name);
  if (value && !(*value > 0)) raise(name + ": " + detail::concat(*value) + " is not > 0");
  return value;
}

// distributed and the options that need it (timeout, bucket_mb, deterministic,
// gradient_compression, dist_backend). With distributed=True joins the MPI job: call it before
// the devices are read.
std::shared_ptr<DistributedJob> take_distributed_options(Keywords& keywords,
                                                         std::optional<std::string>& backend) {
  const bool distributed = keywords.take_bool("distributed").value_or(false);
  DistributedJobSettings settings{
      .timeout_seconds = take_positive(keywords, "timeout"),
      .bucket_mb = take_positive(keywords, "bucket_mb"),
      .deterministic = keywords.take_bool("deterministic").value_or(false),
      .gradient_compression = keywords.take_text("gradient_compression")};
  backend = keywords.take_text("dist_backend");
  const std::vector<std::pair<const char*, bool>> given = {
      {"timeout", settings.timeout_seconds.has_value()},
      {"bucket_mb", settings.bucket_mb.has_value()},
      {"deterministic", settings.deterministic},
      {"gradient_compression", settings.gradient_compression.has_value()},
      {"dist_backend", backend.has_value()}};
  for (const auto& [name, is_given] : given)
    if (is_given && !distributed) raise(std::string(name) + " needs distributed=True");
  if (!distributed) return nullptr;
  return std::make_shared<DistributedJob>(join_distributed_job(settings, OptionSpelling::Keyword));
}

}  // namespace

std::optional<double> number_of(const py::handle& value) {
  if (PyBool_Check(value.ptr()) || !PyNumber_Check(value.ptr()) || py::isinstance<py::str>(value))
    return std::nullopt;
  const double v = PyFloat_AsDouble(value.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return std::nullopt;
  }
  return v;
}

Keywords::Keywords(std::string owner, py::dict kwargs)
    : owner_(std::move(owner)), kwargs_(std::move(kwargs)) {}

std::optional<py::object> Keywords::take_raw(const std::string& name) {
  if (!kwargs_.contains(name)) return std::nullopt;
  py::object value = kwargs_[py::str(name)];
  PyDict_DelItemString(kwargs_.ptr(), name.c_str());
  return value;
}

std::optional<py::object> Keywords::take(const std::string& name) {
  std::optional<py::object> value = take_raw(name);
  if (value && value->is_none()) return std::nullopt;
  return value;
}

std::optional<double> Keywords::take_number(const std::string& name) {
  std::optional<py::object> value = take(name);
  if (!value) return std::nullopt;
  const std::optional<double> number = number_of(*value);
  if (!number) raise(owner_ + ": " + name + " must be a number, got " + type_name(*value));
  const double v = *number;
  if (!std::isfinite(v)) raise(name + ": " + detail::concat(v) + " is not a finite number");
  return v;
}

std::optional<int64_t> Keywords::take_integer(const std::string& name) {
  std::optional<py::object> value = take(name);
  if (!value) return std::nullopt;
  if (PyBool_Check(value->ptr()) || !PyIndex_Check(value->ptr()))
    raise(owner_ + ": " + name + " must be an integer, got " + type_name(*value));
  const long long v =
      PyLong_AsLongLong(py::reinterpret_steal<py::object>(PyNumber_Index(value->ptr())).ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    raise(owner_ + ": " + name + " is out of range");
  }
  return static_cast<int64_t>(v);
}

std::optional<bool> Keywords::take_bool(const std::string& name) {
  std::optional<py::object> value = take(name);
  if (!value) return std::nullopt;
  const std::string type = type_name(*value);
  if (!PyBool_Check(value->ptr()) && type != "bool_")
    raise(owner_ + ": " + name + " must be True or False, got " + type);
  return value->cast<bool>();
}

std::optional<std::string> Keywords::take_text(const std::string& name) {
  std::optional<py::object> value = take(name);
  if (!value) return std::nullopt;
  if (!py::isinstance<py::str>(*value))
    raise(owner_ + ": " + name + " must be a str, got " + type_name(*value));
  return value->cast<std::string>();
}

std::vector<std::string> Keywords::take_texts(const std::string& name) {
  std::optional<py::object> value = take(name);
  std::vector<std::string> items;
  if (!value) return items;
  auto add = [&](const py::handle& item) {
    if (!py::isinstance<py::str>(item))
      raise(owner_ + ": " + name + " must be a str or a list of str, got an item of type " +
            type_name(item));
    std::string text = item.cast<std::string>();
    size_t start = 0;
    while (start <= text.size()) {
      const size_t comma = std::min(text.find(',', start), text.size());
      if (comma > start) items.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
  };
  if (py::isinstance<py::str>(*value)) {
    add(*value);
  } else if (py::isinstance<py::list>(*value) || py::isinstance<py::tuple>(*value)) {
    for (const py::handle& item : *value) add(item);
  } else {
    raise(owner_ + ": " + name + " must be a str or a list of str, got " + type_name(*value));
  }
  return items;
}

void Keywords::finish(const std::vector<std::string>& known) const {
  for (const auto& item : kwargs_)
    raise(owner_ + " got an unexpected keyword '" + std::string(py::str(item.first)) +
          "' (it takes: " + joined(known) + ")");
}

std::vector<Device> parse_device_ids(const py::handle& device_ids) {
  std::string text;
  if (device_ids.is_none()) {
    text = "all";
  } else if (py::isinstance<py::str>(device_ids)) {
    text = device_ids.cast<std::string>();
  } else if (py::isinstance<py::list>(device_ids) || py::isinstance<py::tuple>(device_ids)) {
    if (py::len(device_ids) == 0) return {};
    for (const py::handle& item : device_ids) {
      std::string one;
      if (py::isinstance<py::str>(item)) {
        one = item.cast<std::string>();
      } else if (!PyBool_Check(item.ptr()) && PyIndex_Check(item.ptr())) {
        one = "cuda:" + std::string(py::str(item));
      } else {
        raise("device_ids: an item of type " + type_name(item) +
              " is no device (give \"cpu:N\", \"cuda:N\" or an int for cuda:N)");
      }
      if (one.find(',') != std::string::npos || one.empty())
        raise("device_ids: '" + one + "' is not one device");
      text += (text.empty() ? "" : ",") + one;
    }
  } else {
    raise("device_ids must be a list of devices, \"all\" or None, got " + type_name(device_ids));
  }
  std::vector<Device> devices;
  try {
    devices = parse_device_list(text);
  } catch (const Error& e) {
    raise(std::string("device_ids: ") + e.what());
  }
  for (const Device& d : devices) backend_for(d).check_device(d);
  return devices;
}

std::vector<std::string> parallel_keywords(bool with_precision) {
  std::vector<std::string> names = {"split",   "split_policy", "weights",
                                    "threads", "allow_tf32",   "allow_winograd"};
  if (with_precision) names.push_back("precision");
  return names;
}

void take_parallel_options(Keywords& keywords, DataParallelOptions& parallel, ModelOptions& compile,
                           bool precision_converts) {
  if (std::optional<py::object> splits = keywords.take("split")) {
    if (!py::isinstance<py::dict>(*splits))
      raise("split must be a dict of input name to a dim or None (whole), got " +
            type_name(*splits));
    for (const auto& [key, value] : splits->cast<py::dict>()) {
      const std::string name = py::str(key);
      if (value.is_none() ||
          (py::isinstance<py::str>(value) && py::str(value).cast<std::string>() == "none")) {
        parallel.input_splits[name] = InputSplit::whole();
      } else if (!PyBool_Check(value.ptr()) && PyIndex_Check(value.ptr())) {
        parallel.input_splits[name] = InputSplit::along(value.cast<int64_t>());
      } else {
        raise("split: input '" + name + "' must map to a dim (int) or None, got " +
              type_name(value));
      }
    }
  }
  if (std::optional<std::string> policy = keywords.take_text("split_policy")) {
    try {
      parallel.split_policy = parse_split_policy(*policy);
    } catch (const Error& e) {
      raise(std::string("split_policy: ") + e.what());
    }
  }
  if (std::optional<py::object> weights = keywords.take("weights")) {
    if (parallel.split_policy != SplitPolicy::Weighted)
      raise("weights needs split_policy='weighted'");
    if (!py::isinstance<py::list>(*weights) && !py::isinstance<py::tuple>(*weights))
      raise("weights must be a list of positive numbers, got " + type_name(*weights));
    for (const py::handle& w : *weights) {
      const double v = number_of(w).value_or(-1.0);
      if (!(std::isfinite(v) && v > 0))
        raise("weights must be positive numbers, got " + std::string(py::repr(w)));
      parallel.weights.push_back(v);
    }
    if (parallel.weights.size() != parallel.device_ids.size())
      raise("weights has " + std::to_string(parallel.weights.size()) + " values for " +
            std::to_string(parallel.device_ids.size()) + " devices");
  }
  if (std::optional<int64_t> threads = keywords.take_integer("threads")) {
    if (*threads < 1 || *threads > 1024)
      raise("threads: " + std::to_string(*threads) + " is not in [1, 1024]");
    parallel.threads = static_cast<int>(*threads);
  }
  compile.plan.allow_tf32 = keywords.take_bool("allow_tf32").value_or(false);
  compile.plan.allow_winograd = keywords.take_bool("allow_winograd").value_or(false);
  if (!precision_converts) return;
  if (std::optional<DType> precision = take_precision(keywords)) compile.precision = *precision;
}

std::vector<std::string> train_keywords() {
  std::vector<std::string> names = {"loss",
                                    "optimizer",
                                    "lr",
                                    "momentum",
                                    "nesterov",
                                    "weight_decay",
                                    "no_weight_decay",
                                    "param_lr",
                                    "betas",
                                    "eps",
                                    "clip_grad_norm",
                                    "precision",
                                    "loss_scale",
                                    "loss_scale_growth_interval",
                                    "sync_batchnorm",
                                    "accumulate",
                                    "label_smoothing",
                                    "ignore_index",
                                    "class_dim",
                                    "output",
                                    "freeze",
                                    "seed",
                                    "dim",
                                    "layout",
                                    "normalize",
                                    "distributed",
                                    "timeout",
                                    "bucket_mb",
                                    "deterministic",
                                    "gradient_compression",
                                    "dist_backend"};
  for (const std::string& name : parallel_keywords(false)) names.push_back(name);
  return names;
}

namespace {

// loss, class_dim, ignore_index, label_smoothing, output and freeze.
void take_loss_options(Keywords& k, TrainingGraphSpec& training) {
  std::optional<std::string> loss = k.take_text("loss");
  if (!loss)
    raise(k.owner() + " needs loss= (cross_entropy, nll, mse, l1, bce_with_logits or none)");
  try {
    training.loss.kind = parse_loss_kind(*loss);
  } catch (const Error& e) {
    raise(std::string("loss: ") + e.what());
  }
  if (std::optional<int64_t> class_dim = k.take_integer("class_dim")) {
    if (*class_dim < -64 || *class_dim > 63)
      raise("class_dim: " + std::to_string(*class_dim) + " is not in [-64, 63]");
    training.loss.class_dim = *class_dim;
  }
  // ignore_index: an int, or None (the command line's "none") to count every target.
  if (std::optional<py::object> ignore = k.take_raw("ignore_index")) {
    if (ignore->is_none()) {
      training.loss.ignore_index = std::nullopt;
    } else if (PyBool_Check(ignore->ptr()) || !PyIndex_Check(ignore->ptr())) {
      raise(k.owner() + ": ignore_index must be an integer or None, got " + type_name(*ignore));
    } else {
      training.loss.ignore_index = ignore->cast<int64_t>();
    }
  }
  if (std::optional<double> smoothing = k.take_number("label_smoothing")) {
    if (!(*smoothing >= 0 && *smoothing <= 1))
      raise("label_smoothing: " + detail::concat(*smoothing) + " is not between 0 and 1");
    if (training.loss.kind != LossKind::CrossEntropy)
      raise("label_smoothing is for loss='cross_entropy'");
    training.loss.label_smoothing = *smoothing;
  }
  training.loss.output = k.take_text("output").value_or("");
  training.freeze = k.take_texts("freeze");
}

// betas: a list or tuple of two numbers (each checked by check_optimizer_options).
void take_betas(Keywords& k, OptimizerSettings& s) {
  std::optional<py::object> betas = k.take("betas");
  if (!betas) return;
  std::vector<double> values;
  if (py::isinstance<py::list>(*betas) || py::isinstance<py::tuple>(*betas))
    for (const py::handle& b : *betas) values.push_back(number_of(b).value_or(NAN));
  if (values.size() != 2) raise("betas takes two numbers, (B1, B2)");
  s.betas = {values[0], values[1]};
  s.betas_text = py::repr(*betas);
}

// layout={'x': 'nhwc'} and normalize={'x': 'MEAN,../STD,..'} or {'x': ([MEAN..], [STD..])},
// parsed as the command line parses --layout x=nhwc and --normalize x=MEAN,../STD,...
void take_transforms(Keywords& k, std::map<std::string, InputTransform>& transforms) {
  for (const char* keyword : {"layout", "normalize"}) {
    std::optional<py::object> value = k.take(keyword);
    if (!value) continue;
    if (!py::isinstance<py::dict>(*value))
      raise(std::string(keyword) + " must be a dict of input name to " +
            (keyword == std::string("layout") ? "'nhwc'" : "'MEAN,../STD,..' or (means, stds)") +
            ", got " + type_name(*value));
    for (const auto& [name_object, item] : value->cast<py::dict>()) {
      const std::string name = py::str(name_object);
      std::string text;
      if (py::isinstance<py::tuple>(item) && py::len(item) == 2) {
        for (const py::handle& part : item.cast<py::tuple>()) {
          if (!text.empty()) text += '/';
          bool first = true;
          for (const py::handle& v : part) {
            if (!first) text += ',';
            text += std::string(py::str(v));
            first = false;
          }
        }
      } else {
        text = py::str(item);
      }
      if (keyword == std::string("layout"))
        parse_layout(name, text, transforms[name]);
      else
        parse_normalize(name, text, transforms[name]);
    }
  }
}

// param_lr: a dict of pattern to lr.
void take_param_lr(Keywords& k, OptimizerSettings& s) {
  std::optional<py::object> groups = k.take("param_lr");
  if (!groups) return;
  if (!py::isinstance<py::dict>(*groups))
    raise("param_lr must be a dict of pattern to lr, e.g. {'head.*': 0.1}, got " +
          type_name(*groups));
  for (const auto& [pattern, lr_value] : groups->cast<py::dict>()) {
    const double v = number_of(lr_value).value_or(NAN);
    const std::string p = py::str(pattern);
    if (!(std::isfinite(v) && v >= 0))
      raise("param_lr: '" + p + "' gives an lr that is not a number >= 0");
    s.param_lr.emplace_back(p, v);
  }
}

// optimizer, lr and the optimizer's hyper-parameters, checked as `dprun train` checks them.
void take_optimizer_options(Keywords& k, OptimizerSettings& s) {
  std::optional<std::string> optimizer = k.take_text("optimizer");
  if (!optimizer) raise(k.owner() + " needs optimizer= (sgd, adam or adamw)");
  s.kind = *optimizer;
  std::optional<double> lr = k.take_number("lr");
  if (!lr) raise(k.owner() + " needs lr=");
  s.lr = non_negative("lr", *lr);
  const auto given = [&](const std::string& name) -> std::optional<double> {
    std::optional<double> v = k.take_number(name);
    return v ? std::optional<double>(non_negative(name, *v)) : std::nullopt;
  };
  s.momentum = given("momentum");
  s.nesterov = k.take_bool("nesterov").value_or(false);
  s.weight_decay = given("weight_decay");
  s.eps = given("eps");
  take_betas(k, s);
  s.no_weight_decay = k.take_texts("no_weight_decay");
  check_optimizer_options(s, OptionSpelling::Keyword);
  take_param_lr(k, s);
}

// precision, loss_scale, loss_scale_growth_interval, clip_grad_norm, sync_batchnorm.
void take_precision_options(Keywords& k, TrainSettings& s) {
  TrainerOptions& o = s.trainer;
  if (std::optional<DType> precision = take_precision(k)) o.training.precision = *precision;
  std::optional<double> scale = k.take_number("loss_scale");
  std::optional<int64_t> growth = k.take_integer("loss_scale_growth_interval");
  if (o.training.precision != DType::Float16 && (scale || growth))
    raise(std::string(scale ? "loss_scale" : "loss_scale_growth_interval") +
          ": only float16 training scales its loss (precision='float16')");
  if (scale) {
    if (!(*scale > 0) || !std::isfinite(static_cast<float>(*scale)))
      raise("loss_scale: " + detail::concat(*scale) + " is not a positive float32");
    o.loss_scaling.init_scale = *scale;
  }
  if (growth) {
    if (*growth < 1)
      raise("loss_scale_growth_interval: " + std::to_string(*growth) + " is not >= 1");
    o.loss_scaling.growth_interval = *growth;
  }
  if (std::optional<double> clip = k.take_number("clip_grad_norm")) {
    if (!(*clip > 0))
      raise("clip_grad_norm: " + detail::concat(*clip) + " is not a positive number");
    o.max_grad_norm = *clip;
  }
  o.training.sync_batch_norm = k.take_bool("sync_batchnorm").value_or(false);
}

}  // namespace

TrainSettings parse_train_settings(const py::handle& device_ids, Keywords& k) {
  TrainSettings s;
  std::optional<std::string> backend;
  s.job = take_distributed_options(k, backend);
  std::vector<Device>& devices = s.trainer.parallel.device_ids;
  devices = parse_device_ids(device_ids);
  if (devices.empty()) raise("device_ids: training needs at least one device");
  if (s.job) {
    const bool all = device_ids.is_none() || (py::isinstance<py::str>(device_ids) &&
                                              device_ids.cast<std::string>() == "all");
    devices = job_devices(*s.job, all, std::move(devices));
    use_gradient_backend(*s.job,
                         gradient_backend(backend, devices.front(), OptionSpelling::Keyword),
                         devices.front());
  }
  take_loss_options(k, s.trainer.training);
  take_optimizer_options(k, s.optimizer);
  take_precision_options(k, s);
  if (std::optional<int64_t> accumulate = k.take_integer("accumulate")) {
    if (*accumulate < 1) raise("accumulate: " + std::to_string(*accumulate) + " is not >= 1");
    s.accumulate = *accumulate;
  }
  if (std::optional<int64_t> seed = k.take_integer("seed")) {
    if (*seed < 0) raise("seed: " + std::to_string(*seed) + " is not >= 0");
    s.seed = static_cast<uint64_t>(*seed);
  }
  if (std::optional<int64_t> dim = k.take_integer("dim")) {
    if (*dim < -64 || *dim > 63) raise("dim: " + std::to_string(*dim) + " is not in [-64, 63]");
    s.trainer.parallel.dim = *dim;
  }
  take_transforms(k, s.transforms);
  take_parallel_options(k, s.trainer.parallel, s.compile, false);
  k.finish(train_keywords());
  return s;
}

}  // namespace dprun::python
