#!/usr/bin/env python3
"""More TypeScript/JavaScript pairs: a declaration's doc → its implementation.

npm packages built from TypeScript often ship the compiled JavaScript without
its doc comments and keep them in the `.d.ts` beside it (graphql, kysely,
drizzle-orm, the prosemirror packages, @apollo/client …), so `weft eval
--derive` finds documented definitions in neither: the `.js` has no docs and
`.d.ts` files are not asked about (a declaration is not an implementation).
This pairs them: the first sentence of a declaration's doc comment asks for
the function or method that implements it in the `.js`/`.mjs` beside the
declaration file, the same kind of pair as a doc comment and its definition
(the implementation carries no doc to blank).

    dts_pairs.py PKGDIR QUERIES.jsonl HARD_DIR

Appends rows in the derived format to QUERIES.jsonl for every JavaScript file
of HARD_DIR (the files `weft eval --derive` read, as their hard copy) that has
a declaration file in PKGDIR, skipping symbols the file already has a row for,
and prints how many it added. The query follows `weft eval --derive`: the
description up to the first block tag (or the text of a leading
`@description`/`@summary` tag), its first sentence, 3 to 40 words, no
boilerplate, not a mere echo of the name; targets of at least 3 lines.
Python stdlib only; deterministic.
"""

import json
import os
import re
import sys

ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.")
BOILERPLATE = ("todo", "fixme", "xxx", "deprecated", "@", "internal use", "see ", "note:",
               "copyright", "licensed", "hack", "safety:")
STOP = {"the", "a", "an", "of", "to", "in", "for", "and", "or", "is", "are", "be", "this", "that",
        "it", "its", "on", "with", "by", "as", "from", "at", "if", "returns", "return", "gets",
        "get", "sets", "set", "new", "given", "specified"}

DECL_FUNCTION = re.compile(r"^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:async\s+)?function\*?\s+([A-Za-z_$][\w$]*)")
DECL_CLASS = re.compile(r"^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?class\s+([A-Za-z_$][\w$]*)")
DECL_MEMBER = re.compile(r"^\s*(?:(?:public|protected|private|static|readonly|abstract|override|async)\s+)*(?:(get|set)\s+)?([A-Za-z_$][\w$]*)\s*[<(]")


def description(doc):
    """The doc's description: up to its first block tag or, when nothing
    comes before the tags, the text of its @description (else @summary)
    tag, up to the next tag."""
    lines = []
    for raw in doc.splitlines():
        line = raw.strip()
        line = line.removeprefix("/**")
        line = line.removesuffix("*/")
        line = line.strip().lstrip("*")
        lines.append(line.removeprefix(" "))

    def until_tag(body):
        out, fence = [], False
        for line in body:
            t = line.strip()
            if t.startswith(("```", "~~~")):
                fence = not fence
                out.append("")
                continue
            if fence:
                continue
            if re.match(r"@[A-Za-z]", t):
                break
            out.append(line)
        return "\n".join(out)

    text = until_tag(lines)
    if text.strip():
        return text
    for wanted in (("description", "desc"), ("summary",)):
        for i, line in enumerate(lines):
            m = re.match(r"\s*@([A-Za-z]+)\s*(.*)", line)
            if m and m.group(1) in wanted:
                return until_tag([m.group(2)] + lines[i + 1 :])
    return ""


def inline_to_text(s):
    s = re.sub(r"\{@(?:link|linkcode|linkplain)\s+([^}|\s]+)(?:[ |][^}]*)?\}", r"\1", s)
    s = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"<[^>]+>", "", s)
    s = s.replace("`", "").replace("**", "").replace("__", "")
    return s


def first_sentence(desc):
    paragraphs = [p.strip() for p in desc.split("\n\n") if p.strip()]
    if not paragraphs:
        return None
    p = paragraphs[0]
    if p.startswith(("# ", "| ", "- ", "* ")) or re.match(r"\d+\. ", p):
        return None
    plain = " ".join(inline_to_text(p).split())
    for m in re.finditer(r"[.!?](?= |$)", plain):
        head = plain[: m.end()]
        if any(head.endswith(a) for a in ABBREVIATIONS):
            continue
        return head.strip()
    return plain.strip()


def bad_query(q):
    words = q.split()
    if len(words) < 3:
        return "short"
    if len(words) > 40:
        return "long"
    low = q.lower()
    if "inheritdoc" in low or low.startswith(BOILERPLATE):
        return "boilerplate"
    if not any(len(w) >= 3 for w in re.split(r"[^A-Za-z]", q)):
        return "noalpha"
    return None


def split_ident(name):
    parts = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    parts = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", parts)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", parts) if w]


def stem(w):
    for suffix in ("ing", "es", "s", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)]
    return w


def name_echo(q, name, owner):
    content = [stem(w) for t in re.split(r"[^A-Za-z0-9]+", q) if t[:1].isalpha()
               for w in split_ident(t) if len(w) > 1 and w not in STOP]
    named = {stem(w) for w in split_ident(name) + split_ident(owner)}
    return all(w in named for w in content)


