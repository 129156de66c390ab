# Sourced by check.sh (its variables and functions: here, work, out, logs, row, cap,
# in_budget, compare_losses): the rows that need more than one GPU. Every other row runs
# one rank, or several ranks on one GPU over Gloo: NCCL between processes (its P2P/IPC
# transports), the engine over it at K > 1 and dp-launch's one process a GPU run here only.

# small_gpt_k2 NAME DTYPE [--set k=v]...: the small GPT by dp-launch on two GPUs.
small_gpt_k2() {
  local name="$1" dtype="$2"; shift 2
  ZDP_LOG_LEVEL=warn limited "$(cap 120)" "$work/bin/dp-launch" "$here/configs/small_gpt.toml" \
    --set launch.nproc_per_node=2 --set launch.backend=nccl --set "model.dtype=$dtype" \
    --set "launch.program=\"$work/bin/dp-train\"" --set "launch.log_dir=$out/runs/$name" "$@" >"$logs/$name.log" 2>&1
}
multi_gpu_runs() {
  local gpus name figure sha1 sha2
  gpus=$(timeout -k 10 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  if ((gpus < 2)); then
    for name in "small-gpt K=2 stage1-fp32" "small-gpt K=2 stage3-sharded-bf16" "small-gpt deterministic K=1 = K=2"; do
      row "$name" SKIP "one GPU on this machine"
    done
    return
  fi
  # Losses against the CPU reference at K = 1 (the same global batch: the same sums).
  for name in stage1-fp32 stage3-sharded-bf16; do
    if ! in_budget; then row "small-gpt K=2 $name" SKIP "time budget spent"; continue; fi
    local run=${name%-*} dtype=${name##*-} extra=()
    [[ "$run" == *sharded ]] && extra=(--set zero.accumulate=sharded)
    if ! small_gpt_k2 "k2-$name" "$dtype" --set "zero.stage=$(echo "$run" | tr -dc 0-9)" "${extra[@]}"; then
      row "small-gpt K=2 $name" FAIL "dp-launch failed (logs/k2-$name.log)"; tail -n 30 "$logs/k2-$name.log"; continue
    fi
    if figure=$(compare_losses "$run" "$out/runs/k2-$name/train_summary.json" "$dtype"); then
      row "small-gpt K=2 $name" PASS "$figure"
    else
      row "small-gpt K=2 $name" FAIL "$figure"
    fi
  done
  # train.deterministic: the same bits at K = 1 and K = 2 (docs/design.md), bf16, stage 3.
  if ! in_budget; then row "small-gpt deterministic K=1 = K=2" SKIP "time budget spent"; return; fi
  local det=(--set train.deterministic=true --set zero.stage=3 --set checkpoint.resume=never)
  if small_gpt_k2 det-k2 bf16 "${det[@]}" &&
     small_gpt_k2 det-k1 bf16 "${det[@]}" --set launch.nproc_per_node=1; then
    sha1=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['param_sha256'] or '')" "$out/runs/det-k1/train_summary.json")
    sha2=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['param_sha256'] or '')" "$out/runs/det-k2/train_summary.json")
    if [ -n "$sha1" ] && [ "$sha1" = "$sha2" ]; then row "small-gpt deterministic K=1 = K=2" PASS "param_sha256 ${sha1:0:16}"
    else row "small-gpt deterministic K=1 = K=2" FAIL "K=1 ${sha1:0:16} K=2 ${sha2:0:16}"; fi
  else
    row "small-gpt deterministic K=1 = K=2" FAIL "dp-launch failed (logs/det-k1.log, logs/det-k2.log)"
    tail -n 30 "$logs/det-k2.log" "$logs/det-k1.log"
  fi
}
