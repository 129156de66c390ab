#!/usr/bin/env bash
# Builds zdp's CPU code with a sanitizer and runs tests under it, multi-process tests
# included (their ranks and store server are instrumented children too):
#
#   scripts/sanitize.sh asan   ASan + UBSan (-fsanitize=address,undefined, LeakSanitizer on),
#                              every CPU test                          -> build-asan/
#   scripts/sanitize.sh tsan   TSan, every CPU test                    -> build-tsan/
#                              (with --target simt_tests -R '^simt/Nccl': zdp's NCCL
#                              communicator, its watchdog and the emulated NCCL with ranks
#                              as threads and forked, what scripts/test.sh runs with
#                              the emulation's own TSan test)
#
# Options (after the mode):
#   --repeat N     run each selected test N times (ctest --repeat until-fail:N)
#   -R REGEX       only the tests whose names match (ctest -R), e.g. a flaky one
#   --no-build     reuse the existing build directory
#   --target NAME  build only NAME (with what it needs) instead of everything, e.g.
#                  simt_tests with -R '^simt/': zdp's CUDA kernels and the GPU path above
#                  them run by the SIMT emulation under ASan + UBSan (what scripts/test.sh runs)
#   --             everything after it goes to ctest as is
# Environment: BUILD_DIR (default build-<mode>), JOBS (default nproc), CC / CXX (default
# gcc / g++; clang works too). Any report fails the test that made it: UBSan does not
# recover, ASan/TSan halt on the first error, a rank process exits non-zero on one.
# Exit status: ctest's. The fork rule these runs check is in docs/design.md ("Fork safety").
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
mode="$1"
shift
repeat=1
regex=""
build=1
target=""
ctest_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --repeat) repeat="${2:?--repeat needs a count}"; shift 2 ;;
    -R) regex="${2:?-R needs a regular expression}"; shift 2 ;;
    --no-build) build=0; shift ;;
    --target) target="${2:?--target needs a build target}"; shift 2 ;;
    --) shift; ctest_extra=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "sanitize.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
case "$repeat" in ''|*[!0-9]*|0) echo "sanitize.sh: --repeat takes a positive count, not '$repeat'" >&2; exit 2 ;; esac

# Both modes build everything (or --target) and run every CPU test (GPU tests are not
# built: no CUDA; the SIMT emulation's kernels are, where CUDA's headers are installed).
case "$mode" in
  asan)
    flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
    simt=ON ;;
  tsan)
    flags="-fsanitize=thread -fno-omit-frame-pointer"
    # The SIMT emulation runs every emulated GPU thread as a fiber of one OS thread, each
    # switch announced to TSan (testing/simt/fiber_context.h), so TSan's reports are races
    # between OS threads. Its dp-train runs (^simt/DeterministicGpu\.) outlast their
    # deadlines under TSan on 2 cores: leave them out (-- -E) of a whole run.
    simt=ON ;;
  *) usage ;;
esac

# GCC's -Wmaybe-uninitialized misfires on instrumented code (its own documentation warns
# of false positives under -fsanitize); the ordinary build keeps the warning as an error.
if ! "${CXX:-g++}" --version | grep -qi clang; then
  flags="$flags -Wno-maybe-uninitialized"
fi

build_dir="${BUILD_DIR:-build-$mode}"
jobs="${JOBS:-$(nproc)}"
configure() {
  # -O1 -g1: usable stacks in reports (function names, file:line) at a bearable speed;
  # -g1 rather than -g, whose local-variable info cost a quarter of the compile time
  # (plan_command.cc under ASan: 20.7 s at -g, 15.7 s at -g1). No CUDA: the sanitizers
  # cover the host code, and nvcc-compiled objects would not be instrumented anyway.
  cmake -S . -B "$build_dir" -G Ninja -DZDP_CUDA=OFF -DZDP_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="${CC:-gcc}" -DCMAKE_CXX_COMPILER="${CXX:-g++}" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" -DZDP_TEST_TIMEOUT=1500 \
    -DZDP_SIMT_EMULATION="$simt"
}
instrumented() { grep -qxF -- "CMAKE_CXX_FLAGS:STRING=$flags" "$build_dir/CMakeCache.txt"; }
if [ "$build" = 1 ]; then
  configure
  # A build folder first configured with another compiler (a plain `cmake` picks c++, not
  # g++) has its cache wiped by CMake at the change, and every setting above with it: the
  # build would then be silently uninstrumented, with CUDA. Configure once more.
  instrumented || configure
  if ! instrumented; then
    echo "sanitize.sh: $build_dir/CMakeCache.txt does not hold CMAKE_CXX_FLAGS=\"$flags\"; remove $build_dir and run again" >&2
    exit 2
  fi
  if [ -n "$target" ]; then
    cmake --build "$build_dir" -j "$jobs" --target "$target"
  else
    cmake --build "$build_dir" -j "$jobs"
  fi
fi

supp="$PWD/scripts/sanitizers"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:strict_init_order=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$supp/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp}"
if [ "$mode" = tsan ]; then
  # libgomp is not built with TSan: its barriers are invisible to it, so a team of more
  # than one thread reports false races (every one of 147 reports in the first whole-suite
  # run had libgomp in its stacks). One OpenMP thread per process keeps the reports ours:
  # OMP_THREAD_LIMIT also caps what dp-launch (OMP_NUM_THREADS per rank) and tests
  # (omp_set_num_threads) ask for, and reaches every rank through the environment. The
  # tests that compare thread counts skip, saying so.
  export OMP_NUM_THREADS=1 OMP_THREAD_LIMIT=1
fi

args=(--test-dir "$build_dir" -j "$jobs" --output-on-failure --timeout 1500)
[ -n "$regex" ] && args+=(-R "$regex")
[ "$repeat" -gt 1 ] && args+=(--repeat "until-fail:$repeat")
echo "sanitize.sh: $mode: ctest ${args[*]} ${ctest_extra[*]}"
start=$(date +%s)
status=0
ctest "${args[@]}" "${ctest_extra[@]}" || status=$?
echo "sanitize.sh: $mode: ctest exit $status after $(( $(date +%s) - start )) s"
exit "$status"
