#!/usr/bin/env bash
# Builds, here (no GPU needed), the folder the GPU check runs from on a lent GPU machine:
# a Release, sm_90-only build of just the GPU test binaries, dp-train and the GPU
# benchmarks, the shared libraries they need that the GPU machine's image lacks, the
# small configs, and the CPU reference losses the check compares against. The GPU machine
# then needs no build, no network and no package: `bash gpu-carry/check.sh` (README, "GPU").
#
#   bash tests/gpu/carry.sh                  # -> gpu-carry/ (git-ignored), < 60 MiB
#   CARRY_DIR=... CARRY_BUILD_DIR=build-carry JOBS=2 bash tests/gpu/carry.sh
#   CARRY_FROM_BUILD=build bash tests/gpu/carry.sh   # CI: package an existing CUDA build
#   CARRY_BASELINE=<commit>|none ...         # the baseline dp-train (below); none: without
#
# The baseline: dp-train built from CARRY_BASELINE (default: the last state measured on a
# GPU, docs/gpu-notes.md) with the same build type and CUDA architectures, in
# build-carry-baseline/ (its source from `git archive`), packed as bin/dp-train-baseline.
# The check runs gpt2-124m with it beside the current dp-train on the same card, so a change
# is judged by `dp-launch plan --baseline` region by region on that card, not against figures
# another machine gave (runs on two H200s differed by 3-6% a region). A clone without the
# commit (shallow) gets no baseline, said loudly. CI packs with CARRY_BASELINE=none: the
# second build would add minutes to a cold CI.
#
# Layout of the folder: check.sh, check_lib.sh (its helpers), check_gpt2.sh (its gpt2-124m runs) and check_multi_gpu.sh; payload.tar.xz
# (bin/: the stripped programs, lib/: the bundled libraries, found on the GPU machine
# through LD_LIBRARY_PATH, which check.sh sets; xz because OpenBLAS alone is 36 MiB);
# MANIFEST (the payload's files, which the self-check compares); configs/;
# ref/cpu_losses.json; BUILD_INFO. Libraries the image has (CUDA's cuBLASLt, NCCL and
# cuDNN, hundreds of MiB, from its CUDA or its Python's nvidia packages; glibc and the C++
# runtime) are not bundled: check.sh finds them there.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
carry="${CARRY_DIR:-$repo/gpu-carry}"
build="${CARRY_BUILD_DIR:-$repo/build-carry}"
jobs="${JOBS:-$(nproc)}"
limit_mib=60
start=$SECONDS
# Run 4 of docs/gpu-notes.md (H200, stop 26): the kernels of 0b5b36e; 570fa2c changed only
# the planner's table, docs and the check. Move it when a check measures a newer state.
baseline_rev="${CARRY_BASELINE:-570fa2c}"

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
if ! command -v nvcc >/dev/null 2>&1; then
  echo "carry: no nvcc on PATH: the GPU carry folder needs a CUDA build (install the CUDA toolkit)" >&2
  exit 3
fi

# What the GPU machine runs (check.sh names the same list).
tests=(device_cuda_test convert_gpu_test sfu_exp_gpu_test kernels_gpu_test quantize_gpu_test layer_kernels_gpu_test layernorm_16bit_gpu_test gemm_gpu_test gpt_gpu_test mlp_gpu_test
       fused_attention_gpu_test small_kernels_gpu_test bias_grad_gpu_test
       nccl_comm_test engine_gpu_test gloo_gpu_ranks_test deterministic_gpu_test)
programs=(dp-train dp-launch adamw_gpu_bench gemm_gpu_bench bias_grad_gpu_bench gpt_gpu_bench fused_attention_gpu_bench comm_bench)

flavour="Release, sm_90"
if [ -n "${CARRY_FROM_BUILD:-}" ]; then
  # CI: package from the build it has just made and tested (RelWithDebInfo, sm_80+90; the
  # programs are stripped) instead of compiling everything a second time: it proves the
  # folder builds and self-checks. A folder meant for a GPU session comes from the default
  # (Release, sm_90) path.
  build="$CARRY_FROM_BUILD"
  cache="$build/CMakeCache.txt"
  [ -f "$cache" ] || { echo "carry: CARRY_FROM_BUILD=$build is not a configured build (no CMakeCache.txt)" >&2; exit 1; }
  grep -q "define ZDP_HAVE_CUDA 1" "$build/core/include/zdp/build_config.h" ||
    { echo "carry: CARRY_FROM_BUILD=$build was built without CUDA" >&2; exit 1; }
  archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$cache")
  [[ ";$archs;" == *";90;"* || ";$archs;" == *";90-real;"* ]] ||
    { echo "carry: CARRY_FROM_BUILD=$build has CUDA architectures '$archs', without sm_90 (H200)" >&2; exit 1; }
  flavour="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache"), CUDA architectures $archs, from $build"
  echo "== carry: package from the existing build $build ($flavour)"
else
  echo "== carry: configure $build (Release, sm_90 only)"
  mkdir -p "$build"  # the configure log lives inside it (git-ignored), not beside it
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DZDP_CUDA=ON \
    -DZDP_WERROR=ON >"$build/configure.log" 2>&1 || { tail -n 30 "$build/configure.log"; exit 1; }
fi
echo "== carry: build ${#tests[@]} tests and ${#programs[@]} programs (-j $jobs)"
cmake --build "$build" -j "$jobs" --target "${tests[@]}" "${programs[@]}"

