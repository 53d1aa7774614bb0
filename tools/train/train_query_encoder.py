#!/usr/bin/env python3
"""Fine-tunes MiniLM's top layers for queries only (issue 34, a screen).

The chunks keep the vectors the untouched model gave them (they are in the
index); only the query encoder learns, so, like the query adapter, it needs
no re-index. The top `--layers` transformer layers are trained on what
`train-candidates` dumped: for each training query, a softmax over its
candidates from its own package (the hard negatives weft retrieves) at T,
with the stored chunk vectors fixed. The lower layers' outputs for every
query are computed once.

It prints held-out MRR@10 (15% of the packages, the candidates ranked by the
query vector alone, as train_query_adapter.py does) per epoch and, for each
--eval dump of labelled dev queries, nDCG@10 of weft's fusion over each
query's retrieved candidates re-scored with the new query vectors (hybrid
and vector only), beside the same with the untouched model and with
--adapter (a query adapter's matrix), so the proxy can be checked against
eval-sweep's figures for that adapter.

  train_query_encoder.py PREFIX --model-dir M [--layers 2] [--epochs 3] \\
      [--eval DEV_PREFIX ...] [--adapter weft-query-2.f32] [--out delta.safetensors]

Needs torch, tokenizers, safetensors, numpy.
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
from dumps import fused, held_out, is_index_doc, load, ndcg10, within
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer


def split_camel_case(text):
    """weft_core::split_camel_case: the query text weft embeds."""
    out = []
    for i, c in enumerate(text):
        if c.isupper() and i > 0:
            prev = text[i - 1]
            next_lower = i + 1 < len(text) and text[i + 1].islower()
            if prev.islower() or prev.isdigit() or (prev.isupper() and next_lower):
                out.append(" ")
        out.append(c)
    return "".join(out)


class Bert:
    """A BERT forward pass over safetensors weights (tools/reference_embed.py)."""

    def __init__(self, model_dir):
        self.config = json.load(open(f"{model_dir}/config.json"))
        self.w = {k: v.float() for k, v in load_file(f"{model_dir}/model.safetensors").items()}
        self.tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
        self.tok.enable_padding(pad_id=0)
        self.tok.enable_truncation(256)
        self.layers = self.config["num_hidden_layers"]
        self.eps = self.config["layer_norm_eps"]
        self.heads = self.config["num_attention_heads"]

    def encode(self, texts):
        enc = self.tok.encode_batch(texts)
        ids = torch.tensor([e.ids for e in enc])
        types = torch.tensor([e.type_ids for e in enc])
        mask = torch.tensor([e.attention_mask for e in enc], dtype=torch.float32)
        return ids, types, mask

    def embeddings(self, ids, types):
        w = self.w
        n = ids.shape[1]
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][torch.arange(n)][None]
             + w["embeddings.token_type_embeddings.weight"][types])  # fmt: skip
        return torch.nn.functional.layer_norm(
            x, (x.shape[-1],), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps
        )

    def layer(self, i, x, mask, w=None):
        w = w or self.w
        p = f"encoder.layer.{i}."
        b, n, h = x.shape
        size = h // self.heads

        def lin(t, name):
            return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        def split(t):
            return t.reshape(b, n, self.heads, size).transpose(1, 2)

        q = split(lin(x, "attention.self.query"))
        k = split(lin(x, "attention.self.key"))
        v = split(lin(x, "attention.self.value"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(size) + (1.0 - mask)[:, None, None, :] * -1e9
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, h)
        ln = torch.nn.functional.layer_norm
        x = ln(lin(ctx, "attention.output.dense") + x, (h,),
               w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps)  # fmt: skip
        inner = torch.nn.functional.gelu(lin(x, "intermediate.dense"))
        return ln(lin(inner, "output.dense") + x, (h,),
                  w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)  # fmt: skip

    @staticmethod
    def pool(x, mask):
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdim=True)
        return torch.nn.functional.normalize(pooled, dim=-1)


def lower(model, texts, top, batch=64):
    """Each text's hidden states below the top `top` layers, and its mask."""
    out = []
    with torch.no_grad():
        for s in range(0, len(texts), batch):
            ids, types, mask = model.encode(texts[s : s + batch])
            x = model.embeddings(ids, types)
            for i in range(model.layers - top):
                x = model.layer(i, x, mask)
            for j in range(x.shape[0]):
                n = int(mask[j].sum())
                out.append(x[j, :n].clone())
    return out


def upper(model, states, top, w):
    """The top layers over cached states (padded to the longest), pooled."""
    n = max(s.shape[0] for s in states)
    x = torch.zeros(len(states), n, states[0].shape[1])
    mask = torch.zeros(len(states), n)
    for j, s in enumerate(states):
        x[j, : s.shape[0]] = s
        mask[j, : s.shape[0]] = 1
    for i in range(model.layers - top, model.layers):
        x = model.layer(i, x, mask, w)
    return model.pool(x, mask)


