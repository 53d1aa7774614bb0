#!/usr/bin/env python3
"""Copies a source tree and changes 1% of its Java files (a method added at
the end of each class), for measuring vector reuse across projects
(bench/RESULTS.md, issue 19 item 2).

    python3 bench/fork-copy.py SRC DEST
"""
import os
import random
import shutil
import sys

src, dest = sys.argv[1], sys.argv[2]
shutil.copytree(src, dest)
files = sorted(
    os.path.join(root, f)
    for root, _, names in os.walk(dest)
    for f in names
    if f.endswith(".java")
)
random.seed(1)
for path in random.sample(files, max(1, round(len(files) / 100))):
    text = open(path, errors="replace").read()
    end = text.rstrip().rfind("}")
    method = (
        "\n  /** Added in the fork: a checksum of this class's name. */\n"
        "  static int forkChecksum() {\n"
        f'    return "{os.path.basename(path)}".hashCode();\n'
        "  }\n"
    )
    open(path, "w").write(text[:end] + method + text[end:])
    print("changed", os.path.relpath(path, dest))
