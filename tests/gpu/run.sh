#!/usr/bin/env bash
# Builds zdp with CUDA on a GPU machine and runs, in one go: the GPU tests, the GPU
# benchmarks (fused AdamW vs cudaMemcpy, cuBLASLt), the CPU kernel benchmarks, the rest
# of the ctest suite, then the other benchmarks. Logs go to ${OUT:-out}/; the summary
# printed last lists every step and a table of the benchmarks' "summary:" lines, and the
# exit code is non-zero if any step failed. Meant to finish within 8 minutes on one H200.
#
#   bash tests/gpu/run.sh            # from the repository root (or anywhere)
#   OUT=/tmp/gpu-logs JOBS=8 bash tests/gpu/run.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
out="${OUT:-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
build="$repo/build-gpu"
jobs="${JOBS:-$(nproc)}"

declare -a summary=()
failed=0
run_start=$SECONDS

# step NAME LOGFILE CMD...: runs CMD with its output in LOGFILE (and the tail on the
# console when it fails); records the outcome and the time it took.
step() {
  local name="$1" log="$out/$2"
  shift 2
  local start=$SECONDS rc=0
  echo "== $name (log: $log)"
  "$@" >"$log" 2>&1 || rc=$?
  local took=$((SECONDS - start))
  if ((rc == 0)); then
    summary+=("PASS  $name (${took}s)")
  else
    failed=1
    summary+=("FAIL  $name (exit $rc, ${took}s; see $log)")
    echo "-- $name failed (exit $rc); last lines of $log:"
    tail -n 40 "$log" || true
  fi
  return 0
}

print_summary() {
  echo
  echo "================ GPU run summary ================"
  echo "host: $(hostname)  commit: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' || true
  fi
  local line
  for line in "${summary[@]}"; do echo "$line"; done
  # Each benchmark ends with one "summary:" line: the short table of results.
  local found=0 log
  for log in "$out"/bench-*.log; do
    [ -f "$log" ] || continue
    line="$(grep -h '^summary:' "$log" | tail -n 1 || true)"
    [ -n "$line" ] || continue
    ((found)) || echo "---------------- benchmark results ----------------"
    found=1
    printf '%-16s %s\n' "$(basename "$log" .log | sed 's/^bench-//')" "${line#summary: }"
  done
  echo "total: $((SECONDS - run_start)) s (budget 480 s)"
  echo "logs: $out"
  if ((failed)); then echo "RESULT: FAILED"; else echo "RESULT: OK"; fi
}
trap print_summary EXIT

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true

# A failed install is only a warning: the packages the build needs may all be there, and
# if not, configure says which one is missing.
echo "== install dependencies (log: $out/install-deps.log)"
if bash scripts/install-deps.sh >"$out/install-deps.log" 2>&1; then
  summary+=("PASS  install dependencies")
else
  summary+=("WARN  install dependencies failed (see $out/install-deps.log); continuing")
  tail -n 20 "$out/install-deps.log" || true
fi
rm -rf "$build"
step "configure (ZDP_CUDA=ON)" configure.log \
  cmake -S . -B "$build" -G Ninja -DZDP_CUDA=ON -DZDP_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
if ((failed)); then exit 1; fi
step "build" build.log cmake --build "$build" -j "$jobs"
if ((failed)); then exit 1; fi

step "ctest -L gpu" ctest-gpu.log ctest --test-dir "$build" -L gpu --output-on-failure --timeout 600

# Kernel benchmarks first (GPU, then CPU with all cores), each with a time limit. Their
# tables are in the logs; their summary lines make the table printed last.
bench_run() {  # bench_run NAME LIMIT_S ARGS...
  local name="$1" limit="$2"
  shift 2
  if [ -x "$build/bench/$name" ]; then
    step "bench $name" "bench-$name.log" timeout "$limit" "$build/bench/$name" "$@"
  else
    summary+=("SKIP  bench $name (not built)")
  fi
}
bench_run adamw_gpu_bench 120 --params 256M
bench_run gemm_gpu_bench 120
bench_run adamw_bench 120 --params 64M
bench_run gemm_bench 120
# GPT-2 124M on one GPU (bf16, synthetic tokens, configs/gpt2-124m.toml): dp-train's
# tokens/s and MFU, next to llm.c's published ~56% MFU for the same model on A100s.
if [ -x "$build/bin/dp-train" ]; then
  step "bench gpt2-124m" "bench-gpt2-124m.log" bash -c "cd '$repo' && timeout 300 '$build/bin/dp-train' \
    --config configs/gpt2-124m.toml --set data.kind=synthetic --set train.steps=30 --set train.log_every=10 2>&1 \
    | tee /dev/stderr | grep '^step 30/' | sed 's/^/summary: gpt2-124m bf16 1 GPU: /'"
fi

step "ctest (all but gpu)" ctest-all.log ctest --test-dir "$build" -LE gpu --output-on-failure -j 4 --timeout 600

# Any other benchmark that has been built, with a time limit each.
shopt -s nullglob
for bench in "$build"/bench/*; do
  [ -f "$bench" ] && [ -x "$bench" ] || continue
  name="$(basename "$bench")"
  case "$name" in adamw_gpu_bench | gemm_gpu_bench | adamw_bench | gemm_bench) continue ;; esac
  step "bench $name" "bench-$name.log" timeout 180 "$bench"
done

# The ctest summary lines, for a quick look without opening the logs.
for log in ctest-gpu.log ctest-all.log; do
  [ -f "$out/$log" ] && grep -E "tests passed|tests failed|Total Test time" "$out/$log" | sed "s/^/$log: /" || true
done

exit "$failed"
