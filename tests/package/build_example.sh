#!/usr/bin/env bash
# Installs dprun from BUILD_DIR into a fresh prefix, builds the example application against the
# installed package only, and runs it on MODEL.
set -euo pipefail
build_dir=$1
source_dir=$2
model=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/tests/package/example" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/dprun_example" "$model"