def mrr10(qv, items):
    total = 0.0
    for k, (cv, hits) in items.items():
        s = cv @ qv[k]
        for rank, i in enumerate(np.argsort(-s, kind="stable")[:10]):
            if hits[i]:
                total += 1.0 / (rank + 1)
                break
    return total / max(len(items), 1)


def ndcg_proxy(rows, c, qv, depth=80):
    """nDCG@10 (hybrid, vector only) of weft's fusion over each query's
    retrieved candidates, the vector scores recomputed from `qv`. Chunks
    neither retriever returned stay out, even if the new vector would find
    them."""
    hybrid = vector = 0.0
    for r in rows:
        cands = [
            x for x in r["candidates"] if within(x["vrank"], depth) or within(x["trank"], depth)
        ]
        if not cands:
            continue
        vs = c[[x["row"] for x in cands]] @ qv[r["qrow"]]
        vin = np.zeros(len(cands), dtype=bool)
        vin[np.argsort(-vs, kind="stable")[:depth]] = True
        vlo, vhi = vs[vin].min(), vs[vin].max()
        vn = np.where(vin, (vs - vlo) / (vhi - vlo) if vhi > vlo else 1.0, 0.0)
        ts = np.array([x["tscore"] if within(x["trank"], depth) else np.nan for x in cands])
        tin = ~np.isnan(ts)
        tn = np.zeros(len(cands))
        if tin.any():
            tlo, thi = np.nanmin(ts), np.nanmax(ts)
            tn = np.where(tin, (np.nan_to_num(ts) - tlo) / (thi - tlo) if thi > tlo else 1.0, 0.0)
        index = np.array([is_index_doc(x["uri"]) for x in cands])
        hits = np.array([x["hit"] for x in cands])
        hybrid += ndcg10(fused(vn, tn, index), hits)
        vector += ndcg10(np.where(vin, fused(vn, 0.0, index), -1.0), hits)
    return hybrid / len(rows), vector / len(rows)


def fine_tune(model, args, rng, rows, qd, states, items, train, val, names, started):
    """Trains the top layers; returns every weight, the top ones tuned."""
    params = {k: model.w[k].clone().requires_grad_(True) for k in names}
    opt = torch.optim.AdamW(params.values(), lr=args.lr, weight_decay=0.0)

    def vectors(keys, w):
        out = []
        for s in range(0, len(keys), 128):
            out.append(upper(model, [states[k] for k in keys[s : s + 128]], args.layers, w))
        return torch.cat(out)

    def encode_all(w):
        with torch.no_grad():
            return vectors(list(range(len(rows))), w).numpy()

    base = qd
    print(f"before: held-out MRR@10 {mrr10(base, val):.4f}", file=sys.stderr)
    for epoch in range(args.epochs):
        order = rng.permutation(train)
        total = 0.0
        for s in range(0, len(order), args.batch):
            keys = list(order[s : s + args.batch])
            w = {**model.w, **params}
            qv = vectors(keys, w)
            loss = 0.0
            for j, k in enumerate(keys):
                cv, hits, _ = items[k]
                logits = torch.from_numpy(cv) @ qv[j] / args.temperature
                lp = logits.log_softmax(0)
                loss = loss - torch.logsumexp(lp[torch.from_numpy(hits)], 0)
            loss = loss / len(keys)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(keys)
        w = {**model.w, **{k: v.detach() for k, v in params.items()}}
        qv = encode_all(w)
        print(f"epoch {epoch + 1}: loss {total / len(train):.4f}, held-out MRR@10 {mrr10(qv, val):.4f} ({time.time() - started:.0f}s)", file=sys.stderr, flush=True)

    return {**model.w, **{k: v.detach() for k, v in params.items()}}


