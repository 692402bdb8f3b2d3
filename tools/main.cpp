// dprun: run ONNX models data-parallel from the shell.
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "tools/cli_args.h"
#include "tools/commands.h"
#include "tools/distributed_cli.h"

namespace {

const char* kOverview =
    R"(dprun - data-parallel ONNX execution engine

usage:
  dprun MODEL.onnx [options]          run a model data-parallel (generated inputs unless --input)
  dprun run MODEL.onnx [options]      the same
  dprun bench MODEL.onnx [options]    measure throughput (samples/s) over the devices
  dprun train MODEL.onnx [options]    train data-parallel from .npy files, save to ONNX
  dprun inspect MODEL.onnx            inputs, outputs, opsets, op histogram, parameters
  dprun convert MODEL.onnx --save OUT.onnx
                                      the inference form of a model exported for training
  dprun conformance [options]         run the ONNX backend conformance suite
  dprun ops [--markdown]              every op this build knows: opsets, dtypes, devices,
                                      gradient, 16-bit policy
  dprun --version                     the version of dprun

  dprun COMMAND --help                the options of one command
  multi-process runs: mpirun -np N dprun COMMAND ... --distributed (see run, bench, train --help)

exit status: 0 success, 1 runtime error, 2 usage error
)";

// The options run and bench share.
const char* kParallelOptions =
    R"(  --devices LIST         all | cpu | cpu:0,cpu:1,... | cuda:0,cuda:1,... or bare CUDA ids 0,1
                         (default: all, every GPU when there is one, else one CPU device per
                         core; cpu means one CPU device per core). CUDA devices are refused with
                         exit status 1 by a build without CUDA or where no GPU is present
  --dim D                dim to split inputs and gather outputs along (default 0; may be negative)
  --output-device DEV    where outputs are gathered (default: the first device)
  --split NAME=DIM|none  split input NAME along DIM, or give it whole to every device; repeatable
  --split-policy P       chunk (torch.chunk sizes, default) | even | weighted
  --weights W0,W1,...    device weights for --split-policy weighted (default: measured)
  --threads N            intra-op threads per device (default: the device's core share)
  --allow-tf32           float32 MatMul, Gemm and convolutions on GPUs may use TF32 tensor
                         cores (about 1e-3 relative error; no effect on CPU devices)
  --allow-winograd       float32 3x3 stride-1 convolutions on CPUs may use oneDNN's Winograd
                         algorithm (AVX-512 CPUs; larger rounding error; no effect on GPUs)
  --precision P          float32 (default) | float16 | bfloat16: convert the model's parameters
                         and activations to 16 bits before compiling (inputs and outputs stay
                         float32; a few ops such as Resize and Range stay float32)
  --input NAME=FILE      input from a .npy file (numbers, bool, '|S'/'<U' strings; a 2-byte
                         '<u2'/'V2' file for a bfloat16 input) or an ONNX TensorProto .pb;
                         repeatable. Inputs without a file are generated: floats in [-1, 1),
                         integers in [0, 10) or below the size of the table they index
  --batch N              size of symbolic leading dims of generated inputs (default 1)
  --symbol NAME=N        size of another symbolic dim of generated inputs; repeatable
)";

const char* kRunUsage =
    R"(usage: dprun [run] MODEL.onnx [options]
run a model data-parallel over the devices and print its outputs

)";

const char* kRunOptions =
    R"(run only:
  --output-dir DIR       write each output to DIR/NAME.npy
  --json FILE            write devices_used, chunk_rows, output shapes and each device's
                         peak_bytes as JSON
  --iters N              after a first run (timed apart: it includes the setup), run N times
                         and report the mean time (default 1)
)";

const char* kBenchUsage =
    R"(usage: dprun bench MODEL.onnx [options]
measure throughput: samples/s counts the rows each step ran

)";

const char* kBenchOptions =
    R"(bench only:
  --iters N --warmup N   timed and untimed iterations (default 20 and 3)
  --rounds N             time N rounds of --iters and keep the best (default 1); with
                         --sweep, the device lists take their rounds in turn
  --sweep                also run on the first 1..N devices and print the scaling table (its
                         speed-up compares median step times)
  --profile              also print the time per op type (summed over devices)
  --profile-nodes        also print the time of each node, in execution order, with the
                         input shapes of its first call
  --json FILE            write samples_per_s, each round's, the step-time spread, batch (the
                         rows a step ran), iters, devices and per-device figures
)";

const char* kRunDistributed =
    R"(distributed (start the ranks with mpirun -np N dprun ...):
  --distributed          one rank per process over MPI: the batch is cut over the ranks (rank 0
                         gathers the outputs). Each rank runs on its own --devices; only rank 0
                         prints and writes files
  --timeout S            seconds a rank waits for the others before it ends the job (1800)
)";

const char* kTrainUsage =
    R"(usage: dprun train MODEL.onnx --input NAME=FILE.npy --target FILE.npy --loss L
                   --optimizer O --lr F --batch N (--steps N | --epochs N) --save OUT.onnx
