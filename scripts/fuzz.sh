#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang with ASan + UBSan) in build-fuzz/ and
# runs each for SECONDS seconds (default 20) on a copy of its seed corpus
# (tests/fuzz/corpus/<target>/), so the committed seeds stay small and unchanged. A crash,
# a sanitizer report or a failed property stops the script with libFuzzer's report and the
# input that caused it (crash-* in the work folder); make that input a regression test.
#   scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. scripts/fuzz.sh 600 config_fuzz
#   FUZZ_BUILD_DIR=build-fuzz (default)   FUZZ_WORK_DIR (default: a new temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-20}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(config_fuzz store_core_fuzz safetensors_header_fuzz state_json_fuzz token_header_fuzz profile_files_fuzz
                                rank_profile_fuzz job_progress_fuzz run_summary_fuzz)
build_dir="${FUZZ_BUILD_DIR:-build-fuzz}"
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is not installed (scripts/install-deps.sh installs it)" >&2; exit 1; }

build_start=$SECONDS
cmake -S . -B "$build_dir" -G Ninja -DZDP_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang > /dev/null
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"
echo "fuzz.sh: built ${#targets[@]} targets in $((SECONDS - build_start)) s"

work="${FUZZ_WORK_DIR:-$(mktemp -d /tmp/zdp-fuzz-XXXXXX)}"
# One target's run, its report line in $work/<name>/report (exit 1 on a finding).
fuzz_one() {
  local target="$1" name="${1%_fuzz}" dict=()
  rm -f "$work/$name/report"  # a reused FUZZ_WORK_DIR's old report is not this run's
  mkdir -p "$work/$name/corpus"
  cp tests/fuzz/corpus/"$name"/* "$work/$name/corpus/"
  # A dictionary of each format's tokens and edge numbers (tests/fuzz/dict/) for the text
  # readers; the store's protocol and the token header are binary.
  case "$target" in
    config_fuzz) dict=(-dict="$PWD/tests/fuzz/dict/toml.dict") ;;
    store_core_fuzz|token_header_fuzz) dict=() ;;
    *) dict=(-dict="$PWD/tests/fuzz/dict/json.dict") ;;
  esac
  # -rss_limit_mb: an input that makes a parser allocate without bound is a finding too.
  # -max_len 65536: configs and headers are small; longer inputs only slow the search.
  if ! (cd "$work/$name" && "$OLDPWD/$build_dir/tests/fuzz/$target" -max_total_time="$seconds" -rss_limit_mb=2048 \
          -max_len=65536 -print_final_stats=1 ${dict[@]+"${dict[@]}"} corpus > log.txt 2>&1); then
    { tail -n 60 "$work/$name/log.txt"
      echo "fuzz.sh: $target FAILED after at most $seconds s; the input is in $work/$name (crash-*, leak-*, oom-*)"
    } > "$work/$name/report"
    return 1
  fi
  local runs cov corpus
  runs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$work/$name/log.txt" | grep -o "[0-9]*$" || echo "?")
  cov=$(grep -o "cov: [0-9]*" "$work/$name/log.txt" | tail -1 | grep -o "[0-9]*" || echo "?")
  corpus=$(ls "$work/$name/corpus" | wc -l)
  echo "fuzz.sh: $target: ${seconds} s, $runs inputs, coverage $cov edges, corpus $corpus inputs, no finding" \
    > "$work/$name/report"
}
# The targets run side by side, one per core (libFuzzer is single-threaded; in CI's two
# cores nine 10-second runs took 90 s one after another); their reports in order.
jobs_at_once="$(nproc)"
failed=0
for ((i = 0; i < ${#targets[@]}; i += jobs_at_once)); do
  pids=()
  for target in "${targets[@]:i:jobs_at_once}"; do
    fuzz_one "$target" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  for target in "${targets[@]:i:jobs_at_once}"; do
    cat "$work/${target%_fuzz}/report" 2>/dev/null || echo "fuzz.sh: $target: no report (its setup failed: see above)"
  done
  [ "$failed" -eq 0 ] || { echo "fuzz.sh: a target failed (above)" >&2; exit 1; }
done
[ -z "${FUZZ_WORK_DIR:-}" ] && rm -rf "$work"
exit 0
