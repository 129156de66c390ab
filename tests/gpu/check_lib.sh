# The GPU check's helpers (check.sh sources this file, and owns the variables they use:
# here, out, work, logs, start, budget_s, rows, failed, incomplete). Not run on its own.

# row CHECK PASS|FAIL|SKIP FIGURE: one line of the table, also appended to $logs/rows.txt at
# once.
row() {
  rows+=("$1|$2|$3")
  printf '%-34s %-5s %s\n' "$1" "$2" "$3" >>"$logs/rows.txt"
  # ... and straight into the folder a device run brings back: a check killed there outright
  # (no trap runs on SIGKILL) still returns every row it had.
  if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then printf '%-34s %-5s %s\n' "$1" "$2" "$3" >>"$OUT/rows.txt"; fi
  [ "$2" = FAIL ] && failed=1
  [ "$2" = SKIP ] && [ "$3" = "time budget spent" ] && [[ "$1" == *_test || "$1" == small-gpt* ]] && incomplete=1
  return 0
}
print_table() {
  echo
  echo "================ zdp GPU check: $(hostname) ($((SECONDS - start)) s, budget $budget_s s, 480 s at most) ================"
  [ -f "$here/BUILD_INFO" ] && sed 's/^/# /' "$here/BUILD_INFO"
  printf '%-34s %-5s %s\n' check result figure
  local r
  for r in "${rows[@]}"; do
    IFS='|' read -r c s f <<<"$r"
    printf '%-34s %-5s %s\n' "$c" "$s" "$f"
  done
  # A check whose budget left correctness rows out is not OK (it printed OK with every
  # kernel test after the gpt2-124m runs skipped).
  if ((failed)); then echo "RESULT: FAILED"
  elif ((${interrupted:-0})); then echo "RESULT: INCOMPLETE (interrupted by a signal: the rows above are all that ran)"
  elif ((incomplete)); then echo "RESULT: INCOMPLETE (tests left out by the time budget: rerun them)"
  elif ((${headline:-0})); then echo "RESULT: OK (--headline: no correctness test ran)"
  else echo "RESULT: OK"; fi
}
in_budget() { ((SECONDS - start < budget_s)); }
# limited SECONDS CMD...: CMD under `timeout -k 10 SECONDS`, in the background and waited
# for, so that a signal to the check runs its trap at once (bash holds a trap until a
# foreground child ends, and timeout's own process group misses a TERM to the check's);
# the trap stops it ($child).
limited() {
  timeout -k 10 "$@" &
  child=$!
  wait "$child"
  local rc=$?
  child=
  return "$rc"
}
# cap LIMIT: LIMIT seconds, or fewer so that the step ends by 470 s (the table by 480).
cap() {
  local left=$((470 - (SECONDS - start)))
  ((left < $1)) && echo "$((left > 10 ? left : 10))" || echo "$1"
}

# compare_losses RUN GPU_JSON DTYPE: the GPU run's losses against the CPU reference. fp32:
# every step within 1e-3 relative (the GEMMs' and the row sums' summation orders differ
# from OpenBLAS and the CPU loops: ~1e-6, grown over 20 steps to ~1e-5; a wrong stage or
# a skipped update is off by far more). bf16 and fp16: within 3e-2 relative (bf16 rounds
# activations and weights to 8 bits, ~4e-3 per value; fp16 to 11). All: the loss falls by 10%.
# Prints "max rel diff" and exits non-zero on a mismatch.
compare_losses() {
  python3 - "$here/ref/cpu_losses.json" "$1" "$2" "$3" <<'EOF'
import json, math, sys
ref_path, run, got_path, dtype = sys.argv[1:5]
ref = json.load(open(ref_path))["losses"][run]
got = json.load(open(got_path))["losses"]
tol = 1e-3 if dtype == "fp32" else 3e-2
if len(got) != len(ref):
    print(f"{len(got)} losses, the reference has {len(ref)}"); sys.exit(1)
worst = max(abs(g - r) / abs(r) for g, r in zip(got, ref))
ok = all(math.isfinite(g) for g in got) and worst <= tol and got[-1] < 0.9 * got[0]
print(f"max rel diff {worst:.1e} (tol {tol:g}), loss {got[0]:.3f} -> {got[-1]:.3f}")
sys.exit(0 if ok else 1)
EOF
}

