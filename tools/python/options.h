#pragma once
// The keyword arguments of dprun.DataParallel and dprun.Trainer: the options of `dprun run`
// and `dprun train` with underscores for dashes, read from Python values and checked as the
// command line checks its flags. Every message names the keyword.
#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/parallel/data_parallel.h"
#include "engine/training/distributed_job.h"
#include "engine/training/input_transform.h"
#include "engine/training/optimizer_settings.h"
#include "engine/training/trainer.h"

namespace dprun::python {

/// `value` as a double: an int, a float or anything with __float__ (NumPy scalars), but not a
/// bool or a str; nullopt for anything else.
std::optional<double> number_of(const pybind11::handle& value);

/// Keyword arguments being read: each take_* removes its keyword, and finish() refuses any
/// left, naming the first and the keywords `owner` takes.
class Keywords {
 public:
  Keywords(std::string owner, pybind11::dict kwargs);
  /// The value of `name` (None included), or nullopt when it is absent.
  std::optional<pybind11::object> take_raw(const std::string& name);
  /// The value of `name`, or nullopt when it is absent or None.
  std::optional<pybind11::object> take(const std::string& name);
  std::optional<double> take_number(const std::string& name);
  std::optional<int64_t> take_integer(const std::string& name);
  std::optional<bool> take_bool(const std::string& name);
  std::optional<std::string> take_text(const std::string& name);
  /// A str of comma-separated items, or a list or tuple of str.
  std::vector<std::string> take_texts(const std::string& name);
  /// Throws Error "OWNER got an unexpected keyword 'NAME' (it takes: a, b, ...)" for a
  /// keyword no take_* read; `known` lists the keywords `owner` takes, for the message.
  void finish(const std::vector<std::string>& known) const;
  const std::string& owner() const { return owner_; }

 private:
  std::string owner_;
  pybind11::dict kwargs_;
};

/// The devices of `device_ids`: None or "all" all_devices(); a str as `--devices` takes it
/// ("cpu:0,cpu:1", "cpu", "0,1"); a list or tuple of str ("cpu:0", "cuda:1") and int (CUDA
/// ids); an empty list: no devices (the model runs as it is, on cpu:0). Each device is checked
/// to be usable (a build without CUDA refuses cuda:N).
std::vector<Device> parse_device_ids(const pybind11::handle& device_ids);

/// The keywords DataParallel and Trainer share with `dprun run`: split, split_policy, weights,
/// threads (into `parallel`) and allow_tf32, allow_winograd, precision (into `compile`;
/// precision only when `precision_converts`, as run converts the model).
void take_parallel_options(Keywords& keywords, DataParallelOptions& parallel, ModelOptions& compile,
                           bool precision_converts);
/// The keywords take_parallel_options reads.
std::vector<std::string> parallel_keywords(bool with_precision);

/// What dprun.Trainer's keywords set: the Trainer's options and the optimizer's.
struct TrainSettings {
  TrainerOptions trainer;
  ModelOptions compile;
  OptimizerSettings optimizer;
  int64_t accumulate = 1;
  uint64_t seed = 0;
  /// With distributed=True: this process's rank of the MPI job (joined before the devices are
  /// read, so that the ranks of a host share its cores) and the group the gradients are summed
  /// over (dist_backend); null otherwise.
  std::shared_ptr<DistributedJob> job;
  /// layout= and normalize=, by input name: each batch given to step() and evaluate() is
  /// transformed before it is checked (as `dprun train --layout/--normalize`).
  std::map<std::string, InputTransform> transforms;
};

/// Reads dprun.Trainer's keywords (and those of Trainer.resume) into settings, checked as
/// `dprun train` checks its flags; `device_ids` as parse_device_ids.
TrainSettings parse_train_settings(const pybind11::handle& device_ids, Keywords& keywords);
/// Every keyword dprun.Trainer takes, in the order the docs list them.
std::vector<std::string> train_keywords();

}  // namespace dprun::python
