#!/usr/bin/env bash
# Install the Debian packages rcsweep needs (only those missing). Safe to run repeatedly.
# Optional, not installed here: libxsmm-dev (bench/bench_small_gemm is built only where it is).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  openmpi-bin libopenmpi-dev libopenblas-dev liblapacke-dev libhdf5-dev
  libopenblas-pthread-dev                     # the pthreads build of OpenBLAS, the one rcsweep links (cmake/RcsweepDependencies.cmake)
  libblis-dev                                 # BLIS, opened at run time for the products it multiplies faster (src/linalg/blis.hpp)
  libgtest-dev libgmock-dev libbenchmark-dev libtomlplusplus-dev libcli11-dev librandom123-dev
  nlohmann-json3-dev                          # src/checkpoint: config.json and safetensors headers of model folders
  python3-h5py python3-numpy python3-matplotlib python3-pandas python3-xarray python3-scipy python3-pytest
  python3-tqdm                                # the progress bar of the Python API (run(progress=True))
  clang-16 libclang-rt-16-dev libomp-16-dev  # scripts/fuzz.sh: libFuzzer, ASan/UBSan (clang 14 lacks std::source_location)
  clang-format                                # scripts/format.sh (.clang-format)
  slurm-wlm munge                             # tests/cluster: a real one-node Slurm runs the job scripts
  help2man lmod python3-venv python3-setuptools  # man pages, the module file, pip install of the toolkit (tests/cluster/test_install.py)
  python3-nbclient python3-nbformat python3-ipykernel  # tests/python/test_notebook.py runs docs/examples/*.ipynb headless
  iproute2 util-linux                         # tests/cluster: nodes in network namespaces (ip netns, nsenter)
  chromium                                    # tests/python: the report page checked in headless Chromium
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "[install] all ${#packages[@]} Debian packages present"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "[install] need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "[install] installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
