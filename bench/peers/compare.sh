#!/usr/bin/env bash
# Single-device throughput of dprun against ONNX Runtime on the same models, batch and thread
# count. Installs onnxruntime-node on first use (ort_install.sh).
# usage: bench/peers/compare.sh [BATCH] [THREADS] [ITERS] MODEL.onnx...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
batch=${1:-8}; threads=${2:-1}; iters=${3:-20}; shift 3 || true
models=("$@")
[ ${#models[@]} -gt 0 ] || models=("$root/models/mlp.onnx" "$root/models/cnn.onnx" "$root/models/transformer.onnx")
source "$here/ort_install.sh"
printf "%-28s %6s %7s %14s %14s %7s\n" model batch threads dprun_samples/s ort_samples/s ratio
for m in "${models[@]}"; do
  d=$("$root/build/dprun" bench "$m" --devices cpu:0 --threads "$threads" --batch "$batch" --symbol seq=128 \
      --iters "$iters" --warmup 3 | awk '/samples\/s$/ {print $(NF-1)}')
  o=$(node "$here/ort_bench.js" "$m" "$batch" "$threads" "$iters" 128 |
      sed 's/.*"samples_per_s":\([0-9.e+-]*\).*/\1/')
  printf "%-28s %6s %7s %14.1f %14.1f %6.2fx\n" "$(basename "$m")" "$batch" "$threads" "$d" "$o" \
    "$(awk -v a="$d" -v b="$o" 'BEGIN {print a / b}')"
done
