#!/usr/bin/env python3
"""Deterministic sample of the derived pairs, and the tree to index for it.

    sample.py [DEST] [--n 300] [--n-prose N] [--max-files F] [--seed 34]

Reads DEST/derived/summary.tsv and DEST/derived/<package>.jsonl (written by
derive.sh; already leakage-filtered) and writes

    DEST/sample/queries.jsonl      the sampled rows, in the derived format, plus
                                   `package`, `registry`, `package_lang` (java, ts,
                                   python, rust); `lang` stays the target's own
                                   language (java, typescript, javascript, python,
                                   rust, md, rst, adoc). `path` and alternative
                                   targets are relative to DEST/sample/tree
                                   (`<package>/<path in the hard copy>`);
                                   corpus_root = hard_root = "tree", corpus = "weft-train".
    DEST/sample/tree/<package>/... copies of the hard-copy files holding a sampled
                                   target (doc comments blanked, asked headings masked)
    DEST/sample/weft.toml          a configuration that does not skip dist/ and build/
    DEST/sample/stats.tsv          per package: code and prose rows sampled, files, bytes

--max-bytes caps the bytes of those files per package and kind the same way, and
files over --max-file-bytes (bundles, huge modules) are never taken.
At most --n code queries and --n-prose prose queries (default: --n) per package,
drawn with random.Random("<seed>/<package>/<kind>"), so adding a package changes no
other package's sample. --max-files caps the files per package and kind: a row is
taken only if its files are already in the sample or the cap is not reached (so
files with many targets fill the sample first; fewer bytes per query).
Python 3 standard library only.
"""
import argparse
import json
import os
import random
import shutil
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dest", nargs="?", default=os.path.expanduser("~/.cache/weft-train"))
    ap.add_argument("--n", type=int, default=300, help="code queries per package (300)")
    ap.add_argument("--n-prose", type=int, default=None, help="prose queries per package (default --n)")
    ap.add_argument("--max-files", type=int, default=0, help="files per package and kind (0: no cap)")
    ap.add_argument("--max-bytes", type=int, default=0,
                    help="bytes of files per package and kind (0: no cap)")
    ap.add_argument("--max-file-bytes", type=int, default=250000,
                    help="skip targets in files larger than this (bundles, huge modules; 250000)")
    ap.add_argument("--seed", default="34")
    a = ap.parse_args()
    n_prose = a.n if a.n_prose is None else a.n_prose
    dest = os.path.abspath(a.dest)
    derived = os.path.join(dest, "derived")
    out = os.path.join(dest, "sample")
    tree = os.path.join(out, "tree")
    if os.path.isdir(tree):
        shutil.rmtree(tree)
    os.makedirs(tree)

    packages = []
    with open(os.path.join(derived, "summary.tsv"), encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        for line in fh:
            packages.append(dict(zip(header, line.rstrip("\n").split("\t"))))

    rows_out, stats = [], []
    for p in packages:
        name = p["name"]
        slug = name.lstrip("@").replace("/", "-")
        qfile = os.path.join(derived, slug + ".jsonl")
        hard = os.path.join(derived, slug + ".hard")
        rows = []
        with open(qfile, encoding="utf-8") as fh:
            rows = [json.loads(l) for l in fh if l.strip()]
        picked, files = [], set()
        for kind, cap in (("code", a.n), ("prose", n_prose)):
            pool = [r for r in rows if (r.get("heading_path") is not None) == (kind == "prose")]
            pool.sort(key=lambda r: r["id"])
            random.Random(f"{a.seed}/{slug}/{kind}").shuffle(pool)
            kind_files, taken, kind_bytes = set(), 0, 0
            size = lambda f: os.path.getsize(os.path.join(hard, f))
            for r in pool:
                if taken >= cap:
                    break
                need = {r["path"]} | {t["path"] for t in r.get("alt_targets") or []}
                new = need - kind_files - files
                if a.max_files and len(kind_files | need) > a.max_files:
                    continue
                if any(size(f) > a.max_file_bytes for f in new):
                    continue
                add = sum(size(f) for f in new)
                if a.max_bytes and kind_bytes + add > a.max_bytes:
                    continue
                kind_bytes += add
                kind_files |= need
                picked.append((kind, r))
                taken += 1
            files |= kind_files
        nbytes = 0
        for f in sorted(files):
            src = os.path.join(hard, f)
            dst = os.path.join(tree, slug, f)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
            nbytes += os.path.getsize(dst)
        picked.sort(key=lambda kr: kr[1]["id"])
        for kind, r in picked:
            r = dict(r)
            r["path"] = f"{slug}/{r['path']}"
            r["alt_targets"] = [dict(t, path=f"{slug}/{t['path']}") for t in r.get("alt_targets") or []]
            r["corpus"] = "weft-train"
            r["corpus_root"] = "tree"
            r["hard_root"] = "tree"
            r["package"] = slug
            r["registry"] = p["registry"]
            r["package_lang"] = p["lang"]
            rows_out.append(r)
        code = sum(1 for k, _ in picked if k == "code")
        stats.append((p["registry"], name, p["lang"], code, len(picked) - code, len(files), nbytes))
        print(f"[sample] {name}: {code} code + {len(picked) - code} prose queries, "
              f"{len(files)} files, {nbytes} bytes", file=sys.stderr)

    with open(os.path.join(out, "queries.jsonl"), "w", encoding="utf-8") as fh:
        for r in rows_out:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    # weft's default sources.skip_dirs skip dist/ and build/ (npm builds, SQLAlchemy's
    # doc/build): index the tree with this configuration so that every target is read.
    with open(os.path.join(out, "weft.toml"), "w", encoding="utf-8") as fh:
        fh.write("# index DEST/sample/tree with: weft index --config THIS tree\n[sources]\n"
                 'skip_dirs = ["node_modules", "__pycache__", ".git"]\n')
    with open(os.path.join(out, "stats.tsv"), "w", encoding="utf-8") as fh:
        fh.write("registry\tname\tlang\tcode\tprose\tfiles\tbytes\n")
        for s in stats:
            fh.write("\t".join(map(str, s)) + "\n")
    tot = lambda i: sum(s[i] for s in stats)
    by = {}
    for s in stats:
        b = by.setdefault(s[2], [0, 0, 0, 0])
        b[0] += s[3]; b[1] += s[4]; b[2] += s[5]; b[3] += s[6]
    for lang, b in sorted(by.items()):
        print(f"[sample]   {lang}: {b[0]} code + {b[1]} prose queries, {b[2]} files, {b[3]} bytes", file=sys.stderr)
    print(f"[sample] total: {tot(3)} code + {tot(4)} prose queries, {tot(5)} files, {tot(6)} bytes "
          f"(~{tot(6) // 4} tokens at 4 bytes/token) -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
