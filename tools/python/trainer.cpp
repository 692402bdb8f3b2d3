#include "tools/python/trainer.h"

#include <pybind11/stl.h>

#include "engine/training/ahead_worker.h"

#include "loader/checkpoint_file.h"
#include "loader/onnx_loader.h"
#include "tools/python/arrays.h"
#include "tools/python/data_parallel.h"
#include "tools/python/errors.h"
#include "tools/python/model.h"
#include "tools/python/options.h"
#include "tools/python/pending_step.h"
#include "tools/python/training_session.h"

namespace py = pybind11;

namespace dprun::python {

namespace {

// Raises a pending KeyboardInterrupt (or another signal's exception) before a step starts.
void stop_if_interrupted() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

class PythonTrainer {
 public:
  PythonTrainer(const py::object& model, const py::object& device_ids, py::dict options) {
    std::shared_ptr<const Graph> graph;
    std::string source;
    if (py::isinstance<PythonModel>(model)) {
      const auto& m = model.cast<const PythonModel&>();
      graph = m.graph();
      source = m.source();
    } else {
      source = path_of(model, "Trainer: model (a dprun.Model or a path)");
      py::gil_scoped_release release;
      graph = load_graph(source);
    }
    Keywords keywords("Trainer", std::move(options));
    TrainSettings settings = parse_train_settings(device_ids, keywords);
    py::gil_scoped_release release;
    session_ = std::make_unique<TrainingSession>(std::move(graph), source, std::move(settings));
  }

  // Trainer.resume: the checkpoint's training form with its state.
  PythonTrainer(const std::string& checkpoint_path, const py::object& device_ids, py::dict options,
                bool) {
    Keywords keywords("Trainer.resume", std::move(options));
    TrainSettings settings = parse_train_settings(device_ids, keywords);
    py::gil_scoped_release release;
    const Checkpoint checkpoint = read_checkpoint(checkpoint_path);
    session_ = std::make_unique<TrainingSession>(checkpoint.graph, checkpoint_path,
                                                 std::move(settings), &checkpoint);
  }

  ~PythonTrainer() { close(); }

  py::object step(const py::args& args, const py::kwargs& kwargs) {
    StepBatch batch = step_batch(args, kwargs);
    ready();
    stop_if_interrupted();
    std::optional<double> loss;
    {
      py::gil_scoped_release release;
      loss = open().step(std::move(batch.inputs), std::move(batch.target), batch.input_error);
    }
    // A Ctrl-C that came during the step is raised by the interpreter once this returns: the
    // step is whole, and the caller's loop stops before the next.
    return loss ? py::object(py::float_(*loss)) : py::object(py::none());
  }

  // step() on the Trainer's own thread: returns at once, so that the caller's next batch is
  // made while the devices compute. The arrays are read in place, as step() reads them: they
  // are held (and must not be written) until the step has finished.
  PendingStep step_async(const py::object& self, const py::args& args, const py::kwargs& kwargs) {
    // The batch is read while the last step runs (reading it changes nothing a step uses); then
    // that step is waited for.
    StepBatch batch = step_batch(args, kwargs);
    ready();
    stop_if_interrupted();
    held_ = batch.inputs;  // released here, under the GIL, once the step has finished
    if (batch.target.defined()) held_.push_back(batch.target);
    if (!background_)
      background_ = std::make_unique<AheadWorker<std::optional<double>>>(
          [this](int64_t) { return std::exchange(queued_, {})(); });
    queued_ = [this, b = std::move(batch)]() mutable {
      return open().step(std::move(b.inputs), std::move(b.target), b.input_error);
    };
    outstanding_ = std::make_shared<StepOutcome>();
    background_->request(0);
    return PendingStep{.outcome = outstanding_,
                       .settle = [this] { settle(); },
                       .finished = [this] { return !outstanding_ || background_->ready(); },
                       .owner = self};
  }

  py::dict evaluate(const py::args& args, const py::kwargs& kwargs) {
    ready();
    auto [inputs, target] = batch_of(args, kwargs);
    ValidationResult result;
    {
      py::gil_scoped_release release;
      result = open().evaluate(std::move(inputs), std::move(target));
    }
    py::dict out;
    out["loss"] = result.loss;
    if (result.accuracy) out["accuracy"] = *result.accuracy;
    return out;
  }

