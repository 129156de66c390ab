#!/usr/bin/env bash
# Checks that docs/api.md mentions every public declaration of the public headers, in a
# `code span`: types (class, struct, enum), functions and methods (not in private or
# protected sections, nor in a detail namespace), constants and ZDP_* macros. A header
# added or grown without its documentation fails here, naming what is missing.
#   check_api_doc.sh API_MD INCLUDE_DIR...    (INCLUDE_DIR/zdp/*.h)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 API_MD INCLUDE_DIR..." >&2; exit 2; }
doc="$1"; shift
[ -r "$doc" ] || { echo "check_api_doc: cannot read $doc" >&2; exit 1; }

# Prints "file:line name" for every public declaration.
declarations() {
  awk '
    FNR == 1 { hide = 0; detail = 0; in_macro = 0 }
    {
      raw = $0
      if (in_macro) { in_macro = (raw ~ /\\$/); next }
      if (raw ~ /^#define /) {
        in_macro = (raw ~ /\\$/)
        name = raw; sub(/^#define /, "", name); sub(/[( ].*$/, "", name)
        if (name ~ /^ZDP_/ && name !~ /(_IMPL|_INNER|CONCAT)/) print FILENAME ":" FNR " " name
        next
      }
      line = raw; sub(/\/\/.*$/, "", line)
      if (line ~ /^ *namespace ([a-z_]+::)*detail *\{/) { detail = 1; next }
      if (detail) { if (raw ~ /^\}.*namespace.*detail/) detail = 0; next }
      match(line, /^ */); indent = RLENGTH
      if (line ~ /^ *(private|protected):/) { hide = 1; hide_indent = indent; next }
      if (hide && line ~ /^ *public:/ && indent == hide_indent) { hide = 0; next }
      if (hide && line ~ /^ *\};/ && indent < hide_indent) { hide = 0; next }
      if (hide) next
      if (match(line, /^ *(class|struct|enum class|enum) +(\[\[nodiscard\]\] +)?[A-Za-z_][A-Za-z0-9_]*/)) {
        decl = substr(line, RSTART, RLENGTH); n = split(decl, w, / +/)
        print FILENAME ":" FNR " " w[n]
        next
      }
      if (match(line, /constexpr [^=]* k[A-Z][A-Za-z0-9_]* *=/)) {
        decl = substr(line, RSTART, RLENGTH); sub(/ *=$/, "", decl); n = split(decl, w, / +/)
        print FILENAME ":" FNR " " w[n]
        next
      }
      if (indent != 0 && indent != 2 && indent != 4) next  # continuation lines, bodies
      if (line ~ /^ *(return|if|for|while|:|#)/) next
      if (match(line, /(^|[^:.>A-Za-z0-9_])~?[A-Za-z_][A-Za-z0-9_]*\(/)) {
        name = substr(line, RSTART, RLENGTH); sub(/\($/, "", name); sub(/^.*[^A-Za-z0-9_]/, "", name)
        if (name !~ /^(if|for|while|switch|return|sizeof|decltype|alignof|noexcept|static_assert|operator)$/)
          print FILENAME ":" FNR " " name
      }
    }' "$@"
}

headers=()
for dir in "$@"; do
  for h in "$dir"/zdp/*.h; do [ -e "$h" ] && headers+=("$h"); done
done
[ ${#headers[@]} -gt 0 ] || { echo "check_api_doc: no zdp/*.h under $*" >&2; exit 1; }

missing=0 checked=0
declare -A done_names=()
while read -r where name; do
  [ -n "${done_names[$name]:-}" ] && continue
  done_names[$name]=1
  checked=$((checked + 1))
  if ! grep -Eq "\`[^\`]*\b${name}\b[^\`]*\`" "$doc"; then
    echo "$where: '$name' is public but $doc does not mention it in a \`code span\`"
    missing=$((missing + 1))
  fi
done < <(declarations "${headers[@]}")
if [ $missing -gt 0 ]; then
  echo "check_api_doc: $missing of $checked public names undocumented: add them to $doc" >&2
  exit 1
fi
echo "check_api_doc: all $checked public names of ${#headers[@]} headers appear in $doc"
