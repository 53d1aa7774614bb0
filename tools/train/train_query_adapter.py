#!/usr/bin/env python3
"""Trains a query-side linear adapter for weft's embedding model (issue 34).

Input: what `train-candidates` dumped for the training queries: per query its
vector and the chunks weft retrieved for it (the vector and text retrievers'
top candidates: hard negatives weft itself retrieves) plus the target's own
chunks, each with its stored vector and whether it is a hit.

Model: q' = W q / |W q| with W = I + D, D a full or low-rank matrix; chunks
are untouched, so no index is embedded again. Loss: for each query, the
softmax over its candidates of cos(q', d) / T, minus the log of the mass on
its hits, plus `l2` |D|^2. Adam, fixed seed, whole-list batches.

  train_query_adapter.py PREFIX --out adapter.f32 [--shrunk-out half.f32 [--shrink 0.5]] [--epochs 8] [--l2 ...]

Writes the matrix W as little-endian f32, row-major (what `eval-sweep
--query-adapter` and weft read), and prints held-out figures per epoch:
the candidates re-ranked by the adapted vector alone (MRR@10), before and
after. Held out: every package whose name hashes into --holdout.
"""

import argparse
import hashlib
import sys
import time

import numpy as np
from dumps import held_out, load


def lists(rows, q, c):
    """Per query: (query vector, candidate vectors, hit mask, prose)."""
    out = []
    for r in rows:
        package = r.get("path", r["corpus"]).split("/")[0]
        # Negatives from the query's own package only: a project is what
        # a search runs over.
        cand = [x for x in r["candidates"] if x["uri"].split("/")[0] == package]
        hits = np.array([x["hit"] for x in cand], dtype=bool)
        if not hits.any() or hits.all():
            continue
        idx = np.array([x["row"] for x in cand])
        out.append((q[r["qrow"]], c[idx], hits, r["prose"], package))
    return out


def mrr10(items, w):
    """MRR@10 of each list ranked by cos(W q, d) alone."""
    total = 0.0
    for qv, cv, hits, _, _ in items:
        u = w @ qv
        u /= np.linalg.norm(u) + 1e-12
        s = cv @ u
        order = np.argsort(-s, kind="stable")[:10]
        for rank, i in enumerate(order):
            if hits[i]:
                total += 1.0 / (rank + 1)
                break
    return total / max(len(items), 1)


def train(items, dim, args, rng, val):
    eye = np.eye(dim, dtype=np.float64)
    if args.rank:
        a = rng.normal(0, 1e-3, (dim, args.rank))
        b = np.zeros((dim, args.rank))
        params = [a, b]
    else:
        params = [np.zeros((dim, dim))]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    step = 0
    t = args.temperature

    def matrix():
        if args.rank:
            return eye + params[0] @ params[1].T
        return eye + params[0]

    for epoch in range(args.epochs):
        order = rng.permutation(len(items))
        loss_sum = 0.0
        for start in range(0, len(order), args.batch):
            grad_w = np.zeros((dim, dim))
            w = matrix()
            for i in order[start : start + args.batch]:
                qv, cv, hits, _, _ = items[i]
                u = w @ qv
                n = np.linalg.norm(u) + 1e-12
                uh = u / n
                s = (cv @ uh) / t
                s -= s.max()
                p = np.exp(s)
                p /= p.sum()
                pos = p * hits
                mass = pos.sum()
                loss_sum += -np.log(mass + 1e-30)
                g_s = (p - pos / mass) / t  # d loss / d score
                g_uh = cv.T @ g_s
                g_u = (g_uh - uh * (uh @ g_uh)) / n
                grad_w += np.outer(g_u, qv)
            grad_w /= args.batch
            if args.rank:
                grads = [grad_w @ params[1], grad_w.T @ params[0]]
                grads = [g + 2 * args.l2 * p for g, p in zip(grads, params)]
            else:
                grads = [grad_w + 2 * args.l2 * params[0]]
            step += 1
            for k, (p, g) in enumerate(zip(params, grads)):
                m[k] = 0.9 * m[k] + 0.1 * g
                v[k] = 0.999 * v[k] + 0.001 * g * g
                mh = m[k] / (1 - 0.9**step)
                vh = v[k] / (1 - 0.999**step)
                p -= args.lr * mh / (np.sqrt(vh) + 1e-8)
        w = matrix()
        print(
            f"epoch {epoch + 1}: train loss {loss_sum / len(items):.4f}, "
            f"held-out MRR@10 (vector alone) {mrr10(val, w):.4f} "
            f"(code {mrr10([x for x in val if not x[3]], w):.4f}, "
            f"prose {mrr10([x for x in val if x[3]], w):.4f})",
            file=sys.stderr,
            flush=True,
        )
    return matrix()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefix", help="train-candidates' --out prefix")
    ap.add_argument("--out", required=True, help="where the f32 matrix is written")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--l2", type=float, default=1e-3)
    ap.add_argument("--rank", type=int, default=0, help="0: a full matrix")
    ap.add_argument("--temperature", type=float, default=0.05)
    ap.add_argument("--holdout", type=float, default=0.15, help="share of packages held out")
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--final", action="store_true", help="train on every package (no hold-out)")
    ap.add_argument(
        "--shrunk-out",
        help="also write I + s·D here, from the same training (s: --shrink)",
    )
    ap.add_argument(
        "--shrink",
        type=float,
        default=0.5,
        help="s for --shrunk-out, in (0, 1]: halfway to the identity at 0.5",
    )
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rows, q, c = load(args.prefix, args.dim)
    items = lists(rows, q.astype(np.float64), c.astype(np.float64))
    if args.final:
        tr, val = items, [x for x in items if held_out(x[4], args.holdout)]
    else:
        tr = [x for x in items if not held_out(x[4], args.holdout)]
        val = [x for x in items if held_out(x[4], args.holdout)]
    print(
        f"{len(rows)} queries, {len(items)} with a hit and a miss among their candidates; "
        f"train {len(tr)}, held out {len(val)} "
        f"({len({x[4] for x in val})} packages)",
        file=sys.stderr,
    )
    eye = np.eye(args.dim)
    print(
        f"before: held-out MRR@10 (vector alone) {mrr10(val, eye):.4f} "
        f"(code {mrr10([x for x in val if not x[3]], eye):.4f}, "
        f"prose {mrr10([x for x in val if x[3]], eye):.4f})",
        file=sys.stderr,
    )
    started = time.time()
    w = train(tr, args.dim, args, rng, val)
    print(f"{time.time() - started:.0f}s of training")
    outputs = [(args.out, w)]
    if args.shrunk_out:
        eye = np.eye(args.dim)
        shrunk = eye + args.shrink * (w - eye)
        print(
            f"shrunk by {args.shrink}: held-out MRR@10 (vector alone) {mrr10(val, shrunk):.4f}",
            file=sys.stderr,
        )
        outputs.append((args.shrunk_out, shrunk))
    for path, matrix in outputs:
        matrix.astype("<f4").tofile(path)
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        print(f"wrote {path}, sha256 {digest}")


if __name__ == "__main__":
    main()
