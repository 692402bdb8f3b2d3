#!/usr/bin/env bash
# ctest gpu_bundle: tools/gpu-bundle.sh packs a CUDA build, under 64 MiB with its CUDA plugin,
# that runs from its archive alone (an empty environment), and whose GPU check prints its plan
# and, without a GPU, runs what needs none and reports the rest as skipped (exit 3).
# usage: gpu_bundle_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source_dir=$2
fail() { echo "gpu_bundle_test: $*" >&2; exit 1; }
"$source_dir/tools/gpu-bundle.sh" "$build"
size=$(stat -c %s "$build/gpu-bundle.tar.xz")
[ "$size" -lt $((64 * 1048576)) ] || fail "the archive is $size bytes: 64 MiB or more"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xJf "$build/gpu-bundle.tar.xz" -C "$work" || fail "could not unpack the archive"
b=$work/gpu-bundle
for p in dprun dprun_cuda_tests dprun_unit_tests; do [ -x "$b/bin/$p" ] || fail "no bin/$p"; done
for f in check/gpu_check.py src/models/mlp.onnx src/models/training/mlp_sgd.args \
  src/tests/conformance_expected.txt; do
  [ -f "$b/$f" ] || fail "no $f"
done
for l in libdprun.so.0 libdprun_cuda.so libdnnl.so.2 libonnx.so.1 libprotobuf.so.32; do
  [ -f "$b/lib/$l" ] || fail "no lib/$l"
done
# The machine's own: CUDA's libraries and the C library are never packed.
if find "$b/lib" -printf '%f\n' | grep -E '^(libcuda|libcublas|libcudnn|libnccl|libc\.so|libm\.so)'; then
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
# From the bundle alone, in an empty environment, away from the source tree.
cd "$work"
out=$(env -i "$b/run.sh" dprun --version 2>&1) || fail "dprun --version: $out"
grep -q '^dprun ' <<<"$out" || fail "dprun --version printed: $out"
out=$(env -i "$b/run.sh" dprun "$b/src/models/mlp.onnx" --devices cpu:0 2>&1) ||
  fail "a CPU run from the bundle failed: $out"
grep -q 'logits' <<<"$out" || fail "no output from the CPU run: $out"
# The check's plan, every stage listed.
out=$(env -i "$b/run.sh" check --quick --dry-run 2>&1) || fail "check --dry-run: $out"
for stage in plugin tests models dataparallel nccl streams cuda_graphs torch train; do
  grep -Eq "^  $stage +[0-9]+ s " <<<"$out" || fail "the plan lacks $stage: $out"
done
# Without a GPU the check runs the plugin stage (no CUDA library on a CPU run; cuda:0's error)
# and says of each GPU stage that it was skipped for want of one; exit 3.
if [ ! -e /dev/nvidiactl ]; then
  rc=0
  out=$(env -i "$b/run.sh" check --quick --stages plugin,tests,nccl,streams,cuda_graphs \
    --out "$work/report" 2>&1) || rc=$?
  [ "$rc" = 3 ] || fail "check without a GPU: exit $rc, not 3: $out"
  grep -q '^plugin: a CPU run of models/mlp.onnx: rc 0; CUDA libraries opened: none$' <<<"$out" ||
    fail "the CPU run opened a CUDA library, or did not run: $out"
  for stage in tests nccl cuda_graphs; do
    grep -Eq "^$stage +skipped: no GPU" <<<"$out" || fail "$stage not skipped for no GPU: $out"
  done
  grep -Eq '^streams +not available' <<<"$out" || fail "streams not reported: $out"
  grep -q '| plugin | pass |' "$work/report/report.md" || fail "report.md: $(cat "$work/report/report.md")"
  grep -q '"status": "skipped"' "$work/report/report.json" || fail "report.json lacks the skips"
fi
echo "gpu_bundle_test: PASS"
