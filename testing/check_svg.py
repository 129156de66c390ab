#!/usr/bin/env python3
"""Checks an SVG that zdp's plotting module (plot/) wrote: it parses as XML, its root is
<svg>, each series named with --series NAME=N is drawn with exactly N points (the
<polyline>'s point pairs and/or its <circle> markers, which must agree with each other and
with data-points), --bars N counts the <g class="bar"> groups, --refline NAME requires a
drawn reference line, and --png OUT renders it with rsvg-convert (librsvg2-bin) and checks
that a PNG of the SVG's size came out. Prints what it found; exits 1 naming each failure."""
import argparse
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def series_points(group):
    """The number of points a series group draws, or an error text."""
    counts = []
    for line in group.iter(NS + "polyline"):
        counts.append(len(line.get("points", "").split()))
    circles = len(list(group.iter(NS + "circle")))
    if circles:
        counts.append(circles)
    if not counts:
        return 0, None
    if len(set(counts)) != 1:
        return None, f"its polyline and markers disagree: {counts}"
    declared = int(group.get("data-points", "-1"))
    if declared != counts[0]:
        return None, f"data-points says {declared}, {counts[0]} drawn"
    return counts[0], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("svg")
    ap.add_argument("--series", action="append", default=[], metavar="NAME=N")
    ap.add_argument("--bars", type=int)
    ap.add_argument("--refline", action="append", default=[])
    ap.add_argument("--png")
    a = ap.parse_args()
    failures = []
    try:
        root = ET.parse(a.svg).getroot()
    except (ET.ParseError, OSError) as e:
        print(f"check_svg: {a.svg} does not parse as XML: {e}")
        return 1
    if root.tag != NS + "svg":
        failures.append(f"the root element is {root.tag}, not svg")
    found = {}
    for g in root.iter(NS + "g"):
        if g.get("class") == "series":
            n, err = series_points(g)
            if err:
                failures.append(f"series '{g.get('data-name')}': {err}")
            found[g.get("data-name")] = n
    print("series: " + ", ".join(f"{k}={v}" for k, v in found.items()))
    for spec in a.series:
        name, _, want = spec.rpartition("=")
        if name not in found:
            failures.append(f"no series '{name}' (found: {sorted(found)})")
        elif found[name] != int(want):
            failures.append(f"series '{name}' has {found[name]} points, expected {want}")
    bars = [g for g in root.iter(NS + "g") if g.get("class") == "bar"]
    print(f"bars: {len(bars)}")
    if a.bars is not None and len(bars) != a.bars:
        failures.append(f"{len(bars)} bars, expected {a.bars}")
    lines = [g.get("data-name") for g in root.iter(NS + "g") if g.get("class") == "refline"]
    for name in a.refline:
        if not any(l.startswith(name) for l in lines):
            failures.append(f"no reference line '{name}' (found: {lines})")
    if a.png:
        r = subprocess.run(["rsvg-convert", "--format=png", "--output", a.png, a.svg], capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"rsvg-convert failed ({r.returncode}): {r.stderr.strip()}")
        else:
            with open(a.png, "rb") as f:
                head = f.read(24)
            if head[:8] != b"\x89PNG\r\n\x1a\n":
                failures.append("rsvg-convert wrote no PNG")
            else:
                width, height = struct.unpack(">II", head[16:24])
                want = (round(float(root.get("width"))), round(float(root.get("height"))))
                print(f"png: {width}x{height}")
                if abs(width - want[0]) > 1 or abs(height - want[1]) > 1:
                    failures.append(f"the PNG is {width}x{height}, the SVG {want[0]}x{want[1]}")
    for f in failures:
        print(f"check_svg: {a.svg}: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
