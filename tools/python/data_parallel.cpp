#include "tools/python/data_parallel.h"

#include <pybind11/stl.h>

#include "engine/executor.h"
#include "engine/parallel/data_parallel.h"
#include "engine/parallel/device_list.h"
#include "loader/onnx_loader.h"
#include "tools/python/arrays.h"
#include "tools/python/errors.h"
#include "tools/python/model.h"
#include "tools/python/options.h"

namespace py = pybind11;

namespace dprun::python {

std::vector<Tensor> feeds_of(const std::vector<const ValueInfo*>& inputs, const py::args& args,
                             const py::dict& kwargs) {
  const size_t n = inputs.size();
  if (args.size() > n)
    raise("the model takes " + std::to_string(n) + " input" + (n == 1 ? "" : "s") + " but got " +
          std::to_string(args.size()));
  std::vector<py::object> given(n);
  for (size_t i = 0; i < args.size(); ++i) given[i] = args[i];
  for (const auto& [key, value] : kwargs) {
    const std::string name = py::str(key);
    size_t i = 0;
    while (i < n && inputs[i]->name != name) ++i;
    if (i == n) raise("the model has no input named '" + name + "'");
    if (given[i]) raise("input '" + name + "' is given twice");
    given[i] = py::reinterpret_borrow<py::object>(value);
  }
  std::vector<Tensor> feeds;
  for (size_t i = 0; i < n; ++i) {
    if (!given[i]) raise("input '" + inputs[i]->name + "' is missing");
    feeds.push_back(tensor_from_python(given[i], inputs[i]->name, inputs[i]->type));
    check_input(*inputs[i], feeds.back());
  }
  return feeds;
}

namespace {

// dprun.DataParallel's state: the model compiled on the first device and the DataParallel
// over the devices. close() lets go of both.
class PythonDataParallel {
 public:
  PythonDataParallel(const py::object& model, const py::object& device_ids,
                     const py::object& output_device, const py::object& dim, py::dict options) {
    std::shared_ptr<const Graph> graph;
    if (py::isinstance<PythonModel>(model)) {
      const auto& m = model.cast<const PythonModel&>();
      graph = m.graph();
      source_ = m.source();
    } else {
      source_ = path_of(model, "DataParallel: model (a dprun.Model or a path)");
      py::gil_scoped_release release;
      graph = load_graph(source_);
    }
    DataParallelOptions parallel;
    parallel.device_ids = parse_device_ids(device_ids);
    if (!output_device.is_none()) {
      const std::string text = py::isinstance<py::str>(output_device)
                                   ? output_device.cast<std::string>()
                                   : "cuda:" + std::string(py::str(output_device));
      try {
        parallel.output_device = Device::parse(text);
      } catch (const Error& e) {
        raise(std::string("output_device: ") + e.what());
      }
    }
    if (PyBool_Check(dim.ptr()) || !PyIndex_Check(dim.ptr()))
      raise("DataParallel: dim must be an integer, got " +
            std::string(py::str(py::type::handle_of(dim).attr("__name__"))));
    parallel.dim = dim.cast<int64_t>();
    Keywords keywords("DataParallel", std::move(options));
    ModelOptions compile;
    take_parallel_options(keywords, parallel, compile, true);
    std::vector<std::string> known = {"device_ids", "output_device", "dim"};
    for (const std::string& name : parallel_keywords(true)) known.push_back(name);
    keywords.finish(known);
    const Device first = parallel.device_ids.empty() ? Device::cpu() : parallel.device_ids[0];
    py::gil_scoped_release release;
    model_ = std::make_shared<Model>(graph, first, compile);
    parallel_ = std::make_unique<DataParallel>(model_, std::move(parallel));
  }

  std::vector<py::object> run(const py::args& args, const py::dict& kwargs) {
    DataParallel& parallel = open();
    std::vector<Tensor> feeds = feeds_of(model_->graph().required_inputs(), args, kwargs);
    std::vector<Tensor> outputs;
    {
      py::gil_scoped_release release;
      outputs = parallel.forward(feeds);
      feeds.clear();  // the inputs' buffers are let go with the GIL held by their storage
    }
    std::vector<py::object> arrays;
    for (const Tensor& t : outputs) arrays.push_back(numpy_from_tensor(t));
    return arrays;
  }