train data-parallel from .npy files and save the trained model to ONNX

options (--devices, --dim, --split, --split-policy, --weights, --threads, --allow-tf32 and
--allow-winograd as for run: dprun run --help):
  --input NAME=FILE.npy  the rows of input NAME (split along --dim); repeatable, required
  --target FILE.npy      the labels or targets, one row per sample
  --loss L               cross_entropy | nll | mse | l1 | bce_with_logits | none (the output is
                         the loss), each the mean over the batch
  --class-dim D          class dim of the output for cross_entropy and nll (default 1)
  --ignore-index N|none  cross_entropy and nll leave out targets equal to N (default -100, as
                         PyTorch)
  --label-smoothing F    cross_entropy's label smoothing in [0, 1] (default 0)
  --output NAME          the output the loss reads (default: the first)
  --optimizer O --lr F   sgd | adam | adamw, and the learning rate (both required)
  --momentum F --nesterov --weight-decay F --betas B1,B2 --eps F   as torch.optim
  --no-weight-decay LIST parameters updated without weight decay (a param group with
                         weight_decay 0): names, PREFIX* patterns, or 1d for every
                         parameter of rank below 2 (biases, normalization weights)
  --param-lr LIST        param groups with their own lr: PATTERN=LR items, patterns as
                         --no-weight-decay's (e.g. 'head.*=0.1'); --lr-schedule schedules
                         each group from its own lr
  --batch N              rows per step (required); a last partial batch is used as it is
  --steps N | --epochs N optimizer steps, or passes over the data
  --warmup-steps N       steps left out of the reported samples/s (default 1: the first step
                         builds buffers and kernels); the overall figure is reported too
  --shuffle|--no-shuffle reshuffle each epoch from --seed N (default: shuffle with --epochs)
  --freeze NAME,...      initializers not to train
  --sync-batchnorm       training-mode BatchNormalization normalizes with the statistics of the
                         whole batch, summed over the devices (PyTorch's SyncBatchNorm), not
                         each device's chunk: several devices then train as one
  --val-input NAME=FILE --val-target FILE   validation loss (and accuracy) after each epoch
  --save OUT.onnx        the trained model to serve (required): its inference form, with
                         BatchNormalization on the running statistics and Dropout off
  --checkpoint-every N   every N steps also write OUT.ckpt.onnx: the training form with the
                         optimizer's state, to resume from (replaced whole: a kill never loses it)
  --resume               MODEL is such a checkpoint: continue the run where it stopped (the same
                         data, batch, devices and options; --steps counts the whole run)
  --log-every N          print a progress line every N steps (default: on a terminal a bar, else
                         a line every 10 seconds)
  --json FILE            losses, step_seconds, samples_per_s (after the warm-up),
                         samples_per_s_overall, warmup_steps, devices, peak_bytes per device;
                         in float16 also loss_scales and skipped_steps
  --export-training-graph FILE   the training graph (loss and <param>_grad outputs) as ONNX
  --precision P          float32 (default), bfloat16 or float16: mixed precision, the passes
                         in 16 bits with float32 parameters, gradients, optimizer and loss;
                         float16 scales the loss dynamically as PyTorch's GradScaler
  --lr-schedule S        the lr of each step, as torch.optim.lr_scheduler stepped after each
                         update: constant (default), step:SIZE[:GAMMA] (StepLR, gamma 0.1),
                         exponential:GAMMA, cosine[:ETA_MIN] (CosineAnnealingLR over the
                         steps after the warm-up), linear[:END_FACTOR] (decay to END_FACTOR
                         times --lr, default 0); --json lists lrs
  --lr-warmup N          first a linear warm-up over N steps from --lr-warmup-start F times
                         --lr (default 1/3, LinearLR's) to --lr
  --accumulate N         each optimizer step sums the gradients of N batches of --batch rows
                         (each weighted by its share of the step's rows) before one update
  --clip-grad-norm F     clip the gradients to total 2-norm F before each update
                         (torch.nn.utils.clip_grad_norm_); --json lists grad_norms
  --loss-scale F         float16: the initial loss scale (default 65536)
  --loss-scale-growth-interval N   float16: double the scale after N steps without an
                         overflow (default 2000); an overflow skips the step, halves the scale

distributed (start the ranks with mpirun -np N dprun train ...):
  --distributed          one rank per process over MPI: rank r takes the rows r, r+N, ... of
                         every batch and the gradients are summed over the ranks. Only rank 0
                         prints and writes files
  --timeout S            seconds a rank waits for the others before it ends the job (1800)
  --deterministic        sum gradients in rank order, bit-identical from run to run
  --bucket-mb F          gradient bucket size in MiB (default 25)
  --gradient-compression bf16|fp16|none
                         send float32 gradients as bfloat16 or float16, half the bytes
                         (PyTorch's bf16/fp16 compress hooks); default none
  --dist-backend B       mpi or nccl, what sums the gradients over the ranks (nccl, in GPU
                         memory, when the first device is a GPU; mpi, in host memory, else)
)";

const char* kInspectUsage =
    R"(usage: dprun inspect MODEL.onnx [options]
inputs, outputs, opsets, op histogram and parameters of a model

options:
  --devices LIST         also show where each node runs on those devices' backends, the
                         backend's rewrite, and what a run copies back from a GPU
  --precision P          inspect the model as --precision converts it for run and bench
)";

const char* kConvertUsage =
    R"(usage: dprun convert MODEL.onnx --save OUT.onnx
write the inference form of a model exported for training (BatchNormalization on its running
statistics, Dropout as Identity), to serve it

options:
  --save OUT.onnx        where to write it (required)
)";

const char* kConformanceUsage =
    R"(usage: dprun conformance [options]
run the ONNX backend conformance suite

options:
  --data DIR             test data root (default /usr/share/libonnx-testdata/data)
  --suite LIST           comma-separated suites (default node,pytorch-converted,pytorch-operator,simple)
  --filter TEXT          only tests whose name contains TEXT
  --expected FILE        fail (exit 1) if a test listed in FILE does not pass
  --write-passing FILE   write the names of passing tests to FILE
  --verbose              print every test's result
  --via-cli              run each test through this executable (dprun MODEL --input NAME=FILE.npy
                         ... --output-dir DIR) instead of in this process
  --jobs N               with --via-cli, run N tests at once (default 1)
  --device DEV           run the tests on DEV (default cpu:0; cuda:0 runs each model on the
                         GPU, its nodes without a CUDA kernel on the host)
  --precision P          float16 or bfloat16: run each test converted to P (float32 inputs and
                         outputs kept) against the float32 expected outputs within 16 bits'
                         error (in process only)
)";

