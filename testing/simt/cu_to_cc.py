#!/usr/bin/env python3
"""Rewrites a kernels/cuda/*.cu file as host C++ for the SIMT emulation (simt.h): the two
constructs a C++ compiler cannot take. Everything else compiles as written, with simt.h
force-included.

  kernel<T, 8><<<grid, block, smem, stream>>>(args);  ->  ::zdp_emu::launch(grid, block, smem, stream, kernel<T, 8>, args);
  extern __shared__ float4 row4[];                    ->  float4* row4 = static_cast<float4*>(::zdp_emu::dynamic_shared());

usage: cu_to_cc.py IN.cu OUT.cc   (fails when a launch it cannot read is left over)
"""
import re
import sys

LAUNCH = re.compile(
    r"(?P<kernel>[A-Za-z_][\w:]*(?:<[^<>;]*(?:<[^<>;]*>[^<>;]*)*>)?)\s*"
    r"<<<(?P<config>.*?)>>>\s*\((?P<args>.*?)\);",
    re.S)
EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?P<type>[\w:]+)\s+(?P<name>\w+)\s*\[\s*\]\s*;")


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


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(src) as f:
        text = f.read()
    text = LAUNCH.sub(launch, text)
    text = EXTERN_SHARED.sub(
        lambda m: "{t}* {n} = static_cast<{t}*>(::zdp_emu::dynamic_shared());".format(t=m.group("type"), n=m.group("name")),
        text)
    if "<<<" in text or "extern __shared__" in text:
        sys.exit("cu_to_cc.py: %s: a launch or extern __shared__ it cannot rewrite is left" % src)
    with open(out, "w") as f:
        f.write("// Generated from %s by testing/simt/cu_to_cc.py: do not edit.\n#line 1 \"%s\"\n" % (src, src))
        f.write(text)


if __name__ == "__main__":
    main()
