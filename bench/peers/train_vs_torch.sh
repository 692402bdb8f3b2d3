#!/usr/bin/env bash
# Training throughput of `dprun train` against PyTorch 1.13 (/usr/bin/python3) on the same
# models, data, batch, optimizer and thread counts, in one run. train_vs_torch.py builds the
# models with torch, exports them (training mode, do_constant_folding=False) and times
# PyTorch's own training loop; `dprun train --json` times dprun's steps. Both leave out the
# same warm-up steps.
#   MLP 784-512-256-10, GELU, LogSoftmax, nll loss, batch 64, SGD (lr 0.01, momentum 0.9):
#     dprun cpu:0 --threads 1 against torch.set_num_threads(1); dprun cpu:0,cpu:1 x 1 thread
#     against dprun on one device (and PyTorch on 2 threads, for reference)
#   ResNet-18 and MobileNetV2 (torchvision, random init), batch 16, cross entropy, SGD, one
#   thread
#   LSTM language model (Embedding 1000x128, 2-layer bidirectional LSTM hidden 128, Linear to
#   the 1000 tokens at each of 32 positions), batch 16, cross entropy over the last dim, SGD,
#   one thread
#   ViT (torchvision VisionTransformer, 32x32 images, patch 4, 4 layers, hidden 256, 4 heads,
#   MLP 512), batch 16, cross entropy, SGD, one thread; and batch 32 on 2 devices against 2
#   threads;
#   exported at opset 15 (vit: LayerNorm, GELU and attention decomposed) and 17 (vit17:
#   LayerNormalization as one op); vit_small: patch 8, 2 layers, hidden 64, MLP 128
#   GPT decoder LM (vocab 8192, 4 layers, hidden 256, 4 heads, seq 128, causal mask, tied
#   embedding), batch 16, cross entropy over the last dim, AdamW, one thread; opset 15 (gpt)
#   and 17 (gpt17)
# Three figures per run: samples/s over all timed steps (mean), batch / the median step time
# (which a machine shared with other work disturbs far less), and the peak resident memory over
# the process's own before the model is loaded (VmHWM less VmRSS then: libraries and the
# interpreter do not count). Every measurement is
# repeated ROUNDS times, the engines alternating; the tables give the median over the rounds
# (every round is printed above them).
# OpenBLAS (PyTorch's BLAS on Debian) picks its kernels by the CPU's model name; a VM that hides
# it ("Intel(R) Xeon(R) Processor") gets its SSE3 kernels, 5x slower. Where the CPU has AVX-512
# and OPENBLAS_CORETYPE is not set, PyTorch runs with SkylakeX's kernels.
# usage: bench/peers/train_vs_torch.sh [ROUNDS] (default 3)
# environment: MLP_STEPS (300), RESNET_STEPS (8), LSTM_STEPS (20), VIT_STEPS (10), GPT_STEPS
# (5), MODELS (the models to run, default "mlp resnet18 mobilenet_v2 lstm_lm vit vit17 vit_small
# gpt gpt17"), WORK (a folder to keep the files in)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dprun="$root/build/dprun"
python=/usr/bin/python3
rounds=${1:-3}
mlp_steps=${MLP_STEPS:-300}
resnet_steps=${RESNET_STEPS:-8}
lstm_steps=${LSTM_STEPS:-20}
vit_steps=${VIT_STEPS:-10}
gpt_steps=${GPT_STEPS:-5}
models=" ${MODELS:-mlp resnet18 mobilenet_v2 lstm_lm vit vit17 vit_small gpt gpt17} "
want() { [[ "$models" == *" $1 "* ]]; }
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx512f /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SkylakeX
fi
if [ -n "${WORK:-}" ]; then
  work=$WORK
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

for model in $models; do
  batch=16
  [ "$model" = mlp ] && batch=64
  "$python" "$here/train_vs_torch.py" export "$model" "$work" "$batch" 2>/dev/null
done

