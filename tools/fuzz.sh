#!/usr/bin/env bash
# Fuzzes one of dprun's readers of untrusted bytes with libFuzzer, under AddressSanitizer and
# UndefinedBehaviorSanitizer (clang from Debian's clang package).
#
#   tools/fuzz.sh TARGET [RUNS] [-- LIBFUZZER_FLAGS...]
#
# TARGET is onnx_loader (ONNX model bytes: load, check, compile for the CPU), npy (.npy bytes)
# or checkpoint (a `dprun train` checkpoint: read, then restore into a model and optimizer).
# RUNS is the number of executions (default 1000000). The target (tests/fuzz/fuzz_TARGET.cpp)
# and the readers it drives (loader/*.cpp, and for checkpoint engine/training/checkpoint_*.cpp)
# are compiled instrumented; the rest of the engine comes from build/libdprun.so as the normal
# build makes it (gcc, not instrumented), so build that first. The run starts from the corpus
# in tests/fuzz/corpus/TARGET, which ctest replays (fuzz_TARGET_corpus); inputs that reach new
# code are written to build-fuzz/TARGET-new/ (merge the useful ones into the corpus with
# `-merge=1`). A crash leaves its input as build-fuzz/crash-* and exits non-zero.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
target=${1:?usage: tools/fuzz.sh onnx_loader|npy|checkpoint [RUNS] [-- LIBFUZZER_FLAGS...]}
shift
runs=1000000
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  runs=$1
  shift
fi
[ "${1:-}" = "--" ] && shift
source="$root/tests/fuzz/fuzz_$target.cpp"
[ -f "$source" ] || { echo "fuzz.sh: no target '$target' (tests/fuzz/fuzz_*.cpp)" >&2; exit 2; }
[ -f "$root/build/libdprun.so" ] || { echo "fuzz.sh: build the library first (cmake --build build)" >&2; exit 2; }
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang++ (apt-get install clang)" >&2; exit 2; }

instrumented=("$root"/loader/*.cpp)
if [ "$target" = checkpoint ]; then
  instrumented+=("$root"/engine/training/checkpoint_*.cpp)
fi
out="$root/build-fuzz"
mkdir -p "$out" "$out/$target-new"
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize=vptr -fno-sanitize-recover=undefined -fopenmp -DONNX_ML=1
       -DONNX_NAMESPACE=onnx -DDPRUN_SOURCE_DIR="\"$root\"" -I"$root")
echo "fuzz.sh: building $out/fuzz_$target" >&2
clang++ "${flags[@]}" "$source" "${instrumented[@]}" -o "$out/fuzz_$target" \
  -L"$root/build" -Wl,-rpath,"$root/build" -ldprun -lonnx -lonnx_proto -lprotobuf

cd "$out"
# Large allocations are the reader refusing nothing: a malformed size must be an error, not
# an attempt. -rss_limit_mb bounds the whole process.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  "./fuzz_$target" -runs="$runs" -rss_limit_mb=4096 -malloc_limit_mb=2048 -timeout=20 \
  -print_final_stats=1 "$@" "$out/$target-new" "$root/tests/fuzz/corpus/$target"
