#!/usr/bin/env python3
"""Where a cold build's time goes, from cargo's timing report
(bench/RESULTS.md "Cold release build"): the slowest units, unit seconds
by part (qdrant-edge, tantivy, weft's own crates, the rest), qdrant-edge's
front end and codegen, and when the tail (qdrant-edge, then the binaries)
starts and ends.

    python3 bench/cold-units.py /tmp/cold/LABEL     # a directory bench/cold-build.sh wrote
"""
import glob, json, re, sys

report = glob.glob(sys.argv[1] + "/cargo-timings/cargo-timing-*.html")
if not report:
    sys.exit(f"no cargo timing report under {sys.argv[1]}/cargo-timings")
text = open(report[0]).read()
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", text, re.S).group(1))
total = sum(u["duration"] for u in units)
print(f"{len(units)} units, {total:.0f} unit seconds; slowest:")
for u in sorted(units, key=lambda u: -u["duration"])[:15]:
    print(f"{u['duration']:8.1f}  {u['name']} {u['version']} {u.get('target', '')}")
parts = {"qdrant-edge": ("qdrant-edge",), "tantivy and bitpacking": ("tantivy", "bitpacking"),
         "weft's own crates": ("weft",)}
sums = dict.fromkeys(list(parts) + ["every other unit"], 0.0)
for u in units:
    part = next((p for p, names in parts.items() if u["name"].startswith(names)), "every other unit")
    sums[part] += u["duration"]
print("by part:")
for part, seconds in sums.items():
    print(f"{seconds:8.0f}  {100 * seconds / total:4.1f}%  {part}")
print("the tail:")
for u in units:
    if (u["name"] in ("qdrant-edge", "weft-vector-edge") and not u.get("target", "").strip()) or "bin" in u.get("target", ""):
        sections = ", ".join(f"{n} {s['end'] - s['start']:.1f} s" for n, s in (u.get("sections") or []))
        print(f"  {u['name']}{u.get('target', '')}: {u['start']:.0f} s to {u['start'] + u['duration']:.0f} s"
              + (f" ({sections})" if sections else ""))