# dprun_rate MODEL BATCH DEVICES STEPS WARMUP LOSS [OPTION...]: "MEAN MEDIAN" samples/s after
# the warm-up.
dprun_rate() {
  local optimizer=(--optimizer sgd --lr 0.01 --momentum 0.9)
  [[ $1 == gpt* ]] && optimizer=(--optimizer adamw --lr 0.001 --weight-decay 0.01)
  "$dprun" train "$work/$1.onnx" --input "x=$work/$1.x.npy" --target "$work/$1.target.npy" \
    --loss "$6" "${@:7}" "${optimizer[@]}" --batch "$2" --steps $(($4 + $5)) \
    --warmup-steps "$5" --no-shuffle --devices "$3" --threads 1 --save "$work/trained.onnx" \
    --json "$work/train.json" >/dev/null
  # The report's samples_per_s, the rate of the median step after the warm-up, and the peak
  # resident memory over the process's own at the start, in MiB.
  "$python" - "$work/train.json" "$5" "$2" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
steps = sorted(report["step_seconds"][int(sys.argv[2]):])
print(report["samples_per_s"], float(sys.argv[3]) / steps[(len(steps) + 1) // 2 - 1],
      report["peak_resident_bytes"] / 2**20)
PY
}
# torch_rate MODEL BATCH THREADS STEPS WARMUP: "MEAN MEDIAN PEAK_MIB"
torch_rate() {
  "$python" "$here/train_vs_torch.py" time "$1" "$work" "$2" "$3" "$4" "$5" | "$python" -c '
import json, sys
r = json.loads(sys.stdin.read())
print(r["samples_per_s"], r["median_step_samples_per_s"], r["peak_resident_bytes"] / 2**20)'
}
median() { tr ' ' '\n' | awk NF | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

declare -A means medians peaks
measure() {  # KEY COMMAND...
  local key=$1
  shift
  local v
  read -r -a v <<<"$("$@")"
  means[$key]="${means[$key]:-} ${v[0]}"
  medians[$key]="${medians[$key]:-} ${v[1]}"
  peaks[$key]="${peaks[$key]:-} ${v[2]}"
  printf "  %-24s %10.1f samples/s (median step: %10.1f), peak %7.1f MiB over the start\n" \
    "$key" "${v[0]}" "${v[1]}" "${v[2]}"
}

for ((r = 1; r <= rounds; ++r)); do
  echo "round $r (load average $(cut -d' ' -f1 /proc/loadavg))"
  if want mlp; then
    measure mlp_dprun_1dev dprun_rate mlp 64 cpu:0 "$mlp_steps" 5 nll
    measure mlp_torch_1thread torch_rate mlp 64 1 "$mlp_steps" 5
    measure mlp_dprun_2dev dprun_rate mlp 64 cpu:0,cpu:1 "$mlp_steps" 5 nll
    measure mlp_torch_2threads torch_rate mlp 64 2 "$mlp_steps" 5
  fi
  for cnn in resnet18 mobilenet_v2; do
    want $cnn || continue
    measure ${cnn}_dprun_1dev dprun_rate $cnn 16 cpu:0 "$resnet_steps" 2 cross_entropy
    measure ${cnn}_torch_1thread torch_rate $cnn 16 1 "$resnet_steps" 2
  done
  if want lstm_lm; then
    measure lstm_lm_dprun_1dev dprun_rate lstm_lm 16 cpu:0 "$lstm_steps" 2 cross_entropy \
      --class-dim -1
    measure lstm_lm_torch_1thread torch_rate lstm_lm 16 1 "$lstm_steps" 2
  fi
  for vit in vit vit17 vit_small; do
    want $vit || continue
    steps=$vit_steps
    [ $vit = vit_small ] && steps=$((vit_steps * 10))
    measure ${vit}_dprun_1dev dprun_rate $vit 16 cpu:0 "$steps" 3 cross_entropy
    measure ${vit}_torch_1thread torch_rate $vit 16 1 "$steps" 3
    # Exported with a fixed batch of 16: 2 devices take 16 rows each, PyTorch the same 32.
    measure ${vit}_dprun_2dev dprun_rate $vit 32 cpu:0,cpu:1 "$steps" 3 cross_entropy
    measure ${vit}_torch_2threads torch_rate $vit 32 2 "$steps" 3
  done
  for gpt in gpt gpt17; do
    want $gpt || continue
    measure ${gpt}_dprun_1dev dprun_rate $gpt 16 cpu:0 "$gpt_steps" 2 cross_entropy --class-dim -1
    measure ${gpt}_torch_1thread torch_rate $gpt 16 1 "$gpt_steps" 2
  done
done

table() {  # TITLE ARRAY
  local -n values=$2
  m() { echo "${values[$1]}" | median; }
  row() {
    [ -n "${values[$2]:-}" ] && [ -n "${values[$3]:-}" ] || return 0
    printf "%-44s %12.1f %12.1f %7.2fx\n" "$1" "$(m "$2")" "$(m "$3")" \
      "$(awk -v a="$(m "$2")" -v b="$(m "$3")" 'BEGIN {print a / b}')"
  }
  echo
  echo "$1 (median of $rounds rounds), samples/s"
  printf "%-44s %12s %12s %8s\n" comparison dprun other ratio
  row "MLP b64, 1 thread: dprun vs PyTorch" mlp_dprun_1dev mlp_torch_1thread
  row "MLP b64: dprun 2 devices x 1 vs 1 device" mlp_dprun_2dev mlp_dprun_1dev
  row "MLP b64: dprun 2 devices vs PyTorch 2 threads" mlp_dprun_2dev mlp_torch_2threads
  row "ResNet-18 b16, 1 thread: dprun vs PyTorch" resnet18_dprun_1dev resnet18_torch_1thread
  row "MobileNetV2 b16, 1 thread: dprun vs PyTorch" mobilenet_v2_dprun_1dev \
    mobilenet_v2_torch_1thread
  row "LSTM LM b16 seq 32, 1 thread: dprun vs PyTorch" lstm_lm_dprun_1dev lstm_lm_torch_1thread
  row "ViT b16 opset 15, 1 thread: dprun vs PyTorch" vit_dprun_1dev vit_torch_1thread
  row "ViT b16 opset 17, 1 thread: dprun vs PyTorch" vit17_dprun_1dev vit17_torch_1thread
  row "ViT b32 opset 15: dprun 2 devices vs PyTorch 2 threads" vit_dprun_2dev vit_torch_2threads
  row "ViT b32 opset 17: dprun 2 devices vs PyTorch 2 threads" vit17_dprun_2dev \
    vit17_torch_2threads
  row "small ViT b16, 1 thread: dprun vs PyTorch" vit_small_dprun_1dev vit_small_torch_1thread
  row "small ViT b32: dprun 2 devices vs PyTorch 2 threads" vit_small_dprun_2dev \
    vit_small_torch_2threads
  row "GPT b16 seq 128 opset 15, 1 thread: dprun vs PyTorch" gpt_dprun_1dev gpt_torch_1thread
  row "GPT b16 seq 128 opset 17, 1 thread: dprun vs PyTorch" gpt17_dprun_1dev gpt17_torch_1thread
}
table "from the median step time" medians
table "over all timed steps" means
table "peak resident memory over the process's own at the start (lower is better), MiB" peaks
