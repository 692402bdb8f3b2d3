// `dprun train MODEL.onnx`: data-parallel training from .npy files, saved back to ONNX.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "engine/autograd/inference_graph.h"
#include "engine/backend.h"
#include "engine/distributed/rank_failure.h"
#include "engine/parallel/device_list.h"
#include "engine/training/lr_schedule.h"
#include "engine/training/trainer.h"
#include "loader/checkpoint_file.h"
#include "loader/onnx_loader.h"
#include "loader/training_data_files.h"
#include "tools/commands.h"
#include "tools/distributed_cli.h"
#include "tools/inputs.h"
#include "tools/parallel_options.h"
#include "tools/report_files.h"
#include "tools/train_divergence.h"
#include "tools/train_report.h"
#include "tools/train_step.h"
#include "tools/train_target.h"
#include "tools/training_export.h"

namespace dprun::cli {

namespace {

double parse_double(const std::string& text, const std::string& option) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v))
    throw UsageError("--" + option + " must be a number, got '" + text + "'");
  return v;
}

/// parse_double for an option that takes no negative value (--lr, --momentum, ...).
double parse_non_negative(const std::string& text, const std::string& option) {
  const double v = parse_double(text, option);
  if (v < 0) throw UsageError("--" + option + " must be a number >= 0, got '" + text + "'");
  return v;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

/// The indices of the parameters an item of --no-weight-decay or --param-lr names: "1d" every
/// parameter of rank below 2 (the biases and normalization weights of GPT recipes), "PREFIX*"
/// those whose names start so, any other item one parameter by name. Throws UsageError naming
/// `option` for an item that names none.
std::vector<size_t> parameters_named(const char* option, const std::string& item,
                                     const std::vector<std::string>& names,
                                     const std::vector<Tensor>& parameters) {
  std::vector<size_t> matched;
  for (size_t i = 0; i < names.size(); ++i) {
    const bool match = item == "1d" ? parameters[i].rank() < 2
                       : item.ends_with('*')
                           ? names[i].rfind(item.substr(0, item.size() - 1), 0) == 0
                           : names[i] == item;
    if (match) matched.push_back(i);
  }
  if (matched.empty())
    throw UsageError(std::string("--") + option + ": '" + item + "' names no trainable parameter");
  return matched;
}

/// Which parameters --no-weight-decay exempts.
std::vector<bool> decay_exemptions(const std::string& list, const std::vector<std::string>& names,
                                   const std::vector<Tensor>& parameters) {
  std::vector<bool> exempt(names.size(), false);
  for (const std::string& item : split_list(list))
    for (size_t i : parameters_named("no-weight-decay", item, names, parameters)) exempt[i] = true;
  return exempt;
}

/// The learning rates of --param-lr's groups (items PATTERN=LR, patterns as --no-weight-decay's)
/// by parameter, unset for the parameters no group names; empty without the option. Throws
/// UsageError for a malformed item, a bad lr, or a parameter named by two items (PyTorch's
/// param groups are disjoint too).
std::vector<std::optional<double>> parameter_group_lrs(const Args& args,
                                                       const std::vector<std::string>& names,
                                                       const std::vector<Tensor>& parameters) {
  auto list = args.get("param-lr");
  if (!list) return {};
  std::vector<std::optional<double>> lrs(names.size());
  std::vector<std::string> group_of(names.size());
  for (const std::string& item : split_list(*list)) {
    const size_t eq = item.rfind('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("--param-lr: '" + item + "' is not PATTERN=LR");
    const std::string pattern = item.substr(0, eq);
    const double lr = parse_double(item.substr(eq + 1), "param-lr");
    if (!std::isfinite(lr) || lr < 0)
      throw UsageError("--param-lr: '" + item + "' gives an lr that is not a number >= 0");
    for (size_t i : parameters_named("param-lr", pattern, names, parameters)) {
      if (!group_of[i].empty())
        throw UsageError("--param-lr: '" + names[i] + "' is in two groups, '" + group_of[i] +
                         "' and '" + pattern + "'");
      group_of[i] = pattern;
      lrs[i] = lr;
    }
  }
  return lrs;
}

/// The lr of step `step` for the optimizer and for each --param-lr group, each scheduled from
/// its own base as PyTorch's schedulers treat each param group.
void set_scheduled_lrs(Optimizer& optimizer, const LrSchedule& schedule, double base_lr,
                       const std::vector<std::optional<double>>& group_lrs, int64_t step,
                       int64_t steps) {
  optimizer.set_lr(schedule.lr(base_lr, step, steps));
  if (group_lrs.empty()) return;
  std::vector<std::optional<double>> now(group_lrs.size());
  for (size_t i = 0; i < group_lrs.size(); ++i)
    if (group_lrs[i]) now[i] = schedule.lr(*group_lrs[i], step, steps);
  optimizer.set_parameter_lrs(std::move(now));
}

std::unique_ptr<Optimizer> make_optimizer(const Args& args, const Trainer& trainer) {
  std::vector<Tensor> parameters = trainer.parameters();
  std::string kind = args.get("optimizer").value_or("");
  if (kind.empty()) throw UsageError("--optimizer is required (sgd, adam or adamw)");
  auto lr_text = args.get("lr");
  if (!lr_text) throw UsageError("--lr is required");
  double lr = parse_non_negative(*lr_text, "lr");
  auto number = [&](const char* name, double fallback) {
    auto v = args.get(name);
    return v ? parse_non_negative(*v, name) : fallback;
  };
  std::vector<bool> exempt;
  if (auto list = args.get("no-weight-decay"))
    exempt = decay_exemptions(*list, trainer.parameter_names(), parameters);
  auto with_exemptions = [&](std::unique_ptr<Optimizer> optimizer, double weight_decay) {
    if (exempt.empty()) return optimizer;
    if (weight_decay == 0)
      throw UsageError("--no-weight-decay exempts parameters from a weight decay of 0");
    optimizer->exempt_from_weight_decay(exempt);
    return optimizer;
  };
  if (kind == "sgd") {
    if (args.has("betas") || args.has("eps"))
      throw UsageError("--betas and --eps are Adam options, not SGD's");
    const SgdOptions o{.lr = lr,
                       .momentum = number("momentum", 0),
                       .weight_decay = number("weight-decay", 0),
                       .nesterov = args.has("nesterov")};
    return with_exemptions(std::make_unique<Sgd>(std::move(parameters), o), o.weight_decay);
  }
  if (kind != "adam" && kind != "adamw")
    throw UsageError("--optimizer must be sgd, adam or adamw, got '" + kind + "'");
  if (args.has("momentum") || args.has("nesterov"))
    throw UsageError("--momentum and --nesterov are SGD options, not " + kind + "'s");
  AdamOptions o{.lr = lr, .eps = number("eps", 1e-8)};
  o.decoupled_weight_decay = kind == "adamw";
  o.weight_decay = number("weight-decay", o.decoupled_weight_decay ? 0.01 : 0.0);
  if (auto betas = args.get("betas")) {
    auto items = split_list(*betas);
    if (items.size() != 2) throw UsageError("--betas takes two numbers, B1,B2");
    o.beta1 = parse_double(items[0], "betas");
    o.beta2 = parse_double(items[1], "betas");
    if (!(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1))
      throw UsageError("--betas: " + *betas + " are not two numbers in [0, 1)");
  }
  return with_exemptions(std::make_unique<Adam>(std::move(parameters), o), o.weight_decay);
}

struct Schedule {
  int64_t steps = 0;
  bool by_epochs = false;
};

/// The optimizer steps of the run; with --epochs, enough steps of `accumulate` batches each to
/// pass over the data that many times (the last step may run into the next pass).
Schedule parse_schedule(const Args& args, int64_t batches_per_epoch, int64_t accumulate) {
  if (args.has("steps") == args.has("epochs"))
    throw UsageError("give exactly one of --steps N and --epochs N");
  if (args.has("steps")) return {args.get_int("steps", 1, 1, int64_t(1) << 40), false};
  const int64_t batches = args.get_int("epochs", 1, 1, 1 << 20) * batches_per_epoch;
  return {(batches + accumulate - 1) / accumulate, true};
}

std::vector<OptionSpec> train_option_specs() {
  auto specs = parallel_option_specs();
  specs.insert(specs.end(), {{"target"},
                             {"loss"},
                             {"class-dim"},
                             {"ignore-index"},
                             {"label-smoothing"},
                             {"output"},
                             {"optimizer"},
                             {"lr"},
                             {"momentum"},
                             {"nesterov", false},
                             {"weight-decay"},
                             {"no-weight-decay"},
                             {"param-lr"},
                             {"betas"},
                             {"eps"},
                             {"steps"},
                             {"warmup-steps"},
                             {"epochs"},
                             {"shuffle", false},
                             {"no-shuffle", false},
                             {"seed"},
                             {"freeze", true, true},
                             {"val-input", true, true},
                             {"val-target"},
                             {"save"},
                             {"checkpoint-every"},
                             {"json"},
                             {"export-training-graph"},
                             {"precision"},
                             {"loss-scale"},
                             {"clip-grad-norm"},
                             {"accumulate"},
                             {"resume", false},
                             {"lr-schedule"},
                             {"lr-warmup"},
                             {"lr-warmup-start"},
                             {"loss-scale-growth-interval"},
                             {"sync-batchnorm", false},
                             {"log-every"}});
  auto distributed = distributed_option_specs(true);
  specs.insert(specs.end(), distributed.begin(), distributed.end());
  return specs;
}

TrainerOptions parse_trainer_options(const Args& args) {
  TrainerOptions options;
  options.parallel = parse_parallel_options(args);
  auto loss = args.get("loss");
  if (!loss)
    throw UsageError("--loss is required (cross_entropy, nll, mse, l1, bce_with_logits or none)");
  try {
    options.training.loss.kind = parse_loss_kind(*loss);
  } catch (const Error& e) {
    throw UsageError(std::string("--loss: ") + e.what());
  }
  options.training.loss.class_dim = args.get_int("class-dim", 1, -64, 63);
  if (auto ignore = args.get("ignore-index"))
    options.training.loss.ignore_index =
        *ignore == "none"
            ? std::nullopt
            : std::optional<int64_t>(args.get_int("ignore-index", -100, INT64_MIN, INT64_MAX));
  if (auto smoothing = args.get("label-smoothing")) {
    const double v = parse_double(*smoothing, "label-smoothing");
    if (!(v >= 0 && v <= 1))
      throw UsageError("--label-smoothing: " + *smoothing + " is not between 0 and 1");
    if (options.training.loss.kind != LossKind::CrossEntropy)
      throw UsageError("--label-smoothing is for --loss cross_entropy");
    options.training.loss.label_smoothing = v;
  }
  options.training.loss.output = args.get("output").value_or("");
  for (const auto& list : args.all("freeze"))
    for (const auto& name : split_list(list)) options.training.freeze.push_back(name);
  if (auto precision = parse_precision(args)) options.training.precision = *precision;
  options.training.sync_batch_norm = args.has("sync-batchnorm");
  for (const char* option : {"loss-scale", "loss-scale-growth-interval"})
    if (args.has(option) && options.training.precision != DType::Float16)
      throw UsageError(std::string("--") + option +
                       ": only float16 training scales its loss (--precision float16)");
  if (auto scale = args.get("loss-scale")) {
    const double v = parse_double(*scale, "loss-scale");
    if (!(v > 0) || !std::isfinite(static_cast<float>(v)))
      throw UsageError("--loss-scale: " + *scale + " is not a positive float32");
    options.loss_scaling.init_scale = v;
  }
  if (auto clip = args.get("clip-grad-norm")) {
    const double v = parse_double(*clip, "clip-grad-norm");
    if (!(v > 0) || !std::isfinite(v))
      throw UsageError("--clip-grad-norm: " + *clip + " is not a positive number");
    options.max_grad_norm = v;
  }
  options.loss_scaling.growth_interval = args.get_int(
      "loss-scale-growth-interval", options.loss_scaling.growth_interval, 1, int64_t(1) << 40);
  return options;
}

/// --lr-schedule, --lr-warmup and --lr-warmup-start.
LrSchedule parse_lr_schedule_options(const Args& args) {
  LrSchedule schedule;
  try {
    if (auto text = args.get("lr-schedule")) schedule = parse_lr_schedule(*text);
  } catch (const Error& e) {
    throw UsageError(std::string("--lr-schedule: ") + e.what());
  }
  schedule.warmup_steps = args.get_int("lr-warmup", 0, 0, int64_t(1) << 40);
  if (auto start = args.get("lr-warmup-start")) {
    if (!args.has("lr-warmup")) throw UsageError("--lr-warmup-start needs --lr-warmup N");
    const double v = parse_double(*start, "lr-warmup-start");
    if (!(v > 0 && v <= 1)) throw UsageError("--lr-warmup-start: " + *start + " is not in (0, 1]");
    schedule.warmup_start_factor = v;
  }
  return schedule;
}

std::map<std::string, std::string> input_files(const Args& args, const char* option) {
  std::map<std::string, std::string> files;
  for (const auto& spec : args.all(option)) {
    auto [name, path] = split_assignment(spec, option);
    if (files.count(name))
      throw UsageError(std::string("--") + option + " '" + name + "' given twice");
    files[name] = path;
  }
  return files;
}

// The Model of a checkpoint's graph; errors name the file as load_model's do.
Model model_from_graph(std::shared_ptr<Graph> graph, const std::string& path, Device device,
                       const ModelOptions& options) {
  try {
    return Model(std::move(graph), device, options);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

// A model exported in eval mode trains, but its BatchNormalizations keep their running
// statistics frozen and normalize with them: say so once, with the export that trains them.
void say_if_exported_for_inference(const Graph& graph, const std::string& path) {
  const bool has_batch_norm =
      std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const Node& n) {
        return n.op_type == "BatchNormalization" && canonical_domain(n.domain).empty();
      });
  if (!has_batch_norm || !training_mode_nodes(graph).empty()) return;
  std::printf(
      "note: %s was exported for inference: its BatchNormalization nodes normalize with their "
      "running statistics, which training leaves as they are; to train them, export with "
      "torch.onnx.export(..., training=torch.onnx.TrainingMode.TRAINING, "
      "do_constant_folding=False)\n",
      path.c_str());
}

// --log-every, and whether the progress goes to a terminal.
ProgressOptions progress_options(const Args& args) {
  ProgressOptions options;
  options.every_steps = args.get_int("log-every", 0, 1, int64_t(1) << 40);
  options.terminal = isatty(STDERR_FILENO);
  return options;
}

}  // namespace

int train_command(int argc, char** argv, int first) {
  Args args(argc, argv, first, train_option_specs());
  if (args.positionals().size() != 1)
    throw UsageError("expected exactly one model file (see --help)");
  const std::string model_path = args.positionals()[0];
  if (args.has("sync-batchnorm") && args.has("distributed"))
    throw UsageError(
        "--sync-batchnorm sums batch statistics over the devices of one process, not over "
        "--distributed ranks");
  if (args.has("sync-batchnorm") && args.has("export-training-graph"))
    throw UsageError(
        "--export-training-graph writes ai.onnx nodes only, and ONNX has no sum over replicas: "
        "export without --sync-batchnorm");
  // Before the devices are parsed: the ranks on a host share its cores.
  std::optional<DistributedRun> dist = start_distributed(args);
  const bool writes = !dist || dist->is_root();  // only rank 0 writes files
  TrainerOptions options = parse_trainer_options(args);
  if (dist) options.parallel.device_ids = rank_devices(*dist, args, options.parallel.device_ids);
  auto save = args.get("save");
  if (!save) throw UsageError("--save OUT.onnx is required");
  if (args.has("shuffle") && args.has("no-shuffle"))
    throw UsageError("--shuffle and --no-shuffle contradict each other");
  if (args.has("val-target") && !args.has("val-input"))
    throw UsageError("--val-target needs --val-input");
  int64_t batch = args.get_int("batch", 0, 1, int64_t(1) << 30);
  if (batch == 0) throw UsageError("--batch N is required");
  int64_t checkpoint_every = args.get_int("checkpoint-every", 0, 1, int64_t(1) << 40);
  int64_t warmup_steps = args.get_int("warmup-steps", 1, 0, int64_t(1) << 40);
  const ProgressOptions shown = progress_options(args);
  std::string json_path = args.get("json").value_or("");
  std::string export_path = args.get("export-training-graph").value_or("");
  if (writes) check_writable(*save, "save");
  if (writes && !json_path.empty()) check_writable(json_path, "json");
  if (writes && !export_path.empty()) check_writable(export_path, "export-training-graph");

  const std::vector<Device> devices = options.parallel.device_ids;
  if (dist) choose_gradient_backend(*dist, args, devices.front());
  // --precision is the training's (TrainingGraphSpec::precision): the model itself stays float32,
  // its parameters the float32 master weights.
  ModelOptions model_options = parse_model_options(args);
  model_options.precision = DType::Float32;
  // --resume: MODEL is a checkpoint, the training form with the run's state inside.
  std::optional<Checkpoint> checkpoint;
  if (args.has("resume")) checkpoint = read_checkpoint(model_path);
  auto model =
      checkpoint
          ? std::make_shared<Model>(
                model_from_graph(checkpoint->graph, model_path, devices.front(), model_options))
          : std::make_shared<Model>(load_model(model_path, devices.front(), {}, model_options));
  if (writes) say_if_exported_for_inference(model->graph(), model_path);
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<Trainer> single;
  if (dist)
    ddp = std::make_unique<DistributedDataParallel>(model, options, dist->group, dist->options);
  else
    single = std::make_unique<Trainer>(model, options);
  Trainer& trainer = ddp ? ddp->trainer() : *single;
  if (trainer.needs_target() && !args.has("target"))
    throw UsageError("--loss " + loss_kind_name(options.training.loss.kind) +
                     " needs --target FILE.npy");
  if (!trainer.needs_target() && args.has("target"))
    throw UsageError("--loss none takes no --target: the model's output is the loss");

  TrainingDataFiles data_options;
  data_options.input_names = model->input_names();
  data_options.files = apply_initializer_overrides(*model, input_files(args, "input"));
  check_input_names(data_options.files, data_options.input_names);
  if (args.has("target"))
    check_target_fits(model->graph(), options.training.loss, *args.get("target"));
  data_options.target_file = args.get("target").value_or("");
  data_options.labels = class_labels(*model, options.training.loss);
  data_options.dim = options.parallel.dim;
  data_options.batch = batch;
  data_options.shuffle = args.has("shuffle") || (args.has("epochs") && !args.has("no-shuffle"));
  data_options.seed = static_cast<uint64_t>(args.get_int("seed", 0, 0, INT64_MAX));
  for (const Device& d : devices)  // batches for an accelerator are gathered where it reads fast
    if (d.type != DeviceType::CPU) {
      data_options.pin_for = d;
      break;
    }
  // Batches per optimizer step: their gradients are summed, weighted by their shares of the
  // step's rows, before one update.
  const int64_t accumulate = args.get_int("accumulate", 1, 1, 1 << 20);
  data_options.batches_in_use = accumulate;  // a step's batches are gathered before it runs
  TrainingData data = read_training_data(data_options);
  Schedule schedule = parse_schedule(args, data.batches_per_epoch(), accumulate);

  std::optional<Validation> validation;
  if (args.has("val-input")) {
    TrainingDataFiles val = data_options;
    val.files = input_files(args, "val-input");
    val.target_file = args.get("val-target").value_or("");
    val.option_prefix = "val-";
    val.shuffle = false;
    if (trainer.needs_target() && val.target_file.empty())
      throw UsageError("--val-input needs --val-target for this loss");
    validation.emplace(*model, options.training.loss, read_training_data(val));
  }
  std::unique_ptr<Optimizer> optimizer = make_optimizer(args, trainer);
  const double base_lr = optimizer->lr();
  const std::vector<std::optional<double>> group_lrs =
      parameter_group_lrs(args, trainer.parameter_names(), trainer.parameters());
  const LrSchedule lr_schedule = parse_lr_schedule_options(args);
  const CheckpointedRun checkpointed{
      .model = *model,
      .parameter_names = trainer.parameter_names(),
      .optimizer = *optimizer,
      .scaler = trainer.grad_scaler(),
      .seed = data_options.seed,
      .settings = run_settings(options, *model, trainer, *optimizer, batch, accumulate,
                               data_options.shuffle)};
  int64_t first_step = 0;
  if (checkpoint) {
    first_step = restore_training_state(*checkpoint, model_path, checkpointed);
    if (first_step >= schedule.steps)
      fail("--resume: the checkpoint is at step ", first_step, "; a run of ", schedule.steps,
           " steps has none left");
    std::printf("resuming %s at step %lld\n", model_path.c_str(),
                static_cast<long long>(first_step + 1));
  }
  // Each save: the model to serve, then the checkpoint to resume from (with
  // --checkpoint-every). Each file is replaced whole, so a kill between the two leaves the
  // checkpoint of the step before, which resumes to write both again: a checkpoint is never
  // ahead of the model saved beside it.
  auto save_models = [&](int64_t steps_done) {
    save_inference_model(*model, *save);
    if (checkpoint_every) save_checkpoint(checkpoint_path(*save), checkpointed, steps_done);
  };
  if (writes) {  // what a save killed before its rename left behind
    remove_stale_temporaries(*save);
    if (checkpoint_every) remove_stale_temporaries(checkpoint_path(*save));
  }
  if (writes && !export_path.empty()) save_training_graph(trainer, *model, export_path);
  if (dist) {
    // Before any gradient is summed: every option but the per-rank ones (devices, threads,
    // file paths, what only rank 0 does; per_rank_options() in tools/distributed_cli.cpp says
    // why each), the model and the data's rows must be alike on every rank.
    dist->option_facts = option_facts(args, train_option_specs());
    check_ranks_agree_to_start(*dist, *model,
                               {{"the rows of training data", "", std::to_string(data.rows())}});
  }

  std::printf(
      "training %s on %s: %zu parameters, %lld rows, %lld batches of %lld per epoch, %lld steps\n",
      model_path.c_str(), device_list_to_string(devices).c_str(), trainer.parameter_names().size(),
      static_cast<long long>(data.rows()), static_cast<long long>(data.batches_per_epoch()),
      static_cast<long long>(batch), static_cast<long long>(schedule.steps));
  const std::string compressed =
      dist && dist->options.gradient_compression != DType::Float32
          ? ", in " + std::string(dtype_name(dist->options.gradient_compression))
          : "";
  if (ddp)
    std::printf(
        "distributed over %d rank%s (%s): each step, rank r takes rows r, r+%d, ... of the "
        "batch; %zu gradient bucket%s, %s reduction%s\n",
        dist->size(), dist->size() == 1 ? "" : "s", dist->group->backend().c_str(), dist->size(),
        ddp->stats().buckets, ddp->stats().buckets == 1 ? "" : "s",
        dist->options.deterministic        ? "rank-order (deterministic)"
        : dist->group->backend() == "nccl" ? "NCCL's"
                                           : "MPI's",
        compressed.c_str());
  Progress progress(schedule.steps, trainer.grad_scaler(), shown);
  TrainReport report;
  report.devices = devices;
  report.parameters = trainer.parameter_names();
  int64_t samples = 0, epoch_samples = 0;
  double seconds = 0, epoch_seconds = 0, epoch_loss = 0;
  for (int64_t step = first_step; step < schedule.steps; ++step) {
    const StepBatches batches = step_batches(data, step, accumulate, dist, data_options.seed);
    set_scheduled_lrs(*optimizer, lr_schedule, base_lr, group_lrs, step, schedule.steps);
    report.steps.push_back(run_step(batches, ddp.get(), trainer, *optimizer, devices));
    const double loss = report.steps.back().loss, elapsed = report.steps.back().seconds;
    if (!std::isfinite(loss)) {  // every rank holds the same global loss
      std::string message = detail::concat("step ", step + 1, ": the loss is ", loss,
                                           "; training diverged (try a smaller --lr)");
      if (dist) throw CollectiveError(message);
      fail(message);
    }
    check_parameters_finite(*optimizer, trainer.parameter_names(), step + 1, dist.has_value());
    seconds += elapsed;
    epoch_seconds += elapsed;
    samples += batches.rows;
    epoch_samples += batches.rows;
    epoch_loss += loss * static_cast<double>(batches.rows);
    progress.update(step + 1, loss, static_cast<double>(samples) / seconds);
    if (writes && checkpoint_every && (step + 1) % checkpoint_every == 0) save_models(step + 1);
    std::optional<int64_t> epoch = batches.epoch_end;
    if (step + 1 == schedule.steps && !epoch)  // a run that ends within an epoch
      epoch = (step * accumulate + accumulate - 1) / data.batches_per_epoch();
    if (epoch) {
      std::optional<ValidationResult> val;
      if (validation && writes) report.validation.push_back(*(val = validation->run()));
      progress.epoch_done(*epoch, epoch_loss / static_cast<double>(epoch_samples),
                          static_cast<double>(epoch_samples) / epoch_seconds, val);
      epoch_samples = 0;
      epoch_seconds = epoch_loss = 0;
    }
  }
  if (ddp) {
    ddp->check_parameters_in_sync();
    report.ranks = ranks_json(*dist, *ddp);
  }
  // Unless the last step's checkpoint already saved both (written again, a kill could leave a
  // temporary file beside a finished run's).
  if (writes && !(checkpoint_every && schedule.steps % checkpoint_every == 0))
    save_models(schedule.steps);
  report.throughput = measure_throughput(report.steps, warmup_steps);
  if (writes && !json_path.empty()) write_train_json(json_path, report);
  std::printf("last batch loss %.6f, %.1f samples/s", report.steps.back().loss,
              report.throughput.samples_per_s);
  if (report.throughput.warmup_steps > 0)
    std::printf(" after %lld warm-up step%s (%.1f overall)",
                static_cast<long long>(report.throughput.warmup_steps),
                report.throughput.warmup_steps == 1 ? "" : "s",
                report.throughput.overall_samples_per_s);
  if (const GradScaler* scaler = trainer.grad_scaler())
    std::printf("; %lld of %lld steps skipped for overflowing gradients, loss scale now %g",
                static_cast<long long>(scaler->skipped_steps()),
                static_cast<long long>(schedule.steps), static_cast<double>(scaler->scale()));
  std::printf("; saved %s\n", save->c_str());
  return 0;
}

}  // namespace dprun::cli
