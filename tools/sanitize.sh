#!/usr/bin/env bash
# Builds dprun under the compiler's sanitizers and runs the test suites they are meant for:
#
#   tools/sanitize.sh [address|thread|all] [--cli] [-- GTEST_FLAGS...]
#
#   address  AddressSanitizer + UndefinedBehaviorSanitizer (leaks included), in build-asan/:
#            the unit suite (dprun_unit_tests) and the loader suite (dprun_loader_tests), whole.
#            With --cli also the command-line suite, which runs the instrumented dprun.
#   thread   ThreadSanitizer, in build-tsan/: the suites of the parallel layer (replicate,
#            scatter, parallel_apply, gather, DataParallel, device workers, the simulated
#            streams) and of the collectives (thread process group, reducer, rank failures,
#            DistributedDataParallel), and with MPI the process-group tests under mpirun.
#   all      both (the default).
#
# The compiler is the one the project builds with (g++), so the sanitizer runtimes are Debian's
# libasan8/libubsan1/libtsan2 that come with it. CUDA is left out (DPRUN_CUDA=OFF): its runtime
# is not instrumented and cannot run here; the simulated accelerators stand in for it. Warnings
# are not errors in these builds: -O1 warns differently from the project's build, and warnings
# are the project build's job. Each build directory is kept, so a second run rebuilds only what
# changed (ccache is used when installed, as in the project's build).
#
# Any sanitizer report fails the run: the first one stops its test program (halt_on_error), the
# script prints which suite failed and exits 1. The last line is "sanitize: PASS (...)" or
# "sanitize: FAIL: ...". A full first build takes about an hour per sanitizer on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prog=sanitize

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
}

mode=all
with_cli=0
gtest_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    address | thread | all) mode=$1 ;;
    --cli) with_cli=1 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; gtest_flags=("$@"); break ;;
    *) echo "$prog: unknown argument '$1' (address, thread, all, --cli, --help)" >&2; exit 2 ;;
  esac
  shift
done

jobs=${SANITIZE_JOBS:-$(nproc)}
start=$(date +%s)
failures=()

# configure DIR FLAGS...: a RelWithDebInfo build at -O1 with the given sanitizer flags.
configure() {
  local dir=$1
  shift
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -fno-omit-frame-pointer $*" \
    -DCMAKE_EXE_LINKER_FLAGS="$*" -DCMAKE_SHARED_LINKER_FLAGS="$*" \
    -DDPRUN_CUDA=OFF -DDPRUN_BUILD_BENCH=OFF -DDPRUN_WERROR=OFF >"$dir/sanitize-configure.log" 2>&1 ||
    { echo "$prog: FAIL: configuring $dir (see $dir/sanitize-configure.log)" >&2; exit 1; }
}

build() {
  local dir=$1
  shift
  echo "$prog: building $* in $dir" >&2
  cmake --build "$dir" -j"$jobs" --target "$@" >"$dir/sanitize-build.log" 2>&1 ||
    { tail -20 "$dir/sanitize-build.log" >&2; echo "$prog: FAIL: building in $dir (see $dir/sanitize-build.log)" >&2; exit 1; }
}

# run_suite DIR NAME COMMAND...: runs one test program, its output in DIR/NAME.log; a non-zero
# exit (a failed test or a sanitizer report) is recorded, and the run goes on to the next suite.
run_suite() {
  local log="$1/$2.log" name=$2
  shift 2
  echo "$prog: running $name" >&2
  if "$@" >"$log" 2>&1; then
    echo "$prog: $name: $(grep -E '^\[  PASSED  \]' "$log" | tail -1)" >&2
  else
    grep -E 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:|WARNING: ThreadSanitizer|\[  FAILED  \]' \
      "$log" | head -5 >&2 || true
    echo "$prog: $name failed (see $log)" >&2
    failures+=("$name")
  fi
}