def training_args(doc, epochs, lr):
    """The options of a fine-tune of the top layers over a dump (this
    script's and screen_two_sided.py's)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("prefix")
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=epochs)
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--threads", type=int, default=2)
    return ap


def main():
    ap = training_args(__doc__, epochs=3, lr=2e-5)
    ap.add_argument("--final", action="store_true")
    ap.add_argument("--eval", nargs="*", default=[])
    ap.add_argument("--adapter")
    ap.add_argument(
        "--mix",
        type=float,
        nargs="*",
        default=[1.0],
        help="also evaluate the weights taken this far from the model's (WiSE-FT): 0.5 is halfway",
    )
    ap.add_argument("--out", help="write the learned delta of the top layers (safetensors)")
    ap.add_argument("--load-delta", help="skip training: evaluate this --out file instead")
    ap.add_argument(
        "--ship-out",
        help="write the delta weft builds in: --ship-mix times the learned delta, as f16 safetensors "
        "(crates/adapters/embed-local/learned/; weft's built-in encoders each take a share of it)",
    )
    ap.add_argument("--ship-mix", type=float, default=1.0, help="the mix --ship-out bakes in (default 1.0)")
    ap.add_argument("--ship-name", help="the name --ship-out records (default: its file name without .safetensors)")
    ap.add_argument(
        "--write-queries",
        help="a directory: per --eval dump and --mix, the query vectors as eval-sweep "
        "--query-vectors reads them (DIR/<dump>-mix<m>.jsonl)",
    )
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    model = Bert(args.model_dir)
    dim = model.config["hidden_size"]
    rows, qd, cd = load(args.prefix, dim)
    texts = [split_camel_case(r["query"]) for r in rows]

    # Parity: the untouched model here gives the vectors weft dumped.
    with torch.no_grad():
        ids, types, mask = model.encode(texts[:32])
        x = model.embeddings(ids, types)
        for i in range(model.layers):
            x = model.layer(i, x, mask)
        mine = model.pool(x, mask).numpy()
    cos = (mine * qd[:32]).sum(1)
    print(f"parity with weft's query vectors: min cos {cos.min():.6f}", file=sys.stderr)

    items = {}
    for k, r in enumerate(rows):
        package = r["path"].split("/")[0]
        cand = [x for x in r["candidates"] if x["uri"].split("/")[0] == package]
        hits = np.array([x["hit"] for x in cand], dtype=bool)
        if hits.any() and not hits.all():
            items[k] = (cd[[x["row"] for x in cand]], hits, package)
    train = [k for k, v in items.items() if args.final or not held_out(v[2])]
    val = {k: v[:2] for k, v in items.items() if held_out(v[2])}
    started = time.time()
    states = lower(model, texts, args.layers)
    print(f"{len(train)} training queries, {len(val)} held out; lower layers {time.time() - started:.0f}s", file=sys.stderr)

    names = [k for k in model.w if any(k.startswith(f"encoder.layer.{i}.") for i in range(model.layers - args.layers, model.layers))]
    if args.load_delta:
        delta = load_file(args.load_delta)
        final = {**model.w, **{k: model.w[k] + delta[k].float() for k in names}}
    else:
        final = fine_tune(model, args, rng, rows, qd, states, items, train, val, names, started)
    if args.out and not args.load_delta:
        save_file({k: (final[k] - model.w[k]).contiguous() for k in names}, args.out)
    if args.ship_out:
        # weft adds these to the model's weights for the query encoder
        # (graph::WeightDelta); f16 halves the file and moves a query vector
        # by less than 1e-5.
        shipped = {k: (args.ship_mix * (final[k] - model.w[k])).half().contiguous() for k in names}
        # One metadata key: safetensors writes a dict of several in a
        # different order each run, and the file must rebuild byte for byte.
        name = args.ship_name or os.path.basename(args.ship_out).removesuffix(".safetensors")
        meta = {"name": name, "model": args.model_dir.rstrip("/").rsplit("/", 1)[-1], "mix": str(args.ship_mix)}
        save_file(shipped, args.ship_out, metadata={"weft": json.dumps(meta, sort_keys=True)})
    adapter = None
    if args.adapter:
        adapter = np.fromfile(args.adapter, dtype="<f4").reshape(dim, dim)
    for prefix in args.eval:
        drows, dq, dc = load(prefix, dim)
        dstates = lower(model, [split_camel_case(r["query"]) for r in drows], args.layers)
        variants = {"none": dq}
        for m in args.mix:
            w = {k: model.w[k] + m * (final[k] - model.w[k]) for k in final}
            with torch.no_grad():
                tuned = torch.cat([upper(model, dstates[s : s + 128], args.layers, w) for s in range(0, len(dstates), 128)])
            variants[f"tuned×{m}"] = tuned.numpy()
            if args.write_queries:
                name = prefix.rstrip("/").rsplit("/", 1)[-1]
                with open(f"{args.write_queries}/{name}-mix{m}.jsonl", "w") as out:
                    for r, v in zip(drows, variants[f"tuned×{m}"]):
                        text = split_camel_case(r["query"])
                        out.write(json.dumps({"text": text, "vector": [float(x) for x in v]}) + "\n")
        if adapter is not None:
            a = dq @ adapter.T
            variants["adapter"] = a / np.linalg.norm(a, axis=1, keepdims=True)
        for corpus in sorted({r["corpus"] for r in drows}):
            sub = [r for r in drows if r["corpus"] == corpus]
            cells = [f"{n} {h:.4f}/{v:.4f}" for n, qv in variants.items() for h, v in [ndcg_proxy(sub, dc, qv)]]
            print(f"{corpus} (n={len(sub)}): " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
