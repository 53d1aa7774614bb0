#!/usr/bin/env python3
"""An independent reference for weft's local embedder: a BERT or MPNet forward
pass in numpy (float64), mean pooling over the attention mask, L2
normalisation. MPNet as in Hugging Face transformers' MPNetModel: positions
counted from the padding index, and a relative-position bias (32 log-spaced
buckets, shared by all layers) added to the attention scores.

    reference_embed.py [--delta FILE [--scale S]] MODEL_DIR MAX_TOKENS TEXT...   -> JSON list of vectors

--delta FILE: a safetensors file of weight changes (a query encoder's, e.g.
crates/adapters/embed-local/learned/all-MiniLM-L6-v2.query-encoder.safetensors),
each times S (default 1) added to the model's tensor of the same name first.

Needs numpy, safetensors and tokenizers (tools/test.sh installs them in a venv).
It shares only the tokenizer with the Rust code; every layer is computed here.
"""
import json
import math
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

erf = np.vectorize(math.erf)


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def linear(x, weights, name):
    return x @ weights[name + ".weight"].T + weights[name + ".bias"]


def relative_position_bucket(relative, num_buckets=32, max_distance=128):
    """MPNetEncoder.relative_position_bucket, elementwise over an int array."""
    n = -relative
    num_buckets //= 2
    ret = (n < 0).astype(np.int64) * num_buckets
    n = np.abs(n)
    max_exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        large = max_exact + (np.log(np.maximum(n, 1) / max_exact) / math.log(max_distance / max_exact)
                             * (num_buckets - max_exact)).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return ret + np.where(n < max_exact, n, large)


def embed(model_dir, max_tokens, texts, delta=None, scale=1.0):
    config = json.load(open(f"{model_dir}/config.json"))
    weights = {k: v.astype(np.float64) for k, v in load_file(f"{model_dir}/model.safetensors").items()}
    for name, change in (load_file(delta) if delta else {}).items():
        # f32 like weft's, then added in float64 like every weight here.
        weights[name] = weights[name] + (change.astype(np.float32) * np.float32(scale)).astype(np.float64)
    tokenizer = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    mpnet = config["model_type"] == "mpnet"
    pad = tokenizer.padding["pad_id"] if tokenizer.padding else 0
    tokenizer.enable_padding(pad_id=pad)  # to the longest in the batch
    tokenizer.enable_truncation(max_tokens)
    enc = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in enc])
    types = np.array([e.type_ids for e in enc])
    mask = np.array([e.attention_mask for e in enc], dtype=np.float64)
    eps = config["layer_norm_eps"]
    heads = config["num_attention_heads"]
    batch, length = ids.shape
    bias = (1.0 - mask)[:, None, None, :] * -1e9
    if mpnet:
        # create_position_ids_from_input_ids: padding index 1, tokens from 2.
        positions = (np.cumsum(ids != pad, axis=1) * (ids != pad) + pad).astype(np.int64)
        x = weights["embeddings.word_embeddings.weight"][ids] + weights["embeddings.position_embeddings.weight"][positions]
        relative = np.arange(length)[None, :] - np.arange(length)[:, None]
        buckets = relative_position_bucket(relative, config.get("relative_attention_num_buckets", 32))
        position_bias = weights["encoder.relative_attention_bias.weight"][buckets]  # [q, k, heads]
        bias = bias + position_bias.transpose(2, 0, 1)[None]
        names = ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o", "attention.LayerNorm")
    else:
        x = (weights["embeddings.word_embeddings.weight"][ids]
             + weights["embeddings.position_embeddings.weight"][np.arange(length)][None]
             + weights["embeddings.token_type_embeddings.weight"][types])
        names = ("attention.self.query", "attention.self.key", "attention.self.value",
                 "attention.output.dense", "attention.output.LayerNorm")
    x = layer_norm(x, weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"], eps)
    hidden = x.shape[-1]
    size = hidden // heads
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        query, key, value, output, norm = (p + n for n in names)
        split = lambda t: t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)
        q = split(linear(x, weights, query))
        k = split(linear(x, weights, key))
        v = split(linear(x, weights, value))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
        x = layer_norm(linear(context, weights, output) + x, weights[norm + ".weight"], weights[norm + ".bias"], eps)
        inner = linear(x, weights, p + "intermediate.dense")
        inner = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)))
        x = layer_norm(linear(inner, weights, p + "output.dense") + x,
                       weights[p + "output.LayerNorm.weight"], weights[p + "output.LayerNorm.bias"], eps)
    pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled.tolist()


if __name__ == "__main__":
    args = sys.argv[1:]
    delta, scale = None, 1.0
    if args[:1] == ["--delta"]:
        delta, args = args[1], args[2:]
        if args[:1] == ["--scale"]:
            scale, args = float(args[1]), args[2:]
    print(json.dumps(embed(args[0], int(args[1]), args[2:], delta, scale)))
