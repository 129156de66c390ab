#!/usr/bin/env bash
# Installs the dependencies, builds, makes the quickstart corpus (byte-level token files
# of the fortunes package's texts; the repository's own docs and sources if it is absent),
# and trains the quickstart GPT with dp-launch (2 CPU ranks on loopback); then the
# collective benchmark (zdp's Gloo communicator against raw Gloo, 2 and 4 ranks), and
# names the run's loss curve (loss.svg). In a terminal, dp-launch draws a live status
# line (bar, loss, tokens/s, the whole run's ETA) under the ranks' lines.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
build_dir="${BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja
cmake --build "$build_dir" -j "$(nproc)"
if [ ! -f data/quickstart/train.bin ]; then
  mapfile -t texts < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' 2>/dev/null | sort)
  ((${#texts[@]})) || mapfile -t texts < <(git ls-files '*.md' '*.h' '*.cc')
  "$build_dir/bin/dp-data" text "${texts[@]}" --out data/quickstart
fi
"$build_dir/bin/dp-launch" configs/quickstart.toml "$@"
"$build_dir/bench/comm_bench" --ranks 2,4
echo "quickstart: the loss curve of the run is zdp-logs/quickstart/loss.svg (its numbers: train_summary.json beside it)"
