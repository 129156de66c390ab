# The GPU check's gpt2-124m runs (sourced by check.sh, which defines here, out, logs,
# row, cap and in_budget): the profiled and the unprofiled run of a dp-train build, each
# adding its row to the table.
# shellcheck shell=bash
# profile_parts DIR: the mean step's parts (ms) from DIR/profile.jsonl.
profile_parts() {
  python3 - "$1/profile.jsonl" <<'EOF' 2>/dev/null
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"type":"step"' in l.replace(" ", "")]
if not steps: sys.exit(1)
keys = steps[0]["parts_ms"].keys()
mean = {k: sum(s["parts_ms"][k] for s in steps) / len(steps) for k in keys}
print(" ".join(f"{k} {v:.1f}" for k, v in mean.items() if v >= 0.05), "ms/step")
EOF
}
# What every gpt2-124m run shares: synthetic tokens, no evaluation, and cuDNN's fused
# attention required ("auto" fell back to the batched path where cuDNN is missing or
# refuses the graph, and every row then passed measuring the other attention).
gpt2_args=(--config "$here/configs/gpt2-124m.toml" --set data.kind=synthetic --set train.eval_every=0
           --set train.eval_samples=16 --set model.attention=fused)
# finite_run NAME: no step of run NAME was skipped and no logged loss is not a number (the
# rows' figures are of such a run otherwise). The console says "skipped" on logged steps
# only; train_summary.json's skipped_steps counts them all (a build older than that key,
# the baseline's, is judged by its log alone).
finite_run() {
  local skipped
  grep -Eq '^step .*(skipped|loss -?(nan|inf))' "$logs/$1.log" && return 1
  skipped=$(sed -n 's/.*"skipped_steps": *\([0-9]*\).*/\1/p' "$out/runs/$1/train_summary.json" 2>/dev/null | head -n 1)
  [ -z "$skipped" ] || [ "$skipped" = 0 ]
}
# gpt2_profiled PROGRAM NAME ROW: 30 steps of gpt2-124m, the last 20 profiled with per-kernel
# timing (profile.kernels) into $out/NAME; adds ROW; returns non-zero when it did not run.
gpt2_profiled() {
  local program="$1" name="$2" label="$3" line tok mfu parts rc
  if ! in_budget; then row "$label" SKIP "time budget spent"; return 1; fi
  limited "$(cap 240)" "bin/$program" "${gpt2_args[@]}" --set train.steps=30 --set train.log_every=10 \
    --set profile.enabled=true --set profile.kernels=true --set profile.warmup_steps=10 --set profile.active_steps=20 \
    --set "profile.dir=$out/$name" --set "launch.log_dir=$out/runs/$name" >"$logs/$name.log" 2>&1
  rc=$?
  line=$(grep '^step 30/30' "$logs/$name.log" | tail -n 1)
  if ((rc != 0)) || [ -z "$line" ]; then
    row "$label" FAIL "exit $rc (logs/$name.log)"; tail -n 30 "$logs/$name.log"; return 1
  fi
  if ! finite_run "$name"; then
    row "$label" FAIL "a skipped step or a loss that is not finite (logs/$name.log)"; return 1
  fi
  tok=$(sed -n 's/.*| \([0-9.]*[kM]*\) tok\/s.*/\1/p' <<<"$line")
  mfu=$(sed -n 's/.*MFU \([0-9.]*%\).*/\1/p' <<<"$line")
  parts=$(profile_parts "$out/$name")
  row "$label" PASS "${tok:-?} tok/s, MFU ${mfu:-?}; ${parts:-no profile breakdown}"
}
# gpt2_plain PROGRAM NAME ROW [ARGS...]: the config as a user runs it, with no profiler's events
# between the kernels: 60 steps, each window's mean step (steps 21-40 and 41-60; the first holds
# the cuBLASLt plans and the epilogue timings) and the MFU of it. ARGS: more of dp-train's.
gpt2_plain() {
  local program="$1" name="$2" label="$3" line ms mfu fig="" rc s
  shift 3
  if ! in_budget; then row "$label" SKIP "time budget spent"; return; fi
  limited "$(cap 120)" "bin/$program" "${gpt2_args[@]}" --set train.steps=60 --set train.log_every=20 \
    --set "launch.log_dir=$out/runs/$name" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  for s in 40 60; do
    line=$(grep "^step $s/60 " "$logs/$name.log" | tail -n 1)
    [ -n "$line" ] || continue
    ms=$(sed -n 's/.*| \([0-9.]*\) ms.*/\1/p' <<<"$line")
    mfu=$(sed -n 's/.*MFU \([0-9.]*%\).*/\1/p' <<<"$line")
    fig+="${fig:+; }steps $((s - 19))-$s: ${ms:-?} ms/step, MFU ${mfu:-?}"
  done
  if ((rc == 0)) && [ -n "$fig" ] && finite_run "$name"; then row "$label" PASS "$fig"
  else row "$label" FAIL "exit $rc (logs/$name.log; a skipped step or a non-finite loss fails too)"; tail -n 30 "$logs/$name.log"; fi
}
# plain_ms NAME: the mean step (ms) of steps 41-60 in logs/NAME.log; empty without one.
plain_ms() { sed -n 's/^step 60\/60 .*| \([0-9.]*\) ms.*/\1/p' "$logs/$1.log" 2>/dev/null | tail -n 1; }
# gpt2_plain_versus: the row that judges the builds from the four unprofiled runs (B A A B):
# current / baseline of the mean step over both runs each, beside each build's own spread
# (its second run / its first). A ratio whose distance from 1 is within the larger spread
# is noise on this card.
gpt2_plain_versus() {
  local a1 a2 b1 b2 fig
  a1=$(plain_ms gpt2-124m-plain) a2=$(plain_ms gpt2-124m-plain-2)
  b1=$(plain_ms gpt2-124m-plain-baseline) b2=$(plain_ms gpt2-124m-plain-baseline-2)
  if [ -z "$a1" ] || [ -z "$a2" ] || [ -z "$b1" ] || [ -z "$b2" ]; then
    row "gpt2-124m: current / baseline" SKIP "an unprofiled run has no step 60 (ms: ${a1:-?} ${a2:-?} / ${b1:-?} ${b2:-?})"
    return
  fi
  fig=$(python3 - "$a1" "$a2" "$b1" "$b2" <<'PY'
import sys
a1, a2, b1, b2 = map(float, sys.argv[1:])
ratio = (a1 + a2) / (b1 + b2)
spread = max(abs(a2 / a1 - 1), abs(b2 / b1 - 1))
verdict = "within" if abs(ratio - 1) <= spread else "beyond"
print(f"{ratio:.3f}x (steps 41-60, ms {a1:g} {a2:g} / {b1:g} {b2:g}); same-build spread "
      f"{a2 / a1:.3f}x current, {b2 / b1:.3f}x baseline: {verdict} the spread")
PY
  )
  row "gpt2-124m: current / baseline" PASS "${fig:-?}"
}
# gpt2_deterministic_repeat: train.deterministic's promise at gpt2-124m's shape, where a
# non-deterministic kernel shows (cuDNN's atomic dQ at seq 1024, split-K GEMMs): two runs
# of 10 steps must end with the same param_sha256. Small shapes cannot tell (the GPU tests'
# seq <= 128 attention gets at most two atomic adds per element).
gpt2_deterministic_repeat() {
  local run sha=() rc
  if ! in_budget; then row "gpt2-124m (deterministic, repeated)" SKIP "time budget spent"; return; fi
  for run in 1 2; do
    limited "$(cap 90)" bin/dp-train "${gpt2_args[@]}" --set train.steps=10 --set train.log_every=10 \
      --set train.deterministic=true --set "launch.log_dir=$out/runs/gpt2-124m-det-$run" >"$logs/gpt2-124m-det-$run.log" 2>&1
    rc=$?
    sha+=("$(sed -n 's/.*"param_sha256": *"\([0-9a-f]*\)".*/\1/p' "$out/runs/gpt2-124m-det-$run/train_summary.json" 2>/dev/null)")
    if ((rc != 0)) || [ -z "${sha[-1]}" ]; then
      row "gpt2-124m (deterministic, repeated)" FAIL "run $run: exit $rc, no param_sha256 (logs/gpt2-124m-det-$run.log)"; return
    fi
  done
  if [ "${sha[0]}" = "${sha[1]}" ]; then row "gpt2-124m (deterministic, repeated)" PASS "10 steps twice: param_sha256 ${sha[0]:0:16}... both"
  else row "gpt2-124m (deterministic, repeated)" FAIL "10 steps twice: param_sha256 ${sha[0]:0:16}... and ${sha[1]:0:16}..."; fi
}
