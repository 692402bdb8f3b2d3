// `dprun train MODEL.onnx`: data-parallel training from .npy files, saved back to ONNX.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

#include "engine/autograd/inference_graph.h"
#include "engine/backend.h"
#include "engine/distributed/rank_failure.h"
#include "engine/parallel/device_list.h"
#include "engine/training/lr_schedule.h"
#include "engine/training/optimizer_settings.h"
#include "engine/training/preprocessing_graph.h"
#include "engine/training/trainer.h"
#include "engine/training/training_run.h"
#include "loader/checkpoint_file.h"
#include "loader/onnx_loader.h"
#include "loader/training_data_files.h"
#include "loader/training_run_files.h"
#include "tools/commands.h"
#include "tools/distributed_cli.h"
#include "tools/inputs.h"
#include "tools/parallel_options.h"
#include "tools/process_memory.h"
#include "tools/profile_report.h"
#include "tools/report_files.h"
#include "tools/train_report.h"
#include "tools/training_export.h"
#include "tools/transform_flags.h"

namespace dprun::cli {

namespace {

// The options as given on the command line.
struct TrainFlags {
  std::string model;
  DeviceFlags devices;
  std::vector<std::string> inputs, val_inputs, freeze;
  std::optional<std::string> target, val_target, loss, ignore_index, output, optimizer, betas,
      no_weight_decay, param_lr, save, json, export_graph, precision, lr_schedule;
  std::optional<int64_t> batch, steps, epochs, warmup_steps, seed, accumulate, class_dim,
      checkpoint_every, log_every, lr_warmup, loss_scale_growth_interval, external_data_threshold;
  std::optional<double> lr, momentum, weight_decay, eps, label_smoothing, lr_warmup_start,
      clip_grad_norm, loss_scale;
  bool nesterov = false, shuffle = false, no_shuffle = false, sync_batchnorm = false,
       resume = false, profile = false, embed_preprocessing = false;
  TransformFlags transforms;
  DistributedFlags distributed;
};

constexpr int64_t kManySteps = int64_t(1) << 40;

// The data a step reads and how the run walks over it.
void add_data_options(CLI::App& app, TrainFlags& f) {
  const std::string group = "data";
  CLI::Option* shuffle = nullptr;
  CLI::Option* val_input = nullptr;
  for (CLI::Option* option :
       {add_texts(app, "--input", "NAME=FILE.npy", f.inputs,
                  "the rows of input NAME (split along --dim); repeatable, required")
            ->required(),
        add_text(app, "--target", "FILE.npy", f.target,
                 "the labels or targets, one row per sample"),
        add_integer(app, "--batch", "N", f.batch, 1, 1 << 30,
                    "rows per step (required); a last partial batch is used as it is")
            ->required(),
        add_integer(app, "--steps", "N", f.steps, 1, kManySteps,
                    "optimizer steps (this or --epochs)"),
        add_integer(app, "--epochs", "N", f.epochs, 1, 1 << 20,
                    "passes over the data (this or --steps)")
            ->excludes("--steps"),
        add_integer(app, "--accumulate", "N", f.accumulate, 1, 1 << 20,
                    "each optimizer step sums the gradients of N batches of --batch rows "
                    "(each weighted by its share of the step's rows) before one update"),
        shuffle = add_flag(app, "--shuffle", f.shuffle,
                           "reshuffle each epoch from --seed (default: shuffle with --epochs)"),
        add_flag(app, "--no-shuffle", f.no_shuffle, "keep the rows in order")->excludes(shuffle),
        add_integer(app, "--seed", "N", f.seed, 0, INT64_MAX, "the shuffle's seed (default 0)"),
        val_input = add_texts(app, "--val-input", "NAME=FILE", f.val_inputs,
                              "validation loss (and accuracy) after each epoch on these rows; "
                              "repeatable"),
        add_text(app, "--val-target", "FILE", f.val_target, "the validation rows' targets")
            ->needs(val_input)})
    option->group(group);
  add_transform_options(app, f.transforms, true);
}

void add_loss_options(CLI::App& app, TrainFlags& f) {
  const std::string group = "loss";
  for (CLI::Option* option :
       {add_text(app, "--loss", "L", f.loss,
                 "cross_entropy | nll | mse | l1 | bce_with_logits | none (the output is the "
                 "loss), each the mean over the batch (required)")
            ->required(),
        add_integer(app, "--class-dim", "D", f.class_dim, -64, 63,
                    "class dim of the output for cross_entropy and nll (default 1)"),
        add_text(app, "--ignore-index", "N|none", f.ignore_index,
                 "cross_entropy and nll leave out targets equal to N (default -100, as "
                 "PyTorch)"),
        add_number(app, "--label-smoothing", "F", f.label_smoothing, NumberRule::Finite,
                   "cross_entropy's label smoothing in [0, 1] (default 0)"),
        add_text(app, "--output", "NAME", f.output,
                 "the output the loss reads (default: the first)")})
    option->group(group);
}

void add_optimizer_options(CLI::App& app, TrainFlags& f) {
  const std::string group = "optimizer";
  CLI::Option* lr_warmup = nullptr;
  for (CLI::Option* option :
       {add_text(app, "--optimizer", "O", f.optimizer, "sgd | adam | adamw (required)")->required(),
        add_number(app, "--lr", "F", f.lr, NumberRule::NonNegative, "the learning rate (required)")
            ->required(),
        add_number(app, "--momentum", "F", f.momentum, NumberRule::NonNegative,
                   "SGD's momentum, as torch.optim.SGD"),
        add_flag(app, "--nesterov", f.nesterov, "SGD's Nesterov momentum"),
        add_number(app, "--weight-decay", "F", f.weight_decay, NumberRule::NonNegative,
                   "as torch.optim (default 0, 0.01 for adamw)"),
        add_text(app, "--betas", "B1,B2", f.betas, "Adam's betas (default 0.9,0.999)"),
        add_number(app, "--eps", "F", f.eps, NumberRule::NonNegative, "Adam's eps (default 1e-8)"),
        add_text(app, "--no-weight-decay", "LIST", f.no_weight_decay,
                 "parameters updated without weight decay (a param group with weight_decay "
                 "0): names, PREFIX* patterns, or 1d for every parameter of rank below 2 "
                 "(biases, normalization weights)"),
        add_text(app, "--param-lr", "LIST", f.param_lr,
                 "param groups with their own lr: PATTERN=LR items, patterns as "
                 "--no-weight-decay's (e.g. 'head.*=0.1'); --lr-schedule schedules each group "
                 "from its own lr"),
        add_texts(app, "--freeze", "NAME,...", f.freeze, "initializers not to train"),
        add_text(app, "--lr-schedule", "S", f.lr_schedule,
                 "the lr of each step, as torch.optim.lr_scheduler stepped after each update: "
                 "constant (default), step:SIZE[:GAMMA] (StepLR, gamma 0.1), "
                 "exponential:GAMMA, cosine[:ETA_MIN] (CosineAnnealingLR over the steps after "
                 "the warm-up), linear[:END_FACTOR] (decay to END_FACTOR times --lr, default "
                 "0); --json lists lrs"),
        lr_warmup = add_integer(app, "--lr-warmup", "N", f.lr_warmup, 0, kManySteps,
                                "first a linear warm-up over N steps from --lr-warmup-start "
                                "times --lr to --lr"),
        add_number(app, "--lr-warmup-start", "F", f.lr_warmup_start, NumberRule::Finite,
                   "the warm-up's first factor, in (0, 1] (default 1/3, LinearLR's)")
            ->needs(lr_warmup),
        add_number(app, "--clip-grad-norm", "F", f.clip_grad_norm, NumberRule::Finite,
                   "clip the gradients to total 2-norm F before each update "
                   "(torch.nn.utils.clip_grad_norm_); --json lists grad_norms")})
    option->group(group);
}

void add_precision_options(CLI::App& app, TrainFlags& f) {
  const std::string group = "precision";
  for (CLI::Option* option :
       {add_precision_option(app, f.precision,
                             "float32 (default), bfloat16 or float16: mixed precision, the "
                             "passes in 16 bits with float32 parameters, gradients, optimizer "
                             "and loss; float16 scales the loss dynamically as PyTorch's "
                             "GradScaler"),
        add_number(app, "--loss-scale", "F", f.loss_scale, NumberRule::Finite,
                   "float16: the initial loss scale (default 65536)"),
        add_integer(app, "--loss-scale-growth-interval", "N", f.loss_scale_growth_interval, 1,
                    kManySteps,
                    "float16: double the scale after N steps without an overflow (default "
                    "2000); an overflow skips the step, halves the scale"),
        add_flag(app, "--sync-batchnorm", f.sync_batchnorm,
                 "training-mode BatchNormalization normalizes with the statistics of the "
                 "whole batch, summed over the devices (PyTorch's SyncBatchNorm), not each "
                 "device's chunk: several devices then train as one. Not with --distributed "
                 "(it sums over the devices of one process) nor --export-training-graph (ONNX "
                 "has no sum over replicas)")})
    option->group(group);
}

// What the run writes and shows.
void add_output_options(CLI::App& app, TrainFlags& f) {
  const std::string group = "saving and reporting";
  for (CLI::Option* option :
       {add_text(app, "--save", "OUT.onnx", f.save,
                 "the trained model to serve (required): its inference form, with "
                 "BatchNormalization on the running statistics and Dropout off")
            ->required(),
        add_flag(
            app, "--embed-preprocessing", f.embed_preprocessing,
            "write --layout and --normalize into the saved model as ONNX nodes (Cast, Div, "
            "Sub, Div, Transpose) in front of its inputs: it then takes the stored rows (uint8 "
            "NHWC images) directly and gives what the training-time pipeline gave"),
        add_integer(app, "--checkpoint-every", "N", f.checkpoint_every, 1, kManySteps,
                    "every N steps also write OUT.ckpt.onnx: the training form with the "
                    "optimizer's state, to resume from (replaced whole: a kill never loses it)"),
        add_integer(app, "--external-data-threshold", "BYTES", f.external_data_threshold, 0,
                    INT64_MAX,
                    "write the tensors to OUT.onnx.data beside the model when they hold more than "
                    "BYTES in all (default 2000000000, inside protobuf's 2 GiB limit); 0 writes "
                    "every tensor of 1 KiB or more there"),
        add_flag(app, "--resume", f.resume,
                 "MODEL is such a checkpoint: continue the run where it stopped (the same "
                 "data, batch, devices and options; --steps counts the whole run)"),
        add_integer(app, "--log-every", "N", f.log_every, 1, kManySteps,
                    "print a progress line every N steps (default: on a terminal a bar, else a "
                    "line every 10 seconds)"),
        add_integer(app, "--warmup-steps", "N", f.warmup_steps, 0, kManySteps,
                    "steps left out of the reported samples/s (default 1: the first step "
                    "builds buffers and kernels); the overall figure is reported too"),
        add_text(app, "--json", "FILE", f.json,
                 "losses, step_seconds, data_wait_seconds (how long each step waited for "
                 "its batches), samples_per_s (after the warm-up), "
                 "samples_per_s_overall, warmup_steps, devices, peak_bytes per device; in "
                 "float16 also loss_scales and skipped_steps"),
        add_text(app, "--export-training-graph", "FILE", f.export_graph,
                 "the training graph (loss and <param>_grad outputs) as ONNX"),
        add_flag(app, "--profile", f.profile,
                 "after the run, the time of each op type (forward and backward apart), the "
                 "slowest nodes with their input shapes, each device's node time and the time "
                 "outside the nodes, over the steps after the warm-up (each node is timed "
                 "alone: those steps run slower); in --json too")})
    option->group(group);
}

std::unique_ptr<CLI::App> train_app(TrainFlags& f) {
  auto app = command_app(
      "usage: dprun train MODEL.onnx --input NAME=FILE.npy --target FILE.npy --loss L\n"
      "                   --optimizer O --lr F --batch N (--steps N | --epochs N) --save "
      "OUT.onnx\n"
      "train data-parallel from .npy files and save the trained model to ONNX",
      kTestingAids);
  add_model_path(*app, f.model);
  add_device_options(*app, f.devices);
  add_data_options(*app, f);
  add_loss_options(*app, f);
  add_optimizer_options(*app, f);
  add_precision_options(*app, f);
  add_output_options(*app, f);
  add_distributed_options(*app, f.distributed, true);
  app->get_option("--sync-batchnorm")->excludes("--distributed");
  app->get_option("--sync-batchnorm")->excludes("--export-training-graph");
  return app;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

/// The library's Error for a setting the command line was given, as a UsageError.
template <class F>
auto usage_errors_of(F&& f) {
  try {
    return f();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

/// --param-lr's items, PATTERN=LR. Throws UsageError for a malformed item or a bad lr.
std::vector<std::pair<std::string, double>> param_lr_items(const std::string& list) {
  std::vector<std::pair<std::string, double>> items;
  for (const std::string& item : split_list(list)) {
    const size_t eq = item.rfind('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("--param-lr: '" + item + "' is not PATTERN=LR");
    char* end = nullptr;
    const std::string lr_text = item.substr(eq + 1);
    const double lr = std::strtod(lr_text.c_str(), &end);
    if (lr_text.empty() || *end != '\0')
      throw UsageError("--param-lr must be a number, got '" + lr_text + "'");
    if (!std::isfinite(lr) || lr < 0)
      throw UsageError("--param-lr: '" + item + "' gives an lr that is not a number >= 0");
    items.emplace_back(item.substr(0, eq), lr);
  }
  return items;
}

/// The learning rates of --param-lr's groups (items PATTERN=LR, patterns as --no-weight-decay's)
/// by parameter, unset for the parameters no group names; empty without the option. Throws
/// UsageError for a malformed item, a bad lr, or a parameter named by two items (PyTorch's
/// param groups are disjoint too).
std::vector<std::optional<double>> parameter_group_lrs(const std::optional<std::string>& list,
                                                       const Trainer& trainer) {
  if (!list) return {};
  const OptimizerSettings settings{.param_lr = param_lr_items(*list)};
  return usage_errors_of(
      [&] { return dprun::parameter_group_lrs(settings, trainer, OptionSpelling::Flag); });
}

// One of --betas' numbers.
double beta(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') throw UsageError("--betas must be numbers, got '" + text + "'");
  return v;
}

/// --betas B1,B2. Throws UsageError unless it is two numbers.
std::array<double, 2> betas_of(const std::string& text) {
  const std::vector<std::string> items = split_list(text);
  if (items.size() != 2) throw UsageError("--betas takes two numbers, B1,B2");
  return {beta(items[0]), beta(items[1])};
}

/// The optimizer the flags ask for (--param-lr apart: parameter_group_lrs reads it).
OptimizerSettings optimizer_settings(const TrainFlags& f) {
  OptimizerSettings s{.kind = *f.optimizer,
                      .lr = *f.lr,
                      .momentum = f.momentum,
                      .nesterov = f.nesterov,
                      .weight_decay = f.weight_decay,
                      .eps = f.eps};
  if (f.betas) {
    s.betas = betas_of(*f.betas);
    s.betas_text = *f.betas;
  }
  if (f.no_weight_decay) s.no_weight_decay = split_list(*f.no_weight_decay);
  return s;
}

/// The optimizer of the flags; a setting it refuses is a UsageError.
std::unique_ptr<Optimizer> make_optimizer(const TrainFlags& f, const Trainer& trainer) {
  const OptimizerSettings settings = optimizer_settings(f);
  usage_errors_of([&] { check_optimizer_settings(settings, trainer, OptionSpelling::Flag); });
  return dprun::make_optimizer(settings, trainer, OptionSpelling::Flag);
}

struct Schedule {
  int64_t steps = 0;
  bool by_epochs = false;
};

/// The optimizer steps of the run; with --epochs, enough steps of `accumulate` batches each to
/// pass over the data that many times (the last step may run into the next pass).
Schedule parse_schedule(const TrainFlags& f, int64_t batches_per_epoch, int64_t accumulate) {
  if (f.steps) return {*f.steps, false};
  const int64_t batches = *f.epochs * batches_per_epoch;
  return {(batches + accumulate - 1) / accumulate, true};
}

TrainerOptions parse_trainer_options(const TrainFlags& f) {
  TrainerOptions options;
  options.parallel = parallel_options(f.devices);
  const auto& loss = f.loss;
  try {
    options.training.loss.kind = parse_loss_kind(*loss);
  } catch (const Error& e) {
    throw UsageError(std::string("--loss: ") + e.what());
  }
  options.training.loss.class_dim = f.class_dim.value_or(1);
  if (const auto& ignore = f.ignore_index)
    options.training.loss.ignore_index =
        *ignore == "none" ? std::nullopt
                          : std::optional<int64_t>(parse_int(*ignore, "--ignore-index"));
  if (const auto& smoothing = f.label_smoothing) {
    const double v = *smoothing;
    if (!(v >= 0 && v <= 1))
      throw UsageError("--label-smoothing: " + detail::concat(v) + " is not between 0 and 1");
    if (options.training.loss.kind != LossKind::CrossEntropy)
      throw UsageError("--label-smoothing is for --loss cross_entropy");
    options.training.loss.label_smoothing = v;
  }
  options.training.loss.output = f.output.value_or("");
  for (const auto& list : f.freeze)
    for (const auto& name : split_list(list)) options.training.freeze.push_back(name);
  if (auto precision = precision_of(f.precision)) options.training.precision = *precision;
  options.training.sync_batch_norm = f.sync_batchnorm;
  const bool scales_loss = options.training.precision == DType::Float16;
  if (!scales_loss && (f.loss_scale || f.loss_scale_growth_interval))
    throw UsageError(std::string(f.loss_scale ? "--loss-scale" : "--loss-scale-growth-interval") +
                     ": only float16 training scales its loss (--precision float16)");
  if (const auto& scale = f.loss_scale) {
    if (!(*scale > 0) || !std::isfinite(static_cast<float>(*scale)))
      throw UsageError("--loss-scale: " + detail::concat(*scale) + " is not a positive float32");
    options.loss_scaling.init_scale = *scale;
  }
  if (const auto& clip = f.clip_grad_norm) {
    if (!(*clip > 0))
      throw UsageError("--clip-grad-norm: " + detail::concat(*clip) + " is not a positive number");
    options.max_grad_norm = *clip;
  }
  options.loss_scaling.growth_interval =
      f.loss_scale_growth_interval.value_or(options.loss_scaling.growth_interval);
  return options;
}

/// --lr-schedule, --lr-warmup and --lr-warmup-start.
LrSchedule parse_lr_schedule_options(const TrainFlags& f) {
  LrSchedule schedule;
  try {
    if (const auto& text = f.lr_schedule) schedule = parse_lr_schedule(*text);
  } catch (const Error& e) {
    throw UsageError(std::string("--lr-schedule: ") + e.what());
  }
  schedule.warmup_steps = f.lr_warmup.value_or(0);
  if (const auto& start = f.lr_warmup_start) {
    if (!(*start > 0 && *start <= 1))
      throw UsageError("--lr-warmup-start: " + detail::concat(*start) + " is not in (0, 1]");
    schedule.warmup_start_factor = *start;
  }
  return schedule;
}

std::map<std::string, std::string> input_files(const std::vector<std::string>& specs,
                                               const char* option) {
  std::map<std::string, std::string> files;
  for (const auto& spec : specs) {
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
ProgressOptions progress_options(const std::optional<int64_t>& log_every) {
  ProgressOptions options;
  options.every_steps = log_every.value_or(0);
  options.terminal = isatty(STDERR_FILENO);
  return options;
}

// --save, --json and --export-training-graph name files that can be written.
void check_outputs_writable(const TrainFlags& f) {
  check_writable(*f.save, "save");
  if (f.json && !f.json->empty()) check_writable(*f.json, "json");
  if (f.export_graph && !f.export_graph->empty())
    check_writable(*f.export_graph, "export-training-graph");
}

// --target is given exactly when the loss takes one.
void check_target_given(const TrainFlags& f, const Trainer& trainer, LossKind loss) {
  if (trainer.needs_target() && !f.target)
    throw UsageError("--loss " + loss_kind_name(loss) + " needs --target FILE.npy");
  if (!trainer.needs_target() && f.target)
    throw UsageError("--loss none takes no --target: the model's output is the loss");
}

// The training data's files and how they are batched: --input, --target, --batch, the
// shuffle (by default with --epochs), --seed; a step's `accumulate` batches are gathered
// before it runs. The target file is checked against the model's output before it is read.
TrainingDataFiles training_data_files(const TrainFlags& f, Model& model,
                                      const TrainerOptions& options,
                                      const std::vector<Device>& devices, int64_t accumulate) {
  TrainingDataFiles data_options;
  data_options.input_names = model.input_names();
  data_options.files = apply_initializer_overrides(model, input_files(f.inputs, "input"));
  check_input_names(data_options.files, data_options.input_names);
  if (f.target) check_target_fits(model.graph(), options.training.loss, *f.target);
  data_options.target_file = f.target.value_or("");
  data_options.labels = class_labels(model, options.training.loss);
  data_options.dim = options.parallel.dim;
  data_options.batch = *f.batch;
  data_options.shuffle = f.shuffle || (f.epochs && !f.no_shuffle);
  data_options.seed = static_cast<uint64_t>(f.seed.value_or(0));
  for (const Device& d : devices)  // batches for an accelerator are gathered where it reads fast
    if (d.type != DeviceType::CPU) {
      data_options.pin_for = d;
      break;
    }
  // A step's batches are gathered before it runs, and the next step's while it runs.
  data_options.batches_in_use = 2 * accumulate;
  data_options.transforms = input_transforms(f.transforms);
  check_transforms_fit(model, data_options.transforms);
  if (f.embed_preprocessing && data_options.transforms.empty())
    throw UsageError(
        "--embed-preprocessing needs --layout or --normalize: there is nothing to embed");
  return data_options;
}

// --val-input and --val-target: the held-out rows validated at each epoch's end, batched as
// the training data but never shuffled.
std::optional<Validation> validation_of(const TrainFlags& f, const TrainingDataFiles& data_options,
                                        const Model& model, const Trainer& trainer,
                                        const LossSpec& loss) {
  if (f.val_inputs.empty()) return std::nullopt;
  TrainingDataFiles val = data_options;
  val.files = input_files(f.val_inputs, "val-input");
  val.target_file = f.val_target.value_or("");
  val.option_prefix = "val-";
  val.shuffle = false;
  val.evaluation = true;  // no augmentation: the evaluation transform
  if (trainer.needs_target() && val.target_file.empty())
    throw UsageError("--val-input needs --val-target for this loss");
  return std::optional<Validation>(std::in_place, model, loss, read_training_data(val));
}

// The run's settings with those of its transforms, which a resumed run must share.
std::vector<RunSetting> with_transform_settings(
    std::vector<RunSetting> settings, const std::map<std::string, InputTransform>& transforms) {
  for (RunSetting& s : transform_settings(transforms)) settings.push_back(std::move(s));
  return settings;
}

// --embed-preprocessing: the saved model takes the stored rows of the training files.
std::function<Graph(const Graph&)> preprocessing_edit(const TrainingDataFiles& files,
                                                      const TrainingData& data) {
  std::map<std::string, DType> stored;
  for (size_t i = 0; i < files.input_names.size(); ++i)
    stored[files.input_names[i]] = data.input_dtype(i);
  return [transforms = files.transforms, stored](const Graph& graph) {
    return with_embedded_preprocessing(graph, transforms, stored);
  };
}

// The model a run trains: the checkpoint's training form with --resume, else the model file.
std::shared_ptr<Model> model_to_train(const std::string& path,
                                      const std::optional<Checkpoint>& checkpoint, Device device,
                                      const ModelOptions& compile) {
  if (checkpoint)
    return std::make_shared<Model>(model_from_graph(checkpoint->graph, path, device, compile));
  return std::make_shared<Model>(load_model(path, device, {}, compile));
}

// The run's last line: the last loss, the throughput, float16's skipped steps, the saved file.
void print_run_summary(const TrainReport& report, const GradScaler* scaler, int64_t steps,
                       const std::string& save) {
  std::printf("last batch loss %.6f, %.1f samples/s", report.steps.back().loss,
              report.throughput.samples_per_s);
  if (!report.profile.is_null()) std::printf(" (profiled)");
  if (report.throughput.warmup_steps > 0)
    std::printf(" after %lld warm-up step%s (%.1f overall)",
                static_cast<long long>(report.throughput.warmup_steps),
                report.throughput.warmup_steps == 1 ? "" : "s",
                report.throughput.overall_samples_per_s);
  if (scaler)
    std::printf("; %lld of %lld steps skipped for overflowing gradients, loss scale now %g",
                static_cast<long long>(scaler->skipped_steps()), static_cast<long long>(steps),
                static_cast<double>(scaler->scale()));
  std::printf("; saved %s\n", save.c_str());
}

// --resume: restores the checkpoint's state into the run and returns the step it was written
// after, refusing a checkpoint that has no steps of the run left.
int64_t resume_from(const Checkpoint& checkpoint, const std::string& path,
                    const CheckpointedRun& run, int64_t steps) {
  const int64_t step = restore_training_state(checkpoint, path, run);
  if (step >= steps)
    fail("--resume: the checkpoint is at step ", step, "; a run of ", steps,
         " steps has none left");
  std::printf("resuming %s at step %lld\n", path.c_str(), static_cast<long long>(step + 1));
  return step;
}

// Before any gradient is summed: every option but the per-rank ones (devices, threads, file
// paths, what only rank 0 does; per_rank_options() in tools/distributed_cli.cpp says why
// each), the model and the data's rows must be alike on every rank.
void check_ranks_agree(DistributedRun& dist, const CLI::App& app, const Model& model,
                       const TrainingData& data) {
  dist.option_facts = option_facts(app);
  check_ranks_agree_to_start(dist, model,
                             {{"the rows of training data", "", std::to_string(data.rows())}});
}

// The progress a run shows from its callbacks, and the validations its report keeps.
struct ProgressShown {
  Progress progress;
  TrainReport& report;
  int64_t samples = 0;
  double seconds = 0;

  void step(int64_t steps_done, const StepRecord& step) {
    seconds += step.seconds;
    samples += step.rows;
    progress.update(steps_done, step.loss, static_cast<double>(samples) / seconds);
  }
  void epoch(const EpochRecord& epoch) {
    if (epoch.validation) report.validation.push_back(*epoch.validation);
    progress.epoch_done(epoch.epoch, epoch.mean_loss, epoch.samples_per_s, epoch.validation);
  }
};

// The run's first lines: what trains on what, and over how many ranks.
void print_run_header(const std::string& model_path, const std::vector<Device>& devices,
                      const Trainer& trainer, const TrainingData& data, int64_t batch,
                      int64_t steps, const std::optional<DistributedRun>& dist,
                      DistributedDataParallel* ddp) {
  std::printf(
      "training %s on %s: %zu parameters, %lld rows, %lld batches of %lld per epoch, %lld steps\n",
      model_path.c_str(), device_list_to_string(devices).c_str(), trainer.parameter_names().size(),
      static_cast<long long>(data.rows()), static_cast<long long>(data.batches_per_epoch()),
      static_cast<long long>(batch), static_cast<long long>(steps));
  if (!ddp) return;
  const std::string compressed =
      dist->options.gradient_compression != DType::Float32
          ? ", in " + std::string(dtype_name(dist->options.gradient_compression))
          : "";
  std::printf(
      "distributed over %d rank%s (%s): each step, rank r takes rows r, r+%d, ... of the "
      "batch; %zu gradient bucket%s, %s reduction%s\n",
      dist->size(), dist->size() == 1 ? "" : "s", dist->group->backend().c_str(), dist->size(),
      ddp->stats().buckets, ddp->stats().buckets == 1 ? "" : "s",
      dist->options.deterministic        ? "rank-order (deterministic)"
      : dist->group->backend() == "nccl" ? "NCCL's"
                                         : "MPI's",
      compressed.c_str());
}

int train(const TrainFlags& f, const CLI::App& app) {
  const int64_t baseline_resident = resident_bytes();  // before anything of the run is loaded
  const std::string& model_path = f.model;
  if (!f.steps && !f.epochs) throw UsageError("give --steps N or --epochs N");
  // Before the devices are parsed: the ranks on a host share its cores.
  std::optional<DistributedRun> dist = start_distributed(f.distributed);
  const bool writes = !dist || dist->is_root();  // only rank 0 writes files
  TrainerOptions options = parse_trainer_options(f);
  // --profile: every node of the training graph is timed, on every device (and rank).
  std::unique_ptr<NodeProfile> profile;
  if (f.profile) {
    profile = std::make_unique<NodeProfile>();
    options.parallel.observers.push_back(profile->observer());
  }
  if (dist)
    options.parallel.device_ids =
        rank_devices(*dist, f.devices.devices, options.parallel.device_ids);
  const std::optional<std::string>& save = f.save;
  const int64_t batch = *f.batch;
  const int64_t checkpoint_every = f.checkpoint_every.value_or(0);
  SaveOptions save_options;
  if (f.external_data_threshold)
    save_options.external_data_threshold = static_cast<uint64_t>(*f.external_data_threshold);
  const int64_t warmup_steps = f.warmup_steps.value_or(1);
  const ProgressOptions shown = progress_options(f.log_every);
  const std::string json_path = f.json.value_or("");
  const std::string export_path = f.export_graph.value_or("");
  if (writes) check_outputs_writable(f);

  const std::vector<Device> devices = options.parallel.device_ids;
  if (dist) choose_gradient_backend(*dist, f.distributed.dist_backend, devices.front());
  // --precision is the training's (TrainingGraphSpec::precision): the model itself stays float32,
  // its parameters the float32 master weights.
  const ModelOptions compile = model_options(f.devices, std::nullopt);
  // --resume: MODEL is a checkpoint, the training form with the run's state inside.
  std::optional<Checkpoint> checkpoint;
  if (f.resume) checkpoint = read_checkpoint(model_path);
  auto model = model_to_train(model_path, checkpoint, devices.front(), compile);
  if (writes) say_if_exported_for_inference(model->graph(), model_path);
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<Trainer> single;
  if (dist)
    ddp = std::make_unique<DistributedDataParallel>(model, options, dist->group, dist->options);
  else
    single = std::make_unique<Trainer>(model, options);
  Trainer& trainer = ddp ? ddp->trainer() : *single;
  check_target_given(f, trainer, options.training.loss.kind);

  const int64_t accumulate = f.accumulate.value_or(1);
  const TrainingDataFiles data_options =
      training_data_files(f, *model, options, devices, accumulate);
  TrainingData data = read_training_data(data_options);
  check_samples_fit(*model, data, data_options.transforms);
  Schedule schedule = parse_schedule(f, data.batches_per_epoch(), accumulate);

  std::optional<Validation> validation =
      validation_of(f, data_options, *model, trainer, options.training.loss);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(f, trainer);
  std::vector<std::optional<double>> group_lrs = parameter_group_lrs(f.param_lr, trainer);
  LrSchedule lr_schedule = parse_lr_schedule_options(f);
  const CheckpointedRun checkpointed{
      .model = *model,
      .parameter_names = trainer.parameter_names(),
      .optimizer = *optimizer,
      .scaler = trainer.grad_scaler(),
      .seed = data_options.seed,
      .settings = with_transform_settings(run_settings(options, *model, trainer, *optimizer, batch,
                                                       accumulate, data_options.shuffle),
                                          data_options.transforms)};
  const int64_t first_step =
      checkpoint ? resume_from(*checkpoint, model_path, checkpointed, schedule.steps) : 0;
  std::optional<TrainingRunFiles> files;  // only rank 0 writes
  if (writes) files.emplace(*save, save_options);
  if (files && f.embed_preprocessing)
    files->set_serving_edit(preprocessing_edit(data_options, data));
  if (writes && !export_path.empty())
    save_training_graph(trainer, *model, export_path, save_options);
  if (dist) check_ranks_agree(*dist, app, *model, data);
  print_run_header(model_path, devices, trainer, data, batch, schedule.steps, dist, ddp.get());

  TrainReport report;
  report.baseline_resident_bytes = baseline_resident;
  report.devices = devices;
  report.parameters = trainer.parameter_names();
  ProgressShown shown_progress{.progress = Progress(schedule.steps, trainer.grad_scaler(), shown),
                               .report = report};
  // The profile leaves out the warm-up steps, as samples/s does (all steps when there are no
  // more than those).
  const int64_t run_steps = schedule.steps - first_step;
  const int64_t profiled_from = run_steps > warmup_steps ? warmup_steps : 0;
  if (profile) profile->set_recording(profiled_from == 0);
  int64_t steps_done = 0;
  TrainingRunOptions run_options{
      .steps = schedule.steps,
      .accumulate = accumulate,
      .seed = data_options.seed,
      .lr_schedule = std::move(lr_schedule),
      .group_lrs = std::move(group_lrs),
      .checkpoint_every = checkpoint_every,
      .release_memory_at_end = true,
      .on_step =
          [&](int64_t done, const StepRecord& step) {
            shown_progress.step(done, step);
            if (profile && ++steps_done == profiled_from) profile->set_recording(true);
          },
      .on_epoch = [&](const EpochRecord& epoch) { shown_progress.epoch(epoch); }};
  TrainingRun run(trainer, *optimizer, data, checkpointed, std::move(run_options), ddp.get());
  if (files) run.set_writer(&*files);
  if (validation && writes) run.set_validation(&*validation);
  report.steps = run.run(first_step);
  if (ddp) report.ranks = ranks_json(*dist, *ddp);
  report.throughput = measure_throughput(report.steps, warmup_steps);
  std::optional<TrainingProfileSteps> profiled;
  if (profile) {
    profiled.emplace(TrainingProfileSteps{.steps = run_steps - profiled_from});
    for (size_t k = static_cast<size_t>(profiled_from); k < report.steps.size(); ++k)
      profiled->seconds += report.steps[k].seconds;
    report.profile = training_profile_json(*profile, *profiled);
  }
  if (writes && !json_path.empty()) write_train_json(json_path, report);
  print_run_summary(report, trainer.grad_scaler(), schedule.steps, *save);
  if (profile) {
    if (dist) std::printf("\nrank %d:", dist->rank());
    print_training_profile(*profile, *profiled);
  }
  return 0;
}

}  // namespace

int train_command(int argc, char** argv, int first) {
  TrainFlags flags;
  auto app = train_app(flags);
  parse_command_line(*app, argc, argv, first);
  return train(flags, *app);
}

std::string train_help() {
  TrainFlags flags;
  return command_help(*train_app(flags));
}

}  // namespace dprun::cli