# The baseline dp-train (see the header): same build type and architectures as $build.
baseline=""
baseline_info="none (CARRY_BASELINE=none)"
if [ "$baseline_rev" != none ]; then
  if ! commit=$(git rev-parse --verify --quiet "$baseline_rev^{commit}"); then
    baseline_info="none: $baseline_rev is not in this clone (shallow?)"
    echo "carry: WARNING: the baseline commit $baseline_rev is not in this clone: the check will run no baseline" >&2
  else
    bdir="$repo/build-carry-baseline"
    type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")
    archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")
    if [ "$(cat "$bdir/COMMIT" 2>/dev/null)" != "$commit" ]; then
      rm -rf "$bdir" && mkdir -p "$bdir/src"
      git archive "$commit" | tar -x -C "$bdir/src"
      echo "$commit" >"$bdir/COMMIT"
    fi
    echo "== carry: baseline dp-train at ${commit:0:10} ($type, CUDA architectures $archs) in $bdir"
    cmake -S "$bdir/src" -B "$bdir/build" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DCMAKE_CUDA_ARCHITECTURES="$archs" \
      -DZDP_CUDA=ON -DZDP_WERROR=OFF >"$bdir/configure.log" 2>&1 || { tail -n 30 "$bdir/configure.log"; exit 1; }
    cmake --build "$bdir/build" -j "$jobs" --target dp-train
    baseline="$bdir/build/bin/dp-train"
    baseline_info="${commit:0:10} $(git log -1 --format=%s "$commit" | cut -c1-100)"
  fi
fi
built=$((SECONDS - start))

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for t in "${tests[@]}"; do strip -o "$stage/bin/$t" "$build/tests/$t"; done
for p in dp-train dp-launch; do strip -o "$stage/bin/$p" "$build/bin/$p"; done
[ -z "$baseline" ] || strip -o "$stage/bin/dp-train-baseline" "$baseline"
for b in adamw_gpu_bench gemm_gpu_bench bias_grad_gpu_bench gpt_gpu_bench fused_attention_gpu_bench comm_bench; do strip -o "$stage/bin/$b" "$build/bench/$b"; done

# Bundle every library a program needs except the C runtime and what the GPU machine's
# image provides (the driver, CUDA's cuBLAS(Lt), NCCL and cuDNN: cuDNN's engines are
# over 1 GiB; zdp loads libcudnn with dlopen, so ldd does not list it, but a library that
# names it must never pull it in here). libcudart is bundled: small,
# and the one these programs were built against.
system='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libgcc_s\.|libstdc\+\+\.|libcuda\.so|libcublas|libnccl|libcudnn)'
for f in "$stage"/bin/*; do
  while read -r name _ path _; do
    [[ "$name" =~ $system ]] && continue
    [ -n "${path:-}" ] && [ -f "$path" ] || { echo "carry: $f needs $name, which is not found here" >&2; exit 1; }
    [ -f "$stage/lib/$name" ] || cp -L "$path" "$stage/lib/$name"
  done < <(ldd "$f" | grep '=>')
done

# The CPU reference: the small GPT on this machine's CPU (Gloo), each run of the check.
rm -rf "$carry"
mkdir -p "$carry/configs" "$carry/ref"
cp tests/gpu/small_gpt.toml configs/gpt2-124m.toml "$carry/configs/"
runs=$(mktemp -d)
echo "== carry: CPU reference losses (small GPT, 20 steps)"
declare -A sets=([stage0]="zero.stage=0" [stage1]="zero.stage=1" [stage2]="zero.stage=2" [stage3]="zero.stage=3"
                 [stage2-sharded]="zero.stage=2 zero.accumulate=sharded" [stage3-sharded]="zero.stage=3 zero.accumulate=sharded")
for name in stage0 stage1 stage2 stage3 stage2-sharded stage3-sharded; do
  args=(--config tests/gpu/small_gpt.toml --set launch.backend=gloo --set "launch.log_dir=$runs/$name")
  for s in ${sets[$name]}; do args+=(--set "$s"); done
  ZDP_LOG_LEVEL=warn "$build/bin/dp-train" "${args[@]}" >"$runs/$name.log" 2>&1 ||
    { tail -n 20 "$runs/$name.log"; echo "carry: CPU reference run $name failed" >&2; exit 1; }
done
python3 - "$runs" "$carry/ref/cpu_losses.json" <<'EOF'
import json, sys
runs, out = sys.argv[1], sys.argv[2]
ref = {}
for name in ["stage0", "stage1", "stage2", "stage3", "stage2-sharded", "stage3-sharded"]:
    with open(f"{runs}/{name}/train_summary.json") as f:
        ref[name] = json.load(f)["losses"]
json.dump({"config": "small_gpt.toml", "device": "cpu", "dtype": "fp32", "losses": ref}, open(out, "w"), indent=1)
EOF
rm -rf "$runs"

(cd "$stage" && find bin lib -type f | LC_ALL=C sort) >"$carry/MANIFEST"
tar -C "$stage" -cf - bin lib | xz -6 -T "$jobs" >"$carry/payload.tar.xz"
cp tests/gpu/check.sh tests/gpu/check_lib.sh tests/gpu/check_gpt2.sh tests/gpu/check_multi_gpu.sh "$carry/"
{
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (modified)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(nvcc --version | tail -n 1)"
  echo "build seconds: $built ($flavour, ${#tests[@]} tests + ${#programs[@]} programs)"
  echo "baseline: $baseline_info"
} >"$carry/BUILD_INFO"
size_kib=$(du -sk "$carry" | cut -f1)
echo "carry: $carry is $((size_kib / 1024)) MiB ($(wc -l <"$carry/MANIFEST") files in the payload), built in ${built} s, done in $((SECONDS - start)) s"
if ((size_kib > limit_mib * 1024)); then
  echo "carry: $carry is over the ${limit_mib} MiB limit" >&2
  exit 1
fi
