#!/usr/bin/env python3
"""Masks every heading of the sampled prose files, not only the asked ones.

The hard copy `weft eval --derive` writes masks the headings that queries
ask for ("Section N") and keeps the others. Trained on that, a learned
component could learn that a masked heading marks the answer: true of the
evaluation's hard sets, false of any real documentation. With every heading
masked, a masked heading says nothing about relevance, so what is learned
is how a question matches a section's text.

  mask_headings.py [DEST]      # DEST/sample/tree, in place; idempotent

Line numbers are kept (targets are line spans): a heading's text is replaced
on its own line; reST and setext under- and overlines are resized to it.
"""

import os
import re
import sys

ATX = re.compile(r"^(\s{0,3}#{1,6})\s+(.*?)\s*#*\s*$")
MASKED = re.compile(r"^Section \d+$")
# reST / setext adornment: one repeated punctuation character.
ADORN = re.compile(r"""^([=\-~^"'`#*+_:.<>!$%&,;/?@\\|])\1{2,}\s*$""")


def mask_markdown(lines, counter):
    out, fence = [], None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            mark = stripped[:3]
            fence = None if fence == mark else (fence or mark)
        if fence:
            out.append(line)
            continue
        m = ATX.match(line)
        if m and m.group(2) and not MASKED.match(m.group(2)):
            counter[0] += 1
            out.append(f"{m.group(1)} Section {counter[0]}\n")
            continue
        # setext: text, then a line of = or -
        if (
            i + 1 < len(lines)
            and stripped
            and re.match(r"^\s{0,3}(=+|-+)\s*$", lines[i + 1])
            and not MASKED.match(stripped)
            and not stripped.startswith(("-", "*", "|", ">"))
        ):
            counter[0] += 1
            out.append(f"Section {counter[0]}\n")
            continue
        out.append(line)
    return fix_adornments(out)


def mask_rst(lines, counter):
    out = list(lines)
    for i in range(len(lines) - 1):
        title = lines[i].rstrip("\n")
        if (
            title.strip()
            and not ADORN.match(title)
            and ADORN.match(lines[i + 1])
            and len(lines[i + 1].strip()) >= max(3, len(title.strip()) // 2)
            and not MASKED.match(title.strip())
        ):
            counter[0] += 1
            out[i] = f"Section {counter[0]}\n"
    return fix_adornments(out)


def fix_adornments(lines):
    """Resizes the adornment lines around each masked title to its length."""
    out = list(lines)
    for i, line in enumerate(out):
        if not MASKED.match(line.strip()):
            continue
        width = len(line.rstrip("\n"))
        for j in (i - 1, i + 1):
            if 0 <= j < len(out) and ADORN.match(out[j]):
                out[j] = out[j].strip()[0] * width + "\n"
    return out


def main():
    dest = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/weft-train")
    tree = os.path.join(dest, "sample", "tree")
    files = headings = 0
    for root, _, names in os.walk(tree):
        for name in sorted(names):
            ext = os.path.splitext(name)[1].lower()
            if ext not in (".md", ".markdown", ".rst"):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                lines = f.readlines()
            # Numbers continue after the highest one the derivation used.
            used = [int(m.group(1)) for m in re.finditer(r"Section (\d+)", "".join(lines))]
            counter = [max(used, default=0) + 1000]
            before = counter[0]
            masked = (mask_rst if ext == ".rst" else mask_markdown)(lines, counter)
            if counter[0] != before:
                with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                    f.writelines(masked)
                files += 1
                headings += counter[0] - before
    print(f"mask_headings: {headings} more headings masked in {files} files under {tree}")


if __name__ == "__main__":
    main()
