#!/usr/bin/env bash
# Checks dprun's training outputs in ONNX Runtime, for every training reference case under
# models/training/ (or the cases named):
#   1. `dprun train CASE.onnx $(cat CASE.args) --save OUT.onnx --export-training-graph TG.onnx`;
#      a case that dprun cannot train is reported as SKIP with dprun's error.
#   2. The saved model (the inference form): ORT and `dprun run` on the case's whole data set,
#      outputs compared. ORT also runs PyTorch's trained model (CASE.trained.onnx) in inference
#      form (`dprun convert`, as PyTorch's eval() runs it), compared with dprun's outputs.
#   3. The training graph: ORT and `dprun run` on the first batch (the case's --batch rows),
#      the loss (the first output: `loss`, or `loss_1` when the model has a value `loss`) and
#      every `<param>_grad` compared; dprun's loss is also compared with the loss of the first
#      step that `dprun train` reported (the graph was exported before step 1).
# Tolerance |a - b| <= atol + rtol * |b| with rtol 1e-4 and atol 1e-6 (float32 math, summed
# in different orders). One PASS/FAIL/SKIP line per case, then a summary; exit 1 if any case
# fails. --keep DIR keeps every case's files and log (the largest differences are in the log).
# usage: bench/peers/ort_check.sh [--keep DIR] [CASE...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dprun="$root/build/dprun"
work=""
if [ "${1:-}" = "--keep" ]; then
  work=$2
  shift 2
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  for a in "$root"/models/training/*.args; do cases+=("$(basename "$a" .args)"); done
fi
source "$here/ort_install.sh"

# Runs "$@", appending its output to $log; returns its status.
log_run() { "$@" >>"$log" 2>&1; }

pass=0 fail=0 skip=0
for c in "${cases[@]}"; do
  dir="$work/$c"
  rm -rf "$dir"
  mkdir -p "$dir"
  log="$dir/log.txt"
  cd "$root"
  read -r -a args <"models/training/$c.args"
  inputs=() target="" batch=""
  for ((i = 0; i < ${#args[@]}; ++i)); do
    case "${args[i]}" in
      --input) inputs+=("${args[i + 1]}") ;;
      --target) target=${args[i + 1]} ;;
      --batch) batch=${args[i + 1]} ;;
    esac
  done
  if ! log_run "$dprun" train "models/training/$c.onnx" "${args[@]}" --save "$dir/trained.onnx" \
      --json "$dir/train.json" --export-training-graph "$dir/training_graph.onnx"; then
    printf "SKIP %-24s dprun train fails: %s\n" "$c" "$(tail -n 1 "$log")"
    skip=$((skip + 1))
    continue
  fi
  problems=()
  dprun_inputs=()
  for spec in "${inputs[@]}"; do dprun_inputs+=(--input "$spec"); done

  # 2. The saved model on the whole data set.
  echo "== saved model: ORT vs dprun" >>"$log"
  if ! log_run node "$here/ort_run.js" "$dir/trained.onnx" "$dir/ort_model" "${inputs[@]}"; then
    problems+=("ORT cannot run the saved model")
  elif ! log_run "$dprun" run "$dir/trained.onnx" --devices cpu:0 "${dprun_inputs[@]}" \
      --output-dir "$dir/dprun_model"; then
    problems+=("dprun cannot run the saved model")
  else
    log_run node "$here/npy_compare.js" "$dir/dprun_model" "$dir/ort_model" 1e-4 1e-6 ||
      problems+=("saved model: ORT and dprun differ")
    # PyTorch's trained model is exported for training: its inference form (dprun convert) is
    # what PyTorch's eval() runs and what `dprun train --save` writes.
    echo "== PyTorch's trained model in inference form (ORT) vs dprun's" >>"$log"
    if log_run "$dprun" convert "models/training/$c.trained.onnx" --save "$dir/torch_eval.onnx" &&
      log_run node "$here/ort_run.js" "$dir/torch_eval.onnx" "$dir/torch_model" \
        "${inputs[@]}"; then
      log_run node "$here/npy_compare.js" "$dir/torch_model" "$dir/dprun_model" 1e-4 1e-6 ||
        problems+=("saved model: outputs differ from PyTorch's trained model")
    else
      problems+=("ORT cannot run PyTorch's trained model")
    fi
  fi

  # 3. The training graph on the first batch.
  echo "== training graph: ORT vs dprun" >>"$log"
  graph_inputs=("${inputs[@]}")
  [ -z "$target" ] || graph_inputs+=("target=$target")
  if ! log_run node "$here/ort_run.js" "$dir/training_graph.onnx" "$dir/ort_graph" \
      --rows "$batch" "$dir/batch" "${graph_inputs[@]}"; then
    problems+=("ORT cannot run the training graph")
  else
    batch_inputs=()
    for spec in "${graph_inputs[@]}"; do
      name=${spec%%=*}
      batch_inputs+=(--input "$name=$dir/batch/$(printf %s "$name" | tr -c 'A-Za-z0-9._\n-' _).npy")
    done
    if ! log_run "$dprun" run "$dir/training_graph.onnx" --devices cpu:0 "${batch_inputs[@]}" \
        --output-dir "$dir/dprun_graph"; then
      problems+=("dprun cannot run the training graph")
    else
      log_run node "$here/npy_compare.js" "$dir/dprun_graph" "$dir/ort_graph" 1e-4 1e-6 ||
        problems+=("training graph: ORT and dprun differ")
      # On several devices the first loss is the share-weighted sum of the chunks' losses, and
      # BatchNormalization in training mode normalizes each chunk by its own statistics, so
      # the whole-batch graph is compared with a one-step run on one device.
      one_device=("${args[@]}")
      for ((i = 0; i < ${#one_device[@]}; ++i)); do
        case "${one_device[i]}" in
          --devices) one_device[i + 1]=cpu:0 ;;
          --steps | --epochs) one_device[i]=--steps one_device[i + 1]=1 ;;
        esac
      done
      log_run "$dprun" train "models/training/$c.onnx" "${one_device[@]}" \
        --save "$dir/one_step.onnx" --json "$dir/one_step.json" ||
        problems+=("dprun train fails on one device")
      first=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).losses[0])' \
        "$dir/one_step.json")
      loss_name=$(head -n 1 "$dir/ort_graph/outputs.txt" | tr -c 'A-Za-z0-9._\n-' _)
      graph_loss=$(node -e "const {readNpy} = require('$here/npy.js');
        console.log(readNpy('$dir/dprun_graph/$loss_name.npy').data[0])")
      echo "first step's loss: dprun train $first, training graph $graph_loss" >>"$log"
      awk -v a="$first" -v b="$graph_loss" \
        'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 + 1e-5 * (b < 0 ? -b : b)) }' ||
        problems+=("the training graph's loss differs from dprun train's first loss")
    fi
  fi

  if [ ${#problems[@]} -eq 0 ]; then
    grads=$(find "$dir/ort_graph" -name '*_grad.npy' | wc -l)
    printf "PASS %-24s saved model and training graph (loss, %d gradients) agree\n" "$c" "$grads"
    pass=$((pass + 1))
  else
    printf "FAIL %-24s %s (details: %s)\n" "$c" "$(IFS=';'; echo "${problems[*]}")" "$log"
    fail=$((fail + 1))
  fi
done
echo "ort_check: $pass passed, $fail failed, $skip skipped (dprun cannot train them yet)"
[ "$fail" -eq 0 ]
