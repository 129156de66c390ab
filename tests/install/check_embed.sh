#!/usr/bin/env bash
# The installed package, as a user outside the tree gets it (run by scripts/test.sh after
# the test suite; needs a built tree):
#  1. cmake --install BUILD_DIR into a temporary prefix; the installed headers include
#     nothing private (check_public_headers.sh);
#  2. examples/embed builds against that prefix with find_package(zdp) (libzdp.so, and
#     libzdp.a through zdp::zdp_static) and with pkg-config (its Makefile; and libzdp.a
#     with zdp.pc's Libs.private);
#  3. the installed dp-launch runs examples/embed/embed.toml as it is (2 CPU ranks,
#     `program = "./build/embed_trainer"`), at its stage 2 and at stage 3, and the
#     pkg-config build at stage 2: rank 0's loss falls at least tenfold and both ranks
#     print the same parameter checksum. The static builds train alone (a world of 1).
#   tests/install/check_embed.sh [BUILD_DIR]      (default: build)
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$src/build}" && pwd)"
work="$(mktemp -d /tmp/zdp-install-check.XXXXXX)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
step() { echo "== check_embed: $*"; }
fail() { echo "check_embed: FAILED: $*" >&2; exit 1; }

step "install $build into $prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
for f in bin/dp-launch bin/dp-train include/zdp/engine.h include/zdp/build_config.h lib/libzdp.a \
         lib/cmake/zdp/zdpConfig.cmake lib/cmake/zdp/zdpConfigVersion.cmake lib/pkgconfig/zdp.pc; do
  [ -e "$prefix/$f" ] || fail "the install has no $f"
done
ls "$prefix"/lib/libzdp.so.* > /dev/null 2>&1 || fail "the install has no versioned libzdp.so"
# The installed README's relative links resolve (docs/, its images, examples/): it was
# installed beside api.md and design.md, and 7 of its links led nowhere.
docs="$prefix/share/doc/zdp"
while read -r link; do
  [ -e "$docs/$link" ] || fail "the installed README links $link, which is not in $docs"
done < <(grep -oE '\]\([^)#:]+(#[^)]*)?\)' "$docs/README.md" | sed 's/^](//; s/)$//; s/#.*//' | sort -u)
bash "$src/tests/install/check_public_headers.sh" "$prefix/include"

launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The example's own build directory is $run/build, so that embed.toml's program path holds.
run="$work/embed"
step "examples/embed with find_package(zdp) (libzdp.so)"
cmake -S "$src/examples/embed" -B "$run/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" > "$work/cmake.log" \
  || { cat "$work/cmake.log"; fail "configuring examples/embed against $prefix"; }
cmake --build "$run/build" || fail "building examples/embed (find_package)"
step "examples/embed with find_package(zdp) and zdp::zdp_static (libzdp.a)"
cmake -S "$src/examples/embed" -B "$work/static" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DEMBED_STATIC=ON \
  "${launcher[@]}" > "$work/cmake-static.log" || { cat "$work/cmake-static.log"; fail "configuring the static build"; }
cmake --build "$work/static" || fail "building examples/embed (zdp::zdp_static)"
step "examples/embed with pkg-config"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" make -s -C "$src/examples/embed" BUILD="$work/pc" || fail "building examples/embed (pkg-config)"
step "examples/embed with pkg-config and libzdp.a (Libs.private)"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
c++ -std=c++17 -O1 $(pkg-config --cflags zdp) "$src/examples/embed/main.cc" -o "$work/pc/embed_trainer_pc_static" \
  "$(pkg-config --variable=libdir zdp)/libzdp.a" $(pkg-config --static --libs-only-other zdp) \
  || fail "linking examples/embed with libzdp.a and zdp.pc's Libs.private"
unset PKG_CONFIG_PATH

# Rank 0's first and last loss, and the checksum lines of all ranks, of one dp-launch output.
check_run() {
  local name="$1" out="$2" first last sums
  first=$(sed -n 's/^\[rank 0\] step [0-9]* loss \([0-9.e+-]*\).*/\1/p' "$out" | head -1)
  last=$(sed -n 's/^\[rank 0\] step [0-9]* loss \([0-9.e+-]*\).*/\1/p' "$out" | tail -1)
  [ -n "$first" ] && [ -n "$last" ] || { cat "$out"; fail "$name: no loss lines from rank 0"; }
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 10) }' || { cat "$out"; fail "$name: loss $first -> $last did not fall tenfold"; }
  sums=$(sed -n 's/^\[rank [0-9]*\] rank \([0-9]*\)\/2 done: .*checksum \([0-9a-f]*\)$/\1 \2/p' "$out" | sort)
  [ "$(echo "$sums" | cut -d' ' -f1 | tr '\n' ' ')" = "0 1 " ] || { cat "$out"; fail "$name: expected ranks 0 and 1 to finish, got: $sums"; }
  [ "$(echo "$sums" | cut -d' ' -f2 | sort -u | wc -l)" = 1 ] || { cat "$out"; fail "$name: the ranks disagree: $sums"; }
  echo "check_embed: $name: loss $first -> $last, both ranks at checksum $(echo "$sums" | head -1 | cut -d' ' -f2)"
}
# Below the kernel's ephemeral range (32768+ by default), where outgoing connections take
# their local ports; a port still taken (another job on this machine) is retried higher up.
port=$((20000 + $$ % 12000))
launch() {  # NAME [--set ...]: dp-launch embed.toml from $run, as a user would
  local name="$1"; shift
  step "dp-launch embed.toml: $name"
  local tries=0
  until (cd "$run" && "$prefix/bin/dp-launch" "$src/examples/embed/embed.toml" --set launch.master_port=$port "$@") \
      > "$work/$name.out" 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -lt 5 ] && grep -q "Address already in use" "$work/$name.out"; then
      echo "check_embed: port $port is taken, trying $((port + 7))"
      port=$((port + 7))
      continue
    fi
    cat "$work/$name.out"; fail "$name: dp-launch exited non-zero"
  done
  check_run "$name" "$work/$name.out"
  port=$((port + 1))
}
launch find_package-stage2
launch find_package-stage3 --set zero.stage=3
launch pkg-config-stage2 --set launch.program="$work/pc/embed_trainer_pc"

for static in "$work/static/embed_trainer" "$work/pc/embed_trainer_pc_static"; do
  step "$static (libzdp.a), alone"
  (cd "$work" && "$static") > "$work/static.out" 2>&1 || { cat "$work/static.out"; fail "$static: exit non-zero"; }
  grep -q '^rank 0/1 done: ' "$work/static.out" || { cat "$work/static.out"; fail "$static: did not finish"; }
done
echo "check_embed: OK"
