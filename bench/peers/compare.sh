#!/usr/bin/env bash
# Single-device throughput of dprun against ONNX Runtime (onnxruntime-node, all graph
# optimizations, sequential) on the same models, batch sizes and thread counts.
#
# usage: bench/peers/compare.sh [--batches LIST] [--threads LIST] [--seconds S] [--rounds R]
#                               [--markdown FILE] [MODEL ...]
#   MODEL      a .onnx path, or a torchvision model name (resnet18, mobilenet_v2,
#              efficientnet_b0, squeezenet1_1, densenet121, ...) exported with random weights
#              on first use into ~/.cache/dprun-peers/models (export_torchvision.py)
#              (default: the bundled models/mlp.onnx, models/cnn.onnx, models/transformer.onnx)
#   --batches  comma-separated batch sizes (default 8)
#   --threads  comma-separated intra-op thread counts (default 1)
#   --seconds  timed seconds per engine and round (default 2); the iteration count is set
#              from a short dprun run, and both engines run the same number of iterations
#   --rounds   rounds per cell, alternating the engines; the best of each is kept (default 2)
#   --markdown also write the table as markdown to FILE
#
# Prints a row per (model, batch, threads) and, at the end, the geometric mean of the ratios
# and how many cells are below 1.0x. Symbolic dims other than the batch are set to 128
# (the transformer's sequence length). Installs onnxruntime-node on first use (ort_install.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

batches=8 threads_list=1 seconds=2 rounds=2 markdown=""
models=()
die() { echo "compare.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --batches) [ $# -ge 2 ] || die "--batches needs a value"; batches=$2; shift 2 ;;
    --threads) [ $# -ge 2 ] || die "--threads needs a value"; threads_list=$2; shift 2 ;;
    --seconds) [ $# -ge 2 ] || die "--seconds needs a value"; seconds=$2; shift 2 ;;
    --rounds) [ $# -ge 2 ] || die "--rounds needs a value"; rounds=$2; shift 2 ;;
    --markdown) [ $# -ge 2 ] || die "--markdown needs a value"; markdown=$2; shift 2 ;;
    -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) models+=("$1"); shift ;;
  esac
done
for list in "$batches" "$threads_list"; do
  [[ "$list" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "'$list' is not a list of positive integers"
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds '$rounds' is not a positive integer"
[[ "$seconds" =~ ^[0-9]*\.?[0-9]+$ ]] || die "--seconds '$seconds' is not a number"
[ -x "$root/build/dprun" ] || die "build/dprun is missing: build first (see README.md)"
[ ${#models[@]} -gt 0 ] ||
  models=("$root/models/mlp.onnx" "$root/models/cnn.onnx" "$root/models/transformer.onnx")

# Torchvision names become exported files.
zoo="$HOME/.cache/dprun-peers/models"
for i in "${!models[@]}"; do
  m=${models[$i]}
  if [[ "$m" != *.onnx ]]; then
    models[$i]=$(/usr/bin/python3 "$here/export_torchvision.py" "$zoo" "$m" | tail -n 1)
  elif [ ! -f "$m" ]; then
    die "no model file '$m'"
  fi
done

source "$here/ort_install.sh"

# samples/s of one dprun run
dprun_rate() {  # model batch threads iters
  "$root/build/dprun" bench "$1" --devices cpu:0 --batch "$2" --threads "$3" --symbol seq=128 \
    --iters "$4" --warmup 2 | awk '/samples\/s$/ {print $(NF-1)}'
}
dprun_ms() {  # model batch threads: ms per iteration from a short run
  "$root/build/dprun" bench "$1" --devices cpu:0 --batch "$2" --threads "$3" --symbol seq=128 \
    --iters 3 --warmup 1 | awk '/ms per iteration/ {print $1}'
}
ort_rate() {  # model batch threads iters
  node "$here/ort_bench.js" "$1" "$2" "$3" "$4" 128 |
    sed 's/.*"samples_per_s":\([0-9.e+-]*\).*/\1/'
}
max() { awk -v a="$1" -v b="$2" 'BEGIN {print (a > b ? a : b)}'; }

header=$(printf "%-22s %5s %7s %14s %14s %7s" model batch threads dprun_samples/s ort_samples/s ratio)
echo "$header"
rows=()
IFS=, read -ra batch_values <<<"$batches"
IFS=, read -ra thread_values <<<"$threads_list"
for m in "${models[@]}"; do
  for b in "${batch_values[@]}"; do
    for t in "${thread_values[@]}"; do
      ms=$(dprun_ms "$m" "$b" "$t")
      iters=$(awk -v s="$seconds" -v ms="$ms" 'BEGIN {n = int(s * 1000 / ms) + 1; print (n < 3 ? 3 : n)}')
      d=0 o=0
      for ((r = 0; r < rounds; ++r)); do
        d=$(max "$d" "$(dprun_rate "$m" "$b" "$t" "$iters")")
        o=$(max "$o" "$(ort_rate "$m" "$b" "$t" "$iters")")
      done
      ratio=$(awk -v a="$d" -v b="$o" 'BEGIN {printf "%.2f", a / b}')
      name=$(basename "$m" .onnx)
      printf "%-22s %5s %7s %14.1f %14.1f %6sx\n" "$name" "$b" "$t" "$d" "$o" "$ratio"
      rows+=("$name $b $t $d $o $ratio")
    done
  done
done

summary=$(printf "%s\n" "${rows[@]}" | awk '
  { sum += log($6); n += 1; if ($6 < 1.0) below += 1 }
  END { printf "geometric mean %.2fx over %d cells, %d below 1.0x", exp(sum / n), n, below }')
echo "$summary"

if [ -n "$markdown" ]; then
  {
    echo "| model | batch | threads | dprun samples/s | ONNX Runtime samples/s | ratio |"
    echo "|---|---|---|---|---|---|"
    printf "%s\n" "${rows[@]}" |
      awk '{printf "| %s | %s | %s | %.1f | %.1f | %sx |\n", $1, $2, $3, $4, $5, $6}'
    echo
    echo "$summary"
  } >"$markdown.partial"
  mv "$markdown.partial" "$markdown"
fi
