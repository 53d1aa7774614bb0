#!/usr/bin/env python3
"""An independent reference for weft's local embedder: a BERT forward pass in
numpy, mean pooling over the attention mask, L2 normalisation.

    reference_embed.py MODEL_DIR MAX_TOKENS TEXT...   -> JSON list of vectors

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


def embed(model_dir, max_tokens, texts):
    config = json.load(open(f"{model_dir}/config.json"))
    weights = {k: v.astype(np.float64) for k, v in load_file(f"{model_dir}/model.safetensors").items()}
    tokenizer = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tokenizer.enable_padding()  # to the longest in the batch
    tokenizer.enable_truncation(max_tokens)
    enc = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in enc])
    types = np.array([e.type_ids for e in enc])
    mask = np.array([e.attention_mask for e in enc], dtype=np.float64)
    eps = config["layer_norm_eps"]
    heads = config["num_attention_heads"]
    batch, length = ids.shape
    x = (weights["embeddings.word_embeddings.weight"][ids]
         + weights["embeddings.position_embeddings.weight"][np.arange(length)][None]
         + weights["embeddings.token_type_embeddings.weight"][types])
    x = layer_norm(x, weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"], eps)
    bias = (1.0 - mask)[:, None, None, :] * -1e9
    hidden = x.shape[-1]
    size = hidden // heads
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        split = lambda t: t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)
        q = split(linear(x, weights, p + "attention.self.query"))
        k = split(linear(x, weights, p + "attention.self.key"))
        v = split(linear(x, weights, p + "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
        x = layer_norm(linear(context, weights, p + "attention.output.dense") + x,
                       weights[p + "attention.output.LayerNorm.weight"], weights[p + "attention.output.LayerNorm.bias"], eps)
        inner = linear(x, weights, p + "intermediate.dense")
        inner = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)))
        x = layer_norm(linear(inner, weights, p + "output.dense") + x,
                       weights[p + "output.LayerNorm.weight"], weights[p + "output.LayerNorm.bias"], eps)
    pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled.tolist()


if __name__ == "__main__":
    print(json.dumps(embed(sys.argv[1], int(sys.argv[2]), sys.argv[3:])))
