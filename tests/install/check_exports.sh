#!/usr/bin/env bash
# libzdp.so exports zdp's names only (package/libzdp.map): none of the toml++,
# nlohmann-json, cudnn-frontend or Gloo code compiled into it, and no standard-library
# instantiation of its own, so that a program linking other versions of those binds to
# its own. And it does export the API: zdp::init, and the typeinfo of zdp::Error, which
# users catch.
#   tests/install/check_exports.sh LIBZDP_SO
set -euo pipefail
lib="${1:?usage: check_exports.sh LIBZDP_SO}"
[ -f "$lib" ] || { echo "check_exports: no such library: $lib" >&2; exit 1; }
symbols=$(nm -D --defined-only -C "$lib" | cut -d' ' -f3-)
mangled=$(nm -D --defined-only "$lib" | cut -d' ' -f3-)
[ -n "$symbols" ] || { echo "check_exports: $lib exports nothing" >&2; exit 1; }
# zdp's own, by the mangled name: a name in namespace zdp (_ZN3zdp, const/ref-qualified
# members _ZNK3zdp..., local statics _ZZN3zdp), its typeinfo, vtables and guard variables,
# and thunks to its members. A demangled test also passed the standard library's function
# templates returning a zdp type ("zdp::X* std::__do_uninit_copy<...>").
ours='^_Z(N|NK|NR|NO|NKR|NKO|ZN|ZNK|TIN|TSN|TVN|TTN|TCN|GVN|GVZN|GVZNK)3zdp|^_Z(Th|Tv).*_NK?3zdp'
foreign=$(grep -Ev "$ours" <<<"$mangled" || true)
if [ -n "$foreign" ]; then
  echo "check_exports: $lib exports $(wc -l <<<"$foreign") symbol(s) that are not zdp's (package/libzdp.map), e.g.:" >&2
  head -n 20 <<<"$foreign" | c++filt >&2
  exit 1
fi
for wanted in 'zdp::init(' 'typeinfo for zdp::Error'; do
  grep -qF "$wanted" <<<"$symbols" || { echo "check_exports: $lib does not export $wanted" >&2; exit 1; }
done
echo "check_exports: $(wc -l <<<"$symbols") symbols, all zdp's"
