#!/usr/bin/env bash
# Installs the dependencies, builds everything (CUDA code too when nvcc is on PATH), runs
# the whole test suite with ctest, then zdp's CUDA kernels and the GPU path by the SIMT
# emulation under ASan and UBSan (where CUDA's headers are; ZDP_TEST_SANITIZERS=all adds
# the forked-rank tests and the NCCL tests under TSan), then checks the
# installed package: install into a temporary prefix, build examples/embed against it
# (find_package and pkg-config) and train it with dp-launch on 2 CPU ranks
# (tests/install/check_embed.sh), then runs each fuzz target for 10 s (FUZZ_SECONDS;
# scripts/fuzz.sh). With nvcc, it also packs the GPU check's carry folder from this build
# (tests/gpu/carry.sh, so that it cannot rot) and runs the check's self-check. Used by the
# README and by .ci/run.
#   BUILD_DIR=build (default)   CI=true turns warnings into errors.   ZDP_TEST_SANITIZERS=all
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
# Line tables only (-g1: function names and file:line in backtraces, no local variables):
# -g made every compile a quarter slower, and CI compiles all of zdp three times (here,
# the ASan build, the fuzz build) in its 30 minutes. The README's run command keeps what
# this folder was configured with.
cmake -S . -B "$build_dir" -G Ninja -DZDP_WERROR="$werror" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
cmake --build "$build_dir" -j "$(nproc)"
ctest --test-dir "$build_dir" -j "$(nproc)" --output-on-failure --timeout 600
# multihost_test's lines: why it skipped (no root, no iproute2), or the measured time from
# a rank killed on node 1 to node 0's launcher stopping.
grep -h "^multihost_test: " "$build_dir"/Testing/Temporary/LastTest*.log 2>/dev/null | sort -u || true
# The kernels' no-CUDA entry points (kernels/no_cuda/) exist only in builds without CUDA:
# when this build has CUDA, a second, small build compiles zdp_kernels without it and runs
# kernels_no_cuda_test (22 build steps: 72 CPU-seconds of compiling without ccache, 16 s
# with a warm one).
if grep -q "define ZDP_HAVE_CUDA 1" "$build_dir/core/include/zdp/build_config.h"; then
  nocuda_dir="${build_dir}-nocuda"
  cmake -S . -B "$nocuda_dir" -G Ninja -DZDP_CUDA=OFF -DZDP_WERROR="$werror" -DZDP_BUILD_BENCH=OFF > /dev/null
  cmake --build "$nocuda_dir" -j "$(nproc)" --target kernels_no_cuda_test
  "$nocuda_dir/tests/kernels_no_cuda_test" --gtest_brief=1
fi
# zdp's CUDA kernels and the GPU path above them run by the SIMT emulation again, built
# with ASan + UBSan (scripts/sanitize.sh --target simt_emulation_test): a kernel's read
# past a buffer that its own mask hides, which neither a GPU nor the plain emulation
# reports, fails here, and so does undefined behaviour in its index arithmetic or in the
# host code of the GPU path (the engine's step, the GPT, cuBLASLt's and cuDNN's wrappers,
# the NCCL communicator with ranks as threads). Wherever CUDA's headers are (the emulation
# was built above).
#
# CI's budget is 30 minutes on 2 cores from a clean clone with no compiler cache, and
# each sanitizer build compiles zdp again (stop 37 measured about 38 minutes with the
# steps below at their widest). So CI builds only simt_emulation_test under ASan; the
# forked ranks (GlooGpuRanks, NcclEmulatedRanks), dp-launch on emulated GPUs (NcclLaunch)
# and dp-train's loop (DeterministicGpu) run in the plain build above, and under the
# sanitizers by hand or with ZDP_TEST_SANITIZERS=all:
#   bash scripts/sanitize.sh asan --target simt_tests -R '^simt/' -- -E '^simt/DeterministicGpu\.'
#   bash scripts/sanitize.sh tsan --target simt_tests -R '^simt/(Nccl|SimtEmulatorDeathTest\.UnderTsan)'
# The second is zdp's NCCL communicator under ThreadSanitizer (its watchdog thread beside
# the enqueuing thread; README, "zdp's own kernels without a GPU").
if [ -x "$build_dir/tests/simt_emulation_test" ]; then
  simt_start=$SECONDS
  # CI: only simt_emulation_test is built, so its tests alone are asked for.
  asan_target=simt_emulation_test
  asan_skip='^simt/(DeterministicGpu|GlooGpuRanks|NcclEmulatedRanks|NcclLaunch)\.'
  if [ "${ZDP_TEST_SANITIZERS:-}" = all ]; then
    asan_target=simt_tests
    asan_skip='^simt/DeterministicGpu\.'
  fi
  BUILD_DIR="${build_dir}-simt-asan" bash scripts/sanitize.sh asan --target "$asan_target" -R '^simt/' -- -E "$asan_skip"
  echo "test.sh: the SIMT emulation under ASan + UBSan (build and run) took $((SECONDS - simt_start)) s"
  if [ "${ZDP_TEST_SANITIZERS:-}" = all ]; then
    tsan_start=$SECONDS
    BUILD_DIR="${build_dir}-simt-tsan" bash scripts/sanitize.sh tsan --target simt_tests \
      -R '^simt/(Nccl|SimtEmulatorDeathTest\.UnderTsan)'
    echo "test.sh: zdp's NCCL communicator on the emulation under TSan (build and run) took $((SECONDS - tsan_start)) s"
  fi
fi
bash tests/install/check_embed.sh "$build_dir"
# A short run of every libFuzzer target from its seed corpus (tests/fuzz/, clang with ASan
# and UBSan): a finding fails the run. 10-minute runs are the pre-merge check (README).
fuzz_start=$SECONDS
bash scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
echo "test.sh: fuzzing (build and runs) took $((SECONDS - fuzz_start)) s"
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  carry_start=$SECONDS
  # From the build above: a second, Release sm_90 compile of the GPU binaries (the
  # default of carry.sh, for a GPU session) would compile every GPU binary a second time.
  # No baseline dp-train (a second build of an older commit, for a GPU session only).
  CARRY_BASELINE=none CARRY_FROM_BUILD="$build_dir" bash tests/gpu/carry.sh
  bash gpu-carry/check.sh --self-check
  echo "test.sh: GPU carry folder and self-check took $((SECONDS - carry_start)) s"
else
  echo "test.sh: no nvcc: the GPU carry folder (tests/gpu/carry.sh) is not built"
fi