  void save(const py::object& path) {
    ready();
    const std::string file = path_of(path, "save: path");
    py::gil_scoped_release release;
    open().save(file);
  }

  void save_checkpoint(const py::object& path) {
    ready();
    const std::string file = path_of(path, "save_checkpoint: path");
    py::gil_scoped_release release;
    open().save_checkpoint(file);
  }

  double lr() { return ready().lr(); }
  void set_lr(const py::object& lr) {
    ready();
    const std::optional<double> value = number_of(lr);
    if (!value)
      raise("lr must be a number, got " +
            std::string(py::str(py::type::handle_of(lr).attr("__name__"))));
    open().set_lr(*value);
  }

  int64_t steps() { return ready().steps_done(); }
  int rank() { return open().rank(); }
  int world_size() { return open().world_size(); }
  int64_t pending() { return ready().pending_batches(); }

  // The trained parameters by name, as copies.
  py::dict parameters() {
    TrainingSession& s = ready();
    py::dict out;
    const std::vector<std::string>& names = s.trainer().parameter_names();
    const std::vector<Tensor> values = s.trainer().parameters();
    for (size_t i = 0; i < names.size(); ++i)
      out[py::str(names[i])] = numpy_from_tensor(values[i].to(Device::cpu(), true));
    return out;
  }

  std::vector<std::string> input_names() { return open().model().input_names(); }
  std::vector<std::string> device_ids() {
    std::vector<std::string> names;
    for (const Device& d : open().trainer().devices()) names.push_back(d.to_string());
    return names;
  }

  // Waits for a step in the background (its error, if any, stays with its PendingStep).
  void close() {
    settle();
    py::gil_scoped_release release;
    background_.reset();
    session_.reset();
  }

  // Waits for the step in the background, if one is running, and records its outcome.
  void settle() {
    if (!outstanding_) return;
    const std::shared_ptr<StepOutcome> outcome = std::exchange(outstanding_, nullptr);
    {
      py::gil_scoped_release release;
      try {
        outcome->loss = background_->take();
      } catch (...) {
        outcome->error = std::current_exception();
      }
    }
    outcome->settled = true;
    held_.clear();
    last_outcome_ = outcome;
  }

 private:
  // The arrays of one step's batch and, of several ranks, the error this rank met reading them.
  struct StepBatch {
    std::vector<Tensor> inputs;
    Tensor target;
    std::exception_ptr input_error;  // every rank learns of it in the step
  };

  StepBatch step_batch(const py::args& args, const py::kwargs& kwargs) {
    StepBatch batch;
    const bool ranks = open().world_size() > 1;
    try {
      std::tie(batch.inputs, batch.target) = batch_of(args, kwargs);
    } catch (const Error&) {
      if (!ranks) throw;
      batch.input_error = std::current_exception();
    } catch (const py::error_already_set& e) {
      if (!ranks) throw;
      batch.input_error = std::make_exception_ptr(Error(one_line(e)));
    }
    return batch;
  }

  TrainingSession& open() {
    if (!session_) raise("the Trainer is closed");
    return *session_;
  }

  // open() once the step in the background has finished. A step that failed and whose
  // PendingStep has not raised it raises here, so that a failed step stops the caller's loop.
  TrainingSession& ready() {
    settle();
    if (const auto outcome = std::exchange(last_outcome_, nullptr);
        outcome && outcome->error && !outcome->error_raised) {
      outcome->error_raised = true;
      std::rethrow_exception(outcome->error);
    }
    return open();
  }

  // The batch of a step or evaluate call: inputs by position or name, `target=` apart.
  std::pair<std::vector<Tensor>, Tensor> batch_of(const py::args& args, const py::kwargs& kwargs) {
    TrainingSession& s = open();
    py::dict named;
    py::object target = py::none();
    for (const auto& [key, value] : kwargs) {
      if (std::string(py::str(key)) == "target")
        target = py::reinterpret_borrow<py::object>(value);
      else
        named[key] = value;
    }
    // A transformed input (layout=, normalize=) is given as stored: the session checks it
    // against the model's type once transformed.
    std::vector<ValueInfo> given;
    for (const ValueInfo* input : s.model().graph().required_inputs()) {
      given.push_back(*input);
      if (s.settings().transforms.count(input->name)) given.back().type = TensorType{};
    }
    std::vector<const ValueInfo*> declared;
    for (const ValueInfo& input : given) declared.push_back(&input);
    std::vector<Tensor> inputs = feeds_of(declared, args, named);
    Tensor t;
    if (!target.is_none()) t = tensor_from_python(target, "target", TensorType{});
    return {std::move(inputs), std::move(t)};
  }