# unpack: the payload into $work (xz, else Python's lzma).
unpack() {
  rm -rf "$work" && mkdir -p "$work" || return 1
  xz -dc "$here/payload.tar.xz" 2>/dev/null | tar -C "$work" -xf - 2>/dev/null && return 0
  python3 -c "import lzma,tarfile,sys; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])" \
    "$here/payload.tar.xz" "$work"
}
# find_libraries: LD_LIBRARY_PATH = the bundled lib/, then the image's CUDA libraries (its
# CUDA toolkit, or its Python's nvidia-* packages: cuDNN from nvidia-cudnn-cu13, which
# zdp dlopens for fused attention and whose libcudnn.so.9 loads its engine libraries from
# the same folder); sets $libpath.
find_libraries() {
  local roots=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu)
  local p lib found
  for p in $(timeout -k 10 30 python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do roots+=("$p/nvidia"); done
  libpath="$work/lib"
  for lib in libcublasLt.so.13 libcublas.so.13 libnccl.so.2 libcudnn.so.9; do
    found=$(timeout -k 10 60 find "${roots[@]}" -name "$lib" 2>/dev/null | head -n 1)
    [ -n "$found" ] && libpath="$libpath:$(dirname "$found")"
  done
  export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
# missing_libraries: "binary: lib lib; ..." for what ldd cannot find (empty: none); the
# full ldd output goes to $logs/ldd.log.
missing_libraries() {
  local b m missing=""
  for b in "$work"/bin/*; do
    ldd "$b" >>"$logs/ldd.log" 2>&1
    m=$(ldd "$b" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
    [ -n "$m" ] && missing="$missing $(basename "$b"): $m;"
  done
  echo "$missing"
}
# small_gpt RUN DTYPE BACKEND [PROGRAM]: one run of the small GPT (20 steps) by PROGRAM
# (default dp-train), compared with the CPU reference; adds its row.
small_gpt() {
  local run="$1" dtype="$2" backend="$3" program="${4:-dp-train}" name="$1-$2" stage figure
  [ "$program" = dp-train ] || name="$name-${program#dp-train-}"
  stage=${run#stage}; stage=${stage%%-*}
  local args=(--config "$here/configs/small_gpt.toml" --set "zero.stage=$stage" --set "model.dtype=$dtype"
              --set "launch.backend=$backend" --set "launch.log_dir=$out/runs/$name")
  [[ "$run" == *sharded ]] && args+=(--set zero.accumulate=sharded)
  if ! ZDP_LOG_LEVEL=warn limited "$(cap 90)" "$work/bin/$program" "${args[@]}" >"$logs/small-$name.log" 2>&1; then
    row "small-gpt $name" FAIL "dp-train failed (logs/small-$name.log)"; tail -n 20 "$logs/small-$name.log"; return
  fi
  # The baseline (the last measured state) times; its losses may differ: an LR schedule fix since moved them a step.
  if [ "$program" != dp-train ]; then row "small-gpt $name" PASS "ran (losses not compared)"; return; fi
  if figure=$(compare_losses "$run" "$out/runs/$name/train_summary.json" "$dtype"); then
    row "small-gpt $name" PASS "$figure"
  else
    row "small-gpt $name" FAIL "$figure"
  fi
}
# run_tests NAME...: each test binary, run directly, a row each. PASS needs a test that
# passed: a binary whose tests all skipped (no device seen: cuda_device_count() is 0 for a
# driver older than the runtime, too) read as a pass; device_cuda_test may skip nothing.
run_tests() {
  local t rc passed skipped nfail
  for t in "$@"; do
    if ! in_budget; then row "$t" SKIP "time budget spent"; continue; fi
    limited "$(cap 150)" "bin/$t" --gtest_color=no >"$logs/$t.log" 2>&1
    rc=$?
    passed=$(grep -o '\[  PASSED  \] [0-9]* test' "$logs/$t.log" | grep -o '[0-9]*' | tail -n 1)
    skipped=$(grep -o '\[  SKIPPED \] [0-9]* test' "$logs/$t.log" | grep -o '[0-9]*' | tail -n 1)
    nfail=$(grep -o '\[  FAILED  \] [0-9]* test' "$logs/$t.log" | grep -o '[0-9]*' | tail -n 1)
    if ((rc == 0)) && ((${passed:-0} > 0)) && { [ "$t" != device_cuda_test ] || ((${skipped:-0} == 0)); }; then
      row "$t" PASS "${passed:-0} passed, ${skipped:-0} skipped"
    elif ((rc == 0)); then
      row "$t" FAIL "${passed:-0} passed, ${skipped:-0} skipped: nothing ran on the GPU (logs/$t.log)"; grep -m 5 'Skipped\|skip' "$logs/$t.log"
    else row "$t" FAIL "exit $rc$( ((rc == 124)) && echo ' (timed out)'), ${nfail:-?} failed (logs/$t.log)"; tail -n 30 "$logs/$t.log"; fi
  done
}
# finish: the table (also $logs/table.txt), and where $OUT names the folder a device run
# brings back, the logs packed into it (runs and profiles included, the payload and the
# checkpoints not): a check killed by the run's own limit still returns what it measured.
finish() {
  print_table | tee "$logs/table.txt"
  if [ -n "${dmon_pid:-}" ]; then kill "$dmon_pid" 2>/dev/null; fi
  if [ -n "${OUT:-}" ] && [ -d "$OUT" ] && [ "$out" != "$OUT" ]; then
    tar czf "$OUT/zdp-gpu-check.tgz" -C "$(dirname "$out")" --exclude="$(basename "$out")/carry" \
      --exclude='*.safetensors' "$(basename "$out")" 2>/dev/null
    cp "$logs/table.txt" "$OUT/table.txt" 2>/dev/null
  fi
  return 0
}
