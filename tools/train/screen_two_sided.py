#!/usr/bin/env python3
"""Fine-tunes MiniLM's top layers for queries and chunks alike (issue 34, a screen).

weft's query encoders tune the top layers for queries only: chunks keep the
vectors the untouched model gave them, so no index is embedded again. This
screen asks what tuning both sides would add (a new model, every index
embedded again) before any of it is built: the same data, split and
training as `train_query_encoder.py`, once for queries only and once for
both sides, compared on the held-out packages (15%, by name) by MRR@10 of
the vector alone over each query's candidates from its own package.

Both sides share the tuned weights (one model). A chunk's lower layers are
computed once from its text as weft embedded it (`PREFIX.chunks.jsonl`,
written by `train-candidates`), and its top layers again at every step; to
fit the 2-core budget a training query scores its target's chunks and its
`--negatives` best-ranked other candidates of its package (the query-only
run scores every candidate of its package, as the shipped encoder was
trained).

  screen_two_sided.py PREFIX --model-dir M [--layers 2] [--epochs 1] [--negatives 7]

Needs torch, tokenizers, safetensors, numpy (tools/train/README.md).
"""

import json
import sys
import time

import numpy as np
import torch
from dumps import held_out, load
from train_query_encoder import Bert, lower, mrr10, split_camel_case, training_args, upper


def own(row):
    """The candidates of a query from its own package."""
    package = row["path"].split("/")[0]
    return package, [x for x in row["candidates"] if x["uri"].split("/")[0] == package]


def rank_key(x):
    """Best of a candidate's two retriever ranks (neither: last)."""
    ranks = [r for r in (x["vrank"], x["trank"]) if r is not None]
    return min(ranks) if ranks else 1 << 30


def encode(model, states, keys, layers, w, batch=32, tokens=None):
    """Pooled vectors of the top layers over cached states (their first
    `tokens`), in `keys` order; batched by length to pad little."""
    order = sorted(range(len(keys)), key=lambda i: states[keys[i]].shape[0])
    out = [None] * len(keys)
    for s in range(0, len(order), batch):
        part = order[s : s + batch]
        vecs = upper(model, [states[keys[i]][:tokens].float() for i in part], layers, w)
        for i, v in zip(part, vecs):
            out[i] = v
    return torch.stack(out)


