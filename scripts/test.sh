#!/usr/bin/env bash
# Installs the dependencies, builds everything (CUDA code too when nvcc is on PATH), runs
# the whole test suite with ctest, then checks the installed package: install into a
# temporary prefix, build examples/embed against it (find_package and pkg-config) and
# train it with dp-launch on 2 CPU ranks (tests/install/check_embed.sh). Used by the
# README and by .ci/run.
#   BUILD_DIR=build (default)   CI=true turns warnings into errors.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
# The checkpoint test opens model.safetensors with the real Python package; without it
# (no pip, no network) that test skips and says why, the rest runs.
if ! python3 -c 'import safetensors, numpy' 2>/dev/null; then
  python3 -m pip install --quiet safetensors numpy 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages safetensors numpy 2>/dev/null ||
    echo "test.sh: could not pip-install safetensors and numpy: safetensors_python_test will skip"
fi
build_dir="${BUILD_DIR:-build}"
werror=OFF
[ -n "${CI:-}" ] && werror=ON
cmake -S . -B "$build_dir" -G Ninja -DZDP_WERROR="$werror"
cmake --build "$build_dir" -j "$(nproc)"
ctest --test-dir "$build_dir" -j "$(nproc)" --output-on-failure --timeout 600
bash tests/install/check_embed.sh "$build_dir"
