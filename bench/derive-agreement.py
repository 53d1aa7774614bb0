#!/usr/bin/env python3
"""How closely `weft eval --derive` reproduces a shared/eval query set.

  bench/derive-agreement.py SHARED.jsonl CORPUS WEFT.jsonl

SHARED.jsonl is one of shared/eval/queries/*.jsonl, CORPUS a corpus it
names, WEFT.jsonl the set `weft eval --derive CORPUS_ROOT --name CORPUS`
wrote from the same tree. A shared row is *found* when a weft row asks for
an overlapping span of the same file; *same query* when that row's query
text is the shared one (whitespace and case aside). Prints one JSON line.
"""
import json
import sys
from collections import defaultdict


def norm(s):
    return " ".join(s.lower().split())


def main():
    shared_file, corpus, weft_file = sys.argv[1:4]
    shared = [r for r in map(json.loads, open(shared_file)) if r["corpus"] == corpus]
    weft = [json.loads(l) for l in open(weft_file) if l.strip()]
    by_path = defaultdict(list)
    for r in weft:
        for t in [r] + r.get("alt_targets", []):
            by_path[t["path"]].append((t["start_line"], t["end_line"], norm(r["query"])))
    found = same = 0
    for r in shared:
        spans = [
            q
            for s, e, q in by_path.get(r["path"], [])
            if s <= r["end_line"] and e >= r["start_line"]
        ]
        if spans:
            found += 1
            if norm(r["query"]) in spans:
                same += 1
    n = len(shared)
    print(json.dumps({
        "corpus": corpus,
        "shared_queries": n,
        "weft_queries": len(weft),
        "found": found,
        "found_share": round(found / max(n, 1), 3),
        "same_query": same,
        "same_query_share": round(same / max(n, 1), 3),
    }))


if __name__ == "__main__":
    main()