def main():
    ap = training_args(__doc__, epochs=1, lr=5e-5)
    ap.add_argument("--negatives", type=int, default=3)
    ap.add_argument(
        "--train-tokens",
        type=int,
        default=128,
        help="while training, a chunk's top layers see its first this many tokens (held-out scores see all)",
    )
    ap.add_argument("--mix", type=float, nargs="*", default=[0.5, 1.0])
    ap.add_argument(
        "--sides",
        nargs="*",
        choices=["queries", "queries-reduced", "both"],
        default=["queries", "both"],
        help="what to train, one run each: queries only over every candidate of the package, "
        "queries only over what `both` scores (the control), both sides",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = Bert(args.model_dir)
    dim = model.config["hidden_size"]
    rows, qd, cd = load(args.prefix, dim)
    chunk_texts = [json.loads(line)["text"] for line in open(args.prefix + ".chunks.jsonl")]
    if len(chunk_texts) != cd.shape[0]:
        sys.exit(f"{args.prefix}.chunks.jsonl: {len(chunk_texts)} texts for {cd.shape[0]} vectors")

    items = {}
    for k, r in enumerate(rows):
        package, cand = own(r)
        hits = np.array([x["hit"] for x in cand], dtype=bool)
        if hits.any() and not hits.all():
            items[k] = (cand, hits, package)
    train = [k for k, v in items.items() if not held_out(v[2])]
    val = [k for k, v in items.items() if held_out(v[2])]
    # What each training query scores when chunks are tuned too.
    chosen = {}
    for k in train:
        cand, hits, _ = items[k]
        negatives = sorted((x for x, h in zip(cand, hits) if not h), key=rank_key)[: args.negatives]
        chosen[k] = [x["row"] for x, h in zip(cand, hits) if h] + [x["row"] for x in negatives]
    needed = sorted({c for k in train for c in chosen[k]} | {x["row"] for k in val for x in items[k][0]})
    if "both" not in args.sides:
        needed = needed[:16]
    started = time.time()
    texts = [split_camel_case(r["query"]) for r in rows]
    qstates = lower(model, texts, args.layers)
    # Parity: the untouched model here gives the chunk vectors weft stored.
    with torch.no_grad():
        first = lower(model, [chunk_texts[c] for c in needed[:16]], 0)
        mine = torch.stack([model.pool(s[None], torch.ones(1, s.shape[0]))[0] for s in first]).numpy()
    cos = (mine * cd[needed[:16]]).sum(1)
    print(f"parity with weft's chunk vectors: min cos {cos.min():.6f}", file=sys.stderr)
    cstates = {}
    for s in range(0, len(needed), 256):
        part = needed[s : s + 256]
        for c, st in zip(part, lower(model, [chunk_texts[c] for c in part], args.layers)):
            cstates[c] = st.half()
        print(f"  lower layers: {min(s + 256, len(needed))}/{len(needed)} chunks ({time.time() - started:.0f}s)", file=sys.stderr, flush=True)
    print(f"{len(train)} training queries, {len(val)} held out, {len(needed)} chunks; lower layers {time.time() - started:.0f}s", file=sys.stderr)
    # What tuning the chunk side costs a training query: its short list
    # against every candidate of its package.
    every = np.mean([len(items[k][0]) for k in train])
    short = np.mean([len(chosen[k]) for k in train])
    print(f"chunks a training query scores: {short:.1f} (both), {every:.1f} (queries, every candidate)", flush=True)

    names = [k for k in model.w if any(k.startswith(f"encoder.layer.{i}.") for i in range(model.layers - args.layers, model.layers))]

    def held_out_mrr(w, chunks_too):
        with torch.no_grad():
            qv = encode(model, qstates, val, args.layers, w).numpy()
            if chunks_too:
                rows_needed = sorted({x["row"] for k in val for x in items[k][0]})
                cv = dict(zip(rows_needed, encode(model, cstates, rows_needed, args.layers, w).numpy()))
            out = {}
            for j, k in enumerate(val):
                cand, hits, _ = items[k]
                vecs = np.stack([cv[x["row"]] for x in cand]) if chunks_too else cd[[x["row"] for x in cand]]
                out[j] = (vecs, hits)
        return mrr10(qv, out)

    print(f"untouched model: held-out MRR@10 {held_out_mrr(model.w, False):.4f}", flush=True)
    for sides in args.sides:
        torch.manual_seed(args.seed)
        rng = np.random.default_rng(args.seed)
        params = {k: model.w[k].clone().requires_grad_(True) for k in names}
        opt = torch.optim.AdamW(params.values(), lr=args.lr, weight_decay=0.0)
        for epoch in range(args.epochs):
            order = rng.permutation(train)
            total = 0.0
            for s in range(0, len(order), args.batch):
                keys = [int(k) for k in order[s : s + args.batch]]
                w = {**model.w, **params}
                qv = encode(model, qstates, keys, args.layers, w)
                if sides == "both":
                    flat = [c for k in keys for c in chosen[k]]
                    cvs = encode(model, cstates, flat, args.layers, w, tokens=args.train_tokens)
                loss = 0.0
                at = 0
                for j, k in enumerate(keys):
                    cand, hits, _ = items[k]
                    if sides == "both":
                        n = len(chosen[k])
                        cv, h = cvs[at : at + n], np.arange(n) < int(hits.sum())
                        at += n
                    elif sides == "queries-reduced":
                        cv = torch.from_numpy(cd[chosen[k]])
                        h = np.arange(len(chosen[k])) < int(hits.sum())
                    else:
                        cv, h = torch.from_numpy(cd[[x["row"] for x in cand]]), hits
                    lp = (cv @ qv[j] / args.temperature).log_softmax(0)
                    loss = loss - torch.logsumexp(lp[torch.from_numpy(h)], 0)
                loss = loss / len(keys)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(keys)
                if (s // args.batch) % 20 == 0:
                    print(f"  {sides}: step {s // args.batch + 1}, loss {float(loss.detach()):.4f} ({time.time() - started:.0f}s)", file=sys.stderr, flush=True)
            print(f"{sides}, epoch {epoch + 1}: training loss {total / len(train):.4f} ({time.time() - started:.0f}s)", file=sys.stderr, flush=True)
        tuned = {k: v.detach() for k, v in params.items()}
        for m in args.mix:
            w = {**model.w, **{k: model.w[k] + m * (tuned[k] - model.w[k]) for k in names}}
            print(f"{sides} tuned ×{m}: held-out MRR@10 {held_out_mrr(w, sides == 'both'):.4f} ({time.time() - started:.0f}s)", flush=True)


if __name__ == "__main__":
    main()