  std::unique_ptr<TrainingSession> session_;
  // step_async: the thread that runs the steps, the step it is given, the arrays that step
  // reads, and the outcome of the running step and of the last one settled.
  std::unique_ptr<AheadWorker<std::optional<double>>> background_;
  std::function<std::optional<double>()> queued_;
  std::vector<Tensor> held_;
  std::shared_ptr<StepOutcome> outstanding_;
  std::shared_ptr<StepOutcome> last_outcome_;
};

}  // namespace

void register_trainer(py::module_& m) {
  py::class_<PythonTrainer>(
      m, "Trainer",
      "Trainer(model, device_ids=None, loss=..., optimizer=..., lr=..., **options): trains a "
      "model exported for training as `dprun train` does, one batch per step() call. options: "
      "every training option of `dprun train` that names no file or step count, with "
      "underscores (docs/python.md).")
      .def(py::init([](const py::object& model, const py::object& device_ids,
                       const py::kwargs& options) {
             return std::make_unique<PythonTrainer>(model, device_ids, py::dict(options));
           }),
           py::arg("model"), py::arg("device_ids") = py::none())
      .def_static(
          "resume",
          [](const py::object& path, const py::object& device_ids, const py::kwargs& options) {
            const std::string file = path_of(path, "Trainer.resume: path");
            return std::make_unique<PythonTrainer>(file, device_ids, py::dict(options), true);
          },
          py::arg("path"), py::arg("device_ids") = py::none(),
          "A Trainer from a checkpoint that save_checkpoint wrote, with the same options (a "
          "setting that changes the arithmetic and differs is refused; lr may change).")
      .def("step", &PythonTrainer::step,
           "step(*inputs, target=None): one batch; returns its loss after the update (with "
           "accumulate=N: None on the first N-1 calls, then the step's loss).")
      .def(
          "step_async",
          [](const py::object& self, const py::args& args, const py::kwargs& kwargs) {
            return self.cast<PythonTrainer&>().step_async(self, args, kwargs);
          },
          "step_async(*inputs, target=None): step() started on the Trainer's own thread; "
          "returns a PendingStep at once, so the next batch is made while this one trains. The "
          "arrays are read in place until the step finishes; the Trainer's next call waits for "
          "it.")
      .def("evaluate", &PythonTrainer::evaluate,
           "evaluate(*inputs, target=None): {'loss': ..., 'accuracy': ...} of the inference "
           "form on one batch (accuracy for class losses).")
      .def("save", &PythonTrainer::save, py::arg("path"),
           "Writes the inference form of the model, as `dprun train --save` (distributed: rank 0 "
           "writes, the other ranks do nothing).")
      .def("save_checkpoint", &PythonTrainer::save_checkpoint, py::arg("path"),
           "Writes a checkpoint to resume from (Trainer.resume), as --checkpoint-every "
           "(distributed: rank 0 writes).")
      .def_property("lr", &PythonTrainer::lr, &PythonTrainer::set_lr,
                    "The learning rate of the steps that follow.")
      .def_property_readonly("steps", &PythonTrainer::steps, "Optimizer steps done.")
      .def_property_readonly("rank", &PythonTrainer::rank,
                             "This process's rank with distributed=True (mpirun); 0 without.")
      .def_property_readonly("world_size", &PythonTrainer::world_size,
                             "The job's ranks with distributed=True; 1 without.")
      .def_property_readonly("pending", &PythonTrainer::pending,
                             "Batches kept for the next step (accumulate).")
      .def("parameters", &PythonTrainer::parameters,
           "The trained parameters by name, as NumPy copies.")
      .def_property_readonly("input_names", &PythonTrainer::input_names)
      .def_property_readonly("device_ids", &PythonTrainer::device_ids)
      .def("close", &PythonTrainer::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PythonTrainer& self, py::args) { self.close(); });
}

}  // namespace dprun::python