const char* kOpsUsage =
    R"(usage: dprun ops [options]
every op this build knows, one row each: domain, op, opsets and dtypes of its CPU kernels,
whether it has a CPU and a CUDA kernel, a gradient rule (with its opsets), and whether
--precision float16|bfloat16 keeps it in float32

options:
  --markdown             print the table as a Markdown page (docs/operators.md is its output)
)";

const char* kTestingAids = "\ntesting aids (simulated sim:N devices): see docs/\n";

// The help of `command` ("" for the overview); nullopt for a name that is no command.
std::optional<std::string> help_text(const std::string& command) {
  if (command.empty()) return std::string(kOverview);
  const std::string parallel = std::string("options:\n") + kParallelOptions;
  if (command == "run")
    return kRunUsage + parallel + kRunOptions + "\n" + kRunDistributed + kTestingAids;
  if (command == "bench")
    return kBenchUsage + parallel + kBenchOptions + "\n" + kRunDistributed + kTestingAids;
  if (command == "train") return std::string(kTrainUsage) + kTestingAids;
  if (command == "inspect") return std::string(kInspectUsage);
  if (command == "convert") return std::string(kConvertUsage);
  if (command == "conformance") return std::string(kConformanceUsage) + kTestingAids;
  if (command == "ops") return std::string(kOpsUsage);
  return std::nullopt;
}

bool is_help_flag(const char* arg) {
  return std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0;
}

bool is_command(const std::string& word) {
  return word == "run" || word == "bench" || word == "train" || word == "inspect" ||
         word == "convert" || word == "conformance" || word == "ops";
}

// `dprun --help`, `dprun help [COMMAND]`, `dprun COMMAND ... --help` (a model without a
// command is run's); nullopt when no help was asked for.
std::optional<std::string> requested_help(int argc, char** argv) {
  const std::string first = argv[1];
  if (first == "help") {
    if (argc < 3) return help_text("");
    if (auto text = help_text(argv[2])) return text;
    throw dprun::cli::UsageError("help: '" + std::string(argv[2]) + "' is not a command");
  }
  if (is_help_flag(argv[1])) return help_text("");
  for (int i = 2; i < argc; ++i)
    if (is_help_flag(argv[i])) return help_text(is_command(first) ? first : "run");
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dprun::cli;
  try {
    if (argc < 2) {
      std::fputs(kOverview, stderr);
      return 2;
    }
    std::string first = argv[1];
    if (first == "--version" || first == "version") {
      std::printf("dprun %s\n", DPRUN_VERSION);
      return 0;
    }
    if (auto help = requested_help(argc, argv)) {
      std::fputs(help->c_str(), stdout);
      return 0;
    }
    if (first == "inspect") return inspect_command(argc, argv, 2);
    if (first == "conformance") return conformance_command(argc, argv, 2);
    if (first == "run") return run_command(argc, argv, 2);
    if (first == "bench") return bench_command(argc, argv, 2);
    if (first == "train") return train_command(argc, argv, 2);
    if (first == "convert") return convert_command(argc, argv, 2);
    if (first == "ops") return ops_command(argc, argv, 2);
    return run_command(argc, argv, 1);
  } catch (const UsageError& e) {
    return report_error(e, 2);
  } catch (const std::exception& e) {
    return report_error(e, 1);
  }
}
