#!/usr/bin/env python3
"""Rewrites a kernels/cuda/*.cu file as host C++ for the SIMT emulation (simt.h): the two
constructs a C++ compiler cannot take. Everything else compiles as written, with simt.h
force-included.

  kernel<T, 8><<<grid, block, smem, stream>>>(args);  ->  ::zdp_emu::launch(grid, block, smem, stream, kernel<T, 8>, args);
  extern __shared__ float4 row4[];                    ->  float4* row4 = static_cast<float4*>(::zdp_emu::dynamic_shared());
  __shared__ float s[32];                             ->  static float s[32]; (registered for poisoning before each block)

usage: cu_to_cc.py IN.cu OUT.cc   (fails when a launch it cannot read is left over)
"""
import os
import re
import sys

LAUNCH = re.compile(
    r"(?P<kernel>[A-Za-z_][\w:]*(?:<[^<>;]*(?:<[^<>;]*>[^<>;]*)*>)?)\s*"
    r"<<<(?P<config>.*?)>>>\s*\((?P<args>.*?)\);",
    re.S)
EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?P<type>[\w:]+)\s+(?P<name>\w+)\s*\[\s*\]\s*;")
STATIC_SHARED = re.compile(r"(?<!extern )__shared__\s+(?P<type>[\w:]+)\s+(?P<name>\w+)(?P<dims>(?:\s*\[[^\]]+\])*)\s*;")


def launch(m):
    config = [c.strip() for c in split_top_level(m.group("config"))]
    while len(config) < 4:
        config.append("0" if len(config) == 2 else "nullptr")
    args = m.group("args").strip()
    return "::zdp_emu::launch({}, {}{});".format(", ".join(config), m.group("kernel"), ", " + args if args else "")


def split_top_level(text):
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


LOCAL_INCLUDE = re.compile(r'^#include "(?P<path>kernels/cuda/[\w/]+\.cuh)"\s*$', re.M)


def inline_local_headers(path, root, seen):
    """The file's text with its kernels/cuda/*.cuh includes inlined, each once: a header
    may hold launches too (slice_update.cuh), and its helpers' namespace is renamed by
    simt.h with the rest."""
    with open(os.path.join(root, path) if not os.path.isabs(path) else path) as f:
        lines = f.read().split("\n")
    out = []
    for number, line in enumerate(lines, 1):
        m = LOCAL_INCLUDE.match(line)
        if m:
            header = m.group("path")
            if header not in seen:
                seen.add(header)
                out.append('#line 1 "%s"' % header)
                out.append(inline_local_headers(header, root, seen))
                out.append('#line %d "%s"' % (number + 1, path))
            else:
                out.append("")
            continue
        out.append("" if line.strip() == "#pragma once" else line)
    return "\n".join(out)


def main():
    src, out = sys.argv[1], sys.argv[2]
    # The repository root: kernels/cuda/x.cu is two folders below it.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(src))))
    text = inline_local_headers(src, root, set())
    text = LAUNCH.sub(launch, text)
    text = EXTERN_SHARED.sub(
        lambda m: "{t}* {n} = static_cast<{t}*>(::zdp_emu::dynamic_shared());".format(t=m.group("type"), n=m.group("name")),
        text)
    # A block's own shared variables: registered once, so that the emulation fills them
    # with a poison pattern before every block, as a GPU gives a block memory it has not
    # written (a read before the write shows as a NaN or -1, not the last block's value).
    text = STATIC_SHARED.sub(
        lambda m: "static {t} {n}{d}; static const bool {n}_simt_registered = "
                  "::zdp_emu::register_shared(&{n}, sizeof({n})); (void){n}_simt_registered;".format(
                      t=m.group("type"), n=m.group("name"), d=m.group("dims")),
        text)
    if "<<<" in text or "__shared__" in text:
        sys.exit("cu_to_cc.py: %s: a launch or extern __shared__ it cannot rewrite is left" % src)
    with open(out, "w") as f:
        f.write("// Generated from %s by testing/simt/cu_to_cc.py: do not edit.\n#line 1 \"%s\"\n" % (src, src))
        f.write(text)


if __name__ == "__main__":
    main()
