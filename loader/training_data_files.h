#pragma once
// A training data set read from .npy files (engine/training/training_data.h): one file per
// model input and one for the target, each checked as it is read so that a bad file is named
// once, before any step runs.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/autograd/loss.h"
#include "engine/graph.h"
#include "engine/training/data_checks.h"
#include "engine/training/training_data.h"

namespace dprun {

/// The files of a data set, and how it is batched.
struct TrainingDataFiles : TrainingDataOptions {
  std::vector<std::string> input_names;      // the model's inputs, in order
  std::map<std::string, std::string> files;  // input name -> .npy path
  std::string target_file;                   // empty when the loss takes no target
  /// With a class loss whose model output has a fixed number of classes: the labels the
  /// target may hold (class_labels), checked when it is read.
  std::optional<ClassLabels> labels;
  /// How the options that name the files are called in messages: "" (--input, --target) or
  /// "val-" (--val-input, --val-target).
  std::string option_prefix;
};

/// Reads every file, in the model's input order then the target, and checks each as it is
/// read. Throws Error, the first failure only: "--input names 'N', which is not an input of
/// the model" for a file of no input; "training needs data for input 'N': give --input
/// N=FILE.npy" for an input without a file; "PATH: is a directory; --[val-]input takes a .npy
/// file" (or --[val-]target); read_npy's errors (loader/npy.h), naming the file; a NaN or
/// infinity by file and row (check_finite_rows, along `dim` for inputs, dim 0 for the target);
/// an input without dim `dim` or with other rows than the first (rows_along,
/// check_input_rows); a target label outside `labels` by file and row (check_class_labels);
/// "the target file PATH holds a 0-d array; it needs one row per sample"; a target of other
/// rows (check_target_rows); "the training data has no rows"; a transform (`transforms`) that
/// does not fit its file (TrainingData's constructor). Transformed inputs stay as the files
/// hold them in memory; their batches are float32.
TrainingData read_training_data(const TrainingDataFiles& files);

/// Throws Error "PATH: is a directory; --OPTION takes a .npy file" when `path` is a folder
/// (read_npy would say "file not found").
void check_not_directory(const std::string& path, const std::string& option);

/// Throws Error when the target file `target_path` cannot be the target of `loss` on its output
/// of `graph`: a different rank than the output (without its class dim for cross_entropy and
/// nll), or a different size in a dim after the first (the rows) that the output declares. It
/// reads the file's header only, so a run refuses such a file before it reads any data, naming
/// the output and the model's other outputs (--output picks one), not the loss graph's
/// internal 'target' input. Passes when either shape is unknown.
void check_target_fits(const Graph& graph, const LossSpec& loss, const std::string& target_path);

}  // namespace dprun
