#!/usr/bin/env bash
# Installs the Debian 12 packages dprun builds, tests and benchmarks with. Idempotent: does
# nothing when everything is present. Runs apt-get as root, or through sudo.
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
  # oneDNN's CMake package looks for OpenCL; Debian only recommends these two.
  libdnnl-dev opencl-headers ocl-icd-opencl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # nlohmann/json writes the command line's --json reports and reads them in the tests.
  nlohmann-json3-dev
  # CLI11 parses the command line: typed options, exclusions, per-command help.
  libcli11-dev
  python3-numpy
  # The Python module (tools/python/): pybind11 and the headers of Debian's python3; its tests run
  # with pytest.
  pybind11-dev python3-dev python3-pytest
  # onnx.load reads back the models dprun saves with external data, in the tests.
  python3-onnx
  # Open MPI for multi-process runs (--distributed) and their tests; openmpi-bin's mpirun
  # brings openssh-client, which it needs to start ranks on other hosts.
  libopenmpi-dev openmpi-bin
)
# The peer scripts (bench/peers/ort_install.sh) install onnxruntime-node with npm and run it
# with node. A node that is already there (NodeSource's bundles npm and conflicts with
# Debian's) is kept.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  as_root=(sudo)
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
