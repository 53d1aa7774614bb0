#!/usr/bin/env python3
"""The shape of weft's code: non-test lines per crate, the largest files
and the longest functions (non-test, non-blank, non-comment lines).

    bench/code-shape.py [REPO]     (default: this repository)

Test code is left out: `tests/` and `benches/` directories and each file's
`#[cfg(test)]` module. A function is measured from its `fn` line to the
closing brace at the same indentation.
"""
import os
import re
import sys
from collections import defaultdict

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
root = os.path.abspath(root)


def crate_of(path):
    """The directory holding the Cargo.toml nearest to `path`."""
    d = os.path.dirname(path)
    while d.startswith(root) and d != root:
        if os.path.exists(os.path.join(d, "Cargo.toml")):
            return os.path.relpath(d, root)
        d = os.path.dirname(d)
    return "."


def code_lines(lines):
    out = []
    for i, line in enumerate(lines):
        s = line.strip()
        if re.match(r"#\[cfg\(test\)\]", s) and i + 1 < len(lines) and re.match(r"\s*(pub )?mod \w+", lines[i + 1]):
            break
        if not s or s.startswith("//"):
            continue
        out.append((i, line))
    return out


per_crate = defaultdict(int)
files = []
functions = []
for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = [d for d in dirnames if d not in ("target", ".git", "tests", "benches", "node_modules")]
    for name in filenames:
        if not name.endswith(".rs"):
            continue
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, root)
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
        code = code_lines(lines)
        per_crate[crate_of(path)] += len(code)
        files.append((len(code), rel))
        counted = {i for i, _ in code}
        for i, line in enumerate(lines):
            m = re.match(r"^(\s*)(pub(\([a-z]+\))? )?(async )?(unsafe )?fn (\w+)", line)
            if not m or i not in counted:
                continue
            indent = m.group(1)
            for j in range(i, len(lines)):
                if lines[j].startswith(indent + "}") and (j > i or line.rstrip().endswith("}")):
                    break
                if j > i and lines[j].strip() and not lines[j].startswith(indent + " ") and not lines[j].startswith(indent + ")") and not lines[j].startswith(indent + "where") and not lines[j].startswith(indent + "{") and not lines[j].startswith(indent + "}"):
                    break
            n = sum(1 for k in range(i, j + 1) if k in counted)
            functions.append((n, f"{rel}:{i + 1} {m.group(6)}"))

print("non-test code lines per crate (no blanks, no comments)")
for crate, n in sorted(per_crate.items(), key=lambda kv: -kv[1]):
    print(f"  {n:6d}  {crate}")
print(f"  {sum(per_crate.values()):6d}  total")
print("largest files")
for n, rel in sorted(files, reverse=True)[:12]:
    print(f"  {n:6d}  {rel}")
print("longest functions")
for n, where in sorted(functions, reverse=True)[:12]:
    print(f"  {n:6d}  {where}")