def braces(line):
    """The line's `{` minus `}`, outside strings and // comments (roughly)."""
    depth, quote, i = 0, None, 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
        elif c == "/" and line[i + 1 : i + 2] == "/":
            break
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        i += 1
    return depth


def declarations(text):
    """(owner, name, kind, query) for each documented function or method."""
    lines = text.splitlines()
    out, depth, classes, doc = [], 0, [], None
    i = 0
    while i < len(lines):
        line = lines[i]
        s = line.strip()
        if s.startswith("/**"):
            block = [line]
            while "*/" not in lines[i] and i + 1 < len(lines):
                i += 1
                block.append(lines[i])
            doc = "\n".join(block)
            i += 1
            continue
        if s and not s.startswith("//") and not s.startswith("@"):
            if doc is not None:
                owner = classes[-1][0] if classes and classes[-1][1] == depth - 1 else None
                kind = name = None
                if owner is None and depth == 0 and (m := DECL_FUNCTION.match(line)):
                    kind, name = "function", m.group(1)
                elif owner is not None and (m := DECL_MEMBER.match(line)) and m.group(2) != "constructor":
                    kind, name = "method", m.group(2)
                if kind:
                    q = first_sentence(description(doc))
                    if q and not bad_query(q) and not name_echo(q, name, owner or ""):
                        out.append((owner or "", name, kind, q))
            doc = None
            if depth == 0 and (m := DECL_CLASS.match(line)):
                classes.append((m.group(1), depth))
            depth += braces(line)
            while classes and depth <= classes[-1][1] and "}" in line:
                classes.pop()
        i += 1
    return out


def block_end(lines, start):
    """The last line (0-based) of the block opened on or after `start`."""
    depth, opened = 0, False
    for j in range(start, min(len(lines), start + 600)):
        d = braces(lines[j])
        if "{" in lines[j]:
            opened = True
        depth += d
        if opened and depth <= 0:
            return j
    return None


def implementation(lines, owner, name):
    """(start, end) lines (0-based) of `name`'s definition in the JavaScript."""
    if owner:
        cls = re.compile(r"^\s*(?:export\s+)?(?:default\s+)?(?:let\s+|var\s+|const\s+)?(?:class\s+" + re.escape(owner) + r"\b|" + re.escape(owner) + r"\s*=\s*class\b)")
        for i, line in enumerate(lines):
            if cls.match(line):
                end = block_end(lines, i)
                if end is None:
                    return None
                member = re.compile(r"^\s*(?:static\s+)?(?:async\s+)?(?:get\s+|set\s+)?\*?" + re.escape(name) + r"\s*\(")
                for j in range(i + 1, end):
                    if member.match(lines[j]):
                        e = block_end(lines, j)
                        return (j, e) if e is not None and e <= end else None
                return None
        return None
    fn = re.compile(r"^(?:export\s+)?(?:default\s+)?(?:async\s+)?function\*?\s+" + re.escape(name) + r"\s*\(")
    for i, line in enumerate(lines):
        if fn.match(line):
            e = block_end(lines, i)
            return (i, e) if e is not None else None
    return None


def read(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def main():
    pkg, queries, hard = sys.argv[1:4]
    rows = [json.loads(line) for line in read(queries).splitlines() if line.strip()]
    corpus = os.path.basename(queries)[: -len(".jsonl")]
    had = {(r["path"], r.get("symbol")) for r in rows}
    root = rows[0]["corpus_root"] if rows else pkg
    added = 0
    for dirpath, dirnames, files in os.walk(hard):
        dirnames.sort()
        for f in sorted(files):
            if not f.endswith((".js", ".mjs")):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), hard)
            stem_ = rel[: -len(".mjs")] if f.endswith(".mjs") else rel[: -len(".js")]
            decl = next((os.path.join(pkg, stem_ + e) for e in ((".d.mts", ".d.ts") if f.endswith(".mjs") else (".d.ts",))
                         if os.path.isfile(os.path.join(pkg, stem_ + e))), None)
            if decl is None:
                continue
            js = read(os.path.join(dirpath, f)).splitlines()
            for owner, name, kind, q in declarations(read(decl)):
                symbol = f"{owner}.{name}" if owner else name
                if (rel, symbol) in had:
                    continue
                span = implementation(js, owner, name)
                if span is None or span[1] - span[0] + 1 < 3:
                    continue
                had.add((rel, symbol))
                rows.append({
                    "id": f"{corpus}-dts-{added:05d}", "query": q, "corpus": corpus, "path": rel,
                    "start_line": span[0] + 1, "end_line": span[1] + 1, "alt_targets": [],
                    "corpus_root": root, "hard_root": os.path.basename(hard.rstrip("/")),
                    "n_lines": span[1] - span[0] + 1, "lang": "javascript", "kind": kind, "symbol": symbol,
                    "source": "dts",
                })
                added += 1
    with open(queries, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(r) + "\n" for r in rows)
    print(added)


if __name__ == "__main__":
    main()