run_address() {
  local dir="$root/build-asan"
  mkdir -p "$dir"
  configure "$dir" -fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined
  local targets=(dprun_unit_tests dprun_loader_tests)
  if [ "$with_cli" = 1 ]; then targets+=(dprun_cli_tests); fi
  build "$dir" "${targets[@]}"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export DPRUN_SOURCE_DIR=$root
  run_suite "$dir" asan-unit "$dir/tests/dprun_unit_tests" --gtest_brief=1 "${gtest_flags[@]}"
  run_suite "$dir" asan-loader "$dir/tests/dprun_loader_tests" --gtest_brief=1 "${gtest_flags[@]}"
  if [ "$with_cli" = 1 ]; then run_suite "$dir" asan-cli "$dir/tests/dprun_cli_tests" --gtest_brief=1 "${gtest_flags[@]}"; fi
  unset ASAN_OPTIONS UBSAN_OPTIONS
}

# The unit tests of the parallel layer and of the collectives, by suite name.
readonly tsan_filter='DataParallel*:ParallelApply*:Replicate*:Scatter*:Gather*:DeviceWorker*:'\
'DeviceList*:RunInParts*:RefreshReplicas*:ChunkSizes*:ScatterRowShare*:ReduceAdd*:'\
'ReduceAddCoalesced*:CommRouting*:BackendCollectives*:ThreadProcessGroup*:Reducer*:'\
'ReplicaGroup*:RankFailure*:AllReduceSum*:SyncBatchNorm*:DistributedDataParallel*:'\
'SimStreams*:SimCollectives*:NnConcurrency*:CpuExecutionContext*:VirtualDevices/*:'\
'Ranks/*:OnOrOff/*:OnEveryDeviceType/*:BundledModels/RepeatedParallelRuns*:OnAccelerators/*'\
'-CpuExecutionContext.ParallelFor*:CpuExecutionContext.ThreadsFollowTheConfig:'\
'CpuExecutionContext.InADeviceSetThreadsDefaultToTheCoreShare:'\
'CpuExecutionContext.RunOnOneThreadTurnsParallelismOffAndRestoresIt:'\
'CpuExecutionContext.KernelsSeeTheRunsContext'

run_thread() {
  local dir="$root/build-tsan"
  mkdir -p "$dir"
  configure "$dir" -fsanitize=thread
  local targets=(dprun_unit_tests)
  if grep -q 'MPI support: ON' "$dir/sanitize-configure.log"; then
    targets+=(dprun_mpi_process_group_tests)
  fi
  build "$dir" "${targets[@]}"
  # OpenMP's teams run on one thread: Debian's libgomp is not instrumented, so TSan cannot see
  # the barrier that ends a parallel region and would report every value a team shares (dprun
  # sizes its teams to OMP_THREAD_LIMIT, and so does oneDNN then). The threads left are dprun's
  # own (device workers, ranks as threads), the ones under test; the six tests of the team sizes
  # and partitioning of OpenMP itself need a team and are left out (tsan_filter).
  export OMP_THREAD_LIMIT=1
  # oneDNN's process-wide primitive cache off: it hands a descriptor made on one thread to
  # another through locks of its own, which TSan cannot see either. dprun keeps its primitives
  # per kernel (ops/common/shape_cache.h), so without the cache each thread makes its own.
  export ONEDNN_PRIMITIVE_CACHE_CAPACITY=0
  # tools/tsan.supp says why each of its entries is there.
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tools/tsan.supp}
  export DPRUN_SOURCE_DIR=$root
  run_suite "$dir" tsan-parallel "$dir/tests/dprun_unit_tests" --gtest_brief=1 \
    --gtest_filter="$tsan_filter" "${gtest_flags[@]}"
  if [ -x "$dir/tests/dprun_mpi_process_group_tests" ]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none \
      run_suite "$dir" tsan-mpi mpirun -np 2 --oversubscribe -x TSAN_OPTIONS \
      "$dir/tests/dprun_mpi_process_group_tests" --gtest_brief=1 --gtest_color=no
  fi
  unset TSAN_OPTIONS OMP_THREAD_LIMIT ONEDNN_PRIMITIVE_CACHE_CAPACITY
}

case "$mode" in
  address) run_address ;;
  thread) run_thread ;;
  all) run_address; run_thread ;;
esac

elapsed=$(( $(date +%s) - start ))
if [ ${#failures[@]} -gt 0 ]; then
  echo "$prog: FAIL: ${failures[*]} ($((elapsed / 60))m$((elapsed % 60))s)"
  exit 1
fi
echo "$prog: PASS ($mode, $((elapsed / 60))m$((elapsed % 60))s)"