  py::object call(const py::args& args, const py::kwargs& kwargs) {
    std::vector<py::object> arrays = run(args, kwargs);
    if (arrays.size() == 1) return arrays[0];
    py::tuple out(arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i) out[i] = arrays[i];
    return out;
  }

  py::dict forward_dict(const py::object& feeds) {
    if (!py::isinstance<py::dict>(feeds))
      raise("forward_dict takes a dict of input name to array, got " +
            std::string(py::str(py::type::handle_of(feeds).attr("__name__"))));
    std::vector<py::object> arrays = run(py::args(), feeds.cast<py::dict>());
    py::dict out;
    const std::vector<std::string> names = model_->output_names();
    for (size_t i = 0; i < arrays.size(); ++i) out[py::str(names[i])] = arrays[i];
    return out;
  }

  py::dict last_run() {
    const DataParallelRun run = open().last_run();
    py::dict out;
    py::list devices;
    for (const Device& d : run.devices_used) devices.append(d.to_string());
    out["devices_used"] = devices;
    out["chunk_rows"] = py::cast(run.chunk_rows);
    return out;
  }

  std::vector<std::string> device_ids() {
    std::vector<std::string> names;
    for (const Device& d : open().options().device_ids) names.push_back(d.to_string());
    return names;
  }

  std::vector<std::string> input_names() {
    open();
    return model_->input_names();
  }
  std::vector<std::string> output_names() {
    open();
    return model_->output_names();
  }

  void close() {
    py::gil_scoped_release release;  // the device workers are joined
    parallel_.reset();
    model_.reset();
  }

  std::string repr() const {
    return "<dprun.DataParallel " + source_ +
           (parallel_ ? " on " + device_list_to_string(parallel_->options().device_ids)
                      : std::string(" (closed)")) +
           ">";
  }

 private:
  DataParallel& open() {
    if (!parallel_) raise("the DataParallel of " + source_ + " is closed");
    return *parallel_;
  }

  std::string source_;
  std::shared_ptr<Model> model_;
  std::unique_ptr<DataParallel> parallel_;
};

}  // namespace

void register_data_parallel(py::module_& m) {
  py::class_<PythonDataParallel>(
      m, "DataParallel",
      "DataParallel(model, device_ids=None, output_device=None, dim=0, **options): runs a "
      "model data-parallel as torch.nn.DataParallel does. device_ids: None or \"all\" (every "
      "GPU, else one CPU device per core), a list of \"cpu:N\"/\"cuda:N\" and ints (cuda:N), or "
      "[] (the model as it is). options: split, split_policy, weights, threads, allow_tf32, "
      "allow_winograd, precision, as `dprun run`'s flags.")
      .def(py::init([](const py::object& model, const py::object& device_ids,
                       const py::object& output_device, const py::object& dim,
                       const py::kwargs& options) {
             return std::make_unique<PythonDataParallel>(model, device_ids, output_device, dim,
                                                         py::dict(options));
           }),
           py::arg("model"), py::arg("device_ids") = py::none(),
           py::arg("output_device") = py::none(), py::arg("dim") = 0)
      .def("__call__", &PythonDataParallel::call,
           "dp(x), dp(x, y) or dp(x=..., y=...): the outputs, one NumPy array or a tuple of "
           "them in output order.")
      .def("forward_dict", &PythonDataParallel::forward_dict, py::arg("feeds"),
           "The outputs of the feeds {input name: array} as {output name: array}.")
      .def_property_readonly("last_run", &PythonDataParallel::last_run,
                             "What the last call did: devices_used and chunk_rows.")
      .def_property_readonly("device_ids", &PythonDataParallel::device_ids)
      .def_property_readonly("input_names", &PythonDataParallel::input_names)
      .def_property_readonly("output_names", &PythonDataParallel::output_names)
      .def("close", &PythonDataParallel::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PythonDataParallel& self, py::args) { self.close(); })
      .def("__repr__", &PythonDataParallel::repr);
}

}  // namespace dprun::python
