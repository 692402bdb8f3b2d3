#!/usr/bin/env bash
# Training throughput of `dprun train` against PyTorch 1.13 (/usr/bin/python3) on the same
# models, data, batch, optimizer and thread counts, in one run. train_vs_torch.py builds the
# models with torch, exports them (training mode, do_constant_folding=False) and times
# PyTorch's own training loop; `dprun train --json` times dprun's steps. Both leave out the
# same number of warm-up steps. Every measurement is repeated ROUNDS times, the engines
# alternating, and the table gives the median (all rounds are printed above it).
#   MLP 784-512-256-10, GELU, LogSoftmax, nll loss, batch 64, SGD (lr 0.01, momentum 0.9):
#     dprun cpu:0 --threads 1 against torch.set_num_threads(1); dprun cpu:0,cpu:1 x 1 thread
#     against dprun on one device (and PyTorch on 2 threads, for reference)
#   ResNet-18 (torchvision, random init), batch 16, cross entropy, SGD, one thread
# usage: bench/peers/train_vs_torch.sh [ROUNDS] (default 3)
# environment: MLP_STEPS (300), RESNET_STEPS (8), WORK (a folder to keep the files in)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dprun="$root/build/dprun"
python=/usr/bin/python3
rounds=${1:-3}
mlp_steps=${MLP_STEPS:-300}
resnet_steps=${RESNET_STEPS:-8}
if [ -n "${WORK:-}" ]; then
  work=$WORK
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

"$python" "$here/train_vs_torch.py" export mlp "$work" 64 2>/dev/null
"$python" "$here/train_vs_torch.py" export resnet18 "$work" 16 2>/dev/null

# dprun_rate MODEL BATCH DEVICES STEPS WARMUP LOSS: samples/s after the warm-up steps.
dprun_rate() {
  "$dprun" train "$work/$1.onnx" --input "x=$work/$1.x.npy" --target "$work/$1.target.npy" \
    --loss "$6" --optimizer sgd --lr 0.01 --momentum 0.9 --batch "$2" --steps $(($4 + $5)) \
    --warmup-steps "$5" --no-shuffle --devices "$3" --threads 1 --save "$work/trained.onnx" \
    --json "$work/train.json" >/dev/null
  sed -n 's/^  "samples_per_s": \([0-9.e+-]*\),$/\1/p' "$work/train.json"
}
# torch_rate MODEL BATCH THREADS STEPS WARMUP
torch_rate() {
  "$python" "$here/train_vs_torch.py" time "$1" "$work" "$2" "$3" "$4" "$5" |
    sed 's/.*"samples_per_s": \([0-9.e+-]*\),.*/\1/'
}
median() { tr ' ' '\n' | awk NF | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

declare -A results
measure() {  # KEY COMMAND...
  local key=$1
  shift
  local v
  v=$("$@")
  results[$key]="${results[$key]:-} $v"
  printf "  %-22s %10.1f samples/s\n" "$key" "$v"
}

for ((r = 1; r <= rounds; ++r)); do
  echo "round $r"
  measure mlp_dprun_1dev dprun_rate mlp 64 cpu:0 "$mlp_steps" 5 nll
  measure mlp_torch_1thread torch_rate mlp 64 1 "$mlp_steps" 5
  measure mlp_dprun_2dev dprun_rate mlp 64 cpu:0,cpu:1 "$mlp_steps" 5 nll
  measure mlp_torch_2threads torch_rate mlp 64 2 "$mlp_steps" 5
  measure resnet18_dprun_1dev dprun_rate resnet18 16 cpu:0 "$resnet_steps" 2 cross_entropy
  measure resnet18_torch_1thread torch_rate resnet18 16 1 "$resnet_steps" 2
done

m() { echo "${results[$1]}" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }
echo
echo "median of $rounds rounds, samples/s"
printf "%-44s %12s %12s %8s\n" comparison dprun other ratio
printf "%-44s %12.1f %12.1f %8s\n" "MLP b64, 1 thread: dprun vs PyTorch" "$(m mlp_dprun_1dev)" \
  "$(m mlp_torch_1thread)" "$(ratio "$(m mlp_dprun_1dev)" "$(m mlp_torch_1thread)")"
printf "%-44s %12.1f %12.1f %8s\n" "MLP b64: dprun 2 devices x 1 vs 1 device" "$(m mlp_dprun_2dev)" \
  "$(m mlp_dprun_1dev)" "$(ratio "$(m mlp_dprun_2dev)" "$(m mlp_dprun_1dev)")"
printf "%-44s %12.1f %12.1f %8s\n" "MLP b64: dprun 2 devices vs PyTorch 2 threads" \
  "$(m mlp_dprun_2dev)" "$(m mlp_torch_2threads)" \
  "$(ratio "$(m mlp_dprun_2dev)" "$(m mlp_torch_2threads)")"
printf "%-44s %12.2f %12.2f %8s\n" "ResNet-18 b16, 1 thread: dprun vs PyTorch" \
  "$(m resnet18_dprun_1dev)" "$(m resnet18_torch_1thread)" \
  "$(ratio "$(m resnet18_dprun_1dev)" "$(m resnet18_torch_1thread)")"
