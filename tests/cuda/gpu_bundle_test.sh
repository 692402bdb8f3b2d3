#!/usr/bin/env bash
# ctest gpu_bundle: tools/gpu-bundle.sh packs a CUDA build that runs from its archive alone.
# usage: gpu_bundle_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source_dir=$2
fail() { echo "gpu_bundle_test: $*" >&2; exit 1; }
"$source_dir/tools/gpu-bundle.sh" "$build"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$build/gpu-bundle.tar.xz" -C "$work" || fail "could not unpack the archive"
b=$work/gpu-bundle
for p in dprun dprun_cuda_tests dprun_unit_tests; do [ -x "$b/bin/$p" ] || fail "no bin/$p"; done
for l in libdprun.so.0 libdnnl.so.2 libonnx.so.1 libprotobuf.so.32; do
  [ -f "$b/lib/$l" ] || fail "no lib/$l"
done
# The machine's own: CUDA's libraries and the C library are never packed.
if ls "$b/lib" | grep -E '^(libcuda|libcublas|libcudnn|libnccl|libc\.so|libm\.so)'; then
  fail "packed a library the GPU machine provides"
fi
[ -f "$b/data/node/test_abs/model.onnx" ] || fail "no conformance data"
cd "$source_dir"
out=$("$b/run.sh" dprun_unit_tests --gtest_filter=OpFusion.MatMulTakesItsBiasAdd 2>&1) ||
  fail "the bundled unit test failed: $out"
grep -q '^\[  PASSED  \] 1 test\.$' <<<"$out" || fail "the bundled unit test did not pass: $out"
out=$("$b/run.sh" dprun conformance --data "$b/data" --filter test_abs 2>&1) ||
  fail "the bundled conformance run failed: $out"
grep -Eq '^node +1 passed' <<<"$out" || fail "the bundled conformance run did not pass: $out"
# With no GPU the CLI says so; with one it runs the bundled CNN on it.
if out=$("$b/run.sh" dprun models/cnn.onnx --devices cuda:0 2>&1); then
  grep -q 'logits' <<<"$out" || fail "no output from cuda:0: $out"
else
  [ "$out" = "dprun: error: device cuda:0: no CUDA GPU is present" ] || fail "unexpected: $out"
fi
echo "gpu_bundle_test: PASS"
