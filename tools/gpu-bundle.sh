#!/usr/bin/env bash
# Packs a CUDA build for a GPU machine that has the CUDA libraries but none of Debian's
# packages: the CLI and the test programs, the CUDA plugin (lib/libdprun_cuda.so, which
# libdprun opens from its own folder), every shared library they load that is neither CUDA's
# nor the C library's, the ONNX conformance data, the bundled models, the GPU check
# (check/gpu_check.py) and a launcher.
#
# usage: tools/gpu-bundle.sh [BUILD_DIR [ARCHIVE]]
#   BUILD_DIR  a CUDA build (default: build)
#   ARCHIVE    where to write the archive (default: BUILD_DIR/gpu-bundle.tar.xz)
#
# On the GPU machine (docs/gpu.md, "Running on a GPU machine"):
#   tar -xJf gpu-bundle.tar.xz -C /tmp
#   /tmp/gpu-bundle/run.sh check --quick      # every check, under 8 minutes; report in ./gpu-check-report
#   /tmp/gpu-bundle/run.sh dprun_cuda_tests   # one program of the bundle
# run.sh puts the bundle's libraries first on LD_LIBRARY_PATH, then every folder on the machine
# that holds libcudart, cuBLAS, cuDNN or NCCL (the CUDA installation, or a PyTorch install's
# nvidia/*/lib), and sets DPRUN_SOURCE_DIR to the bundle's src/ (the models the tests read).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${2:-$build/gpu-bundle.tar.xz}
die() { echo "gpu-bundle.sh: $*" >&2; exit 1; }
[ -x "$build/dprun" ] || die "$build/dprun is missing: build first (see README.md)"
[ -x "$build/tests/dprun_cuda_tests" ] ||
  die "$build/tests/dprun_cuda_tests is missing: $build is not a CUDA build"
data=/usr/share/libonnx-testdata/data
[ -d "$data" ] || die "$data is missing: install libonnx-testdata (tools/install-deps.sh)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bundle=$work/gpu-bundle
mkdir -p "$bundle/bin" "$bundle/lib"
binaries=("$build/dprun" "$build"/tests/dprun_cuda_tests "$build"/tests/dprun_unit_tests)
cp "${binaries[@]}" "$bundle/bin/"

# Libraries the GPU machine provides itself: CUDA's, and the C library's (which must match
# the machine's kernel interface and loader).
provided='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl)\.so'
ldd "${binaries[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    [[ "$name" =~ $provided ]] && continue
    cp -L "$path" "$bundle/lib/$name"
  done
# The CUDA plugin: dprun opens it with dlopen, from the folder libdprun.so.0 is in.
[ -f "$build/libdprun_cuda.so" ] || die "$build/libdprun_cuda.so is missing"
[ -f "$bundle/lib/libdprun_cuda.so" ] || cp -L "$build/libdprun_cuda.so" "$bundle/lib/"
strip --strip-unneeded "$bundle"/bin/* "$bundle"/lib/* 2>/dev/null || true
cp -r "$data" "$bundle/data"
# What the check and the tests read: the bundled models and training cases, the conformance
# expectations, and the check itself.
mkdir -p "$bundle/src/tests" "$bundle/check"
cp -r "$root/models" "$bundle/src/models"
cp "$root/tests/conformance_expected.txt" "$bundle/src/tests/"
cp "$root/bench/peers/gpu_check.py" "$bundle/check/"

cat >"$bundle/run.sh" <<'EOF'
#!/usr/bin/env bash
# Runs a program of the bundle (dprun, dprun_cuda_tests, dprun_unit_tests) with its libraries,
# or the GPU check: run.sh check [--quick] [--out DIR] [--budget SECONDS] [--dry-run].
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: run.sh PROGRAM [ARGS...] | run.sh check [OPTIONS]" >&2; exit 2; }
# The folders are looked for once and kept in a file beside this script.
# find fails when a file vanishes while it looks (other programs' temporary files): ignored.
if [ -f "$here/cuda-dirs" ]; then
  cuda_dirs=$(cat "$here/cuda-dirs")
else
  cuda_dirs=$( (find / -xdev \( -type f -o -type l \) \( -name 'libcudart.so.13' \
    -o -name 'libcublas.so.13' -o -name 'libcudnn.so.9' -o -name 'libnccl.so.2' \) \
    -printf '%h\n' 2>/dev/null || true) | sort -u | paste -sd: -)
  # Kept only where the bundle's folder is writable.
  { echo "$cuda_dirs" >"$here/cuda-dirs.$$" && mv "$here/cuda-dirs.$$" "$here/cuda-dirs"; } \
    2>/dev/null || rm -f "$here/cuda-dirs.$$" 2>/dev/null || true
fi
export LD_LIBRARY_PATH="$here/lib${cuda_dirs:+:$cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DPRUN_SOURCE_DIR=${DPRUN_SOURCE_DIR:-$here/src}
program=$1
shift
if [ "$program" = check ]; then
  # The GPU check: every stage, a report in ./gpu-check-report (--out), exit 1 on a failed
  # check, 3 where no GPU is present. run.sh check --help lists its options.
  exec "${PYTHON:-python3}" "$here/check/gpu_check.py" --bundle "$here" "$@"
fi
exec "$here/bin/$program" "$@"
EOF
chmod +x "$bundle/run.sh"

tar -C "$work" -cJf "$out.partial" gpu-bundle
mv "$out.partial" "$out"
size=$(stat -c %s "$out")
echo "gpu-bundle.sh: wrote $out ($((size / 1048576)) MiB; $(find "$bundle/lib" -type f | wc -l) libraries)"
# The device tool carries at most 64 MiB with the working tree.
[ "$size" -lt $((64 * 1048576)) ] || die "$out is 64 MiB or more: too large to carry"
