#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the main CPU job: dp-launch with the CPU
# quickstart config (2 ranks on loopback), then the collective benchmark (zdp's Gloo
# communicator against raw Gloo with 2 and 4 real rank processes).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
build_dir="${BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja
cmake --build "$build_dir" -j "$(nproc)"
"$build_dir/launcher/dp-launch" configs/cpu-quickstart.toml "$@"
"$build_dir/bench/comm_bench" --ranks 2,4
