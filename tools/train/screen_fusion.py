#!/usr/bin/env python3
"""Screens a learned fusion scorer against weft's fixed fusion (issue 34).

Reads what `train-candidates --depth 80` dumped (80 is what weft's query
engine asks each retriever for) and ranks each query's candidates two ways:

- weft's fusion: 0.4 · min-max vector score + 0.6 · min-max text score, times
  1.25 for README and index documents (`FusionConfig::default`,
  `BoostConfig::default`);
- a linear scorer over 21 features of each candidate (both normalised
  scores, raw score gaps, ranks, README/index, prose, the best other chunk
  of the same document, query length and code-likeness crossed with the
  scores, chunk size and position), each also crossed with "the chunk is
  prose", trained with a listwise softmax loss on the training dump,
  starting from weft's weights, Adam, seed 34.

It prints nDCG@10 of the first hit among the ranked chunks, the figure
`weft eval` reports, for the held-out training packages and for every
corpus of each --eval dump. Scoring the fixed fusion this way gives within
.001 of `eval-sweep` on Node.js (.7165 against .7162), so the screen says
what the product would do without building it.

  screen_fusion.py TRAIN_PREFIX [--eval DEV_PREFIX ...] [--epochs 6]
"""

import argparse
import json
import math
import re

import numpy as np
from dumps import fused, held_out, is_index_doc, ndcg10, within

CODE_LIKE = re.compile(r"[a-z][A-Z]|_|\.|\(|::|#|[A-Za-z]\d")
NAMES = [
    "vnorm", "tnorm", "vpresent", "tpresent", "vgap", "tratio", "vlogrank", "tlogrank",
    "index_doc", "prose", "prose_v", "prose_t", "doc_vmax", "doc_tmax", "doc_count",
    "qcode_v", "qcode_t", "qlen_v", "qlen_t", "tokens", "first_chunk",
]  # fmt: skip


def features(row, depth):
    """(features, hits, weft's fused score) of one query's candidates."""
    cands = [
        c for c in row["candidates"] if within(c["vrank"], depth) or within(c["trank"], depth)
    ]
    if not cands:
        return None, None, None
    vs = [c["vscore"] for c in cands if within(c["vrank"], depth)] or [0.0]
    ts = [c["tscore"] for c in cands if within(c["trank"], depth)] or [0.0]
    vlo, vhi, tlo, thi = min(vs), max(vs), min(ts), max(ts)
    q = row["query"]
    qcode = 1.0 if CODE_LIKE.search(q) else 0.0
    qlen = min(len(q.split()), 24) / 24
    rows = []
    for c in cands:
        vin, tin = within(c["vrank"], depth), within(c["trank"], depth)
        vn = ((c["vscore"] - vlo) / (vhi - vlo) if vhi > vlo else 1.0) if vin else 0.0
        tn = ((c["tscore"] - tlo) / (thi - tlo) if thi > tlo else 1.0) if tin else 0.0
        prose = 1.0 if c["content_type"] == "prose" else 0.0
        rows.append([
            vn, tn, float(vin), float(tin),
            (c["vscore"] if vin else vlo) - vhi,
            (c["tscore"] / thi if thi > 0 else 0.0) if tin else 0.0,
            -math.log1p(c["vrank"] if vin else depth) / math.log1p(depth),
            -math.log1p(c["trank"] if tin else depth) / math.log1p(depth),
            float(is_index_doc(c["uri"])), prose, prose * vn, prose * tn,
            0.0, 0.0, 0.0, qcode * vn, qcode * tn, qlen * vn, qlen * tn,
            math.log(max(c["tokens"], 1)) / math.log(512), float(c["chunk_index"] == 0),
        ])  # fmt: skip
    by_uri = {}
    for i, c in enumerate(cands):
        by_uri.setdefault(c["uri"], []).append(i)
    for i, c in enumerate(cands):
        others = [j for j in by_uri[c["uri"]] if j != i]
        rows[i][12] = max((rows[j][0] for j in others), default=0.0)
        rows[i][13] = max((rows[j][1] for j in others), default=0.0)
        rows[i][14] = math.log1p(len(others)) / math.log(10)
    x = np.array(rows)
    x = np.hstack([x, x * x[:, 9:10]])
    hits = np.array([c["hit"] for c in cands], dtype=bool)
    return x, hits, fused(x[:, 0], x[:, 1], x[:, 8] > 0)


def load(prefix, depth):
    out = []
    for line in open(prefix + ".jsonl"):
        r = json.loads(line)
        x, hits, fixed = features(r, depth)
        group = r["path"].split("/")[0] if r["corpus"] == "weft-train" else r["corpus"]
        out.append((x, hits, fixed, r["prose"], group))
    return out


def figures(items, w):
    n = len(items)
    fixed = sum(ndcg10(f, h) for x, h, f, *_ in items if x is not None)
    learned = sum(ndcg10(x @ w, h) for x, h, f, *_ in items if x is not None)
    return f"n={n} fixed {fixed / max(n, 1):.4f} learned {learned / max(n, 1):.4f}"


def train(items, val, args):
    rng = np.random.default_rng(args.seed)
    items = [it for it in items if it[0] is not None and it[1].any()]
    w0 = np.zeros(items[0][0].shape[1])
    w0[0], w0[1] = 0.4, 0.6
    w, m, v, step = w0.copy(), np.zeros_like(w0), np.zeros_like(w0), 0
    for epoch in range(args.epochs):
        order = rng.permutation(len(items))
        for start in range(0, len(order), 32):
            g = np.zeros_like(w)
            for i in order[start : start + 32]:
                x, hits = items[i][0], items[i][1]
                s = x @ w / args.temperature
                p = np.exp(s - s.max())
                p /= p.sum()
                pos = p * hits
                g += x.T @ (p - pos / pos.sum()) / args.temperature
            g = g / 32 + 2 * args.l2 * (w - w0)
            step += 1
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            w -= args.lr * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
        code = figures([i for i in val if not i[3]], w)
        prose = figures([i for i in val if i[3]], w)
        print(f"epoch {epoch + 1}: held-out code {code}; prose {prose}", flush=True)
    return w


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("train", help="train-candidates' --out prefix of the training queries")
    ap.add_argument("--eval", nargs="*", default=[], help="dumps of labelled dev queries")
    ap.add_argument("--depth", type=int, default=80)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--l2", type=float, default=1e-3)
    ap.add_argument("--temperature", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=34)
    args = ap.parse_args()
    items = load(args.train, args.depth)
    val = [i for i in items if held_out(i[4])]
    w = train([i for i in items if not held_out(i[4])], val, args)
    print(" ".join(f"{n}={x:+.3f}" for n, x in zip(NAMES + ["p_" + n for n in NAMES], w)))
    for prefix in args.eval:
        dev = load(prefix, args.depth)
        for corpus in sorted({i[4] for i in dev}):
            print(f"{corpus}: {figures([i for i in dev if i[4] == corpus], w)}")


if __name__ == "__main__":
    main()
