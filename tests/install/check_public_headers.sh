#!/usr/bin/env bash
# Checks what the public headers (INCLUDE_DIR/zdp/*.h) include: only the C++ standard
# library (<name> without a dot or a slash) and each other ("zdp/x.h" of the same set).
# Anything else (a private header of runtime/src, kernels/ or optim/; Gloo, NCCL, TOML++,
# CUDA) would make every user's build need it. The one exception is zdp/cuda.h, the
# CUDA-specific header, which includes the CUDA runtime API.
#   check_public_headers.sh INCLUDE_DIR...   (the installed include/ or the source dirs)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 INCLUDE_DIR..." >&2; exit 2; }

declare -A public=()
headers=()
for dir in "$@"; do
  for h in "$dir"/zdp/*.h; do
    [ -e "$h" ] || continue
    headers+=("$h")
    public["zdp/$(basename "$h")"]=1
  done
done
[ ${#headers[@]} -gt 0 ] || { echo "check_public_headers: no zdp/*.h under $*" >&2; exit 1; }

include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*([<"])([^>"]+)[>"]'
failures=0
for h in "${headers[@]}"; do
  lineno=0
  while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    [[ $line =~ $include_re ]] || continue
    delim=${BASH_REMATCH[1]} name=${BASH_REMATCH[2]}
    if [ "$delim" = '"' ]; then
      [ -n "${public[$name]:-}" ] && continue
      why="not a public header (only \"zdp/x.h\" of the installed set)"
    else
      [[ $name =~ ^[a-z_]+$ ]] && continue
      [ "$(basename "$h")" = cuda.h ] && [ "$name" = cuda_runtime_api.h ] && continue
      why="not the C++ standard library (Gloo, NCCL, CUDA and other dependencies stay private)"
    fi
    echo "$h:$lineno: includes ${delim}${name}$([ "$delim" = '<' ] && echo '>' || echo '"'): $why"
    failures=$((failures + 1))
  done < "$h"
done
if [ $failures -gt 0 ]; then
  echo "check_public_headers: $failures forbidden include(s) in ${#headers[@]} public headers" >&2
  exit 1
fi
echo "check_public_headers: ${#headers[@]} public headers include only the standard library and each other"
