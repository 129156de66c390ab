#!/usr/bin/env bash
# Installs every Debian 12 package zdp needs to build and test. Idempotent: packages
# already present are left alone, and apt-get update runs only when something is missing.
# The CUDA toolkit is optional and is never installed here: when nvcc is on PATH the
# build compiles the CUDA code too (see ZDP_CUDA in CMakeLists.txt), and cuDNN's frontend
# headers are pip-installed for its fused attention (below).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgloo-dev            # CPU collectives (Gloo, TCP transport)
  libgtest-dev libgmock-dev googletest   # unit and multi-process tests
  libbenchmark-dev       # micro-benchmarks in bench/
  libtomlplusplus-dev    # TOML configs
  libcli11-dev           # command-line parsing for dp-launch / dp-ckpt
  nlohmann-json3-dev     # manifests, traces, reports
  libxxhash-dev          # checkpoint checksums (XXH3-64 of fixed-size chunks)
  libopenblas-dev        # CPU GEMMs
  libopenblas-openmp-dev # ... on OpenMP, sharing the CPU kernels' threads (preferred by kernels/CMakeLists.txt)
  fortunes               # the quickstart's text corpus (configs/quickstart.toml)
  python3                # test helpers (testing/check_svg.py: the plots' XML)
  librsvg2-bin           # rsvg-convert: the tests render every plot to PNG
  iproute2               # `ip netns`: the two-host test's network namespaces (multihost_test)
  clang libclang-rt-14-dev   # libFuzzer + sanitizer runtimes: the fuzz targets (scripts/fuzz.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#packages[@]} packages present"
fi

# With the CUDA toolkit: cuDNN's C++ frontend (header-only; pip's nvidia-cudnn-frontend
# wheel, without its Python dependencies, which the headers do not need) for the GPT's
# fused attention. CMake finds the headers through python3 (CMakeLists.txt); without
# them the build takes the batched attention path and says so. ~11 MB download; pinned to
# the version the fused path was written and compiled against (1.32.0: its graph API).
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if python3 -c "import importlib.metadata as m; m.distribution('nvidia-cudnn-frontend')" 2>/dev/null; then
    echo "install-deps: nvidia-cudnn-frontend present"
  else
    echo "install-deps: pip-installing nvidia-cudnn-frontend (cuDNN's C++ frontend headers)"
    python3 -m pip install --quiet --no-deps nvidia-cudnn-frontend==1.32.0 2>/dev/null ||
      python3 -m pip install --quiet --no-deps --break-system-packages nvidia-cudnn-frontend==1.32.0 2>/dev/null ||
      echo "install-deps: could not pip-install nvidia-cudnn-frontend: the build has no fused attention"
  fi
fi
