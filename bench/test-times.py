#!/usr/bin/env python3
"""Where the test step's time goes, from a log of tools/test.sh (or of its
test command alone): each step's wall time from the "== step  (at Ns)"
marks, and the tests' own times, from cargo nextest's "PASS [ Ns]" lines
(each test a process) or cargo test's "finished in Ns" lines (each binary
one process), with the slowest listed (bench/RESULTS.md "CI's time").

    bash .ci/run > LOG 2>&1; python3 bench/test-times.py LOG [N]
"""
import re
import sys

if len(sys.argv) < 2:
    sys.exit(__doc__)
text = open(sys.argv[1], errors="replace").read()
top = int(sys.argv[2]) if len(sys.argv) > 2 else 10

marks = re.findall(r"^== (.+?)  \(at (\d+)s\)$", text, re.M)
# Steps of tools/test.sh itself; the container smoke's phases restart at 0.
steps = [(name, int(at)) for name, at in marks if not name.startswith("smoke-containers:")]
if steps:
    print("steps (wall seconds):")
    for (name, at), (_, after) in zip(steps, steps[1:]):
        print(f"{after - at:7d}  {name}")

tests = re.findall(r"^\s+(?:PASS|LEAK|FLAKY|FAIL)[^\[]*\[\s*([\d.]+)s\]\s+\(\s*\d+/\d+\)\s+(\S+ \S+)", text, re.M)
if tests:
    kind = "nextest: one process a test"
else:
    kind = "cargo test: one process a binary"
    current = None
    for line in text.splitlines():
        running = re.match(r"\s+Running (?:unittests )?(\S+)", line)
        if running:
            current = running.group(1)
        finished = re.search(r"finished in ([\d.]+)s", line)
        if finished and current:
            tests.append((finished.group(1), current))
            current = None
if not tests:
    sys.exit(f"{sys.argv[1]}: no test times (neither nextest's PASS lines nor cargo test's 'finished in')")
times = sorted(((float(s), name) for s, name in tests), reverse=True)
print(f"{kind}: {len(times)} timed, {sum(s for s, _ in times):.0f} s in all; slowest:")
for seconds, name in times[:top]:
    print(f"{seconds:8.1f}  {name}")
